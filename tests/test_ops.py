"""The workbook's operators on CPU and Meta: results against torch, opcheck, and every bad input.

In the style of pytorch/extension-cpp: sample inputs per op, one reference per op, opcheck on the
samples. The CUDA kernels have their own file (test_cuda.py)."""

import pytest
import torch
from torch.library import opcheck

# bfloat16 and float16 are the dtypes autocast casts to (lesson 05).
DTYPES = {"add": [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16],
          "sum": [torch.float32, torch.float64, torch.int32, torch.int64],
          "matmul": [torch.float32, torch.float64, torch.bfloat16, torch.float16]}
# float32 and float64 to near their precision; bfloat16 and float16 to assert_close's defaults for them
# (about two units in the last place: the sums round once, but in another order than torch's).
TOLERANCE = {torch.float32: {"rtol": 1e-5, "atol": 1e-4}, torch.float64: {"rtol": 1e-12, "atol": 1e-4},
             torch.bfloat16: {}, torch.float16: {}}


def make(shape, dtype, device="cpu", seed=0):
    generator = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=dtype).to(device)
    return torch.randint(-1000, 1000, shape, generator=generator, dtype=dtype).to(device)


def sample_inputs(name, dtype, device="cpu"):
    """(args, kwargs) per op: small and odd sizes, and non-contiguous inputs (a transposed view)."""
    if name == "add":
        return [((make(s, dtype, device, 1), make(s, dtype, device, 2)), {}) for s in [(1,), (7, 5), (1000, 3)]] + [
            ((make((5, 7), dtype, device, 1).T, make((7, 5), dtype, device, 2)), {})]
    if name == "sum":
        return [((make(s, dtype, device),), {}) for s in [(1,), (1000,), (33, 65), (1 << 16 | 3,)]] + [
            ((make((40, 30), dtype, device).T,), {}), ((make((100,), dtype, device),), {"dtype": torch.float64})]
    if name == "matmul":
        return [((make((n, k), dtype, device, 1), make((k, m), dtype, device, 2)), {})
                for n, k, m in [(1, 1, 1), (3, 5, 7), (33, 17, 65), (64, 256, 64), (70, 300, 130)]] + [
            ((make((9, 4), dtype, device, 1).T, make((9, 6), dtype, device, 2)), {})]
    raise KeyError(name)


REFERENCE = {
    "add": torch.add,
    "sum": lambda x, dtype=None: torch.sum(x, dtype=dtype),
    "matmul": torch.matmul,
}


@pytest.mark.parametrize("name, dtype", [(n, d) for n, ds in DTYPES.items() for d in ds])
def test_matches_torch(workbook, name, dtype):
    for args, kwargs in sample_inputs(name, dtype):
        result, expected = getattr(workbook, name)(*args, **kwargs), REFERENCE[name](*args, **kwargs)
        assert result.dtype == expected.dtype and result.shape == expected.shape
        if dtype.is_floating_point:
            torch.testing.assert_close(result, expected, **TOLERANCE[dtype])
        else:
            assert torch.equal(result, expected)


def test_float32_sum_of_16m_elements_is_accurate(workbook):
    x = make((1 << 24,), torch.float32)
    exact = x.double().sum()
    assert abs(workbook.sum(x).double() - exact) <= abs(torch.sum(x).double() - exact) + 1e-3


def test_int32_sum_accumulates_in_int64_like_torch(workbook):
    x = torch.full((1 << 20,), 2**30, dtype=torch.int32)  # the total overflows int32
    assert workbook.sum(x).item() == torch.sum(x).item() == 2**50
    assert workbook.sum(x, dtype=torch.int32).item() == torch.sum(x, dtype=torch.int32).item()


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_all_reduce_is_the_integer_sum(workbook, dtype):
    for shape in [(1,), (1000,), (1 << 16 | 3,)]:
        x = make(shape, dtype)
        assert torch.equal(workbook.all_reduce(x), torch.sum(x, dtype=torch.int64))
    assert workbook.all_reduce(torch.empty(5, 0, dtype=dtype, device="meta")).dtype == torch.int64


def test_in_place_and_out_variants(workbook):
    a, b = make((6, 4), torch.float32, seed=1), make((6, 4), torch.float32, seed=2)
    expected = a + b
    out = torch.empty_like(a)
    workbook.add_out(a, b, out=out)
    workbook.add_(a, b)
    assert torch.equal(a, expected) and torch.equal(out, expected)


def test_row_is_a_view_sharing_storage(workbook):
    m = make((4, 3), torch.float32)
    r = workbook.row(m, -1)
    assert torch.equal(r, m[-1])
    assert r.untyped_storage().data_ptr() == m.untyped_storage().data_ptr()
    r.add_(1)  # writes through to m
    assert torch.equal(m[-1], r)


def test_composites_match_torch(workbook):
    x, w, b = make((5, 3), torch.float64, seed=1), make((3, 4), torch.float64, seed=2), make((5, 4), torch.float64, seed=3)
    torch.testing.assert_close(workbook.affine(x, w, b), x @ w + b)
    torch.testing.assert_close(workbook.mean(x), x.mean())
    assert workbook.mean(torch.ones(0)).isnan() and torch.ones(0).mean().isnan()


@pytest.mark.parametrize("name", DTYPES)
def test_meta_kernels_give_shapes_and_dtypes(workbook, name):
    for dtype in DTYPES[name]:
        for args, kwargs in sample_inputs(name, dtype):
            meta_args = [a.to("meta") for a in args]
            result, expected = getattr(workbook, name)(*meta_args, **kwargs), REFERENCE[name](*args, **kwargs)
            assert result.device.type == "meta" and result.shape == expected.shape and result.dtype == expected.dtype


def test_meta_views_and_composites(workbook):
    m = torch.empty(4, 3, device="meta")
    assert workbook.row(m, 1).shape == (3,)
    assert workbook.affine(m, torch.empty(3, 2, device="meta"), torch.empty(4, 2, device="meta")).shape == (4, 2)
    assert workbook.mean(m).shape == ()


@pytest.mark.parametrize("name, dtype", [("add", torch.float32), ("add", torch.int64), ("add", torch.bfloat16),
                                         ("sum", torch.int32), ("sum", torch.float32), ("matmul", torch.float32),
                                         ("matmul", torch.float64), ("matmul", torch.float16)])
def test_opcheck_per_dtype(workbook, name, dtype):
    # Every operator, with and without requires_grad, is opchecked in lesson 06 (its table); here, the dtypes.
    for args, kwargs in sample_inputs(name, dtype)[:3]:
        opcheck(getattr(workbook, name).default, args, kwargs)


# Every bad input, with the message that names the argument. (op, args, kwargs, expected message)
x, i32, i16 = torch.ones(2, 3), torch.ones(2, 3, dtype=torch.int32), torch.ones(2, 3, dtype=torch.int16)
BAD_INPUTS = {
    "add: other on another device": ("add", (x, x.to("meta")), {}, r"`self` must be on meta, got cpu"),
    "add: unsupported dtype": ("add", (i16, i16), {}, r"`self` has dtype Short; supported: Float, Double, Int, Long, BFloat16, Half"),
    "add: dtypes differ": ("add", (x, i32), {}, r"`other` has dtype Int but `self` has dtype Float"),
    "add: shapes differ": ("add", (x, torch.ones(3, 2)), {}, r"`other` has shape \[3, 2\] but `self` has shape \[2, 3\]"),
    "add_: x not contiguous": ("add_", (torch.ones(3, 2).T, x), {}, r"workbook::add_: `x` is written in place and must be contiguous"),
    "add_out: out dtype": ("add_out", (x, x), {"out": i32}, r"`out` has dtype Int but `x` has dtype Float"),
    "add_out: out shape": ("add_out", (x, x), {"out": torch.ones(6)}, r"`out` has shape \[6\] but `x` has shape \[2, 3\]"),
    "add_out: out not contiguous": ("add_out", (x, x), {"out": torch.ones(3, 2).T}, r"`out` is written in place"),
    "add_out: out on another device": ("add_out", (x, x), {"out": torch.ones(2, 3, device="meta")}, r"must be on meta, got cpu"),
    "sum: unsupported dtype": ("sum", (i16,), {}, r"workbook::sum: `self` has dtype Short"),
    "sum: unsupported result dtype": ("sum", (x,), {"dtype": torch.float16}, r"`dtype` must be one of Float, Double, Int, Long, got Half"),
    "all_reduce: floating dtype": ("all_reduce", (x,), {}, r"workbook::all_reduce: `self` has dtype Float; supported: Int, Long"),
    "matmul: integer dtype": ("matmul", (i32, i32.T), {}, r"workbook::matmul: `self` has dtype Int; supported: Float, Double, BFloat16, Half"),
    "matmul: dtypes differ": ("matmul", (x, x.T.double()), {}, r"`other` has dtype Double but `self` has dtype Float"),
    "matmul: self not 2-D": ("matmul", (torch.ones(2, 3, 4), x), {}, r"`self` must be 2-D, got 3-D with shape \[2, 3, 4\]"),
    "matmul: other not 2-D": ("matmul", (x, torch.ones(3)), {}, r"`other` must be 2-D, got 1-D"),
    "matmul: inner sizes differ": ("matmul", (x, x), {}, r"`self` is \[2, 3\] and `other` is \[2, 3\]; self.size\(1\) must equal other.size\(0\)"),
    "matmul: other on another device": ("matmul", (x, x.T.to("meta")), {}, r"`self` must be on meta, got cpu"),
    "row: not 2-D": ("row", (torch.ones(3), 0), {}, r"workbook::row: `self` must be 2-D"),
    "row: index out of range": ("row", (x, 2), {}, r"`index` 2 is out of range for 2 rows"),
    "mean: integer dtype": ("mean", (i32,), {}, r"workbook::mean: `self` has dtype Int; supported: Float, Double"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_refused_with_a_message_naming_the_argument(workbook, case):
    name, args, kwargs, message = BAD_INPUTS[case]
    with pytest.raises(RuntimeError, match=message):
        getattr(workbook, name)(*args, **kwargs)


@pytest.mark.parametrize("name, args", [("add", lambda s: (s, s)), ("sum", lambda s: (s,)), ("matmul", lambda s: (s, s))])
def test_cpu_kernels_refuse_non_strided_layouts(workbook, name, args):
    # Through the dispatcher a sparse tensor never reaches the CPU kernel (it dispatches to
    # SparseCPU, where nothing is registered). Call the CPU kernel directly to test its own check.
    sparse = torch.eye(3).to_sparse()
    with pytest.raises(NotImplementedError, match="SparseCPU"):
        getattr(workbook, name)(*args(sparse))
    cpu_only = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    with pytest.raises(RuntimeError, match=r"`self` must be a dense \(strided\) tensor, got layout Sparse"):
        getattr(workbook, name).default.redispatch(cpu_only, *args(sparse))


def test_empty_inputs(workbook):
    empty = torch.ones(0)
    assert workbook.add(empty, empty).shape == (0,)
    assert workbook.sum(empty).item() == 0 and workbook.sum(torch.ones(0, dtype=torch.int32)).item() == 0
    assert torch.equal(workbook.matmul(torch.ones(5, 0), torch.ones(0, 3)), torch.zeros(5, 3))
    assert workbook.matmul(torch.ones(0, 4), torch.ones(4, 3)).shape == (0, 3)


def test_row_refuses_non_strided_layouts(workbook):
    # row is registered at CompositeImplicitAutograd, which covers the sparse backends too, so a
    # sparse tensor reaches its kernel through the dispatcher and its own check answers.
    with pytest.raises(RuntimeError, match=r"workbook::row: `self` must be a dense \(strided\) tensor, got layout Sparse"):
        workbook.row(torch.eye(3).to_sparse(), 0)
