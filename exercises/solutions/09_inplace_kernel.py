"""Exercise 09.inplace_kernel (hard): a kernel that writes into its argument: mul's out= form, on the device.

Lesson 09's device has no kernel of its own for `aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) ->
Tensor(a!)`: the fallback serves it. Write one in Python: the check registers `mul_out` below at the device's key
(PrivateUse1), in place of aten's, as lesson 09, section 7 registers one for add_. Once yours replaces aten's, nothing
else checks, converts or resizes anything (section 7). As aten's out= kernels do, on the device it must:
- write self * other into `out` itself (its own memory, whatever its strides) and return `out`; `self` and `other`
  broadcast (empty ones too), and `out` may be `self` or `other` itself; an `out` of another shape (an empty one, one
  with as many elements, or a larger one the product could be broadcast into) is resized to the product's shape where it
  is (a view into a larger buffer keeps its offset, one of the buffer `self` is in too), and laid out as aten lays out
  the product (by the inputs' strides, whatever out's own were: channels_last, transposed or expanded inputs; a
  channels_last `out` of another shape), unless it is `self` or `other` itself, which aten refuses to resize (to another
  shape, even of as many elements);
- compute the product in the dtype torch computes self * other in, then store it in `out`'s dtype; refuse, with a
  RuntimeError, a product that `out`'s dtype cannot hold, by its dtype, whatever its values (a float product into an
  integer `out`, whole numbers too, an empty product too);
- accept a 0-dim CPU tensor as `self` or `other` (a scalar), and a Python number, which the kernel is handed as a Python
  int, float or complex, not a tensor (x.mul_(2), z.mul_(1j), torch.mul(x, 2.5, out=out) and torch.mul(2.5, x, out=out)
  hand it one; torch.mul(2, 3.5, out=out) two), and refuse any other tensor not on the device (a CPU tensor, `out`
  included; a 0-dim tensor of another device: a CUDA scalar beside the device's tensors comes here, since PrivateUse1
  outranks CUDA), with a RuntimeError that names the argument;
- leave every argument as it was when it refuses a call, and leave `self` and `other` as they were, unless one of
  them is `out`.
The check calls it on each of these cases, compares with aten's own mul on the CPU, calls it again after an argument
changed in place (its values, or its layout: t_), and makes sure thread-local state and the process's settings (threads,
default dtype, denormal flushing) are as they were after each call, a refused one too, inside torch.no_grad() too. Any
torch operator may be called inside (on the device, `*` runs a kernel of ours). (aten also refuses an `out` that partly
overlaps `self` or `other`; the check does not ask that of yours.)
"""

import torch


def mul_out(self, other, *, out):
    # Every check before anything is written: a refused call leaves its arguments as they were.
    on_the_device = torch.device("privateuseone").type  # PrivateUse1's name: "workbook" once lesson 09 renamed it
    for name, tensor in (("self", self), ("other", other), ("out", out)):
        # A Python number (x.mul_(2) hands the kernel one) and a 0-dim CPU self or other are scalars.
        if isinstance(tensor, torch.Tensor) and tensor.is_cpu and (name == "out" or tensor.dim() > 0):
            raise RuntimeError(f"mul.out: `{name}` is on the CPU; every tensor argument must be on the device")
        # Another device's tensor, 0-dim too: a CUDA scalar beside the device's tensors comes here (PrivateUse1
        # outranks CUDA).
        if isinstance(tensor, torch.Tensor) and not tensor.is_cpu and tensor.device.type != on_the_device:
            raise RuntimeError(f"mul.out: `{name}` is on {tensor.device}; every tensor argument must be on the device")
    computed_in = torch.result_type(self, other)
    if not torch.can_cast(computed_in, out.dtype):
        raise RuntimeError(f"mul.out: the product's type {computed_in} can't be cast to `out`'s {out.dtype}")
    if not isinstance(self, torch.Tensor) and not isinstance(other, torch.Tensor):  # torch.mul(2, 3.5, out=out)
        self = torch.tensor(self)  # two numbers make a number: the first as a tensor, so that their product is one
    # Our mul kernel, in the promoted dtype, into a new tensor: out may be self or other, read here before written.
    product = self * other
    if out.shape != product.shape and (out is self or out is other):  # aten will not grow an input under its reader
        raise RuntimeError(f"mul.out: `out` is an input, of shape {list(out.shape)}, and the product's is "
                           f"{list(product.shape)}")
    if out.shape != product.shape:
        out.resize_(product.shape)  # our resize_ kernel: out's own storage, grown
        out.as_strided_(product.shape, product.stride())  # laid out as the product, as aten's out= kernels do
    out.copy_(product)  # our _copy_from: into out's memory, by its strides, converted to its dtype
    return out
