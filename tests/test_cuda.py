"""csrc/*.cu: every CUDA source compiles with nvcc; with a GPU, the CUDA kernels match torch.

The compile check needs only nvcc and torch's headers, so it runs on a machine with a CPU-only
torch and no GPU (the kernels are compiled, not linked or run). The runtime tests need a CUDA
build of torch and a GPU, and are skipped without one. Like tests/test_ops.py, they take every operator's samples,
reference and bad inputs from helpers/samples.py; then what only a GPU shows (streams, CUDA graphs, determinism).
"""

import os
import shutil
import time

import pytest
import torch

from helpers import build, isolated, paths, samples

CU_FILES = sorted(paths.CSRC.rglob("*.cu"))


def nvcc_command(source, output):
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    return [
        "nvcc", "-c", "-std=c++20", "-Xcompiler", "-fPIC",
        f"-I{include}", f"-I{os.path.join(include, 'torch', 'csrc', 'api', 'include')}", f"-I{paths.CSRC}",
        # torch's headers expect a generated c10/cuda/impl/cuda_cmake_macros.h, absent from a CPU wheel.
        "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",
        "--expt-relaxed-constexpr",
        "-o", str(output), str(source),
    ]  # fmt: skip


def first_error_lines(output: str, limit: int = 15) -> str:
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if "error" in line), 0)
    return "\n".join(lines[start : start + limit])


def test_there_are_cu_files():
    assert CU_FILES, f"no .cu file under {paths.CSRC}"


@pytest.mark.parametrize("source", CU_FILES, ids=[str(p.relative_to(paths.CSRC)) for p in CU_FILES])
def test_every_cu_file_compiles_with_nvcc(source, tmp_path, compile_once):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found: the CUDA sources were not compile-checked")
    start = time.perf_counter()
    inputs = [source, *paths.CSRC.rglob("*.h")]
    returncode, output, _ = compile_once(nvcc_command(source, tmp_path / "x.o"), inputs, tmp_path / "x.o")
    seconds = time.perf_counter() - start
    assert returncode == 0, (
        f"nvcc rejected {source.relative_to(paths.REPO)} (rc {returncode}, {seconds:.0f} s):\n"
        f"{first_error_lines(output)}"
    )


# ---- runtime: needs a GPU ------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(build.why_no_cuda() is not None, reason=f"CUDA kernels not run: {build.why_no_cuda()}")

OPS = samples.OPS
ON_CUDA = [name for name, op in OPS.items() if "cuda" in op.devices]


@pytest.fixture(scope="module")
def ops():
    build.load_all("schemas", "cuda", "composite")  # composite.cpp has row, affine and mean, for every backend
    return torch.ops.workbook


def make(shape, dtype, device="cuda", seed=0):
    return samples.tensor(shape, dtype, device, seed)


# Kernels that add up many terms (sum, matmul, and the composites of them) add in another order than torch, and sum's
# blocks in whichever order their atomics land: a result may be off the exact one by a few roundings of the terms it
# adds. The same reference on the inputs' magnitudes (sum of |x|, |a| @ |b|) is the size of those terms, and RTOL times
# it the error allowed (bfloat16 and float16: assert_close's rtol for them). test_matmul_matches_torch pins matmul's
# results closer.
RTOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 1.6e-2, torch.float16: 1e-3}


def reference(name, cpu_args, cpu_kwargs, cast=lambda t: t):
    """The outputs (samples.outputs) of the operator's reference, run by torch on copies of the CPU arguments, cast."""
    cpu_args, cpu_kwargs = samples.each_tensor(lambda t: cast(t.clone()), cpu_args, cpu_kwargs)
    return samples.outputs(OPS[name].reference(*cpu_args, **cpu_kwargs), cpu_args, cpu_kwargs)


@needs_cuda
@pytest.mark.parametrize("name, dtype", [pytest.param(name, dtype, id=f"{name}-{str(dtype).removeprefix('torch.')}")
                                         for name in ON_CUDA for dtype in OPS[name].dtypes])
def test_matches_the_reference(ops, name, dtype):
    # Every sample of helpers/samples.py on the GPU: the result and every argument written, against the reference run
    # by torch on the CPU; exactly for integers and for the operators whose every element is rounded once.
    for args, kwargs in samples.inputs(name, dtype, "cuda"):
        cpu_args, cpu_kwargs = samples.on("cpu", args, kwargs)  # before the operator writes into any of them
        result = getattr(ops, name)(*args, **kwargs)
        values = samples.by_name(name, args, kwargs)
        assert result.device == next(value for value in values.values() if isinstance(value, torch.Tensor)).device
        if aliased := samples.aliased(name):  # a view of the argument, or the argument written
            assert result.untyped_storage().data_ptr() == values[aliased].untyped_storage().data_ptr()
        ours = [t.cpu() for t in samples.outputs(result, args, kwargs)]
        expected = reference(name, cpu_args, cpu_kwargs)
        assert [(t.dtype, t.shape) for t in ours] == [(t.dtype, t.shape) for t in expected], name
        if OPS[name].exact or not dtype.is_floating_point:
            assert all(map(torch.equal, ours, expected)), (name, dtype, [tuple(t.shape) for t in args])
            continue
        exact = reference(name, cpu_args, cpu_kwargs, torch.Tensor.double)
        magnitudes = reference(name, cpu_args, cpu_kwargs, lambda t: t.double().abs())
        for got, want, size in zip(ours, exact, magnitudes):
            within = ((got.double() - want).abs() <= RTOL[dtype] * size) | (got.isnan() & want.isnan())
            assert within.all(), (f"{name}, {dtype}, shape {tuple(got.shape)}: {int((~within).sum())} elements off "
                                  f"the exact result by more than {RTOL[dtype]} times the reference on |inputs|")


@needs_cuda
def test_sum_int64_beyond_32_bits_and_negative(ops):
    x = torch.full(((1 << 16) + 5,), -(1 << 40), dtype=torch.int64, device="cuda")
    assert ops.sum(x).item() == -(1 << 40) * ((1 << 16) + 5)


@needs_cuda
@pytest.mark.parametrize(
    "in_dtype, dtype",
    [
        (torch.int32, torch.int32),
        (torch.int64, torch.int32),
        (torch.int32, torch.float64),
        (torch.int64, torch.float32),
        (torch.float32, torch.float64),
        (torch.float64, torch.float32),
    ],
)
def test_sum_dtype_argument(ops, in_dtype, dtype):
    x = make((1000,), in_dtype)
    got = ops.sum(x, dtype=dtype)
    assert got.dtype == dtype and got.dim() == 0
    # As cpu.cpp: accumulate by the input's kind (integers in int64), convert the total at the end.
    expected = x.double().sum() if in_dtype.is_floating_point else x.sum(dtype=torch.int64)
    torch.testing.assert_close(got, expected.to(dtype), rtol=1e-5, atol=1e-3)


@needs_cuda
def test_sum_of_floats_into_an_integer_converts_the_total_not_each_element(ops):
    x = torch.arange(1000, dtype=torch.float32, device="cuda") * 0.5  # every partial sum is exact
    # 0.5 * (0 + 1 + ... + 999) = 249750; truncating each element first would give 249500.
    assert ops.sum(x, dtype=torch.int64).item() == 249750


@needs_cuda
def test_sum_int32_result_wraps_like_cpu(ops):
    # 4 * 2^29 = 2^31 overflows int32: the int64 total 2^31 converted to int32 wraps to -2^31, as on CPU.
    x = torch.full((4,), 1 << 29, dtype=torch.int32, device="cuda")
    assert ops.sum(x, dtype=torch.int32).item() == -(1 << 31)


@needs_cuda
def test_float_sum_refuses_deterministic_mode_integer_sum_does_not(ops):
    # The float sum adds with atomics in block order (not reproducible): csrc/cuda.cu's sum_all says so.
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with pytest.raises(RuntimeError, match="workbook::sum"):
            ops.sum(make((1000,), torch.float32))
        assert ops.sum(make((1000,), torch.int32)).item() == make((1000,), torch.int32, "cpu").sum().item()
    finally:
        torch.use_deterministic_algorithms(was)


@needs_cuda
def test_sum_runs_on_the_current_stream(ops):
    x = make(((1 << 20) + 3,), torch.int64)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        got = ops.sum(x)
        same = torch.equal(got, x.sum())
    assert same


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.int32, torch.float32])
def test_sum_and_matmul_replay_in_a_cuda_graph(ops, dtype):
    # Capture happens on a side stream; work launched on the legacy default stream during capture is
    # an error, and work on any other stream would be missing from the graph (pytorch#157363).
    x = make(((1 << 20) + 3,), dtype, seed=1)
    a = make((33, 17), torch.float32, seed=1)
    b = make((17, 65), torch.float32, seed=2)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture
        ops.sum(x), ops.matmul(a, b)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        total = ops.sum(x, dtype=dtype)
        product = ops.matmul(a, b)
    x.copy_(make(x.shape, dtype, seed=2))  # new inputs in the same memory
    a.copy_(make(a.shape, torch.float32, seed=3))
    graph.replay()
    torch.cuda.synchronize()
    if dtype.is_floating_point:
        torch.testing.assert_close(total.double(), x.double().sum(), rtol=1e-5, atol=1e-5 * x.abs().sum().item())
    else:
        assert total.item() == x.sum().item()  # also proves the memset was captured: no stale total
    torch.testing.assert_close(product, a @ b, rtol=1e-4, atol=1e-4)


@needs_cuda
@pytest.mark.parametrize("dtype", OPS["matmul"].dtypes)
@pytest.mark.parametrize("n, k, m", [(33, 17, 65), (256, 256, 256), (1, 1, 1), (5, 0, 3)])
def test_matmul_matches_torch(ops, dtype, n, k, m):
    a, b = make((n, k), dtype, seed=1), make((k, m), dtype, seed=2)
    expected = (a.double() @ b.double()).to(dtype)
    # bfloat16 and float16 accumulate in float32 and round once: assert_close's defaults for them.
    tol = {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, torch.float64: {"rtol": 1e-10, "atol": 1e-10}}.get(dtype, {})
    torch.testing.assert_close(ops.matmul(a, b), expected, **tol)


@needs_cuda
@pytest.mark.parametrize("name, what", [(name, what) for name in ON_CUDA for what in OPS[name].bad_inputs])
def test_bad_input_is_refused_with_a_message_naming_the_argument(ops, name, what):
    args, kwargs, message = samples.bad_inputs(name, "cuda")[what]
    with pytest.raises(RuntimeError, match=message):
        getattr(ops, name)(*args, **kwargs)


@needs_cuda
@pytest.mark.parametrize("name", ON_CUDA)
def test_a_tensor_on_the_cpu_is_refused(ops, name):
    # One tensor argument on the CPU, the others on the GPU: the dispatcher picks the CUDA kernel, which names it.
    values = samples.by_name(name, *samples.inputs(name, OPS[name].dtypes[0], "cuda")[0])
    names = [argument for argument, value in values.items() if isinstance(value, torch.Tensor)]
    if len(names) < 2 or not torch._C._dispatch_has_kernel_for_dispatch_key(f"workbook::{name}", "CUDA"):
        pytest.skip(f"{name}: one tensor argument" if len(names) < 2 else f"{name}: a composite, its parts check")
    for moved in names:
        with pytest.raises(RuntimeError, match=rf"workbook::{name}: `{moved}` must be on cuda, got cpu"):
            getattr(ops, name)(**values | {moved: values[moved].cpu()})


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@needs_cuda
def test_tensors_on_two_gpus_are_refused(ops):
    with pytest.raises(RuntimeError, match="`other` is on cuda:1 but `self` is on cuda:0"):
        ops.add(torch.ones(3, device="cuda:0"), torch.ones(3, device="cuda:1"))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@needs_cuda
def test_second_gpu_runs_on_its_own_device(ops):
    x = make(((1 << 20) + 3,), torch.int64, device="cuda:1")
    assert ops.sum(x).device == x.device
    assert ops.sum(x).item() == x.sum().item()


@needs_cuda
def test_a_host_loop_registered_for_every_key_crashes_on_a_cuda_tensor():
    """Lesson 02, section 4: the catch-all kernel's CPU loop, given a CUDA tensor, reads a GPU address on the host. On a
    machine with a discrete GPU that is a segmentation fault, not an error Python could catch (so: a child process)."""
    done = isolated.run("""
        import torch
        from helpers import build
        build.load("schemas")
        build.load("catch_all")
        torch.ops.workbook.sum_everywhere(torch.ones(1 << 20, device="cuda"))
        print("returned")
    """)
    assert done.returncode < 0 and "returned" not in done.stdout, (done.returncode, done.stdout, done.stderr[-1000:])
