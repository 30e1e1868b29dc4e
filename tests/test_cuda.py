"""csrc/*.cu: every CUDA source compiles with nvcc; with a GPU, the CUDA kernels match torch.

The compile check needs only nvcc and torch's headers, so it runs on a machine with a CPU-only
torch and no GPU (the kernels are compiled, not linked or run). The runtime tests need a CUDA
build of torch and a GPU, and are skipped without one.
"""

import os
import re
import shutil
import time

import pytest
import torch

from helpers import build, isolated, paths

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

ADD_DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16]


@pytest.fixture(scope="module")
def ops():
    build.load_all("schemas", "cuda", "composite")  # composite.cpp has row, for every backend
    return torch.ops.workbook


def make(shape, dtype, device="cuda", seed=0):
    generator = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=dtype).to(device)
    return torch.randint(-1000, 1000, shape, generator=generator, dtype=dtype).to(device)


@needs_cuda
@pytest.mark.parametrize("dtype", ADD_DTYPES)
@pytest.mark.parametrize("shape", [(1,), (1000,), (33, 17), ((1 << 20) + 3,)])
def test_add_matches_torch(ops, dtype, shape):
    a, b = make(shape, dtype, seed=1), make(shape, dtype, seed=2)
    torch.testing.assert_close(ops.add(a, b), a + b, rtol=0, atol=0)


@needs_cuda
@pytest.mark.parametrize("dtype", ADD_DTYPES)
def test_add_in_place_and_out(ops, dtype):
    a, b = make((1000,), dtype, seed=1), make((1000,), dtype, seed=2)
    expected = a + b
    out = torch.empty_like(a)
    ops.add_out(a, b, out=out)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    ops.add_(a, b)
    torch.testing.assert_close(a, expected, rtol=0, atol=0)


@needs_cuda
def test_add_non_contiguous_input(ops):
    a = make((64, 48), torch.float32, seed=1).t()
    b = make((48, 64), torch.float32, seed=2)
    torch.testing.assert_close(ops.add(a, b), a + b, rtol=0, atol=0)


@needs_cuda
def test_add_empty(ops):
    a = torch.empty(0, device="cuda")
    assert ops.add(a, a).shape == (0,)


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 3])
def test_sum_float_matches_torch(ops, dtype, n):
    x = make((n,), dtype)
    got = ops.sum(x)
    assert got.dtype == dtype and got.dim() == 0 and got.device == x.device
    # Both reduce in a tree, in different orders: compare with the double-precision sum.
    rtol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(got.double(), x.double().sum(), rtol=rtol, atol=rtol * x.abs().sum().item())


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("n", [1, 1000, (1 << 20) + 3])
def test_sum_integers_is_exact_and_int64(ops, dtype, n):
    x = make((n,), dtype)
    got = ops.sum(x)
    assert got.dtype == torch.int64
    assert got.item() == x.sum().item()


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
def test_sum_empty_is_zero(ops):
    assert ops.sum(torch.empty(0, device="cuda")).item() == 0
    assert ops.sum(torch.empty(0, dtype=torch.int32, device="cuda")).item() == 0


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
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n, k, m", [(33, 17, 65), (256, 256, 256), (1, 1, 1), (5, 0, 3)])
def test_matmul_matches_torch(ops, dtype, n, k, m):
    a, b = make((n, k), dtype, seed=1), make((k, m), dtype, seed=2)
    expected = (a.double() @ b.double()).to(dtype)
    # bfloat16 and float16 accumulate in float32 and round once: assert_close's defaults for them.
    tol = {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, torch.float64: {"rtol": 1e-10, "atol": 1e-10}}.get(dtype, {})
    torch.testing.assert_close(ops.matmul(a, b), expected, **tol)


@needs_cuda
def test_matmul_non_contiguous_input(ops):
    a = make((40, 33), torch.float64, seed=1).t()  # 33 x 40, transposed view
    b = make((40, 7), torch.float64, seed=2)
    torch.testing.assert_close(ops.matmul(a, b), a @ b)


@needs_cuda
@pytest.mark.parametrize("index", [0, 2, -1])
def test_row_is_a_view(ops, index):
    x = make((5, 7), torch.float32)
    r = ops.row(x, index)
    torch.testing.assert_close(r, x[index], rtol=0, atol=0)
    assert r.device == x.device
    assert r.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()


@needs_cuda
@pytest.mark.parametrize(
    "call, message",
    [
        (lambda w: w.add(torch.ones(3, device="cuda"), torch.ones(3)), "`other` must be on cuda"),
        (lambda w: w.add_(torch.ones(3, device="cuda"), torch.ones(3)), "`other` must be on cuda"),
        (lambda w: w.add_out(torch.ones(3, device="cuda"), torch.ones(3, device="cuda"), out=torch.ones(3)),
         "`out` must be on cuda"),
        (lambda w: w.matmul(torch.ones(2, 2, device="cuda"), torch.ones(2, 2)), "`other` must be on cuda"),
        (lambda w: w.add(torch.ones(3, device="cuda"), torch.ones(3, device="cuda", dtype=torch.float64)),
         "`other` has dtype Double"),
        (lambda w: w.add(torch.ones(3, device="cuda"), torch.ones(4, device="cuda")), "`other` has shape"),
        (lambda w: w.add(torch.ones(3, device="cuda", dtype=torch.bool), torch.ones(3, device="cuda", dtype=torch.bool)),
         "`self` has dtype Bool"),
        (lambda w: w.sum(torch.ones(3, device="cuda", dtype=torch.int16)), "`self` has dtype Short"),
        (lambda w: w.sum(torch.ones(3, device="cuda"), dtype=torch.float16), "`dtype` must be one of"),
        (lambda w: w.matmul(torch.ones(2, 2, 2, device="cuda"), torch.ones(2, 2, device="cuda")), "`self` must be 2-D"),
        (lambda w: w.matmul(torch.ones(2, 2, device="cuda"), torch.ones(2, device="cuda")), "`other` must be 2-D"),
        (lambda w: w.matmul(torch.ones(2, 3, device="cuda"), torch.ones(2, 3, device="cuda")),
         "self.size(1) must equal other.size(0)"),
        (lambda w: w.matmul(torch.ones(2, 2, device="cuda", dtype=torch.int32), torch.ones(2, 2, device="cuda",
         dtype=torch.int32)), "`self` has dtype Int"),
        (lambda w: w.row(torch.ones(2, 2, 2, device="cuda"), 0), "`self` must be 2-D"),
        (lambda w: w.row(torch.ones(2, 2, device="cuda"), 2), "`index` 2 is out of range"),
        (lambda w: w.add_(torch.ones(3, 4, device="cuda").t(), torch.ones(4, 3, device="cuda")),
         "`self` is written in place"),
    ],
)  # fmt: skip
def test_bad_arguments_name_the_argument(ops, call, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        call(ops)


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
