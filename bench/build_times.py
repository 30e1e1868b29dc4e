"""Build times of each csrc layer: the workbook's way (helpers.build) against a default load_inline.

    python -m bench.build_times                 (or: make bench) every layer the lessons build
    python -m bench.build_times 05_autocast     only the layers of the lessons named

Each build runs in a fresh process (`python -m bench.build_times --time HOW LAYER`, which prints JSON) with a build
folder of its own, so "cold" means a real compile:
- workbook, cold / warm: build.load(layer): only the headers each file includes, the flags of helpers/toolchain.py
  (-O3, this CPU's vector instructions, the precompiled header). A fresh folder each time, so cold includes probing
  the compiler and building the precompiled header, as on a fresh clone. Warm = the library is already built (a notebook
  re-run): the cost of checking it is up to date and loading it.
- load_inline default: the same source text through torch.utils.cpp_extension.load_inline with its defaults: it
  prepends #include <torch/extension.h> and passes no optimization flag.
- load default (the cpu layer only): the same files through torch.utils.cpp_extension.load, no flags.
The lessons' layers are read from their build.load / build.load_all calls.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch  # its cpp_extension module is imported, quietly, by helpers.toolchain

from bench import dispatch_cost
from bench.kernels import machine
from helpers import build, paths

NOTEBOOKS = paths.REPO / "notebooks"


def lesson_layers() -> dict[str, list[str]]:
    """Each lesson's layers, in order, as its build.load / build.load_all calls name them."""
    layers = {}
    for notebook in sorted(NOTEBOOKS.glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        code = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
        named = []
        for arguments in re.findall(r"build\.load(?:_all)?\(([^)]*)\)", code):
            named += re.findall(r'"(\w+)"', arguments)
            named += [layer for stage in re.findall(r"\*dispatch_cost\.(\w+)", arguments)
                      for layer in getattr(dispatch_cost, stage)]
        layers[notebook.stem] = list(dict.fromkeys(layer for layer in named if layer in build.LAYERS))
    return layers


def time_one_build(how: str, layer: str) -> float:
    """Build `layer` in this process, `how` one of workbook / load_inline / load; the seconds it took."""
    sources = build.layer_sources(layer)
    paths.BUILD_DIR.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if how == "workbook":
        build.load(layer)
    elif how == "load_inline":
        text = "\n".join(source.read_text() for source in sources)
        torch.utils.cpp_extension.load_inline(f"inline_{layer}", cpp_sources=[text], extra_include_paths=[str(paths.CSRC)],
                                              build_directory=str(paths.BUILD_DIR), is_python_module=False)
    else:
        torch.utils.cpp_extension.load(f"default_{layer}", sources=[str(source) for source in sources],
                                       extra_include_paths=[str(paths.CSRC)], build_directory=str(paths.BUILD_DIR),
                                       is_python_module=False)
    return time.perf_counter() - start


def seconds(how: str, layer: str, folder: str) -> float:
    """time_one_build in a fresh Python whose build folder is `folder`."""
    done = subprocess.run([sys.executable, "-m", "bench.build_times", "--time", how, layer], capture_output=True,
                          text=True, cwd=paths.REPO, env={**os.environ, "WORKBOOK_BUILD_DIR": folder})
    if done.returncode != 0:
        sys.exit(f"building {layer!r} ({how}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])["seconds"]


def main(lessons: list[str]) -> None:
    by_lesson = lesson_layers()
    unknown = set(lessons) - set(by_lesson)
    if unknown:
        sys.exit(f"unknown lessons {sorted(unknown)}; lessons are: {', '.join(by_lesson)}")
    lessons = lessons or list(by_lesson)
    wanted = {layer for lesson in lessons for layer in by_lesson[lesson]}
    print(machine())
    print(f"{'layer':20} {'workbook cold':>14} {'workbook warm':>14} {'load_inline default':>20} {'ratio':>6}")
    totals = {}
    for layer in (layer for layer in build.LAYERS if layer in wanted):
        if layer == "cuda" and build.why_no_cuda():
            print(f"{layer:20} skipped: {build.why_no_cuda()}")
            continue
        with tempfile.TemporaryDirectory() as ours, tempfile.TemporaryDirectory() as theirs:
            cold, warm = seconds("workbook", layer, ours), seconds("workbook", layer, ours)
            inline = seconds("load_inline", layer, theirs)
        totals[layer] = (cold, warm, inline)
        print(f"{layer:20} {cold:13.1f}s {warm:13.2f}s {inline:19.1f}s {inline / cold:5.1f}x", flush=True)
    if "cpu" in totals:
        with tempfile.TemporaryDirectory() as folder:
            default = seconds("load", "cpu", folder)
        print(f"\nthe cpu layer through cpp_extension.load with no flags: {default:.1f} s cold "
              f"(the workbook's build: {totals['cpu'][0] - default:+.1f} s)")
    print("\nper lesson (sum of its layers):")
    for lesson in lessons:
        cold, warm, inline = (sum(totals[layer][i] for layer in by_lesson[lesson] if layer in totals) for i in range(3))
        print(f"{lesson:20} {cold:13.1f}s {warm:13.2f}s {inline:19.1f}s {inline / cold:5.1f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--time"]:
        print(json.dumps({"seconds": time_one_build(*sys.argv[2:4])}))
    else:
        main(sys.argv[1:])
