"""Lesson 08: the wheels of csrc/package and csrc/stable, AOTInductor from C++, torch.jit.trace. The wheels, the
.pt2 and the C++ runner are built once into build/shipping/ and shared with the lesson (helpers/shipping.py).

Lesson 08 itself, under nbval, checks what each needs a fresh Python for, and compares the printed results with its
stored outputs: every operator of the installed wheel under opcheck in a clean interpreter, the AOTInductor package
against eager in a fresh Python, and the error without the operators' library. These tests pin the contracts the
lesson leans on, and what no lesson can show on every machine: the stable wheel under another torch release."""

import os
import re
import shutil
import subprocess
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from torch.utils.cpp_extension import CUDA_HOME

from helpers import build, shipping, toolchain, trace


@pytest.fixture(scope="module")
def site():
    """The wheel, installed into a folder of its own."""
    return shipping.install(shipping.build_wheel())


@pytest.fixture(scope="module")
def model_pt2(workbook):
    return shipping.mlp_package()[1]


def test_wheel_is_one_abi3_wheel_holding_the_library_and_the_python_side():
    wheel = shipping.build_wheel()
    assert re.fullmatch(r"workbook_ops-0\.1\.0-cp310-abi3-linux_\w+\.whl", wheel.name)
    names = zipfile.ZipFile(wheel).namelist()
    assert {"workbook_ops/__init__.py", "workbook_ops/batching.py", "workbook_ops/check.py",
            "workbook_ops/_C.abi3.so", "workbook_ops/_built_for.py"} <= set(names)
    # The CUDA the kernels were compiled for, written by setup.py: None where no CUDA kernels were built.
    built_for = zipfile.ZipFile(wheel).read("workbook_ops/_built_for.py").decode()
    cuda_kernels = torch.cuda.is_available() and CUDA_HOME is not None  # setup.py's condition
    assert built_for.startswith(f"CUDA = {torch.version.cuda!r}" if cuda_kernels else "CUDA = None")


def test_a_wheel_outside_the_checkout_installs(tmp_path):
    # WORKBOOK_BUILD_DIR may name a folder outside the checkout (README), and the wheels are built there: a wheel's
    # cache key once asked for its place in the checkout, and exercise 08.load_before_aoti's check failed on its
    # reference solution.
    wheel = shipping.build_wheel()
    elsewhere = tmp_path / wheel.name
    shutil.copy(wheel, elsewhere)
    assert (shipping.install(elsewhere) / "workbook_ops" / "__init__.py").exists()


def test_installed_package_refuses_a_torch_built_for_another_cuda(site, tmp_path):
    # What the pin on torch cannot do (lesson 08): the package, told its kernels were built for another CUDA, refuses
    # to load before it touches the library.
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    (copy / "workbook_ops" / "_built_for.py").write_text('CUDA = "0.0"\n')
    printed = shipping.run_python("""
        import torch
        try:
            import workbook_ops
        except ImportError as error:
            print(error)
        print("library loaded:", any("workbook" in str(lib) for lib in torch.ops.loaded_libraries))
        """, copy)
    assert printed.splitlines() == [
        f"workbook_ops was built for CUDA 0.0, this torch for CUDA {torch.version.cuda}: install the workbook_ops "
        "built for this torch", "library loaded: False"]


def test_wheel_library_needs_no_python_and_runs_kernels_on_threads(site):
    symbols = shipping.imported_symbols(site / "workbook_ops" / "_C.abi3.so")
    assert not [name for name in symbols if name.startswith(("Py", "_Py"))]  # the py_limited_api promise, kept
    # Where the compiler has OpenMP (the probe the layers use; setup.py asks the compiler the same question), the
    # library calls the OpenMP runtime (g++: GOMP_*, clang: __kmpc_*): at::parallel_for uses threads.
    if "-fopenmp" in toolchain.toolchain().openmp_cflags:
        assert any(name.startswith(("GOMP_", "__kmpc_")) for name in symbols), "built without -fopenmp"


def test_installed_package_registers_the_vmap_rule(site):
    printed = shipping.run_python("""
        import torch, workbook_ops
        print(torch._C._dispatch_has_kernel_for_dispatch_key("workbook::matmul", "FuncTorchBatched"))
        batch, other = torch.randn(5, 3, 4), torch.randn(4, 2)
        print(torch.allclose(torch.vmap(torch.ops.workbook.matmul, in_dims=(0, None))(batch, other), batch @ other))
        """, site)
    assert printed.split() == ["True", "True"]


def test_stable_abi_add_matches_the_regular_add(workbook):
    build.load("stable")
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64, torch.int32, torch.bfloat16):
        a = (torch.randn(6, 5, generator=generator) * 10).to(dtype)
        b = (torch.randn(5, 6, generator=generator) * 10).to(dtype).t()  # not contiguous
        assert torch.equal(torch.ops.workbook_stable.add(a, b), workbook.add(a, b))


@pytest.mark.parametrize("a, b, message", [
    (torch.ones(2, 3), torch.ones(2, 3, dtype=torch.float64), "`other` has dtype Double but `self` has dtype Float"),
    (torch.ones(2, 3), torch.ones(3, 2), "`other` has shape [3, 2] but `self` has shape [2, 3]"),
    (torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool), "`self` has dtype Bool; supported: Float"),
])
def test_stable_abi_add_refuses_bad_input_naming_the_argument(workbook, a, b, message):
    build.load("stable")
    with pytest.raises(RuntimeError) as error:
        torch.ops.workbook_stable.add(a, b)
    assert str(error.value).startswith("workbook_stable::add: " + message)


def test_stable_wheel_needs_only_torchs_c_shim_and_any_torch_from_2_10():
    wheel = shipping.build_wheel("stable")
    metadata = zipfile.ZipFile(wheel).read("workbook_stable-0.1.0.dist-info/METADATA").decode()
    assert "Requires-Dist: torch>=2.10" in metadata.splitlines()
    symbols = shipping.imported_symbols(shipping.install(wheel) / "workbook_stable" / "_C.abi3.so")
    assert [name for name in symbols if re.match(r"_ZN(K)?(2at|3c10|5torch)", name)] == []
    assert "torch_library_impl" in symbols


VENVS = shipping.torch_venvs()
ONE_TORCH = "only one torch here: `make test TORCH=2.13.0` (or 2.14.1) makes a venv with another"


@pytest.mark.skipif(len(VENVS) < 2, reason=ONE_TORCH)
def test_stable_wheel_loads_and_passes_opcheck_under_every_torch_here():
    # Lesson 08's promise of the stable ABI: built with any of these releases, it runs under all of them.
    outcomes = shipping.abi_matrix("stable")
    assert len(outcomes) == len(VENVS) ** 2
    assert {pair: outcome for pair, outcome in outcomes.items() if not outcome.opcheck_passed} == {}


@pytest.mark.skipif(len(VENVS) < 2, reason=ONE_TORCH)
def test_regular_wheel_passes_under_the_torch_it_was_built_with_and_another_torch_promises_nothing():
    outcomes = shipping.abi_matrix("package")
    assert all(outcomes[release, release].opcheck_passed for release in VENVS)
    # Under another release each outcome is possible (lesson 08 prints which one each pair gave); a refusal names what
    # the loader missed.
    for (built, run), outcome in outcomes.items():
        if not outcome.loaded:
            assert "undefined symbol" in outcome.detail, (built, run, outcome)


def test_cpp_runner_matches_eager_with_no_python_on_two_batch_sizes(site, model_pt2, tmp_path):
    runner = shipping.build_runner()
    library = site / "workbook_ops" / "_C.abi3.so"
    model = shipping.mlp_package()[0]
    for rows in (3, 5):
        x = torch.randn(rows, 32, generator=torch.Generator().manual_seed(rows))
        stdin = f"{rows} 32\n{' '.join(repr(v) for v in x.flatten().tolist())}\n"
        done = subprocess.run([str(runner), str(model_pt2), str(library)], input=stdin, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        out_rows, cols, *values = done.stdout.split()
        with torch.no_grad():
            expected = model(x)
        assert (int(out_rows), int(cols)) == tuple(expected.shape)
        assert torch.allclose(torch.tensor([float(v) for v in values]).reshape(expected.shape), expected, atol=1e-5)
    # The loader, failing, leaves the folder it unpacked the package into: in a temporary folder of the test's own.
    missing = subprocess.run([str(runner), str(model_pt2)], input=stdin, capture_output=True, text=True,
                             env={**os.environ, "TMPDIR": str(tmp_path)})
    assert missing.returncode == 1
    # affine was decomposed
    assert missing.stderr.strip().splitlines()[-1] == "Could not find schema for workbook::matmul."


def test_aoti_package_leaves_the_process_compile_settings_as_it_found_them(workbook, monkeypatch, tmp_path):
    # torch's compile writes the machine's description into config.aot_inductor.metadata, the process's dict
    # (torch/_inductor/codecache.py, AotCodeCompiler.compile); a stand-in that does the same, not a real compile (16 s).
    def compile_as_torch_does(program, package_path):
        torch._inductor.config.aot_inductor.metadata["AOTI_DEVICE_KEY"] = "cpu"
        Path(package_path).write_bytes(b"")

    monkeypatch.setattr(shipping, "SHIPPING", tmp_path)
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_as_torch_does)
    before = torch._inductor.config.get_config_copy()
    shipping.aoti_package(shipping.exported_mlp()[1])
    assert torch._inductor.config.get_config_copy() == before


def test_jit_trace_records_the_op_and_reaches_it_through_the_tracer_key(workbook):
    traces = []

    def twice_the_sum(a, b):
        traces.append(trace.call(workbook.add, a, b))
        return traces[-1].result * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (FutureWarning, DeprecationWarning))  # its deprecation: the next test
        traced = torch.jit.trace(twice_the_sum, (torch.ones(3), torch.ones(3)), check_trace=False)
    assert [node.kind() for node in traced.graph.nodes()][:1] == ["workbook::add"]
    assert traces[0].predicted_path == ["Tracer", "AutogradCPU", "CPU"]
    assert traces[0].agrees
    a, b = torch.randn(3), torch.randn(3)
    assert torch.equal(traced(a, b), (a + b) * 2)


def test_jit_trace_deprecation_is_a_future_warning_from_torch_2_14():
    # Lesson 08: FutureWarning (shown by default everywhere) from 2.14; DeprecationWarning (hidden outside __main__)
    # before.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.jit.trace(lambda a: a * 2, (torch.ones(2),))
    categories = {warning.category for warning in caught if "torch.jit.trace` is deprecated" in str(warning.message)}
    new = torch.__version__ >= (2, 14)
    assert categories == {FutureWarning if new else DeprecationWarning}
