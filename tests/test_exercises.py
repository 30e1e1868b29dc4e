"""Every exercise's check, proven: it passes on the reference solution, fails on every mistake in
exercises/mistakes/ with the diagnosis that mistake names (test_exercise_mistakes.py), and fails on the untouched
skeleton (each lesson's exercise cells run under nbval, which compares what check() prints with what the lesson
stores). Checks run in processes of their own (exercises/runner.py), so a crashing file cannot take the test run
with it, and no check sees what an earlier one registered."""

import functools
import json
import re

import pytest

import exercises
from exercises import SKELETONS, SOLUTIONS
from exercises.mistakes import MISTAKES, RIGHT_ANSWERS
from helpers import paths

EXERCISES = exercises._exercises()


@functools.cache
def lesson_code_cells() -> list[tuple[str, dict]]:
    """Every code cell of every lesson: (the notebook's file name, the cell)."""
    return [(notebook.name, cell) for notebook in sorted((SKELETONS.parent / "notebooks").glob("*.ipynb"))
            for cell in json.loads(notebook.read_text())["cells"] if cell["cell_type"] == "code"]


def checked_exercise(cell: dict) -> str | None:
    """The exercise id a cell calls check() on, or None."""
    called = re.search(r'^check\("([\w.]+)"\)', "".join(cell["source"]), re.MULTILINE)
    return called.group(1) if called else None


def lesson_verdicts() -> dict[str, str]:
    """What each lesson stores for check(id) on the untouched skeleton: exercise id -> the verdict and diagnosis."""
    verdicts = {}
    for _, cell in lesson_code_cells():
        if exercise_id := checked_exercise(cell):
            printed = "".join("".join(output.get("text", "")) for output in cell["outputs"]
                              if output.get("name") == "stdout")
            verdicts[exercise_id] = printed[printed.index(f"  {exercise_id}  ") - 4:]
    return verdicts


def test_every_lesson_stores_its_exercises_failing_on_the_skeleton():
    verdicts = lesson_verdicts()
    assert set(verdicts) == set(EXERCISES)
    for exercise_id, verdict in verdicts.items():
        assert verdict.startswith(f"FAIL  {exercise_id}  (exercises/{EXERCISES[exercise_id].file})"), verdict


def test_lessons_run_every_cell_under_nbval():
    for notebook, cell in lesson_code_cells():
        tags = cell.get("metadata", {}).get("tags", [])
        assert "nbval-skip" not in tags, f"{notebook}: {''.join(cell['source'])[:80]!r}"


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_check_passes_on_the_solution(exercise_id):
    result = exercises.run_check(exercise_id, SOLUTIONS / EXERCISES[exercise_id].file)
    assert result.passed, result.diagnosis


@pytest.mark.parametrize("answer", RIGHT_ANSWERS, ids=lambda a: f"{a.exercise}-{a.name}")
def test_check_passes_a_right_answer_besides_the_solution(answer):
    result = exercises.run_check(answer.exercise, answer.write_under(paths.BUILD / "right"))
    assert result.passed, result.diagnosis


def test_every_skeleton_has_its_check():
    skeletons = {path.name for path in SKELETONS.glob("[0-9][0-9]_*") if path.suffix in (".py", ".cpp")}
    assert skeletons == {exercise.file for exercise in EXERCISES.values()}


def test_every_lesson_has_two_exercises_one_hard_and_three_mistakes_each():
    for lesson in (f"{n:02d}" for n in range(11)):
        ours = [e for e in EXERCISES.values() if e.id.startswith(lesson + ".")]
        assert len(ours) >= 2 and any(e.difficulty == "hard" for e in ours), lesson
    for exercise in EXERCISES.values():
        assert sum(m.exercise == exercise.id for m in MISTAKES) >= 3, exercise.id


def test_mistakes_files_read_within_120_columns():
    files = sorted((SKELETONS / "mistakes").glob("*.toml"))
    assert len(files) == len(EXERCISES)
    for path in files:
        long = [n for n, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 120]
        assert not long, f"{path.name}: lines {long} over 120 columns (a string breaks at a space: ' \\' ends the line)"


def test_no_skeleton_diagnosis_gives_the_answer():
    # What a lesson stores for an untouched skeleton is its diagnosis: it must not contain the solution's own answer.
    spoilers = {"00.predict_path": "'AutogradCPU'", "01.schema": "Tensor(a!)", "02.composite_key": "CompositeImplicit",
                "03.fallthrough": "fallthrough_kernel", "05.register_autocast": "register_autocast",
                "05.autocast_guard": "ExcludeDispatchKeyGuard", "06.fake_kernel": "[2, 3, 4]",
                "06.vmap_rule": "one matrix"}
    verdicts = lesson_verdicts()
    for exercise_id, answer in spoilers.items():
        diagnosis = verdicts[exercise_id].split("\n", 1)[1]  # the lines under "FAIL  <id>  (<file>)"
        assert answer not in diagnosis, exercise_id


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
