"""The workbook's operators, installed: `import workbook_ops`, then call torch.ops.workbook.<op>.

    import torch, workbook_ops
    torch.ops.workbook.add(torch.ones(3), torch.ones(3))

No JIT compiler, no notebook, no helpers: what lessons 00-07 built at run time, shipped.
"""

from pathlib import Path

import torch

from .batching import matmul_batching_rule

# _C is a plain shared library, not a Python extension module: it has no PyInit_ function, and its static
# initializers register the operators with the dispatcher when it is loaded. So torch loads it, not import.
LIBRARY = next(Path(__file__).parent.glob("_C*.so"))
torch.ops.load_library(LIBRARY)

# The registrations made from Python (lesson 06's vmap rule) ship in the package too: importing it makes them.
torch.library.register_vmap("workbook::matmul", matmul_batching_rule)
