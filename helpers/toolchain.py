"""How this machine's compiler builds the workbook's layers: -O3, the vector instructions torch chose for this CPU,
OpenMP where it works, and a precompiled header for the torch headers nearly every layer includes. Probed once per
machine, compiler and torch, then read from a cache in build/extensions/. helpers/build.py asks toolchain() for the
flags; nothing here is needed to understand how a layer is registered.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import logging

import torch

from . import isolated, paths, progress

# torch.utils.cpp_extension looks for a CUDA toolkit when it is imported. With a CUDA build of torch (what pip installs
# on Linux) on a machine with nvcc but no GPU, it logs "No CUDA runtime is found, using CUDA_HOME=...": true, and
# nothing to act on for the CPU layers (the CUDA layer needs a GPU, and says so). Kept out of every lesson's output.
_cpp_extension_log = logging.getLogger("torch.utils.cpp_extension")
_cpp_extension_log.setLevel(logging.ERROR)
import torch.utils.cpp_extension  # noqa: E402

_cpp_extension_log.setLevel(logging.NOTSET)  # its later warnings (a compiler mismatch, ...) are shown


def torch_includes() -> list[str]:
    """The folders of torch's C++ headers, as torch.utils.cpp_extension passes them to the compiler."""
    return torch.utils.cpp_extension.include_paths()


@dataclass(frozen=True)
class Toolchain:
    """How this machine's compiler builds the layers: probed once, then cached in paths.BUILD_DIR."""

    compiler: str  # what torch.utils.cpp_extension runs ($CXX, else c++) and its first --version line
    capability: str  # torch's CPU capability on this machine, which the kernels are compiled for
    cflags: list[str]  # for every layer: optimization and vector instructions
    openmp_cflags: list[str]  # for layers that use at::parallel_for, where OpenMP works
    openmp_ldflags: list[str]
    openmp: str  # how at::parallel_for gets its threads, or why it runs on one
    runtime: str  # "" where the layers share the process's C++ runtime, else why they do not (a warning)

    def flags(self, sources: list[Path]) -> tuple[list[str], list[str]]:
        """(cflags, ldflags) for a layer. OpenMP only for parallel layers: one without parallel loops
        then builds the same with OpenMP on or off, and is not rebuilt when it is switched."""
        if is_parallel(sources):
            return [*self.cflags, *self.openmp_cflags], list(self.openmp_ldflags)
        return list(self.cflags), []

    def describe(self) -> str:
        flags = " ".join([*self.cflags, *self.openmp_cflags])
        return f"{self.compiler}; CPU capability {self.capability}; flags {flags}; {self.openmp}" + (
            f"; {self.runtime}" if self.runtime else "")


def is_parallel(sources: list[Path]) -> bool:
    """Whether a layer uses at::parallel_for / at::parallel_reduce (a file includes ATen/Parallel.h)."""
    include = re.compile(r"^\s*#\s*include\s*<ATen/Parallel\.h>", re.MULTILINE)
    return any(include.search(path.read_text()) for path in sources)


# JIT builds pass no optimization flag by default: kernels would run at -O0, hence -O3.
# Vector width: torch compiles its own CPU kernels once per instruction set (DEFAULT, AVX2, AVX512)
# and picks one at run time (torch.backends.cpu.get_cpu_capability(); ATEN_CPU_CAPABILITY=avx2
# overrides it). A JIT build runs where it was built, so it needs only the one torch picked here:
# the same macros and -m flags torch's own build uses for it. at::vec::Vectorized<T> takes its width
# from them. Other machines (Arm, where DEFAULT means NEON) need no flag.
CAPABILITY_FLAGS = {
    "AVX512": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512",
               "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-mf16c"],
    "AVX2": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-mavx2", "-mfma", "-mf16c"],
    "DEFAULT": ["-DCPU_CAPABILITY=DEFAULT", "-DCPU_CAPABILITY_DEFAULT"],
}  # fmt: skip

# at::parallel_for is a header template built on `#pragma omp parallel`: without -fopenmp, _OPENMP is
# undefined, so is INTRA_OP_PARALLEL (ATen/ParallelOpenMP.h), and at::parallel_for compiles its serial
# branch (ATen/Parallel-inl.h): "parallel" kernels run on one thread, with no warning. This probe
# library must compile with -fopenmp and load into this process: g++'s calls resolve to the libgomp
# torch already loaded (one OpenMP runtime in the process); clang's need its own runtime, libomp,
# linked in. Apple clang has no -fopenmp, and Debian's clang has no omp.h until libomp-dev is installed.
OPENMP_PROBE = """
#include <omp.h>
extern "C" int workbook_openmp_threads() {
  int threads = 0;
#pragma omp parallel reduction(+ : threads)
  threads += 1;
  return threads;
}
"""


# The C++ runtime: torch's libraries and the layers should share one libstdc++ (or libc++), the one the process loaded.
# A compiler that links a copy of it into each library (with -static-libstdc++, say) gives each layer a runtime of its
# own. A lent GPU machine's $CXX, a wrapper, did (the layers defined libstdc++'s symbols; ldd listed no libstdc++.so):
# there the trace recorder's std::ostringstream and one refused input crashed the process (a segmentation fault), and
# the system's g++ (CXX=/usr/bin/g++) built layers that passed. Here, a copy of the very runtime the process loaded
# works: the warning names a risk, not a certain crash.
RUNTIME_PROBE = """
#include <sstream>
extern "C" int workbook_runtime_probe() {
  std::ostringstream out;
  out << 42;
  return static_cast<int>(out.str().size());
}
"""
# std::basic_ostream<char>'s symbols: libstdc++ (_ZNSo) and libc++ (_ZNSt3__113basic_ostream).
RUNTIME_SYMBOLS = re.compile(r"\b(_ZNSo|_ZNSt3__113basic_ostream)\w*")


def _compile_probe(folder: Path, name: str, cflags: list[str], ldflags: list[str],
                   code: str = OPENMP_PROBE) -> tuple[Path | None, str]:
    """Compile `code` into a shared library the way torch builds a layer (compile, then link)."""
    source, obj, library = folder / f"{name}.cpp", folder / f"{name}.o", folder / f"{name}.so"
    source.write_text(code)
    for command in ([paths.compiler(), "-c", "-fPIC", *cflags, str(source), "-o", str(obj)],
                    [paths.compiler(), "-shared", str(obj), *ldflags, "-o", str(library)]):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            error = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip())
            return None, error.split("error:", 1)[-1].strip()
    return library, ""


def _accepts(flags: list[str], folder: Path) -> bool:
    source = folder / "empty.cpp"
    source.write_text("int workbook_probe() { return 0; }\n")
    command = [paths.compiler(), "-c", *flags, str(source), "-o", str(folder / "empty.o")]
    return subprocess.run(command, capture_output=True).returncode == 0


def _probe_openmp(folder: Path) -> tuple[list[str], list[str], str]:
    if os.environ.get("WORKBOOK_OPENMP") == "0":
        return [], [], "OpenMP off (WORKBOOK_OPENMP=0): kernels run on one thread"
    error = ""
    for name, ldflags in (("openmp_cflags", []), ("openmp_linked", ["-fopenmp"])):
        library, error = _compile_probe(folder, name, ["-fopenmp"], ldflags)
        if library is None:
            break  # the compile failed: linking will not help
        # Loaded in a fresh process beside torch, as a layer will be: in this one, an earlier probe may
        # already have brought in an OpenMP runtime.
        load = f"import ctypes, torch; assert ctypes.CDLL({str(library)!r}).workbook_openmp_threads() >= 1"
        done = isolated.run(load)
        if done.returncode == 0:
            how = "the process's OpenMP runtime" if not ldflags else "its own OpenMP runtime, linked in"
            return ["-fopenmp"], ldflags, f"OpenMP on ({how})"
        error = done.stderr.strip().splitlines()[-1].split(":")[-1].strip()  # e.g. undefined symbol: __kmpc_fork_call
    return [], [], (f"no OpenMP ({error}): at::parallel_for runs every kernel on ONE thread. For threads, use g++ "
                    "or install clang's OpenMP runtime (Debian/Ubuntu: libomp-dev; macOS: brew install libomp)")


def _probe_runtime(folder: Path) -> str:
    """"" where a library the compiler links leaves the C++ runtime to the process, else a warning that says why."""
    library, _ = _compile_probe(folder, "runtime", [], [], RUNTIME_PROBE)
    if library is None or shutil.which("nm") is None:
        return ""  # no verdict: a compile error shows up in the first layer's build
    defined = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    if not (found := RUNTIME_SYMBOLS.search(defined)):
        return ""
    return (f"the C++ runtime is linked INTO each library (it defines {found.group(0)}): each layer then has a copy of "
            "its own beside the one torch loaded, which can crash the process (seen once: a segmentation fault in the "
            "trace recorder). Set CXX to a compiler that links it as a shared library (e.g. CXX=/usr/bin/g++)")


@functools.cache
def toolchain() -> Toolchain:
    """Probe the compiler once per machine, compiler and torch (about a second), then read the cache."""
    version = subprocess.run([paths.compiler(), "--version"], capture_output=True, text=True).stdout.splitlines()
    compiler = f"{paths.compiler()} ({version[0] if version else 'unknown version'})"
    capability = torch.backends.cpu.get_cpu_capability()
    identity = f"v3 {compiler} {capability} {torch.__version__} {os.environ.get('WORKBOOK_OPENMP', '')}"
    cached = paths.BUILD_DIR / f"toolchain_{paths.content_hash([], identity, length=10)}.json"
    if cached.exists():
        found = Toolchain(**json.loads(cached.read_text()))
    else:
        paths.BUILD_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=paths.BUILD_DIR) as folder:
            optimize = ["-O3"] if _accepts(["-O3"], Path(folder)) else []
            vector = CAPABILITY_FLAGS.get(capability, CAPABILITY_FLAGS["DEFAULT"])
            if not _accepts(vector, Path(folder)):
                capability, vector = f"DEFAULT (the compiler refused {capability}'s flags)", CAPABILITY_FLAGS["DEFAULT"]
            openmp_cflags, openmp_ldflags, openmp = _probe_openmp(Path(folder))
            runtime = _probe_runtime(Path(folder))
        found = Toolchain(compiler, capability, optimize + vector, openmp_cflags, openmp_ldflags, openmp, runtime)
        cached.write_text(json.dumps(asdict(found)))
        print(f"Compiler probed: {found.describe()}", file=sys.stderr)
    return found


# A precompiled header (g++): the torch headers nearly every layer includes (torch/library.h, ATen's Tensor and
# Dispatcher; about half of a small layer's compile) parsed once per machine into build/extensions/pch_<hash>/, and
# read by each layer's compile instead. g++ uses the .gch only where the flags that define
# macros are the ones it was built with, so it is built with the flags cpp_extension.load passes, and -Winvalid-pch
# puts any mismatch in the build log. Not for layers with -fopenmp (it defines _OPENMP) or without torch/library.h
# (the stable-ABI layer must not see ATen), nor for clang (another .gch format). WORKBOOK_PCH=0 turns it off.
PCH_HEADERS = ("torch/library.h", "ATen/core/Tensor.h", "ATen/core/dispatch/Dispatcher.h")


def extension_cflags(cflags: list[str]) -> list[str]:
    """The flags torch.utils.cpp_extension.load gives the compiler for a layer built with `cflags`, less
    -DTORCH_EXTENSION_NAME (which the precompiled headers never read)."""
    system = [*torch_includes(), sysconfig.get_paths()["include"]]
    return ["-DTORCH_API_INCLUDE_EXTENSION_H", f"-I{paths.CSRC}", *[f for path in system for f in ("-isystem", path)],
            "-fPIC", "-std=c++20", *cflags]


def precompiled_header(sources: list[Path], cflags: list[str]) -> list[str]:
    """The flags that make a layer's compile read the precompiled header, built first if missing; [] where none
    applies or its build failed (the layer then compiles as usual)."""
    tools = toolchain()
    includes_library = any(re.search(r"^\s*#\s*include\s*<torch/library\.h>", p.read_text(), re.M) for p in sources)
    pch_off = os.environ.get("WORKBOOK_PCH") == "0"
    if pch_off or "clang" in tools.compiler or "-fopenmp" in cflags or not includes_library:
        return []
    flags = extension_cflags(cflags)
    folder = paths.BUILD_DIR / f"pch_{paths.content_hash([], tools.compiler, torch.__version__, *flags, length=10)}"
    header, failed = folder / "workbook_pch.h", folder / "failed.txt"
    with paths.locked(folder / "lock"):  # one process builds it; the others (load_all, pytest workers) wait
        if not Path(f"{header}.gch").exists() and not failed.exists():
            header.write_text("".join(f"#include <{name}>\n" for name in PCH_HEADERS))
            with progress.Line(f"precompiled header ({', '.join(PCH_HEADERS)})"):
                command = [paths.compiler(), "-x", "c++-header", *flags, str(header), "-o", f"{header}.gch.tmp"]
                done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode == 0:
                os.replace(f"{header}.gch.tmp", f"{header}.gch")
            else:
                failed.write_text(done.stderr)
    return [] if failed.exists() else ["-include", str(header), "-Winvalid-pch"]


def first_diagnostics(ninja_output: str, limit: int = 3) -> str:
    """The first `limit` distinct compiler errors with the two lines of context g++ prints after each
    (a template error repeats once per instantiation: shown once)."""
    lines = ninja_output.splitlines()
    picked: list[str] = []
    seen: set[str] = set()
    for i, line in enumerate(lines):
        if re.match(r"^\S+?:\d+:\d+: (fatal )?error:", line) and line not in seen:
            seen.add(line)
            if len(seen) > limit:
                break
            path, rest = line.split(":", 1)
            shown = os.path.relpath(path, paths.REPO) if os.path.isabs(path) else path
            picked.append(f"{shown}:{rest}")
            picked.extend(lines[i + 1 : i + 3])
    return "\n".join(picked) if picked else ninja_output[-2000:]
