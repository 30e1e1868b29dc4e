"""Lesson 08: the wheel of csrc/package, the stable-ABI port of add, AOTInductor from C++, torch.jit.trace. The wheel,
the .pt2 and the C++ runner are built once into build/shipping/ and shared with the lesson (helpers/shipping.py).

Lesson 08 itself, under nbval, checks what each needs a fresh Python for, and compares the printed results with its
stored outputs: every operator of the installed wheel under opcheck in a clean interpreter, the AOTInductor package
against eager in a fresh Python, and the error without the operators' library."""

import re
import subprocess
import warnings

import pytest
import torch

from conftest import TORCH
from helpers import build, shipping, trace


@pytest.fixture(scope="module")
def site():
    """The wheel, installed into a folder of its own."""
    return shipping.install(shipping.build_wheel())


@pytest.fixture(scope="module")
def model_pt2(workbook):
    model = shipping.TinyModel().eval()
    with torch.no_grad():
        return shipping.aoti_package(torch.export.export(model, (torch.zeros(3, 8),)))


def input_and_expected():
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return x, shipping.TinyModel().eval()(x)


def test_wheel_is_one_abi3_wheel_holding_the_library_and_the_python_side():
    wheel = shipping.build_wheel()
    assert re.fullmatch(r"workbook_ops-0\.1\.0-cp310-abi3-linux_\w+\.whl", wheel.name)
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert {"workbook_ops/__init__.py", "workbook_ops/batching.py", "workbook_ops/_C.abi3.so"} <= set(names)


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


def test_stable_abi_library_imports_only_the_c_shim_from_torch():
    library = build.load("stable").library
    symbols = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True).stdout
    mangled = [line.split()[-1] for line in symbols.splitlines() if re.search(r"\b_ZN(K)?(2at|3c10|5torch)", line)]
    assert mangled == []
    assert "torch_library_impl" in symbols or "aoti_torch" in symbols


def test_cpp_runner_matches_eager_with_no_python(site, model_pt2):
    x, expected = input_and_expected()
    runner = shipping.build_runner()
    stdin = f"3 8\n{' '.join(repr(v) for v in x.flatten().tolist())}\n"
    library = site / "workbook_ops" / "_C.abi3.so"
    done = subprocess.run([str(runner), str(model_pt2), str(library)], input=stdin, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows, cols, *values = done.stdout.split()
    assert (int(rows), int(cols)) == (3, 4)
    assert torch.allclose(torch.tensor([float(v) for v in values]).reshape(3, 4), expected, atol=1e-5)

    missing = subprocess.run([str(runner), str(model_pt2)], input=stdin, capture_output=True, text=True)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines()[-1] == "Could not find schema for workbook::matmul."


def test_jit_trace_records_the_op_and_reaches_it_through_the_tracer_key(workbook):
    traces = []

    def twice_the_sum(a, b):
        traces.append(trace.call(workbook.add, a, b))
        return traces[-1].result * 2

    traced = torch.jit.trace(twice_the_sum, (torch.ones(3), torch.ones(3)), check_trace=False)
    assert [node.kind() for node in traced.graph.nodes()][:1] == ["workbook::add"]
    assert traces[0].predicted_path == ["Tracer", "AutogradCPU", "CPU"]
    assert traces[0].agrees
    a, b = torch.randn(3), torch.randn(3)
    assert torch.equal(traced(a, b), (a + b) * 2)


def test_jit_trace_deprecation_is_a_future_warning_from_torch_2_14():
    # Lesson 08: FutureWarning (shown by default everywhere) from 2.14; DeprecationWarning (hidden outside __main__) before.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.jit.trace(lambda a: a * 2, (torch.ones(2),))
    categories = {warning.category for warning in caught if "torch.jit.trace` is deprecated" in str(warning.message)}
    new = TORCH >= (2, 14)
    assert categories == {FutureWarning if new else DeprecationWarning}
