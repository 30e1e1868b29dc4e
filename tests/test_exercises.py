"""Every exercise's check, proven: it fails on the untouched skeleton, fails on every mistake in exercises/mistakes.py with
the diagnosis that mistake names, and passes on the reference solution. Checks run in processes of their own (exercises/runner.py), so a crashing file cannot take
the test run with it, and no check sees what an earlier one registered."""

import re

import pytest

import exercises
from exercises import SKELETONS, SOLUTIONS
from exercises.mistakes import MISTAKES

EXERCISES = exercises._exercises()


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_check_fails_on_the_skeleton_and_passes_on_the_solution(exercise_id):
    file = EXERCISES[exercise_id].file
    result = exercises.run_check(exercise_id, SKELETONS / file)
    assert not result.passed, result.diagnosis
    result = exercises.run_check(exercise_id, SOLUTIONS / file)
    assert result.passed, result.diagnosis


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: f"{m.exercise}-{m.name}")
def test_check_catches_the_mistake(mistake, tmp_path):
    path = tmp_path / EXERCISES[mistake.exercise].file
    path.write_text(mistake.text())
    result = exercises.run_check(mistake.exercise, path)
    assert not result.passed and mistake.expect in result.diagnosis, result.diagnosis


def test_every_lesson_has_two_exercises_one_hard_and_three_mistakes_each():
    for lesson in (f"{n:02d}" for n in range(9)):
        ours = [e for e in EXERCISES.values() if e.id.startswith(lesson + ".")]
        assert len(ours) >= 2 and any(e.difficulty == "hard" for e in ours), lesson
    for exercise in EXERCISES.values():
        assert sum(m.exercise == exercise.id for m in MISTAKES) >= 3, exercise.id


def test_no_skeleton_diagnosis_gives_the_answer():
    # What a lesson stores for an untouched skeleton is its diagnosis: it must not contain the solution's own answer.
    spoilers = {"00.predict_path": "'AutogradCPU'", "01.schema": "Tensor(a!)", "02.composite_key": "CompositeImplicit",
                "03.fallthrough": "fallthrough_kernel", "05.register_autocast": "register_autocast",
                "05.autocast_guard": "ExcludeDispatchKeyGuard"}
    for exercise_id, answer in spoilers.items():
        assert answer not in exercises.run_check(exercise_id, SKELETONS / EXERCISES[exercise_id].file).diagnosis


def test_a_verdict_does_not_depend_on_what_was_checked_before():
    # Lesson 05's exercise, as a learner ran it: a solution that registers at AutocastCPU, then the untouched skeleton.
    assert exercises.run_check("05.register_autocast", SOLUTIONS / "05_register_autocast.py").passed
    assert not exercises.run_check("05.register_autocast", SKELETONS / "05_register_autocast.py").passed


def test_check_reads_the_readers_copy_but_skeletons_under_make_test(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(exercises, "MINE", tmp_path)
    monkeypatch.delenv("WORKBOOK_EXERCISES", raising=False)
    assert exercises.path_of("00.predict_path") == SKELETONS / "00_predict_path.py"
    copy = exercises.start("00.predict_path")
    assert copy == tmp_path / "00_predict_path.py" and "copied to" in capsys.readouterr().out
    assert copy.read_text() == (SKELETONS / "00_predict_path.py").read_text()
    copy.write_text("PATH = []\n")
    assert exercises.start("00.predict_path").read_text() == "PATH = []\n"  # start() keeps the reader's work ...
    assert "kept, with your changes" in capsys.readouterr().out  # ... and says so
    assert exercises.path_of("00.predict_path") == copy
    monkeypatch.setenv("WORKBOOK_EXERCISES", "skeletons")
    assert exercises.path_of("00.predict_path") == SKELETONS / "00_predict_path.py"


def test_readme_lists_every_exercise_with_its_difficulty():
    readme = (SKELETONS.parent / "README.md").read_text()
    for exercise in EXERCISES.values():
        assert re.search(rf"`{re.escape(exercise.id)}`\s*\|\s*{exercise.difficulty}\b", readme), exercise.id
