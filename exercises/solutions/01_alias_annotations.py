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
    # One alias set shared by x and the view; the sum, a new tensor, is in none.
    "diag_sum": "diag_sum(Tensor(a) x) -> (Tensor(a), Tensor)",
    # x is written; the count is a new tensor, so the return carries no annotation.
    "clamp_count_": "clamp_count_(Tensor(a!) x, float lo, float hi) -> Tensor",
    # One alias set per buffer: a set shared by min and max would say they may be the same tensor.
    "minmax_out": "minmax_out(Tensor x, *, Tensor(a!) min, Tensor(b!) max) -> (Tensor(a!), Tensor(b!))",
}
# A tag says which kind of mutated argument an operator returns: clamp_count_ returns none of its arguments.
TAGS = {"diag_sum": [], "clamp_count_": [], "minmax_out": [torch.Tag.out]}
