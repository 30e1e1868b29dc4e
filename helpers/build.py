"""Compile and load the workbook's C++ layers, one shared library per layer.

A *layer* is a set of files in csrc/ that registers one thing with the dispatcher: the schemas
(TORCH_LIBRARY), or the kernels for one dispatch key (TORCH_LIBRARY_IMPL). Lessons load the layers
they need, in order, into the running process:

    from helpers import build
    build.load("schemas")   # the operator declarations (and the trace recorder's ops)
    build.load("cpu")       # CPU kernels; now torch.ops.workbook.add(x, y) runs

What this adds to torch.utils.cpp_extension.load:
- Fast builds: only the headers each file includes (no implicit torch/extension.h).
- Fast kernels on any machine and compiler: -O3, the vector instructions torch chose for this CPU,
  and OpenMP where the compiler has it (probed once; see toolchain()).
- A cache key over every csrc file involved, headers included, so editing a header rebuilds.
- A guard against loading a second library that registers an already registered namespace;
  the process would abort (and the Jupyter kernel with it). You get a Python error instead.
- Compiler errors cut down to the first diagnostics, with file:line.
- One live progress line per compile (helpers/progress.py), and load_all() to compile several
  layers side by side, one per core.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import fcntl
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from . import progress

# torch.utils.cpp_extension looks for a CUDA toolkit when it is imported. With a CUDA build of torch (what pip installs
# on Linux) on a machine with nvcc but no GPU, it logs "No CUDA runtime is found, using CUDA_HOME=...": true, and
# nothing to act on for the CPU layers (the CUDA layer needs a GPU, and says so). Kept out of every lesson's output.
_cpp_extension_log = logging.getLogger("torch.utils.cpp_extension")
_cpp_extension_log.setLevel(logging.ERROR)
import torch.utils.cpp_extension  # noqa: E402

_cpp_extension_log.setLevel(logging.NOTSET)  # its later warnings (a compiler mismatch, ...) are shown

REPO = Path(__file__).resolve().parent.parent
CSRC = REPO / "csrc"
BUILD_DIR = Path(os.environ.get("WORKBOOK_BUILD_DIR", REPO / "build")) / "extensions"
# torch.compile's compiled code (lesson 06) is cached beside the extensions rather than in /tmp, so
# that a second run of a notebook or of the tests finds it, and `make clean` removes it. (Inductor's
# precompiled header, ~150 MB, still goes to /tmp/torchinductor_<user>: torch 2.13 and 2.14 place it there
# without reading this variable.)
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(BUILD_DIR.parent / "inductor"))

# Layer name -> the csrc files compiled into its library.
LAYERS: dict[str, list[str]] = {
    "schemas": ["schemas.cpp", "trace_ops.cpp"],
    "cpu": ["cpu.cpp"],
    "meta": ["meta.cpp"],
    "composite": ["composite.cpp"],
    "autograd": ["autograd.cpp"],
    "fallthrough": ["fallthrough.cpp"],
    "ad_inplace_or_view": ["ad_inplace_or_view.cpp"],
    # Autocast kernels: a layer of its own, as ATen/autocast_mode.h is a heavy header (lesson 05).
    "autocast": ["autocast.cpp"],
    # The dispatcher timed from C++ (lesson 07, bench/dispatch_cost.py).
    "dispatch_bench": ["bench/dispatch_cost.cpp"],
    # workbook_stable::add, on LibTorch's stable ABI (lesson 08).
    "stable": ["stable/add.cpp"],
    # CUDA kernels: building and loading this layer needs a CUDA build of torch and a GPU.
    "cuda": ["cuda.cu"],
    # Lesson 01's pitfalls: what goes wrong, and the fix.
    "duplicate_namespace": ["pitfalls/duplicate_namespace.cpp"],
    "fragment": ["pitfalls/fragment.cpp"],
    # Lesson 02's pitfall: m.def(schema, fn) registers fn for every key.
    "catch_all": ["pitfalls/catch_all.cpp"],
    # Lesson 03: torch's autograd fallback, a fallthrough and autogradNotImplementedFallback side by side; a view
    # operator registered below autograd.
    "autograd_fallbacks": ["pitfalls/autograd_fallbacks.cpp"],
    "view_below_autograd": ["pitfalls/view_below_autograd.cpp"],
    # Lesson 04's pitfalls: a wrong backward formula, and a deprecated guard.
    "wrong_backward": ["pitfalls/wrong_backward.cpp"],
    "deprecated_guard": ["pitfalls/deprecated_guard.cpp"],
    # Lesson 05's pitfall: an autocast kernel without its exclude guard.
    "autocast_no_guard": ["pitfalls/autocast_no_guard.cpp"],
}



def why_no_cuda() -> str | None:
    """Why the CUDA layer cannot run in this process, or None where it can."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    return f"torch {torch.__version__} is a CUDA build, but this machine has no GPU"


@dataclass(frozen=True)
class Toolchain:
    """How this machine's compiler builds the layers: probed once, then cached in BUILD_DIR."""

    compiler: str  # what torch.utils.cpp_extension runs ($CXX, else c++) and its first --version line
    capability: str  # torch's CPU capability on this machine, which the kernels are compiled for
    cflags: list[str]  # for every layer: optimization and vector instructions
    openmp_cflags: list[str]  # for layers that use at::parallel_for, where OpenMP works
    openmp_ldflags: list[str]
    openmp: str  # how at::parallel_for gets its threads, or why it runs on one

    def flags(self, sources: list[Path]) -> tuple[list[str], list[str]]:
        """(cflags, ldflags) for a layer. OpenMP only for parallel layers: one without parallel loops
        then builds the same with OpenMP on or off, and is not rebuilt when it is switched."""
        if is_parallel(sources):
            return [*self.cflags, *self.openmp_cflags], list(self.openmp_ldflags)
        return list(self.cflags), []

    def describe(self) -> str:
        flags = " ".join([*self.cflags, *self.openmp_cflags])
        return f"{self.compiler}; CPU capability {self.capability}; flags {flags}; {self.openmp}"


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

# at::parallel_for is a header template built on `#pragma omp parallel`: without -fopenmp the pragma
# is ignored and "parallel" kernels run on one thread. This probe library must compile with
# -fopenmp and load into this process: g++'s calls resolve to the libgomp torch already loaded (one
# OpenMP runtime in the process); clang's need its own runtime, libomp, linked in. Apple clang has
# no -fopenmp, and Debian's clang has no omp.h until libomp-dev is installed.
OPENMP_PROBE = """
#include <omp.h>
extern "C" int workbook_openmp_threads() {
  int threads = 0;
#pragma omp parallel reduction(+ : threads)
  threads += 1;
  return threads;
}
"""


def _compiler() -> str:
    return os.environ.get("CXX", "c++")


def _compile_probe(folder: Path, name: str, cflags: list[str], ldflags: list[str]) -> tuple[Path | None, str]:
    """Compile OPENMP_PROBE into a shared library the way torch builds a layer (compile, then link)."""
    source, obj, library = folder / "probe.cpp", folder / f"{name}.o", folder / f"{name}.so"
    source.write_text(OPENMP_PROBE)
    for command in ([_compiler(), "-c", "-fPIC", *cflags, str(source), "-o", str(obj)],
                    [_compiler(), "-shared", str(obj), *ldflags, "-o", str(library)]):  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            error = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip())
            return None, error.split("error:", 1)[-1].strip()
    return library, ""


def _accepts(flags: list[str], folder: Path) -> bool:
    source = folder / "empty.cpp"
    source.write_text("int workbook_probe() { return 0; }\n")
    command = [_compiler(), "-c", *flags, str(source), "-o", str(folder / "empty.o")]
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
        load = f"import torch, ctypes; assert ctypes.CDLL({str(library)!r}).workbook_openmp_threads() >= 1"
        done = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True)
        if done.returncode == 0:
            how = "the process's OpenMP runtime" if not ldflags else "its own OpenMP runtime, linked in"
            return ["-fopenmp"], ldflags, f"OpenMP on ({how})"
        error = done.stderr.strip().splitlines()[-1].split(":")[-1].strip()  # e.g. undefined symbol: __kmpc_fork_call
    return [], [], (f"no OpenMP ({error}): at::parallel_for runs every kernel on ONE thread. For threads, use g++ "
                    "or install clang's OpenMP runtime (Debian/Ubuntu: libomp-dev; macOS: brew install libomp)")


@functools.cache
def toolchain() -> Toolchain:
    """Probe the compiler once per machine, compiler and torch (about a second), then read the cache."""
    version = subprocess.run([_compiler(), "--version"], capture_output=True, text=True).stdout.splitlines()
    compiler = f"{_compiler()} ({version[0] if version else 'unknown version'})"
    capability = torch.backends.cpu.get_cpu_capability()
    identity = f"v2 {compiler} {capability} {torch.__version__} {os.environ.get('WORKBOOK_OPENMP', '')}"
    cached = BUILD_DIR / f"toolchain_{hashlib.sha256(identity.encode()).hexdigest()[:10]}.json"
    if cached.exists():
        found = Toolchain(**json.loads(cached.read_text()))
    else:
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=BUILD_DIR) as folder:
            optimize = ["-O3"] if _accepts(["-O3"], Path(folder)) else []
            vector = CAPABILITY_FLAGS.get(capability, CAPABILITY_FLAGS["DEFAULT"])
            if not _accepts(vector, Path(folder)):
                capability, vector = f"DEFAULT (the compiler refused {capability}'s flags)", CAPABILITY_FLAGS["DEFAULT"]
            openmp_cflags, openmp_ldflags, openmp = _probe_openmp(Path(folder))
        found = Toolchain(compiler, capability, optimize + vector, openmp_cflags, openmp_ldflags, openmp)
        cached.write_text(json.dumps(asdict(found)))
        print(f"Compiler probed: {found.describe()}", file=sys.stderr)
    return found


@contextmanager
def locked(path: Path):
    """Hold an exclusive lock on the file `path` (created if missing): other processes wait at the same lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


# A precompiled header (g++): the torch headers nearly every layer includes (torch/library.h, ATen's Tensor and
# Dispatcher; about 5 s of each compile on 2 cores) parsed once per machine into build/extensions/pch_<hash>/, and
# read by each layer's compile instead (meta.cpp: 8.9 s -> 4.5 s). g++ uses the .gch only where the flags that define
# macros are the ones it was built with, so it is built with the flags cpp_extension.load passes, and -Winvalid-pch
# puts any mismatch in the build log. Not for layers with -fopenmp (it defines _OPENMP) or without torch/library.h
# (the stable-ABI layer must not see ATen), nor for clang (another .gch format). WORKBOOK_PCH=0 turns it off.
PCH_HEADERS = ("torch/library.h", "ATen/core/Tensor.h", "ATen/core/dispatch/Dispatcher.h")


def extension_cflags(cflags: list[str]) -> list[str]:
    """The flags torch.utils.cpp_extension.load gives the compiler for a layer built with `cflags`, less
    -DTORCH_EXTENSION_NAME (which the precompiled headers never read)."""
    system = [*torch.utils.cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
    return ["-DTORCH_API_INCLUDE_EXTENSION_H", f"-I{CSRC}", *[f for path in system for f in ("-isystem", path)],
            "-fPIC", "-std=c++20", *cflags]


def precompiled_header(sources: list[Path], cflags: list[str]) -> list[str]:
    """The flags that make a layer's compile read the precompiled header, built first if missing; [] where none
    applies or its build failed (the layer then compiles as usual)."""
    tools = toolchain()
    includes_library = any(re.search(r"^\s*#\s*include\s*<torch/library\.h>", p.read_text(), re.M) for p in sources)
    if os.environ.get("WORKBOOK_PCH") == "0" or "clang" in tools.compiler or "-fopenmp" in cflags or not includes_library:
        return []
    flags = extension_cflags(cflags)
    folder = BUILD_DIR / f"pch_{hashlib.sha256(' '.join([tools.compiler, torch.__version__, *flags]).encode()).hexdigest()[:10]}"
    header, failed = folder / "workbook_pch.h", folder / "failed.txt"
    with locked(folder / "lock"):  # one process builds it; the others (load_all, pytest workers) wait
        if not Path(f"{header}.gch").exists() and not failed.exists():
            header.write_text("".join(f"#include <{name}>\n" for name in PCH_HEADERS))
            with progress.Line(f"precompiled header ({', '.join(PCH_HEADERS)})"):
                done = subprocess.run([_compiler(), "-x", "c++-header", *flags, str(header), "-o", f"{header}.gch.tmp"],
                                      capture_output=True, text=True)
            if done.returncode == 0:
                os.replace(f"{header}.gch.tmp", f"{header}.gch")
            else:
                failed.write_text(done.stderr)
    return [] if failed.exists() else ["-include", str(header), "-Winvalid-pch"]


class CompileError(RuntimeError):
    """The compiler rejected a csrc file. The message holds its first diagnostics."""


class NamespaceAlreadyRegistered(RuntimeError):
    """Loading this library would register an operator namespace a second time."""


@dataclass
class Built:
    layer: str
    library: Path  # the .so file
    seconds: float  # time spent in this call: compiling (cold) or checking (warm)
    compiled: bool  # False when an up-to-date library was found


def layer_sources(layer: str) -> list[Path]:
    if layer not in LAYERS:
        raise KeyError(f"unknown layer {layer!r}; layers are: {', '.join(LAYERS)}")
    return [CSRC / name for name in LAYERS[layer]]


def cache_key(sources: list[Path], flags: list[str] | None = None) -> str:
    """Hash of the sources, every header in csrc/, the compiler and flags, torch's version and the build folder.

    The folder counts because torch renames a library (name_v1, ...) when a name it has already
    built in this process is built again somewhere else.
    """
    digest = hashlib.sha256()
    for path in sorted(sources) + sorted(CSRC.rglob("*.h")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    if flags is None:
        tools = toolchain()
        cflags, ldflags = tools.flags(sources)
        flags = [tools.compiler, *cflags, *ldflags]
    digest.update(" ".join(flags).encode() + torch.__version__.encode() + str(BUILD_DIR).encode())
    return digest.hexdigest()[:10]


def defined_namespaces(sources: list[Path]) -> set[str]:
    """Namespaces these files open with TORCH_LIBRARY or STABLE_TORCH_LIBRARY (not _IMPL, not _FRAGMENT)."""
    pattern = re.compile(r"^\s*(?:STABLE_)?TORCH_LIBRARY\(\s*(\w+)\s*,", re.MULTILINE)
    return {ns for path in sources for ns in pattern.findall(path.read_text())}


def defined_ops(sources: list[Path]) -> set[str]:
    """'ns::op' for every m.def in these files (each file opens at most one namespace)."""
    opens = re.compile(r"^\s*TORCH_LIBRARY(?:_FRAGMENT)?\(\s*(\w+)\s*,", re.MULTILINE)
    defs = re.compile(r"\bm\.def\(\s*\"(\w+)")
    ops = set()
    for path in sources:
        text = path.read_text()
        ops |= {f"{ns}::{name}" for ns in opens.findall(text) for name in defs.findall(text)}
    return ops


def check_namespaces_free(layer: str, sources: list[Path]) -> None:
    """Refuse, with a Python error, a load that would abort the process: a second TORCH_LIBRARY for a
    namespace, or a second definition of an operator (from a TORCH_LIBRARY_FRAGMENT)."""
    existing_ops = set(torch._C._dispatch_get_all_op_names())
    namespaces = defined_namespaces(sources) & {name.split("::")[0] for name in existing_ops}
    ops = defined_ops(sources) & existing_ops
    if not namespaces and not ops:
        return
    what = f"namespace {', '.join(sorted(namespaces))}" if namespaces else f"operator {', '.join(sorted(ops))}"
    raise NamespaceAlreadyRegistered(
        f"Layer {layer!r} defines {what}, which this process already has. Each namespace has one TORCH_LIBRARY "
        "and each operator one definition per process; a second one aborts the process, so the library was not "
        "loaded. If you edited a csrc file after loading it, restart the kernel (Kernel > Restart) and run the "
        "notebook again. If two libraries share a namespace on purpose, open it with TORCH_LIBRARY_FRAGMENT in "
        "all but one, and define each operator once."
    )


def _first_diagnostics(ninja_output: str, limit: int = 3) -> str:
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
            shown = os.path.relpath(path, REPO) if os.path.isabs(path) else path
            picked.append(f"{shown}:{rest}")
            picked.extend(lines[i + 1 : i + 3])
    return "\n".join(picked) if picked else ninja_output[-2000:]


def _label(layer: str) -> str:
    """How a build of this layer is named in its progress line: layer 'cpu' (cpu.cpp)."""
    return f"layer {layer!r} ({', '.join(LAYERS[layer])})"


def library_path(layer: str) -> Path:
    sources = layer_sources(layer)
    name = f"workbook_{layer}_{cache_key(sources)}"
    return (BUILD_DIR / name / f"{name}.so").resolve()


def load(layer: str) -> Built:
    """Compile a layer if its library is missing or out of date, then load it into this process.

    Loading the same build twice is a no-op. Loading a *different* build of a layer that defines a
    namespace already in the process raises NamespaceAlreadyRegistered instead of aborting.
    """
    sources = layer_sources(layer)
    library = library_path(layer)
    if str(library) not in torch.ops.loaded_libraries:
        check_namespaces_free(layer, sources)
    library.parent.mkdir(parents=True, exist_ok=True)
    cold = not library.exists()
    tools = toolchain()
    cflags, ldflags = tools.flags(sources)
    cflags += precompiled_header(sources, cflags)  # the same flags cold or warm: ninja rebuilds when they change
    if cold and is_parallel(sources) and not tools.openmp.startswith("OpenMP on"):
        print(tools.openmp, file=sys.stderr)
    start = time.perf_counter()
    try:
        with progress.Line(_label(layer)) if cold else nullcontext():
            torch.utils.cpp_extension.load(
                name=library.stem,
                sources=[str(p) for p in sources],
                extra_cflags=cflags,  # fresh lists: torch appends to the lists it is given
                extra_ldflags=ldflags,
                extra_include_paths=[str(CSRC)],
                build_directory=str(library.parent),
                is_python_module=False,  # a plain library: its static initializers register the ops
                verbose=False,
            )
    except RuntimeError as error:
        if not str(error).startswith("Error building extension"):
            raise
        output = getattr(error.__cause__, "output", None) or b""
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        raise CompileError(
            f"Layer {layer!r} failed to compile. First errors:\n\n{_first_diagnostics(text or str(error))}"
        ) from None
    seconds = time.perf_counter() - start
    return Built(layer, library, seconds, compiled=cold)


def load_all(*layers: str) -> list[Built]:
    """load() each layer, in the order given, after compiling the missing ones side by side.

    Libraries must be loaded in order (the schemas' TORCH_LIBRARY before anything else), but they can
    be compiled in any order. So each missing layer is first built in a process of its own, as many
    at a time as the machine has cores, then all are loaded here, in order.
    A layer that fails there is compiled again by load(), which reports its errors.
    """
    if sum(not library_path(layer).exists() for layer in layers) > 1:
        # One process at a time builds: pytest's other workers wait here, then find the layers built.
        with locked(BUILD_DIR / "load_all.lock"):
            missing = [layer for layer in layers if not library_path(layer).exists()]
            if len(missing) > 1:
                with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                    list(pool.map(_build_in_own_process, missing))
    return [load(layer) for layer in layers]


def _build_in_own_process(layer: str) -> None:
    code = f"from helpers import build; build.load({layer!r})"
    try:
        with progress.Line(_label(layer)):
            subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, check=True)
    except subprocess.CalledProcessError:
        pass  # load() compiles it again, in this process, and reports the compiler's errors
