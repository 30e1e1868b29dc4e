"""helpers/shapes.py: symbolic fake tensors, and guards written with the inputs' names."""

import torch

from helpers import build, shapes


def test_a_sym_sizes_kernel_keeps_symbols_and_a_sizes_kernel_pins_them(workbook):
    build.load("meta_sizes")
    for op, out, guards in [
        (workbook.matmul, ["a.size(0)", "b.size(1)"], ["a.size(1) == b.size(0)"]),
        (workbook.matmul_sizes, ["5", "4"], ["a.size(0) == 5", "a.size(1) == 3", "b.size(0) == 3", "b.size(1) == 4"]),
    ]:
        mode, fakes = shapes.symbolic(a=torch.randn(5, 3), b=torch.randn(3, 4))
        with mode:
            result = op(fakes["a"], fakes["b"])
        assert (shapes.named(result.shape, mode), shapes.guards(mode)) == (out, guards)


def test_every_size_is_a_symbol_of_its_own_and_no_guard_comes_free():
    mode, fakes = shapes.symbolic(x=torch.randn(3, 3))
    assert shapes.named(fakes["x"].shape, mode) == ["x.size(0)", "x.size(1)"]  # equal sizes, two symbols
    assert shapes.guards(mode) == []
