"""Exercise 07.predict_autocast_path (medium): every layer at once.

With the layers of lessons 00-05 loaded (schemas, cpu, meta, composite, autograd, fallthrough, ad_inplace_or_view,
autocast), `x` requiring grad and `y` not, which kernels does the dispatcher call, in order, for

    with torch.autocast("cpu"):
        torch.ops.workbook.add(x, y)

Each is a layer whose cost lesson 07 measured. Write their dispatch keys, highest priority first.
"""

PATH = ["AutocastCPU", "AutogradCPU", "CPU"]
