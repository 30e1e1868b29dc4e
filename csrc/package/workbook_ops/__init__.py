"""The workbook's operators, installed: `import workbook_ops`, then call torch.ops.workbook.<op>.

    import torch, workbook_ops
    torch.ops.workbook.add(torch.ones(3), torch.ones(3))

No JIT compiler, no notebook, no helpers: what lessons 00-07 built at run time, shipped.
"""

from pathlib import Path

import torch

from ._built_for import CUDA
from .batching import matmul_batching_rule

# Kernels compiled for one CUDA need a torch built for the same major version (within one, CUDA keeps minor version
# compatibility), and the pin on torch cannot say so (setup.py): refuse another one here, with a message, rather than
# fail to load or misbehave later. torchvision compares major versions only, too (torchvision/extension.py).
if CUDA is not None and CUDA.split(".")[0] != (torch.version.cuda or "").split(".")[0]:
    raise ImportError(f"workbook_ops was built for CUDA {CUDA}, this torch for CUDA {torch.version.cuda}: "
                      "install the workbook_ops built for this torch")

# _C is a plain shared library, not a Python extension module: it has no PyInit_ function, and its static
# initializers register the operators with the dispatcher when it is loaded. So torch loads it, not import.
LIBRARY = next(Path(__file__).parent.glob("_C*.so"))
torch.ops.load_library(LIBRARY)

# The registrations made from Python (lesson 06's vmap rule) ship in the package too: importing it makes them.
torch.library.register_vmap("workbook::matmul", matmul_batching_rule)
