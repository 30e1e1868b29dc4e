"""What a reader does with README's "Using this in your own project": copy the four files it names into
a folder of their own, save its C++ block as my_ops.cpp, run its Python cell, and check what it shows.
All of it runs in a process of its own, in a folder outside the checkout, with the copied files and torch: a new
Python, or under the test command a child of the fork server, which has imported nothing but torch (forkserver.py)."""

import filecmp
import os
import re
import shutil
import tempfile
from pathlib import Path

import torch

from helpers import forkserver, paths

COPIED = ["helpers/trace.py", "helpers/plot.py", "csrc/trace.h", "csrc/trace_ops.cpp"]

README = (paths.REPO / "README.md").read_text()
SECTION = README[README.index("## Using this in your own project"):]

# What the reader checks after running the README's cell (its names: x, t, figure).
CHECKS = """
assert t.predicted_path == t.recorded_path == ["CPU"] and t.agrees, t
assert trace.dispatch_table(torch.ops.my_ops.twice)["CPU"].ours
theirs = trace.call(torch.ops.aten.add.Tensor, x, x)
assert theirs.predicted_path == ["AutogradCPU", "CPU"] and theirs.recorded == [], theirs
assert not trace.dispatch_table(torch.ops.aten.add.Tensor)["CPU"].ours
plot.table_map([torch.ops.my_ops.twice, torch.ops.aten.add.Tensor]).savefig("table.png")
assert not any(name == "helpers" or name.startswith("helpers.") for name in sys.modules), "used the workbook"

# A second copy of the recorder in the same process (the workbook's, here) registers nothing and
# shares the first one's log: no abort, and both libraries' kernels record.
from helpers import build
build.load("schemas"), build.load("cpu")
both = trace.call(torch.ops.workbook.add, torch.ones(2), torch.ones(2))
assert both.recorded_path == ["CPU"] and trace.call(torch.ops.my_ops.twice, x).recorded_path == ["CPU"]
print("OK")
"""


def readme_block(language: str) -> str:
    """The README section's first code block in this language, verbatim."""
    return re.search(rf"```{language}\n(.*?)```", SECTION, re.DOTALL).group(1)


def reader_folder() -> Path:
    """A folder outside the checkout, the same on every run (so a second run finds the build done)."""
    tag = paths.content_hash([], str(paths.REPO), length=8)
    return Path(tempfile.gettempdir()) / f"dispatcher-workbook-reader-{tag}"


def put(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:  # untouched files keep their time: no rebuild
        path.write_text(text)


def test_copied_trace_and_plot_trace_a_readers_own_operator():
    assert all(f"`{name}`" in SECTION for name in COPIED), "the README names other files to copy"
    folder = reader_folder()
    folder.mkdir(exist_ok=True)
    for name in COPIED:
        source, target = paths.REPO / name, folder / Path(name).name
        if not target.exists() or not filecmp.cmp(source, target, shallow=False):
            shutil.copy(source, target)
    put(folder / "my_ops.cpp", readme_block("cpp"))
    put(folder / "reader.py",
        "import sys\nimport matplotlib\nmatplotlib.use('Agg')\n" + readme_block("python") + CHECKS)
    # cpp_extension.load builds into ~/.cache/torch_extensions/<python, cuda>/my_ops, one folder for every checkout on
    # the machine: a run from another checkout (other source paths) made the next run here compile again (20 s).
    # The reader's folder holds its own build, as a reader's project would: one per torch release, since torch 2.14
    # leaves a `lock` file in a build folder that torch 2.13 waits on forever.
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(folder / f"torch_extensions-{torch.__version__}")}
    done = forkserver.run("import runpy; runpy.run_path('reader.py', run_name='__main__')", env, str(folder), 600)
    assert done.returncode == 0 and done.stdout.endswith("OK\n"), done.stdout[-3000:] + done.stderr[-3000:]
    assert "my_ops::twice" in done.stdout and "recorded:  CPU(Float)" in done.stdout
    assert (folder / "ladders.png").stat().st_size > 0 and (folder / "table.png").stat().st_size > 0
