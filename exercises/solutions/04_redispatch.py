"""Exercise 04.redispatch (hard): an Autograd kernel that calls below itself.

`exercise::scale2(Tensor x) -> Tensor` returns 2 * x; its CPU and Meta kernels are registered for you. Its Autograd
kernel is written in Python (below, registered at the Autograd key with the call's keyset: lesson 03, section 3, says
how, in C++ and in Python). As written, Scale2's forward calls the operator again, and the call comes back to the
Autograd kernel, forever. Fix forward so that the call runs the operator's kernels below autograd, once, on the call's
own backend, as torch's generated autograd kernels of functional operators hand a call on: with autograd and
ADInplaceOrView off for the calls the kernels below it make in turn (lesson 04, section 1: why the guard). The check
calls it on CPU, meta and sparse tensors, with and without requires_grad, twice, and inside a TorchDispatchMode, which
must see the call (an empty input's and a 0-dim one's too); then on a nested and an mkldnn tensor, whose keysets hold
AutogradNestedTensor and AutogradOther (`torch._C._dispatch_keys(x)` prints them), on a complex tensor (its gradient
too, under a loss that gives the output a complex one), its conjugate and a negative view, on a sparse CSR tensor, which
no kernel takes, on a dual tensor (forward-mode AD, inside torch.no_grad() too, with a tangent of a tensor subclass, and
one that requires grad: the right tangent, recorded, the caller's left as it was, or a refusal), on a tensor subclass
with `__torch_dispatch__` (torch's TwoTensor), from two threads at once, and in an autocast region under an AutocastCPU
kernel that hands the call on by its keyset, and with a kernel at ADInplaceOrView too (an in-place or view operator has
one). Each call, the refused one too, must leave the thread's dispatch state as it found it, and backward must stay
differentiable (create_graph=True), leave the gradient it receives as it is, keep nothing it does not need (x and the
output may change after the call, and the memory of x, and of the output, is freed when the caller drops it, while the
graph lives on), take a gradient that arrives undefined (a node below that gives none; on meta tensors too) or sparse
for a dense x, and leave no cycle that keeps the output alive.
"""

import torch

op = torch.ops.exercise.scale2.default


class Scale2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, keyset, x):
        # Under torch's guard, as its generated autograd kernels of functional operators hand a call on (emit_call in
        # torchgen/packaged/autograd/gen_variable_type.py): the aten calls the kernels below make skip autograd and
        # ADInplaceOrView too, so a kernel that ends in a view hands back no view made inside this Function.
        with torch._C._AutoDispatchBelowADInplaceOrView():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, x)  # the keys below Autograd only

    @staticmethod
    def backward(ctx, grad):
        return None, 2 * grad  # none for the keyset, 2 * grad for x


def autograd_kernel(keyset, x):
    return Scale2.apply(keyset, x)
