"""Exercise 01.alias_annotations (hard): schemas that tell the truth.

Three operators have Python kernels already (the check registers them, in namespace `exercise`). None is shaped like
the schemas this lesson shows:

    diag_sum(x)                  returns two tensors: x.diagonal(), a view of x that shares its storage, and the sum
                                 of that diagonal, a new tensor
    clamp_count_(x, lo, hi)      clamps x in place, and returns how many elements it changed, as a new tensor
    minmax_out(x, *, min, max)   writes the minimum and the maximum of each row of x into the caller's buffers `min`
                                 and `max`, and returns both buffers, in that order (as aten's out= operators do)

Write their schemas (SCHEMAS; `lo` and `hi` are floats) and the tags they need (TAGS: name -> list of torch.Tag), so
that each schema tells the truth about what its kernel writes and which outputs share storage with which arguments:
no promise missing, and none that the kernel does not keep (a tag is a promise too). The check compares each
schema's promises with what its kernel does, then runs torch.library.opcheck on each operator with its kernel and a fake
kernel, on contiguous and transposed inputs, torch.compile's test included where torch can compile the operator (it
cannot compile a custom operator that returns a view).
"""

import torch

SCHEMAS = {
    "diag_sum": "diag_sum(Tensor x) -> (Tensor, Tensor)",  # TODO
    "clamp_count_": "clamp_count_(Tensor x, float lo, float hi) -> Tensor",  # TODO
    "minmax_out": "minmax_out(Tensor x, *, Tensor min, Tensor max) -> (Tensor, Tensor)",  # TODO
}
TAGS: dict[str, list[torch.Tag]] = {"diag_sum": [], "clamp_count_": [], "minmax_out": []}  # TODO
