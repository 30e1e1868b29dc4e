"""Exercise 08.stable_autograd (hard): what the stable ABI could not give workbook_stable::add, from Python.

workbook_stable::add (csrc/stable/add.cpp, loaded for you as the JIT "stable" layer) has a CPU kernel only: the
stable API of torch 2.10 has no Meta kernel helpers, no SymInt and no autograd::Function (lesson 08, section 2). Give
it, from Python:
- a fake kernel: what its CPU kernel returns, without data (shape, dtype, device, strides), for every dtype and layout
  the CPU kernel takes, on fake tensors with symbolic sizes (kept symbolic: torch.compile(dynamic=True) and export with
  a Dim; sizes known only when the call runs too, in any dimension, as x[mask]'s and nonzero(x).t()'s) and on meta
  tensors; and, as the workbook's C++ Meta kernels do, refusing every call the CPU kernel refuses (read its checks),
  with the error they raise (a RuntimeError whose message names the operator, as theirs do; not NotImplementedError,
  which torch.compile reads as a missing fake kernel), so that torch.compile and torch.export refuse while tracing what
  eager refuses;
- a backward (setup_context and backward, for torch.library.register_autograd).
The check runs opcheck on every dtype the CPU kernel takes, with every combination of requires_grad, on contiguous,
transposed, expanded and empty inputs; gradcheck, gradgradcheck, and a backward from a float64 grad_output of random
values; the fake kernel on meta and on symbolic-size fake tensors, and forward then backward on symbolic-size fake
tensors (as a compiled training step traces them: sizes kept symbolic there too); and calls the CPU kernel refuses
(dtypes, shapes, layouts, devices; inputs with no elements too), on meta tensors (one beside a CPU tensor, 0-dim ones
too) and, for sparse layouts (COO, CSR, CSC, BSR, BSC) and other devices (every device type torch names: cuda, xpu, mps,
mtia, xla, maia, ipu, hip, vulkan, ve, fpga, lazy, hpu, lesson 09's own privateuseone and more), on fake tensors
(refusals that always run: not assert statements, which python -O drops); and two calls before their two backwards, of
one dtype and of two; each call's output is its own (two calls, two tensors); an output the caller drops must be freed
at once, its memory too while the graph lives on (a loss made from it), and so must inputs the caller drops.
"""

import torch
from torch.fx.experimental.symbolic_shapes import sym_eq

SUPPORTED = (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16)  # add.cpp's


def fake(self, other):
    # add.cpp's checks, as torch._check: on symbolic sizes it compares the symbols, and fixes no size to a number.
    torch._check(self.layout == other.layout == torch.strided, lambda: "workbook_stable::add: dense tensors only")
    torch._check(self.dtype in SUPPORTED, lambda: f"workbook_stable::add: `self` has dtype {self.dtype}")
    torch._check(other.dtype == self.dtype, lambda: f"workbook_stable::add: dtypes {other.dtype} and {self.dtype}")
    # sym_eq, not ==: `other.shape == self.shape` decides while tracing whether two sizes are equal, which no trace can
    # where a size is known only when the call runs (x[mask]); sym_eq's answer, checked by torch._check, waits for it.
    torch._check(sym_eq(other.shape, self.shape),
                 lambda: f"workbook_stable::add: shapes {other.shape} and {self.shape}")
    torch._check(other.device == self.device, lambda: f"workbook_stable::add: `other` on {other.device}, `self` on "
                                                      f"{self.device}")
    # Its only kernel is the CPU one: a fake CUDA tensor's call would find no kernel when it runs. (Meta is where this
    # kernel itself runs: it takes meta tensors.)
    torch._check(self.device.type in ("cpu", "meta"), lambda: f"workbook_stable::add: a CPU kernel only, not "
                                                              f"{self.device}")
    return self.new_empty(self.shape)  # the CPU kernel's output: new, contiguous, self's dtype and device


def setup_context(ctx, inputs, output):
    pass  # d(self + other) needs nothing from forward


def backward(ctx, grad):
    return grad, grad  # one gradient per input
