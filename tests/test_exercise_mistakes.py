"""Every exercise's check fails on every mistake in exercises/mistakes/, with the diagnosis that mistake names: a
check that passes a wrong answer is a bug. (A file of its own: pytest's workers take files, and these run beside
test_exercises.py's.)"""

import importlib.metadata

import pytest

import exercises
from exercises.mistakes import MISTAKES
from helpers import paths


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: f"{m.exercise}-{m.name}")
def test_check_catches_the_mistake(mistake):
    release = tuple(int(part) for part in importlib.metadata.version("torch").split(".")[:2])
    if mistake.torch_from and release < tuple(int(part) for part in mistake.torch_from.split(".")):
        pytest.skip(f"a mistake from torch {mistake.torch_from} on: torch {release} behaves otherwise")
    result = exercises.run_check(mistake.exercise, mistake.write_under(paths.BUILD / "mistakes"))
    assert not result.passed and mistake.expect in result.diagnosis, result.diagnosis
