"""Exercise 01.alias_annotations (hard): schemas that tell the truth.

Three operators have Python kernels already (the check registers them, in namespace `exercise`):

    diagonal(x)                returns x.diagonal(): a view of x, sharing its storage
    clamp_(x, lo, hi)          clamps x in place, and returns x itself (like aten's clamp_)
    rowsum_out(x, *, out)      writes the sum of each row of x into `out`, and returns `out` (like aten's out= ops)

Write their schemas (SCHEMAS), and the tags they need (TAGS: name -> list of torch.Tag), so that every schema tells
the truth about what its kernel aliases, writes and returns, and torch.compile can take each operator. The check runs
torch.library.opcheck on each, with the kernel and a fake kernel.
"""

import torch

SCHEMAS = {
    "diagonal": "diagonal(Tensor(a) x) -> Tensor(a)",
    "clamp_": "clamp_(Tensor(a!) x, float lo, float hi) -> Tensor(a!)",
    "rowsum_out": "rowsum_out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)",
}
TAGS = {"diagonal": [], "clamp_": [torch.Tag.inplace], "rowsum_out": [torch.Tag.out]}
