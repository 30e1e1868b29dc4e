"""Exercise 00.predict_path (easy): predict a path, then let the check run it.

`x` requires grad, `y` does not. Which kernels does the dispatcher call, in order, for

    with torch.no_grad():
        torch.ops.workbook.add(x, y)

with lesson 00's layers (schemas, cpu)? Write their dispatch keys, highest priority first, as a list of strings: the
check reads PATH from your file without running it: write it out, and nothing else, rather than compute it.
"""

PATH = ["CPU"]  # TODO: is no_grad enough to go straight to the CPU kernel?
