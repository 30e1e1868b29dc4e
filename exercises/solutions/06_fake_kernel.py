"""Exercise 06.fake_kernel (hard): a fake kernel that opcheck accepts.

`exercise::stack2(Tensor a, Tensor b) -> Tensor` stacks two tensors of the same shape into one with a new first
dimension of size 2 (torch.stack([a, b])). a and b may differ in dtype: the output has the dtype they promote to, as
torch.stack's. Its CPU kernel is registered. Its fake kernel (what torch.compile and torch.export run on fake tensors)
must return an empty tensor of the real output's shape, dtype, device and strides, for any dtype and any layout of the
inputs, and for symbolic sizes (torch.compile(dynamic=True) and torch.export with a Dim pass them): one compile must
serve every size. It must refuse what the real kernel refuses (two shapes, two devices: a 0-dim CPU tensor beside
another device's too), symbolic sizes included (an unknown size beside a known one too), with refusals that always run
(not assert statements, which python -O drops) and raise what the real kernel's raise (a RuntimeError). Each call's
output is its own (two calls in one trace too). The check runs it on meta tensors, on fake tensors with symbolic sizes,
one of them unknown while tracing (the count of x[x > 0], as torch.export meets after .item()), and opcheck on the real
ones.
"""

import torch
from torch._prims_common import suggest_memory_format  # private: the rule aten's cat uses for its output's layout


def fake(a, b):
    # The real kernel refuses two shapes: so does the fake one (torch._check works on symbolic sizes too).
    torch._check(a.dim() == b.dim(), lambda: "stack2: a and b must have the same shape")
    for i in range(a.dim()):
        torch._check(a.shape[i] == b.shape[i], lambda: "stack2: a and b must have the same shape")
    torch._check(a.device == b.device, lambda: "stack2: a and b must be on one device")
    dtype = torch.result_type(a, b)  # int32 with float32 gives float32, float16 with bfloat16 float32
    if a.dim() == 0:
        return a.new_empty(2, dtype=dtype)  # two scalars: a vector of 2
    # torch.stack([a, b]) is torch.cat([a, b]) viewed with a new first dimension. cat's output takes the memory format
    # both inputs suggest (suggest_memory_format: a channels_last tensor sliced along its channels suggests
    # channels_last, one sliced along its width contiguous), contiguous when they differ. On meta tensors torch.cat
    # itself lays out some non-contiguous inputs otherwise (that width-sliced one, of one dtype or two), so the layout
    # is built here.
    layouts = {suggest_memory_format(a), suggest_memory_format(b)}
    memory_format = layouts.pop() if len(layouts) == 1 else torch.contiguous_format
    out = torch.empty((2 * a.shape[0], *a.shape[1:]), dtype=dtype, device=a.device, memory_format=memory_format)
    return out.view(2, *a.shape)
