"""Lesson 06's Python side: the workbook's add and matmul as Python custom operators, and a vmap
batching rule for the C++ matmul.

    from helpers import python_ops
    torch.ops.workbook_py.add(x, y)              # defined here with torch.library.custom_op
    rule = python_ops.register_matmul_batching_rule()   # vmap of workbook::matmul without a loop,
                                                        # until rule._destroy()

Importing this module defines the `workbook_py` operators (once per process, like loading a layer).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import source

# ---------------------------------------------------------------------------------------------
# The same operators, authored in Python. The body is ordinary torch code; custom_op makes it an
# operator the dispatcher knows, opaque to torch.compile, like a C++ one.


@torch.library.custom_op("workbook_py::add", mutates_args=())
def add(self: Tensor, other: Tensor) -> Tensor:
    """Elementwise sum of two tensors of the same shape and dtype (no broadcasting), like workbook::add."""
    torch._check(self.shape == other.shape, lambda: f"workbook_py::add: shapes {self.shape} and {other.shape} differ")
    torch._check(self.dtype == other.dtype, lambda: f"workbook_py::add: dtypes {self.dtype} and {other.dtype} differ")
    return torch.add(self, other)


@add.register_fake
def _(self, other):
    return torch.empty_like(self)


def _add_backward(ctx, grad):
    return grad, grad


add.register_autograd(_add_backward)


@torch.library.custom_op("workbook_py::matmul", mutates_args=())
def matmul(self: Tensor, other: Tensor) -> Tensor:
    """2-D matrix product, like workbook::matmul."""
    torch._check(self.dim() == 2 and other.dim() == 2, lambda: "workbook_py::matmul: both inputs must be 2-D")
    torch._check(self.shape[1] == other.shape[0], lambda: f"workbook_py::matmul: {self.shape} @ {other.shape}")
    return torch.mm(self, other)


@matmul.register_fake
def _(self, other):
    return self.new_empty(self.shape[0], other.shape[1])


def _matmul_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, grad):
    self, other = ctx.saved_tensors
    return matmul(grad, other.t()), matmul(self.t(), grad)


matmul.register_autograd(_matmul_backward, setup_context=_matmul_setup_context)


# ---------------------------------------------------------------------------------------------
# A batching rule for the C++ workbook::matmul. The rule itself ships with the installable package
# (csrc/package/workbook_ops/batching.py, lesson 08); here it is that file, loaded alone (source.module).

matmul_batching_rule = source.module("package/workbook_ops/batching.py").matmul_batching_rule


def register_matmul_batching_rule() -> torch.library.Library:
    """Register matmul_batching_rule for workbook::matmul, in a library of its own, and return it.

    The registration lasts as long as that Library object: keep a reference, and call its _destroy()
    (or drop it) to go back to torch's fallback loop.
    """
    library = torch.library.Library("workbook", "FRAGMENT")
    torch.library.register_vmap("workbook::matmul", matmul_batching_rule, lib=library)
    return library
