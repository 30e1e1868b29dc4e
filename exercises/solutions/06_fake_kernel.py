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
from torch.fx.experimental.symbolic_shapes import guard_or_false


def suggest_memory_format(t: torch.Tensor) -> torch.memory_format:
    """The layout aten's cat gives its output by (Tensor.suggest_memory_format: is_channels_last_strides_2d_s4 and
    _3d_s5 in c10/core/MemoryFormat.h), where a size the trace cannot know counts as more than 1, as a size must for a
    layout to matter. torch's own Python copy of the rule (torch._prims_common.suggest_memory_format) counts it as 0:
    contiguous, where the real kernel's output for a count of 2 or more is channels_last, and a compiled program that
    checks the output's strides against the fake's (Inductor's assert_size_stride) fails."""
    order = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}.get(t.dim())
    if t.layout != torch.strided or order is None or guard_or_false(t.stride(1) == 0):
        return torch.contiguous_format
    smallest = 0  # the memory a dimension's stride must be past, in the channels_last order
    for d in order:
        if (guard_or_false(t.shape[d] == 0) or guard_or_false(t.stride(d) < smallest)
                or d == 0 and guard_or_false(smallest == t.stride(1))):
            return torch.contiguous_format
        smallest = t.stride(d) * t.shape[d]
    return torch.channels_last if t.dim() == 4 else torch.channels_last_3d


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
