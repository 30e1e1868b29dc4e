"""workbook_stable::add, installed: `import workbook_stable`, then torch.ops.workbook_stable.add(a, b).

The library (_C.abi3.so) registers the operator and its CPU kernel; this file adds a fake kernel, for torch.compile,
torch.export and opcheck's fake-tensor tests. In Python, because the stable C++ API has no SymInt: a stable Meta kernel
would see plain int64 sizes, so it could not keep a symbolic size symbolic.
"""

from pathlib import Path

import torch

LIBRARY = next(Path(__file__).parent.glob("_C*.so"))
torch.ops.load_library(LIBRARY)


@torch.library.register_fake("workbook_stable::add")
def _(self, other):
    # The CPU kernel's output: a new contiguous tensor of self's shape, dtype and device.
    return self.new_empty(self.shape)
