"""What a reader does with README's "Using this in your own project": copy four files into a folder
of their own, write an operator with the one-line Scope, build it, then trace and plot it. All of it runs
in a fresh Python in a folder outside the checkout, with the copied files and torch, nothing else."""

import filecmp
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from helpers import build

COPIED = ["helpers/trace.py", "helpers/plot.py", "csrc/trace.h", "csrc/trace_ops.cpp"]

READER_OPS = """
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "trace.h"

at::Tensor twice(c10::DispatchKeySet ks, const at::Tensor& x) {
  workbook::trace::Scope scope("twice", ks, x);  // the one line that makes this kernel show in traces
  return x.mul(2);
}

TORCH_LIBRARY(reader_ops, m) { m.def("twice(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(reader_ops, CPU, m) { m.impl("twice", &twice); }
TORCH_LIBRARY_IMPL(reader_ops, Autograd, m) { m.impl("twice", torch::CppFunction::makeFallthrough()); }
"""

READER_SCRIPT = """
import os
import sys
import matplotlib
matplotlib.use("Agg")
import torch
import torch.utils.cpp_extension

os.makedirs("build", exist_ok=True)
torch.utils.cpp_extension.load("reader_ops", sources=["reader_ops.cpp", "trace_ops.cpp"],
                               build_directory="build", is_python_module=False)

import trace, plot  # the copied files

x = torch.ones(3, requires_grad=True)
mine = trace.call(torch.ops.reader_ops.twice, x)
print(mine)
assert mine.predicted_path == mine.recorded_path == ["CPU"] and mine.agrees, mine
assert trace.dispatch_table(torch.ops.reader_ops.twice)["CPU"].ours
theirs = trace.call(torch.ops.aten.add.Tensor, x, x)
assert theirs.predicted_path == ["AutogradCPU", "CPU"] and theirs.recorded == [], theirs
assert not trace.dispatch_table(torch.ops.aten.add.Tensor)["CPU"].ours
plot.ladders([mine, theirs]).savefig("ladders.png")
plot.table_map([torch.ops.reader_ops.twice, torch.ops.aten.add.Tensor]).savefig("table.png")
assert not any(name == "helpers" or name.startswith("helpers.") for name in sys.modules), "used the workbook"

# A second copy of the recorder in the same process (the workbook's, here) registers nothing and
# shares the first one's log: no abort, and both libraries' kernels record.
from helpers import build
build.load("schemas"), build.load("cpu")
both = trace.call(torch.ops.workbook.add, torch.ones(2), torch.ones(2))
assert both.recorded_path == ["CPU"] and trace.call(torch.ops.reader_ops.twice, x).recorded_path == ["CPU"]
print("OK")
"""


def reader_folder() -> Path:
    """A folder outside the checkout, the same on every run (so a second run finds the build done)."""
    tag = hashlib.sha256(str(build.REPO).encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"dispatcher-workbook-reader-{tag}"


def put(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:  # untouched files keep their time: no rebuild
        path.write_text(text)


def test_copied_trace_and_plot_trace_a_readers_own_operator():
    folder = reader_folder()
    folder.mkdir(exist_ok=True)
    for name in COPIED:
        source, target = build.REPO / name, folder / Path(name).name
        if not target.exists() or not filecmp.cmp(source, target, shallow=False):
            shutil.copy(source, target)
    put(folder / "reader_ops.cpp", READER_OPS)
    put(folder / "reader.py", READER_SCRIPT)
    done = subprocess.run([sys.executable, "reader.py"], cwd=folder, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.endswith("OK\n"), done.stdout[-3000:] + done.stderr[-3000:]
    assert "twice" in done.stdout and "recorded:  CPU(Float)" in done.stdout
    assert (folder / "ladders.png").stat().st_size > 0 and (folder / "table.png").stat().st_size > 0
