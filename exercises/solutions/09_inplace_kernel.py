"""Exercise 09.inplace_kernel (hard): an in-place kernel for the device.

Lesson 09's device has no kernel of its own for `aten::mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)`.
Write one in Python: the check registers `mul_` below at the device's key (PrivateUse1), in place of aten's
structured kernel, as lesson 09, section 7 registers one for add_. On the device, it must:
- write self * other into `self` itself (its own memory, whatever its strides; `other` may broadcast) and return
  `self`;
- accept a 0-dim CPU tensor as `other` (a scalar, as aten's kernels do), and refuse any other CPU tensor with a
  RuntimeError that names `other`: once your kernel replaces aten's, nothing else checks (section 7);
- refuse, with a RuntimeError, a product whose type `self` cannot hold (an integer `self` times a float `other`), as
  aten's in-place operators do (torch.can_cast);
- let gradients flow (torch's autograd kernel for mul_ runs above yours).
Any torch operator may be called inside.
"""

import torch


def mul_(self, other):
    # Our mul kernel below would refuse a CPU `other` too; this check keeps the contract whatever computes the product.
    if other.device != self.device and not (other.is_cpu and other.dim() == 0):
        raise RuntimeError(f"mul_: `other` is on {other.device}, `self` on {self.device}")
    if not torch.can_cast(torch.result_type(self, other), self.dtype):
        raise RuntimeError(f"mul_: the product's type {torch.result_type(self, other)} can't be cast to {self.dtype}")
    self.copy_(self * other)  # self * other: our mul kernel; copy_ writes the product into self's own memory
    return self
