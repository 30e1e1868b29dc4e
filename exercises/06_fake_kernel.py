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


def fake(a, b):
    return torch.empty_like(a)  # TODO
