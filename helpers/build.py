"""Compile and load the workbook's C++ layers, one shared library per layer.

A *layer* is a set of files in csrc/ that registers one thing with the dispatcher: the schemas
(TORCH_LIBRARY), or the kernels for one dispatch key (TORCH_LIBRARY_IMPL). Lessons load the layers
they need, in order, into the running process:

    from helpers import build
    build.load("schemas")   # the operator declarations (and the trace recorder's ops)
    build.load("cpu")       # CPU kernels; now torch.ops.workbook.add(x, y) runs

Underneath, load_sources() is torch.utils.cpp_extension.load, with four additions:
- a library name that carries a hash of every file involved (headers in csrc/ too), the compiler and its flags, so
  an edit rebuilds and nothing else does; a layer's library that exists is loaded as it is, without running ninja
  to confirm it (a file outside csrc/, such as an exercise answer, may include headers the hash does not see: ninja
  still decides for it);
- the flags of helpers/toolchain.py: -O3, the vector instructions torch chose for this CPU, OpenMP where it works,
  a precompiled header (probed once per machine);
- a refusal, as a Python error, to load a second TORCH_LIBRARY for a namespace (helpers/guard.py): that would abort
  the process, and the Jupyter kernel with it;
- compiler errors cut down to the first diagnostics, with file:line.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch

from . import guard, isolated, paths, progress, toolchain  # toolchain imports torch.utils.cpp_extension, quietly

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
    # Lesson 09: a device of our own on PrivateUse1 (helpers/device.py gives it its name): its kernels, and what
    # torch asks of a device outside the dispatcher (the lesson loads the second after showing what fails without it).
    "device": ["backend/device.cpp"],
    "device_guard": ["backend/guard.cpp"],
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
    # Lesson 04's pitfalls: a wrong backward formula, a deprecated guard, and a forward with no guard.
    "wrong_backward": ["pitfalls/wrong_backward.cpp"],
    "deprecated_guard": ["pitfalls/deprecated_guard.cpp"],
    "forward_without_guard": ["pitfalls/forward_without_guard.cpp"],
    # Lesson 05's pitfall: an autocast kernel without its exclude guard.
    "autocast_no_guard": ["pitfalls/autocast_no_guard.cpp"],
    # Lesson 06's pitfall: a Meta kernel that reads sizes() specializes every dynamic size.
    "meta_sizes": ["pitfalls/meta_sizes.cpp"],
}


class CompileError(RuntimeError):
    """The compiler rejected a source file. The message holds its first diagnostics."""


NamespaceAlreadyRegistered = guard.NamespaceAlreadyRegistered


@dataclass
class Built:
    layer: str
    library: Path  # the .so file
    seconds: float  # time spent in this call: compiling (cold) or checking (warm)
    compiled: bool  # False when an up-to-date library was found


def layer_sources(layer: str) -> list[Path]:
    if layer not in LAYERS:
        raise KeyError(f"unknown layer {layer!r}; layers are: {', '.join(LAYERS)}")
    return [paths.CSRC / name for name in LAYERS[layer]]


def cache_key(sources: list[Path], flags: list[str] | None = None) -> str:
    """Hash of the sources, every header in csrc/, the compiler and flags, torch's version and the build folder.

    The folder counts because torch renames a library (name_v1, ...) when a name it has already
    built in this process is built again somewhere else.
    """
    if flags is None:
        tools = toolchain.toolchain()
        cflags, ldflags = tools.flags(sources)
        flags = [tools.compiler, *cflags, *ldflags]
    headers = sorted(paths.CSRC.rglob("*.h"))
    return paths.content_hash([*sources, *headers], *flags, torch.__version__, str(paths.BUILD_DIR), length=10)


def library_path(layer: str) -> Path:
    return _library(f"workbook_{layer}", layer_sources(layer))


def _library(name: str, sources: list[Path], flags: list[str] | None = None) -> Path:
    stem = f"{name}_{cache_key(sources, flags)}"
    return (paths.BUILD_DIR / stem / f"{stem}.so").resolve()


def load(layer: str) -> Built:
    """Compile a layer if its library is missing or out of date, then load it into this process.

    Loading the same build twice is a no-op. Loading a *different* build of a layer that defines a
    namespace already in the process raises NamespaceAlreadyRegistered instead of aborting.
    """
    label = f"layer {layer!r} ({', '.join(LAYERS[layer])})"
    return load_sources(f"workbook_{layer}", layer_sources(layer), label=label)


def load_sources(name: str, sources: list[Path], label: str | None = None, optimize: bool = True) -> Built:
    """Compile `sources` into one library called `name` (plus a hash of everything that went into it) and load it:
    what load() does for a layer, for any files, yours included. `label` names the build in progress lines.
    optimize=False compiles at -O1, not -O3: for code whose speed does not matter (an exercise's answer), about a
    quarter less compile time; the precompiled header still serves it (g++ checks that both define __OPTIMIZE__)."""
    sources = [Path(source).resolve() for source in sources]
    label = label or f"{name} ({', '.join(source.name for source in sources)})"
    tools = toolchain.toolchain()
    cflags, ldflags = tools.flags(sources)
    optimized = cflags if optimize else ["-O1" if flag == "-O3" else flag for flag in cflags]
    library = _library(name, sources, [tools.compiler, *optimized, *ldflags])
    if str(library) not in torch.ops.loaded_libraries:
        guard.check_namespaces_free(label[:1].upper() + label[1:], sources)
    start = time.perf_counter()
    # A layer built before: its name's hash covers every input. (Not while another process may be writing it.)
    if (library.exists() and not _being_built(library.parent)
            and all(paths.CSRC in source.parents for source in sources)):
        torch.ops.load_library(str(library))
        return Built(name.removeprefix("workbook_"), library, time.perf_counter() - start, compiled=False)
    # Built with the -O3 flags, and read at -O1 too. The same flags cold or warm: ninja rebuilds on a change.
    cflags = optimized + toolchain.precompiled_header(sources, cflags)
    library.parent.mkdir(parents=True, exist_ok=True)
    cold = not library.exists()
    if cold and toolchain.is_parallel(sources) and not tools.openmp.startswith("OpenMP on"):
        print(tools.openmp, file=sys.stderr)
    if cold and tools.runtime:
        print(f"Warning: {tools.runtime}", file=sys.stderr)
    try:
        with progress.Line(label) if cold else nullcontext():
            torch.utils.cpp_extension.load(
                name=library.stem,
                sources=[str(p) for p in sources],
                extra_cflags=cflags,  # fresh lists: torch appends to the lists it is given
                extra_ldflags=ldflags,
                extra_include_paths=[str(paths.CSRC)],
                build_directory=str(library.parent),
                is_python_module=False,  # a plain library: its static initializers register the ops
                verbose=False,
            )
    except RuntimeError as error:
        if not str(error).startswith("Error building extension"):
            raise
        output = getattr(error.__cause__, "output", None) or b""
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        first_errors = toolchain.first_diagnostics(text or str(error))
        what = label[:1].upper() + label[1:]
        raise CompileError(f"{what} failed to compile. First errors:\n\n{first_errors}") from None
    return Built(name.removeprefix("workbook_"), library, time.perf_counter() - start, compiled=cold)


def _being_built(folder: Path) -> bool:
    """Whether a build of torch.utils.cpp_extension.load may be writing the library in `folder` now. Each build holds
    the folder's file `lock`: torch up to 2.13 creates it for the build and removes it after (FileBaton); from 2.14 the
    file stays, and a build holds an flock on it (filelock), so the file alone says nothing there."""
    lock = folder / "lock"
    if not lock.exists():
        return False
    if not hasattr(torch.utils.cpp_extension, "FileLock"):  # the file baton: there only while a build runs
        return True
    with open(lock) as file:
        try:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released when the file closes
        except OSError:  # held by a build (or no flock on this file system: ask torch's build)
            return True
    return False


def load_all(*layers: str) -> list[Built]:
    """load() each layer, in the order given, after compiling the missing ones side by side.

    Libraries must be loaded in order (the schemas' TORCH_LIBRARY before anything else), but they can
    be compiled in any order. So each missing layer is first built by load() in a process of its own
    (isolated.run: forked from the test session's fork server, else a new Python), as many at a time as the
    machine has cores, then all are loaded here, in order. A layer that fails there is compiled again by
    load() here, which reports its errors.
    """
    if sum(not library_path(layer).exists() for layer in layers) > 1:
        # One process at a time builds: pytest's other workers wait here, then find the layers built.
        with paths.locked(paths.BUILD_DIR / "load_all.lock"):
            missing = [layer for layer in layers if not library_path(layer).exists()]
            if len(missing) > 1:
                with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                    list(pool.map(_build_in_own_process, missing))
    return [load(layer) for layer in layers]


def _build_in_own_process(layer: str) -> None:
    with progress.Line(f"layer {layer!r} ({', '.join(LAYERS[layer])})"):
        isolated.run(f"from helpers.build import load; load({layer!r})")


def why_no_cuda() -> str | None:
    """Why the CUDA layer cannot run in this process, or None where it can."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU-only build"
    return f"torch {torch.__version__} is a CUDA build, but this machine has no GPU"
