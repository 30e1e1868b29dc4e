"""Exercises with automatic checks. At the end of each lesson:

    from helpers.exercises import check, start
    start("02.meta_kernel")   # copies exercises/02_meta_kernel.cpp to my_exercises/ (git ignores it): edit that copy
    check("02.meta_kernel")   # PASS, or FAIL and what the dispatcher did instead of what the exercise asks

An exercise is a file in exercises/: a skeleton that runs as it is, with a TODO, and a docstring or comment that
says what to do. check() checks your copy in my_exercises/ if you made one, else the skeleton. The checks
themselves are in exercises/checks.py, the reference solutions in exercises/solutions/. Under `make test`,
WORKBOOK_EXERCISES=skeletons makes check() use the skeletons, so the stored outputs are those of untouched files.

Checks of C++ files build the file as a layer of its own in a fresh Python (in_fresh_process): your code may crash
(an abort, a stack overflow) without taking the notebook's kernel with it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import json
import os
import shutil
import signal
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import isolated
from .build import REPO

SKELETONS = REPO / "exercises"
SOLUTIONS = SKELETONS / "solutions"
MINE = REPO / "my_exercises"


@dataclass
class Result:
    passed: bool
    diagnosis: str = ""


# id ("02.meta_kernel") -> (file name in exercises/, check function taking the file's path)
CHECKS: dict[str, tuple[str, Callable[[Path], Result]]] = {}


def exercise(exercise_id: str, file: str):
    """Register a check (exercises/checks.py uses this as a decorator)."""

    def register(check_function: Callable[[Path], Result]):
        CHECKS[exercise_id] = (file, check_function)
        return check_function

    return register


def _checks() -> dict[str, tuple[str, Callable[[Path], Result]]]:
    importlib.import_module("exercises.checks")
    return CHECKS


def path_of(exercise_id: str) -> Path:
    """Your copy in my_exercises/ if there is one (and WORKBOOK_EXERCISES is not "skeletons"), else the skeleton."""
    file = _checks()[exercise_id][0]
    mine = MINE / file
    if mine.exists() and os.environ.get("WORKBOOK_EXERCISES") != "skeletons":
        return mine
    return SKELETONS / file


def show(exercise_id: str) -> None:
    """Print the task: the docstring of a Python exercise, the leading comment of a C++ one."""
    path = SKELETONS / _checks()[exercise_id][0]
    if path.suffix == ".py":
        text = ast.get_docstring(ast.parse(path.read_text()))
    else:
        lines = itertools.takewhile(lambda line: line.startswith("//"), path.read_text().splitlines())
        text = "\n".join(line[3:] for line in lines)
    print(f"{path.relative_to(REPO)}\n\n{text}")


def start(exercise_id: str) -> Path:
    """Copy the skeleton to my_exercises/ (unless a copy is there already) and return the copy's path."""
    file = _checks()[exercise_id][0]
    mine = MINE / file
    if not mine.exists():
        MINE.mkdir(exist_ok=True)
        shutil.copy(SKELETONS / file, mine)
    return mine


def run_check(exercise_id: str, path: Path | None = None) -> Result:
    """The check's verdict on `path` (default: path_of(exercise_id)). An exception the checked code raises is a
    failure, with the exception as its diagnosis."""
    file, check_function = _checks()[exercise_id]
    try:
        return check_function(path or path_of(exercise_id))
    except Exception as error:  # noqa: BLE001 - the reader's code may raise anything; that is the diagnosis
        return Result(False, f"your code raised {type(error).__name__}: {str(error).splitlines()[0]}")


def check(exercise_id: str) -> None:
    """Print PASS, or FAIL with the diagnosis."""
    path = path_of(exercise_id)
    result = run_check(exercise_id, path)
    print(f"{'PASS' if result.passed else 'FAIL'}  {exercise_id}  ({path.relative_to(REPO)})")
    if result.diagnosis:
        print(textwrap.indent(result.diagnosis, "      "))


# ---------------------------------------------------------------------------------------------
# Tools for the checks


def load_python(path: Path):
    """Import a Python exercise file afresh (an edited file is read again)."""
    spec = importlib.util.spec_from_file_location(f"exercise_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare_paths(answer: list[str], actual: list[str], hint: str) -> Result:
    """A predicted path against the dispatcher's, with the first difference and a hint."""
    if answer == actual:
        return Result(True, f"path: {' -> '.join(actual)}")
    for i, (yours, theirs) in enumerate(zip(answer, actual)):
        if yours != theirs:
            where = f"kernel {i + 1}: you wrote {yours!r}, the dispatcher calls {theirs!r}"
            break
    else:
        i = min(len(answer), len(actual))
        where = (f"after {' -> '.join(actual[:i]) or 'nothing'}, the dispatcher calls {actual[i]!r} too" if len(actual) > i
                 else f"the dispatcher stops at {actual[-1]!r}: your {answer[i]!r} is never called")
    return Result(False, f"{where}.\nHint: {hint}")


RESULT_MARK = "EXERCISE RESULT "


def in_fresh_process(source: Path, layers: tuple[str, ...], body: str) -> Result:
    """Build `source` as a layer of its own in a fresh Python, after loading `layers`, then run `body` there. The
    body ends with report(passed, diagnosis). A compile error, a refused load or a crash becomes the diagnosis."""
    code = f"""
        import json
        import torch
        from helpers import build

        def report(passed, diagnosis=""):
            print({RESULT_MARK!r} + json.dumps([passed, diagnosis]))

        build.load_all(*{layers!r})
        build.LAYERS["exercise"] = [{str(source)!r}]
        try:
            build.load("exercise")
        except (build.CompileError, build.NamespaceAlreadyRegistered) as error:
            report(False, str(error))
            raise SystemExit
    """
    done = isolated.run(textwrap.dedent(code) + textwrap.dedent(body))
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            passed, diagnosis = json.loads(line[len(RESULT_MARK):])
            return Result(passed, diagnosis)
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name
        return Result(False, f"the check's process died ({name}) while running your code.")
    return Result(False, f"the check's process failed (exit {done.returncode}):\n{done.stderr.strip()[-1500:]}")
