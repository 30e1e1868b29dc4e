"""Build times of each csrc layer: the workbook's way (helpers.build) against a default load_inline.

    python -m bench.build_times                 (or: make bench) every layer and lesson
    python -m bench.build_times 05_autocast     only the layers of the lessons named

Each measurement runs in a fresh process with an empty build folder, so "cold" means a real compile.
- workbook, cold / warm: build.load(layer): only the headers each file includes, -O3. Warm = the
  library is already built (a notebook re-run): the cost of checking it is up to date and loading it.
- load_inline default: the same source text through torch.utils.cpp_extension.load_inline with its
  defaults: it prepends #include <torch/extension.h> and passes no optimization flag.
"""

import sys
import tempfile

import torch

from helpers import build, isolated

LESSON_LAYERS = {
    "00_dispatcher_tour": ["schemas", "cpu"],
    "01_schemas": ["schemas", "cpu", "fragment", "duplicate_namespace"],
    "02_backend_kernels": ["schemas", "cpu", "meta", "composite", "catch_all"],
    "03_fallthrough": ["schemas", "cpu", "meta", "composite", "fragment", "fallthrough", "ad_inplace_or_view"],
    "04_autograd_function": ["schemas", "cpu", "meta", "composite", "autograd", "wrong_backward", "deprecated_guard"],
    "05_autocast": ["schemas", "cpu", "meta", "composite", "autograd", "autocast", "autocast_no_guard"],
    "06_composition": ["schemas", "cpu", "meta", "composite", "autograd", "fallthrough", "ad_inplace_or_view",
                       "autocast"],
    "07_dispatch_cost": ["schemas", "cpu", "meta", "autograd", "autocast"],
}

WORKBOOK = """
import dataclasses, os, time
os.environ["WORKBOOK_BUILD_DIR"] = {folder!r}
from helpers import build
if not {optimized!r}:  # the same build without -O3 and the vector flags
    tools = dataclasses.replace(build.toolchain(), cflags=[])
    build.toolchain = lambda: tools
start = time.perf_counter()
build.load({layer!r})
print(time.perf_counter() - start)
"""

LOAD_INLINE = """
import time
import torch.utils.cpp_extension as ext
from helpers import build
sources = "\\n".join(path.read_text() for path in build.layer_sources({layer!r}))
start = time.perf_counter()
ext.load_inline({name!r}, cpp_sources=[sources], extra_include_paths=[str(build.CSRC)],
                build_directory={folder!r}, is_python_module=False)
print(time.perf_counter() - start)
"""


def seconds(code: str) -> float:
    done = isolated.run(code)
    if done.returncode != 0:
        sys.exit(done.stderr[-3000:])
    return float(done.stdout.split()[-1])


def main(lessons: list[str]):
    unknown = set(lessons) - set(LESSON_LAYERS)
    if unknown:
        sys.exit(f"unknown lessons {sorted(unknown)}; lessons are: {', '.join(LESSON_LAYERS)}")
    lessons = lessons or list(LESSON_LAYERS)
    layers = [layer for layer in build.LAYERS if layer == "cuda" or any(layer in LESSON_LAYERS[l] for l in lessons)]
    print(f"{'layer':20} {'workbook cold':>14} {'workbook warm':>14} {'load_inline default':>20} {'ratio':>6}")
    totals = {}
    for layer in layers:
        if layer == "cuda" and not torch.cuda.is_available():
            print(f"{layer:20} skipped: needs a CUDA build of torch and a GPU")
            continue
        with tempfile.TemporaryDirectory() as ours, tempfile.TemporaryDirectory() as theirs:
            cold = seconds(WORKBOOK.format(folder=ours, layer=layer, optimized=True))
            warm = seconds(WORKBOOK.format(folder=ours, layer=layer, optimized=True))
            inline = seconds(LOAD_INLINE.format(folder=theirs, layer=layer, name=f"inline_{layer}"))
        totals[layer] = (cold, warm, inline)
        print(f"{layer:20} {cold:13.1f}s {warm:13.2f}s {inline:19.1f}s {inline / cold:5.1f}x", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        unoptimized = seconds(WORKBOOK.format(folder=folder, layer="cpu", optimized=False))
    print(f"\nthe cpu layer without {' '.join(build.toolchain().cflags)}: {unoptimized:.1f} s cold "
          f"(the optimization flags cost {totals['cpu'][0] - unoptimized:+.1f} s)")
    print("\nper lesson (sum of its layers):")
    for lesson in lessons:
        cold, warm, inline = (sum(totals[layer][i] for layer in LESSON_LAYERS[lesson]) for i in range(3))
        print(f"{lesson:20} {cold:13.1f}s {warm:13.2f}s {inline:19.1f}s {inline / cold:5.1f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
