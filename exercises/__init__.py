"""Exercises with automatic checks. At the end of each lesson:

    from exercises import check, show, start
    show("02.meta_kernel")    # the task, and its difficulty
    start("02.meta_kernel")   # copies exercises/02_meta_kernel.cpp to my_exercises/ (git ignores it): edit that copy
    check("02.meta_kernel")   # PASS, or FAIL and what the dispatcher did instead of what the exercise asks

An exercise is a file here: a skeleton that runs as it is, with a TODO, and a docstring or leading comment that says
what to do. check() checks your copy in my_exercises/ once you made one, else the skeleton, in a process of its own
(runner.py): your code may register anything or crash, and the next check starts clean. The checks are in checks.py,
the reference solutions in solutions/, and in mistakes/ the mistakes each check must catch, one file per exercise
(tests/test_exercise_mistakes.py runs them all; tests/test_exercises.py the solutions and the skeletons). Under
`make test`, WORKBOOK_EXERCISES=skeletons makes check() use the skeletons, so the lessons' stored
outputs are those of untouched files.
"""

from __future__ import annotations

import ast
import itertools
import os
import shutil
import textwrap
from pathlib import Path

from .runner import run
from .toolkit import EXERCISES, FOLDER, Result

SKELETONS = FOLDER
SOLUTIONS = FOLDER / "solutions"
MINE = FOLDER.parent / "my_exercises"


def _exercises() -> dict:
    from . import checks  # noqa: F401 - registers every check

    return EXERCISES


def path_of(exercise_id: str) -> Path:
    """Your copy in my_exercises/ if there is one (and WORKBOOK_EXERCISES is not "skeletons"), else the skeleton."""
    file = _exercises()[exercise_id].file
    mine = MINE / file
    if mine.exists() and os.environ.get("WORKBOOK_EXERCISES") != "skeletons":
        return mine
    return SKELETONS / file


def show(exercise_id: str) -> None:
    """Print the task: the docstring of a Python exercise, the leading comment of a C++ one."""
    exercise = _exercises()[exercise_id]
    path = SKELETONS / exercise.file
    if path.suffix == ".py":
        text = ast.get_docstring(ast.parse(path.read_text()))
    else:
        lines = itertools.takewhile(lambda line: line.startswith("//"), path.read_text().splitlines())
        text = "\n".join(line[3:] for line in lines)
    print(f"{_shown(path)} ({exercise.difficulty})\n\n{text}")


def start(exercise_id: str) -> Path:
    """Copy the skeleton to my_exercises/, unless a copy is there already (yours is kept), and say which."""
    file = _exercises()[exercise_id].file
    mine = MINE / file
    if mine.exists():
        print(f"{_shown(mine)} is there already: kept, with your changes. Delete it to start over.")
    else:
        MINE.mkdir(exist_ok=True)
        shutil.copy(SKELETONS / file, mine)
        print(f"copied to {_shown(mine)}: edit that file, then check({exercise_id!r})")
    return mine


def _shown(path: Path) -> Path:
    """A path as a reader in the checkout would type it."""
    return path.relative_to(FOLDER.parent) if path.is_relative_to(FOLDER.parent) else path


def run_check(exercise_id: str, path: Path | None = None) -> Result:
    """The check's verdict on `path` (default: path_of(exercise_id)), from a process of its own."""
    return run(exercise_id, path or path_of(exercise_id))


def check(exercise_id: str) -> None:
    """Print PASS, or FAIL with the diagnosis."""
    path = path_of(exercise_id)
    result = run_check(exercise_id, path)
    print(f"{'PASS' if result.passed else 'FAIL'}  {exercise_id}  ({_shown(path)})")
    if result.diagnosis:
        print(textwrap.indent(result.diagnosis, "      "))
