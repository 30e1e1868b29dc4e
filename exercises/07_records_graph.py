"""Exercise 07.records_graph (medium): when must an Autograd kernel record a graph?

Lesson 04's Autograd kernels (csrc/autograd.cpp) skip torch::autograd::Function, whose cost lesson 07 measures, when
there is nothing to record. Write the test they make: given the tensor arguments of a call, return True when the call
must record a graph (its output gets a grad_fn, or a forward-mode tangent), False when it need not. The check compares
your answer with torch's own ops, case by case, on calls of one to four float (float16 and bfloat16 too) or complex
(complex64 and complex128) tensors: requires_grad on none, any or all inputs, and a forward-mode tangent
(torch.autograd.forward_ad; a tensor's tangent is `torch.autograd.forward_ad.unpack_dual(t).tangent`), with grad mode on
and in torch.no_grad(), on empty, 0-dim (with a tangent too), meta (with a tangent too), subclass (one that prints
itself its own way) and sparse tensors (COO, CSR, CSC, BSR and BSC, inside a dual level too, beside a dense one with a
tangent; none carries a tangent: make_dual and unpack_dual raise on one; a COO one of [10**6, 10**6] with 3 elements),
and on tensors asked about twice, their flags or tangents changed in between (requires_grad_(), a dual level closed, and
another opened, a tangent gained by an in-place write). (It runs in an Autograd kernel, which inference mode skips:
torch.inference_mode() is not a case.)
"""

import torch


def records_graph(*tensors: torch.Tensor) -> bool:
    return any(t.requires_grad for t in tensors)  # TODO: is requires_grad enough?
