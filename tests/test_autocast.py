"""csrc/autocast.cpp: the workbook's operators under torch.autocast, against torch's own autocast."""

from contextlib import nullcontext

import pytest
import torch
from torch.autograd import gradcheck

from helpers import build, isolated, trace

BF16, F16, F32, F64, I32 = torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int32

# op, input dtypes, the autocast region's dtype -> the output dtype
CASES = [
    ("matmul", (F32, F32), BF16, BF16),  # lower precision: float32 inputs are cast down
    ("matmul", (F32, F32), F16, F16),
    ("matmul", (BF16, BF16), BF16, BF16),
    ("matmul", (F64, F64), BF16, F64),  # float64 is never cast
    ("add", (F32, F32), BF16, F32),  # widest type: float32 stays float32
    ("add", (BF16, F32), BF16, F32),  # ... and a bfloat16 input is widened to it
    ("add", (F32, BF16), BF16, F32),
    ("add", (BF16, BF16), BF16, BF16),
    ("add", (F64, F64), BF16, F64),
    ("add", (I32, I32), BF16, I32),  # integers are not eligible
]
REFERENCE = {"matmul": torch.matmul, "add": torch.add}


def inputs(op, dtypes, requires_grad=False):
    generator = torch.Generator().manual_seed(0)
    shapes = [(16, 40), (40, 8)] if op == "matmul" else [(16, 8), (16, 8)]
    tensors = []
    for shape, dtype in zip(shapes, dtypes):
        if dtype.is_floating_point:
            tensors.append(torch.randn(shape, generator=generator).to(dtype).requires_grad_(requires_grad))
        else:
            tensors.append(torch.randint(-100, 100, shape, generator=generator, dtype=dtype))
    return tensors


@pytest.mark.parametrize("op, dtypes, region_dtype, expected", CASES)
def test_output_dtype_and_values_match_torch_autocast(workbook, op, dtypes, region_dtype, expected):
    args = inputs(op, dtypes)
    with torch.autocast("cpu", dtype=region_dtype):
        result, reference = getattr(workbook, op)(*args), REFERENCE[op](*args)
    assert result.dtype == reference.dtype == expected
    torch.testing.assert_close(result, reference)


def test_mixed_float_and_float64_add_is_refused(workbook):
    # float64 is ignored when promoting and never cast: add then sees two dtypes, and says so.
    refusal = "`other` has dtype Double but `self` has dtype Float"
    with torch.autocast("cpu"), pytest.raises(RuntimeError, match=refusal):
        workbook.add(*inputs("add", (F32, F64)))


@pytest.mark.parametrize("op", ["matmul", "add"])
def test_path_enters_autocast_once_then_autograd_then_cpu(workbook, op):
    args = inputs(op, (F32, F32))
    with torch.autocast("cpu"):
        t = trace.call(getattr(workbook, op), *args)
    assert t.error is None and t.agrees
    assert t.recorded_path == ["AutocastCPU", "AutogradCPU", "CPU"]
    assert [e.depth for e in t.recorded] == [0, 1, 2]
    below = "BFloat16" if op == "matmul" else "Float"
    assert [e.dtypes for e in t.recorded] == [["Float", "Float"], [below, below], [below, below]]


@pytest.mark.parametrize("context", [nullcontext, lambda: torch.autocast("cpu", enabled=False)],
                         ids=["outside", "disabled"])
def test_without_autocast_inputs_are_untouched(workbook, context):
    args = inputs("matmul", (F32, F32))
    with context():
        t = trace.call(workbook.matmul, *args)
        with trace.op_calls() as calls:
            workbook.matmul(*args)
    assert t.recorded_path == ["AutogradCPU", "CPU"] and t.result.dtype == F32
    assert calls == ["workbook.matmul.default"]  # no cast


def test_a_weights_cast_is_cached_within_a_region_like_torch(workbook):
    x = inputs("matmul", (F32, F32))[0]
    weight = inputs("matmul", (F32, F32), requires_grad=True)[1]  # a leaf that requires grad
    counts = {}
    for name, op in [("workbook", workbook.matmul), ("torch", torch.matmul)]:
        with trace.op_calls() as calls:
            with torch.autocast("cpu"):
                op(x, weight), op(x, weight)
            with torch.autocast("cpu"):  # a new region: the cache was cleared when the last one ended
                op(x, weight)
        counts[name] = calls.count("aten._to_copy.default")
    # x is cast at every call; the weight once per region.
    assert counts == {"workbook": 3 + 2, "torch": 3 + 2}


def test_gradients_come_back_in_the_input_dtype_and_match_torch(workbook):
    grads = {}
    for name, op in [("workbook", workbook.matmul), ("torch", torch.matmul)]:
        a, b = inputs("matmul", (F32, F32), requires_grad=True)
        with torch.autocast("cpu"):
            out = op(a, b)
        assert out.dtype == BF16
        out.float().pow(2).sum().backward()
        grads[name] = (a.grad, b.grad)
    for ours, theirs in zip(*grads.values()):
        assert ours.dtype == theirs.dtype == F32
        torch.testing.assert_close(ours, theirs, rtol=2e-2, atol=2e-2)


def test_gradcheck_through_the_autocast_kernels_pass_through_branch_in_float64(workbook):
    # float64 is never cast: this checks the branch that casts nothing (the cast path: the test below).
    a, b = inputs("matmul", (F64, F64), requires_grad=True)
    bias = torch.randn(16, 8, dtype=F64, requires_grad=True)
    with torch.autocast("cpu"):
        assert trace.call(workbook.matmul, a, b).recorded_path[0] == "AutocastCPU"
        assert gradcheck(workbook.matmul, (a, b))
        assert gradcheck(workbook.add, (a @ b, bias))
        assert gradcheck(workbook.affine, (a, b, bias))


def test_the_cast_path_gives_what_the_casts_written_out_give_forward_and_backward(workbook):
    a, b = inputs("matmul", (F32, F32), requires_grad=True)
    grad_out = torch.randn(16, 8, generator=torch.Generator().manual_seed(1)).to(BF16)
    with torch.autocast("cpu"):
        in_region = workbook.matmul(a, b)
    by_hand = workbook.matmul(a.to(BF16), b.to(BF16))
    assert [edge[0].name() for edge in in_region.grad_fn.next_functions] == ["ToCopyBackward0"] * 2
    assert torch.equal(in_region, by_hand)
    for ours, written_out in zip(torch.autograd.grad(in_region, (a, b), grad_out),
                                 torch.autograd.grad(by_hand, (a, b), grad_out)):
        assert ours.dtype == F32 and torch.equal(ours, written_out)


def test_a_backward_called_inside_a_region_is_autocast_again(workbook):
    a, b = inputs("matmul", (F32, F32), requires_grad=True)
    out = workbook.matmul(a, b)  # float32, no region
    with torch.autocast("cpu"), trace.recording() as events:
        out.sum().backward()
    assert {tuple(e.dtypes) for e in events if e.key == "CPU"} == {("BFloat16", "BFloat16")}
    assert b.grad.dtype == F32


@pytest.mark.parametrize("first, second", [(F16, F32), (F16, F16)])
def test_promote_type_throws_on_the_other_half_type_before_a_float32_like_torch_cat(workbook, first, second):
    args = [tensor.to(dtype) for tensor, dtype in zip(inputs("add", (F32, F32)), (first, second))]
    for op in (workbook.add, lambda x, y: torch.cat([x, y])):
        with torch.autocast("cpu"), pytest.raises(RuntimeError, match="Unexpected floating ScalarType"):
            op(*args)
    with torch.autocast("cpu"):  # a float32 first makes the answer float32 before the float16 is met
        assert workbook.add(args[1].float(), args[0]).dtype == F32


def test_no_cast_is_cached_with_the_cache_off_nor_a_widening_one(workbook):
    x, weight = inputs("matmul", (F32, F32))
    weight.requires_grad_()
    bf16_weight, bias = inputs("add", (BF16, F32))
    bf16_weight.requires_grad_()
    counts = []
    for region, call in [({"cache_enabled": False}, lambda: workbook.matmul(x, weight)),
                         ({}, lambda: workbook.add(bf16_weight, bias))]:
        with trace.op_calls() as calls:
            with torch.autocast("cpu", **region):
                call(), call()
        counts.append(calls.count("aten._to_copy.default"))
    assert counts == [4, 2]


def test_destroy_removes_a_python_autocast_kernel_from_the_dispatcher_but_not_from_py_kernels(workbook):
    done = isolated.run("""
        import torch
        from helpers import build
        build.load_all("schemas", "cpu", "meta", "autograd", "autocast")
        op = torch.ops.workbook.sum.default
        for attempt in range(2):  # the second registration replaces the leftover Python entry
            lib = torch.library.Library("workbook", "IMPL")
            torch.library.register_autocast("workbook::sum", "cpu", torch.float32, lib=lib)
            with torch.autocast("cpu"):
                print(op(torch.ones(8, dtype=torch.bfloat16)).dtype)
            lib._destroy()
            print(torch._C._dispatch_has_kernel_for_dispatch_key("workbook::sum", "AutocastCPU"),
                  [key.name for key in op.py_kernels], op.has_kernel_for_dispatch_key(torch._C.DispatchKey.AutocastCPU))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["torch.float32", "False ['AutocastCPU'] True"] * 2


def test_python_register_autocast_works_without_a_cpp_kernel_and_fails_beside_one(workbook):
    # In a fresh process: a registration lasts as long as the process.
    done = isolated.run("""
        import torch
        from helpers import build
        build.load_all("schemas", "cpu", "meta", "autograd", "autocast")
        x = torch.ones(8, dtype=torch.bfloat16)
        torch.library.register_autocast("workbook::sum", "cpu", torch.float32)
        with torch.autocast("cpu"):
            print(torch.ops.workbook.sum(x).dtype)
        try:
            torch.library.register_autocast("workbook::matmul", "cpu", torch.float32)
        except KeyError as error:
            print("KeyError", error)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["torch.float32", "KeyError <DispatchKey.AutocastCPU: 24>"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: CUDA kernels not run")
def test_cuda_autocast_runs_matmul_in_float16(workbook):
    build.load("cuda")
    a, b = (t.cuda() for t in inputs("matmul", (F32, F32)))
    with torch.autocast("cuda"):
        t = trace.call(workbook.matmul, a, b)
        reference = torch.matmul(a, b)
    assert t.recorded_path == ["AutocastCUDA", "AutogradCUDA", "CUDA"]
    assert t.result.dtype == reference.dtype == F16
    torch.testing.assert_close(t.result, reference)
