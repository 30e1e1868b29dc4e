"""helpers/shapes.py: symbolic fake tensors, and guards written with the inputs' names."""

import torch

from helpers import shapes


def test_a_sym_sizes_kernel_keeps_symbols_and_an_int_kernel_pins_them(workbook):
    # workbook::matmul's Meta kernel reads sym_sizes(); a fake kernel that reads the sizes as ints does what lesson
    # 06's sizes() pitfall does (defined here, in a namespace of its own: the workbook's holds exactly its operators).
    with torch.library._scoped_library("shapes_test", "FRAGMENT") as library:
        library.define("matmul_ints(Tensor a, Tensor b) -> Tensor")
        library.impl("matmul_ints", lambda a, b: a @ b, "CPU")
        torch.library.register_fake("shapes_test::matmul_ints",
                                    lambda a, b: a.new_empty(int(a.shape[0]), int(b.shape[1])), lib=library)
        for op, out, guards in [
            (workbook.matmul, ["a.size(0)", "b.size(1)"], ["a.size(1) == b.size(0)"]),
            (torch.ops.shapes_test.matmul_ints, ["5", "4"], ["a.size(0) == 5", "b.size(1) == 4"]),
        ]:
            mode, fakes = shapes.symbolic(a=torch.randn(5, 3), b=torch.randn(3, 4))
            with mode:
                result = op(fakes["a"], fakes["b"])
            assert (shapes.named(result.shape, mode), shapes.guards(mode)) == (out, guards)


def test_every_size_is_a_symbol_of_its_own_and_no_guard_comes_free():
    mode, fakes = shapes.symbolic(x=torch.randn(3, 3))
    assert shapes.named(fakes["x"].shape, mode) == ["x.size(0)", "x.size(1)"]  # equal sizes, two symbols
    assert shapes.guards(mode) == []
