"""Exercise 06.fake_kernel (medium): a fake kernel that opcheck accepts.

`exercise::stack2(Tensor a, Tensor b) -> Tensor` stacks two tensors of the same shape into one with a new first
dimension of size 2 (torch.stack([a, b])). a and b may differ in dtype: the output has the dtype they promote to,
as torch.stack's. Its CPU kernel is registered. Its fake kernel (what torch.compile and
torch.export run on fake tensors) must return an empty tensor of the real output's shape, dtype, device and strides,
for any dtype and any layout of the inputs, and for symbolic sizes (torch.compile(dynamic=True) and torch.export with a
Dim pass them): one compile must serve every size. The check runs it on meta tensors and on fake tensors with symbolic
sizes, and opcheck on the real ones.
"""

import torch


def fake(a, b):
    if a.dim() == 0:
        return a.new_empty(2, dtype=torch.result_type(a, b))  # two scalars: a vector of 2, in the promoted dtype
    # torch.stack([a, b]) is torch.cat([a, b]) viewed with a new first dimension (torch/_refs). On fake tensors cat
    # computes only the metadata: the promoted dtype (int32 with float32 gives float32), and the layout both inputs
    # share (channels_last stays channels_last), contiguous when they differ. a.new_empty(2, *a.shape) would always be
    # contiguous, in a's dtype.
    return torch.cat([a, b]).view(2, *a.shape)
