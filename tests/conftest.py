"""Shared fixtures, and the rule for what the tests own.

One owner per fact. The tests pin contracts: each kernel's results against torch, every refused input and its
message, gradients (gradcheck), opcheck per dtype, what the helpers and exercise checks do. The lessons pin
demonstrations: nbval compares every stored output, so a table or verdict a lesson prints is a check, run by the
same test command, and is not tested again here:
- opcheck of every operator, with and without gradients, warning-free: lesson 06, section 1;
- each exercise's check failing on its untouched skeleton: the lessons' exercise cells;
- the installed wheel under opcheck in a clean interpreter, the .pt2 against eager in a fresh Python: lesson 08.
A test may still use what a lesson shows, to pin what the lesson cannot show on every machine (test_shipping.py).
"""

import os
import shutil
import subprocess
from pathlib import Path

import matplotlib
import pytest

# Figures render off-screen here. (Not MPLBACKEND: notebook kernels started by nbval would inherit it.)
matplotlib.use("Agg")

from helpers import paths

paths.use_workbook_inductor_cache()  # torch.compile's cache in build/inductor, shared with the lessons



@pytest.fixture(scope="session")
def workbook():
    """Every CPU-side layer of the workbook, loaded once for the test session."""
    import torch

    from helpers import build

    build.load_all("schemas", "cpu", "meta", "composite", "autograd", "fallthrough", "ad_inplace_or_view", "autocast")
    return torch.ops.workbook


@pytest.fixture(scope="session")
def compile_once():
    """Run a compile-only check (nvcc, a cross compiler) unless it already passed on the same inputs.

    A pass is remembered in build/compile_checks/ under a hash of the command, the compiler binary,
    torch's version and every input file; an unchanged tree then costs nothing on the next run (the
    nvcc check takes ~30 s). A failure is never remembered: it runs, and fails, every time.
    Returns (exit code, compiler output, whether the pass was remembered)."""

    import torch

    def run(command: list[str], inputs: list[os.PathLike], output: os.PathLike) -> tuple[int, str, bool]:
        compiler = os.path.realpath(shutil.which(command[0]) or command[0])
        arguments = ["<output>" if argument == str(output) else argument for argument in command[1:]]
        key = paths.content_hash([Path(path) for path in inputs], *arguments, compiler,
                                 str(os.stat(compiler).st_mtime_ns), torch.__version__, length=16)
        stamp = paths.BUILD / "compile_checks" / f"{os.path.basename(command[0])}_{key}.ok"
        if stamp.exists():
            return 0, stamp.read_text(), True
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode == 0 and os.path.getsize(output) > 0:
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(" ".join(command) + "\n" + done.stdout + done.stderr)
        return done.returncode, done.stdout + done.stderr, False

    return run
