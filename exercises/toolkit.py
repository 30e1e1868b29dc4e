"""What the checks (exercises/checks.py) are made of: a Result, the registry of exercises, and small tools for checking a
reader's file. Every check runs in a process of its own (exercises/runner.py), so nothing here needs to undo what a
reader's code registered."""

from __future__ import annotations

import importlib.util
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from helpers import trace

FOLDER = Path(__file__).resolve().parent


@dataclass
class Result:
    passed: bool
    diagnosis: str = ""


@dataclass(frozen=True)
class Exercise:
    id: str  # "02.meta_kernel": lesson, then name
    difficulty: str  # easy, medium or hard: what a learner who did the lesson meets
    check: Callable[[Path], Result]
    on_crash: Callable[[Path], str] | None = None  # what to say when the reader's code kills the check's process

    @property
    def file(self) -> str:
        """The skeleton's file name: the id with an underscore for the dot, .py or .cpp."""
        stem = self.id.replace(".", "_", 1)
        return next(name for name in (f"{stem}.py", f"{stem}.cpp") if (FOLDER / name).exists())


EXERCISES: dict[str, Exercise] = {}
DIFFICULTIES = ("easy", "medium", "hard")


def exercise(exercise_id: str, difficulty: str, on_crash: Callable[[Path], str] | None = None):
    """Register a check (exercises/checks.py uses this as a decorator)."""
    assert difficulty in DIFFICULTIES, difficulty

    def register(check: Callable[[Path], Result]):
        EXERCISES[exercise_id] = Exercise(exercise_id, difficulty, check, on_crash)
        return check

    return register


def load_python(path: Path):
    """Import a Python exercise file afresh."""
    spec = importlib.util.spec_from_file_location(f"exercise_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def operator(schema: str, kernel=None, key: str = "CPU", namespace: str = "exercise", tags=()):
    """Define <namespace>::<schema> (with `kernel` at `key`, if given); yields the Library registrations go into."""
    library = torch.library.Library(namespace, "FRAGMENT")
    library.define(schema, tags=tags)
    if kernel is not None:
        library.impl(schema.split("(")[0], kernel, key)
    yield library


def call_path(op, *args) -> list[str]:
    """The keys whose kernels the dispatcher calls for op(*args), here and now."""
    return trace.path(trace.predict(op, *args))


def first_difference(answer: list, actual: list) -> int | None:
    """The index of the reader's first entry that differs from the actual one; None where the shorter list is the
    start of the longer."""
    return next((i for i, (yours, theirs) in enumerate(zip(answer, actual)) if yours != theirs), None)


def compare_paths(answer: list[str], actual: list[str], where_to_look: str) -> Result:
    """A predicted path against the dispatcher's. On a mismatch, says which of the reader's entries is the first
    wrong one, and where to look, never what the right entry is."""
    if list(answer) == actual:
        return Result(True, f"path: {' -> '.join(actual)}")
    if (i := first_difference(answer, actual)) is not None:
        where = f"your kernel {i + 1}, {answer[i]!r}, is not the one the dispatcher calls there"
    else:
        where = (f"after your {len(answer)} kernel(s) the dispatcher calls more" if len(actual) > len(answer)
                 else f"the dispatcher stops before your kernel {len(actual) + 1}, {answer[len(actual)]!r}")
    return Result(False, f"{where}.\nLook again at {where_to_look}")


def mentions(path: Path, pattern: str) -> bool:
    """Whether the file's code (comments dropped) matches `pattern`: for diagnoses aimed at one known mistake."""
    code = re.sub(r"//.*|#.*", "", path.read_text())
    return re.search(pattern, code) is not None
