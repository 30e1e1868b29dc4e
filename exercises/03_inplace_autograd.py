"""Exercise 03.inplace_autograd (hard): gradients through an in-place operator.

`exercise::add_(Tensor(a!) x, Tensor other) -> Tensor(a!)` adds `other` into `x` and returns `x`; its CPU and Meta
kernels, and an ADInplaceOrView kernel that hands the call on (and, unlike csrc's, bumps no version), are registered for
you. Its Autograd kernel (below, registered for you at the Autograd key, with the call's keyset) applies AddInPlace, a
torch.autograd.Function, the Python twin of csrc/autograd.cpp's AddInPlace (lesson 03, section 4). Write its forward and
backward: forward adds `other` into `x` through the operator's kernels below autograd, its ADInplaceOrView kernel
included (this Autograd kernel must not run again), and tells autograd that `x` was modified in place; after `y =
x.clone(); add_(y, other)`, backward must give x and other their gradients, themselves differentiable (gradgradcheck).
(csrc's AddInPlace skips ADInplaceOrView, safely only because mark_dirty bumps the one version that key's kernel would:
torch's own Autograd kernels for in-place operators hand the call on to it, lesson 03, section 4.) The check calls it on
CPU (non-contiguous ones too), meta, nested and mkldnn tensors, also with an `x` or an `other` that does not require
grad, an `other` conjugated lazily, on a leaf that requires grad and on a view of one (refused; inside torch.no_grad(),
as an optimizer's step, written), inside a TorchDispatchMode, which must see the call, on a tensor subclass with
`__torch_dispatch__` (torch's TwoTensor), in an autocast region under an AutocastCPU kernel that hands the call on by
its keyset, on complex tensors under a loss that gives the output a complex gradient (a real `other` added into a
complex `x` too, and a complex64 one into a complex128 one), on dual tensors (forward-mode AD, complex ones and inside
torch.no_grad() too: the right tangent, or a refusal) and from two threads at once; each call must leave the thread's
dispatch state as it found it, and the tensor it wrote must be freed once the caller drops it (add_(y, y) too), and so
must `other`, while the written tensor's graph lives on.
"""

import torch


class AddInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, keyset, x, other):
        return x  # TODO: write other into x below autograd, and tell autograd that x changed

    @staticmethod
    def backward(ctx, grad):
        return None, grad, None  # TODO: one gradient per input of forward (keyset, x, other)


def autograd_kernel(keyset, x, other):
    # Refuse as torch's add_ does, before anything is written: Function.apply raises for a leaf marked dirty only after
    # forward wrote into it and bumped its version (csrc/autograd.cpp's add_ calls torch's check_inplace here).
    if torch.is_grad_enabled() and x.requires_grad and (x.is_leaf or (x._base is not None and x._base.is_leaf)):
        raise RuntimeError("a leaf Variable that requires grad (or a view of one) is being used in an in-place "
                           "operation.")
    return AddInPlace.apply(keyset, x, other)
