"""helpers/build.py: the cache key, rebuilds on header edits, the namespace guard, compile errors."""

import contextlib
import ctypes
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from helpers import build, guard, isolated, messages, paths, progress, toolchain

TINY_SOURCE = """#include "tiny.h"
extern "C" int tiny_value() { return TINY_VALUE; }
"""


@pytest.fixture
def tiny_csrc(tmp_path, monkeypatch):
    """A throw-away csrc/ with one tiny layer (no torch headers: it compiles in about a second)."""
    csrc = tmp_path / "csrc"
    csrc.mkdir()
    (csrc / "tiny.cpp").write_text(TINY_SOURCE)
    (csrc / "tiny.h").write_text("#define TINY_VALUE 1\n")
    monkeypatch.setattr(paths, "CSRC", csrc)
    monkeypatch.setattr(paths, "BUILD_DIR", tmp_path / "build")
    monkeypatch.setattr(build, "LAYERS", {"tiny": ["tiny.cpp"], "broken": ["broken.cpp"]})
    return csrc


def test_warm_load_finds_the_library_and_does_not_compile(tiny_csrc):
    first = build.load("tiny")
    again = build.load("tiny")
    assert first.compiled and not again.compiled
    assert again.library == first.library


@contextlib.contextmanager
def torch_build_holding(lock: Path):
    """The lock torch's build holds while it runs: from torch 2.14 an flock on the file (filelock), in 2.13 the file
    itself (FileBaton)."""
    if hasattr(torch.utils.cpp_extension, "FileLock"):
        with torch.utils.cpp_extension.FileLock(str(lock)):
            yield
    else:
        baton = torch.utils.file_baton.FileBaton(str(lock))
        assert baton.try_acquire()
        try:
            yield
        finally:
            baton.release()


def test_a_built_layer_loads_without_ninja_unless_a_build_holds_its_lock(tiny_csrc, monkeypatch):
    """From torch 2.14 the file `lock` stays in every build folder: its presence alone must not send every load through
    torch's build (ninja, about 20 ms a layer). A build that holds it does."""
    library = build.load("tiny").library
    asked = []
    monkeypatch.setattr(torch.utils.cpp_extension, "load", lambda **arguments: asked.append(arguments["name"]))
    monkeypatch.setattr(torch.ops, "load_library", lambda path: None)  # the library is loaded already
    build.load("tiny")
    assert asked == []
    assert (library.parent / "lock").exists() == hasattr(torch.utils.cpp_extension, "FileLock")
    with torch_build_holding(library.parent / "lock"):
        build.load("tiny")
    assert asked == [library.stem]


def test_editing_a_header_rebuilds(tiny_csrc):
    before = build.load("tiny")
    assert ctypes.CDLL(str(before.library)).tiny_value() == 1
    (tiny_csrc / "tiny.h").write_text("#define TINY_VALUE 2\n")
    after = build.load("tiny")
    assert after.compiled and after.library != before.library
    assert ctypes.CDLL(str(after.library)).tiny_value() == 2


def test_cache_key_covers_sources_headers_and_flags(tiny_csrc):
    sources = [tiny_csrc / "tiny.cpp"]
    key = build.cache_key(sources)
    assert build.cache_key(sources, flags=["-O0"]) != key
    (tiny_csrc / "unrelated.h").write_text("// any header in csrc counts\n")
    assert build.cache_key(sources) != key


def test_an_unoptimized_build_is_a_library_of_its_own_at_O1(tiny_csrc):
    fast_code = build.load_sources("tiny", [tiny_csrc / "tiny.cpp"])
    fast_build = build.load_sources("tiny", [tiny_csrc / "tiny.cpp"], optimize=False)
    assert fast_build.library != fast_code.library and ctypes.CDLL(str(fast_build.library)).tiny_value() == 1
    ninja = (fast_build.library.parent / "build.ninja").read_text()
    assert " -O1 " in ninja and " -O3 " not in ninja


def test_toolchain_compiles_for_torchs_cpu_capability():
    tools = toolchain.toolchain()
    capability = torch.backends.cpu.get_cpu_capability()
    wanted = toolchain.CAPABILITY_FLAGS.get(capability, toolchain.CAPABILITY_FLAGS["DEFAULT"])
    assert tools.capability == capability and all(flag in tools.cflags for flag in wanted)
    assert "-O3" in tools.cflags
    assert tools.compiler.startswith(paths.compiler())


@pytest.fixture
def compiler_without_openmp(tmp_path, monkeypatch):
    """A compiler that refuses -fopenmp, as Apple clang does; otherwise it is the usual one."""
    wrapper = tmp_path / "no-openmp-c++"
    real = shutil.which(paths.compiler())
    wrapper.write_text(f"""#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = "-fopenmp" ]; then echo "clang: error: unsupported option '-fopenmp'" >&2; exit 1; fi
done
exec {real} "$@"
""")
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    toolchain.toolchain.cache_clear()
    yield
    toolchain.toolchain.cache_clear()


def test_a_compiler_without_openmp_builds_and_says_kernels_run_on_one_thread(
        compiler_without_openmp, tiny_csrc, capsys):
    tools = toolchain.toolchain()
    assert tools.openmp_cflags == [] and tools.openmp_ldflags == []
    assert tools.openmp.startswith("no OpenMP (unsupported option '-fopenmp')") and "ONE thread" in tools.openmp
    capsys.readouterr()  # the probe's own report
    built = build.load("tiny")
    assert built.compiled and ctypes.CDLL(str(built.library)).tiny_value() == 1
    assert "ONE thread" not in capsys.readouterr().err  # tiny has no parallel loop: nothing to warn about
    (tiny_csrc / "tiny.cpp").write_text("#if 0\n#include <ATen/Parallel.h>\n#endif\n" + TINY_SOURCE)
    assert toolchain.is_parallel([tiny_csrc / "tiny.cpp"])
    assert build.load("tiny").compiled and "ONE thread" in capsys.readouterr().err  # a parallel layer: the log says so


def test_a_compiler_that_links_the_cpp_runtime_into_each_library_gets_a_warning(tmp_path, monkeypatch):
    # A lent GPU machine's $CXX did this; the layers it built crashed in the trace recorder (helpers/toolchain.py).
    wrapper = tmp_path / "static-runtime-c++"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which(paths.compiler())} -static-libstdc++ "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    toolchain.toolchain.cache_clear()
    try:
        static = toolchain.toolchain()
    finally:
        toolchain.toolchain.cache_clear()
    assert "linked INTO each library (it defines _ZNSo" in static.runtime and static.runtime in static.describe()
    monkeypatch.delenv("CXX")
    assert toolchain.toolchain().runtime == ""  # the compiler of the test run leaves the runtime to the process


def test_openmp_flags_go_to_parallel_layers_only():
    tools = toolchain.toolchain()
    assert toolchain.is_parallel(build.layer_sources("cpu"))
    assert not toolchain.is_parallel(build.layer_sources("schemas"))
    assert tools.flags(build.layer_sources("cpu")) == ([*tools.cflags, *tools.openmp_cflags], tools.openmp_ldflags)
    assert tools.flags(build.layer_sources("schemas")) == (tools.cflags, [])


def test_openmp_can_be_switched_off(monkeypatch, tiny_csrc):
    monkeypatch.setenv("WORKBOOK_OPENMP", "0")
    toolchain.toolchain.cache_clear()
    try:
        tools = toolchain.toolchain()
        assert tools.openmp_cflags == [] and tools.openmp.startswith("OpenMP off")
    finally:
        toolchain.toolchain.cache_clear()


def test_compile_error_shows_first_diagnostic_with_file_and_line(tiny_csrc):
    (tiny_csrc / "broken.cpp").write_text("int ok() { return 0; }\nint broken() { return undeclared_name; }\n")
    with pytest.raises(build.CompileError) as error:
        build.load("broken")
    message = str(error.value)
    assert "broken.cpp:2:" in message and "undeclared_name" in message
    assert len(message.splitlines()) < 15, "the message should be the diagnostics, not the whole ninja log"


def test_redefining_a_loaded_namespace_raises_instead_of_aborting(workbook, tmp_path, monkeypatch):
    # An edited copy of schemas.cpp is a different library defining the same namespace.
    csrc = tmp_path / "csrc"
    shutil.copytree(paths.CSRC, csrc)
    (csrc / "schemas.cpp").write_text((csrc / "schemas.cpp").read_text() + "// edited\n")
    monkeypatch.setattr(paths, "CSRC", csrc)
    with pytest.raises(build.NamespaceAlreadyRegistered, match="restart the kernel"):
        build.load("schemas")
    assert torch.ops.workbook.add(torch.ones(2), torch.ones(2)).tolist() == [2.0, 2.0]


def test_loading_the_same_build_again_is_a_no_op(workbook):
    loaded = set(torch.ops.loaded_libraries)
    build.load("schemas")
    assert set(torch.ops.loaded_libraries) == loaded


def test_defined_namespaces_ignores_impl_and_fragment(tmp_path):
    source = tmp_path / "x.cpp"
    source.write_text("TORCH_LIBRARY(alpha, m) {}\nTORCH_LIBRARY_IMPL(beta, CPU, m) {}\n"
                      "TORCH_LIBRARY_FRAGMENT(gamma, m) {}\n")
    assert guard.defined_namespaces([source]) == {"alpha"}


def test_unknown_layer_lists_the_known_ones():
    with pytest.raises(KeyError, match="schemas"):
        build.layer_sources("no_such_layer")


def test_defined_ops_reads_library_and_fragment_defs(tmp_path):
    source = tmp_path / "x.cpp"
    source.write_text('TORCH_LIBRARY_FRAGMENT(alpha, m) {\n  m.def("one(Tensor x) -> Tensor");\n'
                      '  m.def("two() -> ()");\n}\n')
    assert guard.defined_ops([source]) == {"alpha::one", "alpha::two"}


def test_redefining_an_op_from_a_fragment_raises(workbook, tmp_path, monkeypatch):
    source = tmp_path / "again.cpp"
    source.write_text('TORCH_LIBRARY_FRAGMENT(workbook, m) {\n  m.def("add(Tensor a, Tensor b) -> Tensor");\n}\n')
    with pytest.raises(build.NamespaceAlreadyRegistered, match="operator workbook::add"):
        guard.check_namespaces_free("again", [source])


def test_cpu_kernels_compile_for_arm(tmp_path, compile_once):
    """No x86 intrinsic without a portable fallback: cpu.cpp compiles for aarch64 (NEON), where a cross
    compiler is installed (Debian: g++-aarch64-linux-gnu)."""
    cross = shutil.which("aarch64-linux-gnu-g++")
    if cross is None:
        pytest.skip("aarch64-linux-gnu-g++ not installed: the Arm compile check did not run")
    include = os.path.join(os.path.dirname(torch.__file__), "include")
    command = [cross, "-c", "-std=c++20", "-fPIC", "-O3", *toolchain.CAPABILITY_FLAGS["DEFAULT"], "-fopenmp",
               f"-I{include}", f"-I{include}/torch/csrc/api/include", f"-I{paths.CSRC}",
               str(paths.CSRC / "cpu.cpp"), "-o", str(tmp_path / "cpu.o")]
    inputs = [paths.CSRC / "cpu.cpp", *paths.CSRC.rglob("*.h")]
    returncode, output, _ = compile_once(command, inputs, tmp_path / "cpu.o")
    assert returncode == 0, output[-3000:]


def test_compile_once_remembers_passes_only(tmp_path, compile_once, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")  # its stamps in tmp_path, not build/compile_checks/
    source, output = tmp_path / "check.cpp", tmp_path / "check.o"
    command = [paths.compiler(), "-c", str(source), "-o", str(output)]
    source.write_text("int broken( {\n")
    assert compile_once(command, [source], output)[0] != 0
    assert compile_once(command, [source], output)[0] != 0, "a failure must run again"
    source.write_text("int fine() { return 0; }\n")
    assert compile_once(command, [source], output)[::2] == (0, False)
    assert compile_once(command, [source], output)[::2] == (0, True)
    source.write_text("int fine() { return 1; }\n")
    assert compile_once(command, [source], output)[::2] == (0, False), "an edited input must compile again"


def test_precompiled_header_is_built_with_the_flags_of_the_layers_that_read_it(workbook):
    tools = toolchain.toolchain()
    if "clang" in tools.compiler or os.environ.get("WORKBOOK_PCH") == "0":
        pytest.skip("no precompiled header with clang, or with WORKBOOK_PCH=0")
    sources = build.layer_sources("meta")
    layer_cflags = tools.flags(sources)[0]
    pch = toolchain.precompiled_header(sources, layer_cflags)
    assert pch[:1] == ["-include"] and Path(pch[1] + ".gch").exists()
    # What cpp_extension.load really passed to the compiler for the meta layer (g++ ignores a .gch built otherwise).
    ninja = (build.library_path("meta").parent / "build.ninja").read_text()
    name, *cflags = re.search(r"^cflags = (.*)$", ninja, re.MULTILINE)[1].split()
    assert name.startswith("-DTORCH_EXTENSION_NAME=")
    assert cflags == toolchain.extension_cflags(layer_cflags) + pch


def test_no_precompiled_header_for_the_stable_abi_layer_or_openmp_layers():
    tools = toolchain.toolchain()
    stable = build.layer_sources("stable")
    assert toolchain.precompiled_header(stable, tools.flags(stable)[0]) == []  # it must not see torch/library.h
    assert toolchain.precompiled_header(build.layer_sources("cpu"), [*tools.cflags, "-fopenmp"]) == []


@pytest.mark.parametrize("standard", ["c++17", "c++20"])
def test_torchs_headers_need_cpp20_from_torch_2_14(tmp_path, standard):
    # README "Build flags": cpp_extension passes -std=c++20 itself; an extra -std=c++17 (older tutorials) fails from
    # 2.14.
    source = tmp_path / "uses_torch.cpp"
    source.write_text("#include <c10/util/intrusive_ptr.h>\n")
    include = torch.utils.cpp_extension.include_paths()[0]
    done = subprocess.run([paths.compiler(), f"-std={standard}", "-fsyntax-only", f"-I{include}", str(source)],
                          capture_output=True, text=True)
    needs_cpp20 = torch.__version__ >= (2, 14)
    if standard == "c++17" and needs_cpp20:
        assert done.returncode != 0 and "strong_ordering" in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-1000:]


def test_every_line_a_build_prints_on_stderr_is_known_as_progress(capsys):
    # the exercise runner drops these lines when quoting a crashed check's last words: a build's
    # seconds change from run to run, and a lesson's stored output must not.
    with progress.Line("layer 'x'", every=0.01):
        time.sleep(0.05)
    with pytest.raises(ValueError), progress.Line("layer 'y'"):
        raise ValueError
    lines = capsys.readouterr().err.splitlines()
    assert any("still building" in line for line in lines)
    assert lines and all(progress.is_progress_line(line) for line in lines)
    assert not progress.is_progress_line("Fatal Python error: Segmentation fault")


def test_a_cpp_warning_inside_an_op_called_through_torch_ops_is_a_python_warning_from_torch_2_15():
    # Lessons 04 and 06, and helpers/messages.py (pytorch#193451): up to 2.14 torch writes such a warning to stderr
    # itself, past Python's warnings filters; from 2.15 it is a UserWarning. aten's out= resize warning is one.
    done = isolated.run("""
        import torch, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.ops.aten.add.out(torch.ones(2), torch.ones(2), out=torch.empty(5))
        print(len([w for w in caught if issubclass(w.category, UserWarning) and "resized" in str(w.message)]))
        """)
    python_warning = done.stdout.strip() == "1"
    assert python_warning == (torch.__version__ >= (2, 15)), done.stderr[-2000:]
    if not python_warning:  # torch's own line on stderr: messages.warning_in keeps only its words
        words = messages.warning_in(done.stderr, "resized")
        assert words.startswith("An output with one or more elements was resized") and "(function" not in words


@pytest.mark.parametrize("line", [
    "[W1124 10:00:00.000000 7 BatchedFallback.cpp:82] Warning: There is a drop. (function warnFallback)",
    "x/torch/_ops.py:1350: UserWarning: There is a drop. (Triggered internally at /a/b/BatchedFallback.cpp:82.)",
    "[W1124 10:00:00.000000 7 LegacyTypeDispatch.h:75] Warning: There is a drop. (function operator())",
])
def test_a_warning_reads_the_same_from_every_build_of_torch(line):
    assert messages.warning_in(f"other\n{line}\nmore", "drop") == "There is a drop."
