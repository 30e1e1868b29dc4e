"""Exercise 00.inference_mode (easy): the same call, inside torch.inference_mode().

`x` requires grad (it was created outside the block), `y` does not. Which kernels does the dispatcher call, in order,
for

    with torch.inference_mode():
        torch.ops.workbook.add(x, y)

Write their dispatch keys, highest priority first.
"""

PATH = ["CPU"]  # inference_mode puts the Autograd keys in the thread-local exclude set
