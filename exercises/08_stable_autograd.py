"""Exercise 08.stable_autograd (hard): what the stable ABI could not give workbook_stable::add, from Python.

workbook_stable::add (csrc/stable/add.cpp, loaded for you as the JIT "stable" layer) has a CPU kernel only: the
stable API of torch 2.10 has no Meta kernel helpers and no autograd::Function (lesson 08, section 2). Give it, from
Python, a fake kernel (what its CPU kernel returns, without data) and a backward (setup_context and backward, for
torch.library.register_autograd). The check runs opcheck and gradcheck with every combination of requires_grad, on
contiguous and on transposed inputs.
"""

import torch


def fake(self, other):
    return torch.empty_like(self)  # TODO: what exactly does the CPU kernel return?


def setup_context(ctx, inputs, output):
    pass


def backward(ctx, grad):
    return grad, None  # TODO: one gradient per input
