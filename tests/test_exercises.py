"""Every exercise's check fails on the untouched skeleton, with a diagnosis, and passes on the reference solution:
no check can pass vacuously. C++ exercises are built and run in fresh processes (helpers.exercises.in_fresh_process),
so a crashing skeleton (05.autocast_guard) cannot take the test run with it."""

import pytest

from helpers import exercises

EXERCISES = sorted(exercises._checks())
# What each skeleton's diagnosis must say: the failure the exercise is about, not some other error.
SKELETON_DIAGNOSES = {
    "00.predict_path": "the dispatcher calls 'AutogradCPU'",
    "00.inference_mode": "the dispatcher calls 'CPU'",
    "01.schema": "Tensor(a!)",
    "01.fragment": "defines namespace workbook, which this process already has",
    "02.composite_key": "no fake impl or Meta kernel",
    "02.meta_kernel": "your kernel returns shape [4]",
    "03.autograd_outcomes": "'fallthrough': you said 'grad'; it is 'error'",
    "03.fallthrough": "torch's autograd fallback still runs",
    "04.backward": "yours [1.0, 1.0, 1.0], right [0.75, 3.0, 12.0]",
    "04.two_inputs": "d/da",
    "05.register_autocast": "dtypes torch.float32 and torch.bfloat16 differ",
    "05.autocast_guard": "A stack overflow",
    "06.fake_kernel": "test_faketensor failed",
    "06.vmap_rule": "the kernel ran 4 times",
    "07.records_graph": "torch.no_grad(), requires_grad (True, False): you say True",
    "07.predict_autocast_path": "the dispatcher calls 'AutocastCPU'",
    "08.fake_for_stable": "test_faketensor failed",
    "08.load_before_aoti": "Could not find schema for workbook::matmul",
}


def test_every_lesson_has_at_least_two_exercises():
    lessons = [f"{n:02d}" for n in range(9)]
    assert {lesson: sum(e.startswith(lesson + ".") for e in EXERCISES) >= 2 for lesson in lessons} == dict.fromkeys(
        lessons, True)
    assert sorted(SKELETON_DIAGNOSES) == EXERCISES


# Checks that build C++ or start a fresh Python (seconds each) run on their skeletons in the lessons themselves, whose
# stored FAIL lines and diagnoses nbval compares; the others are cheap enough to run here too.
IN_FRESH_PROCESS = {"01.fragment", "02.meta_kernel", "05.autocast_guard", "08.load_before_aoti"}


@pytest.mark.parametrize("exercise_id", sorted(set(EXERCISES) - IN_FRESH_PROCESS))
def test_check_fails_on_the_skeleton_with_its_diagnosis(workbook, exercise_id):
    file = exercises.CHECKS[exercise_id][0]
    result = exercises.run_check(exercise_id, exercises.SKELETONS / file)
    assert not result.passed
    assert SKELETON_DIAGNOSES[exercise_id] in result.diagnosis


@pytest.mark.parametrize("exercise_id", EXERCISES)
def test_check_passes_on_the_solution(workbook, exercise_id):
    file = exercises.CHECKS[exercise_id][0]
    result = exercises.run_check(exercise_id, exercises.SOLUTIONS / file)
    assert result.passed, result.diagnosis


def test_check_reads_the_readers_copy_but_skeletons_under_make_test(monkeypatch, tmp_path):
    monkeypatch.setattr(exercises, "MINE", tmp_path)
    monkeypatch.delenv("WORKBOOK_EXERCISES", raising=False)
    assert exercises.path_of("00.predict_path") == exercises.SKELETONS / "00_predict_path.py"
    copy = exercises.start("00.predict_path")
    assert copy == tmp_path / "00_predict_path.py"
    assert copy.read_text() == (exercises.SKELETONS / "00_predict_path.py").read_text()
    copy.write_text("PATH = []\n")
    assert exercises.start("00.predict_path").read_text() == "PATH = []\n"  # start() keeps the reader's work
    assert exercises.path_of("00.predict_path") == copy
    monkeypatch.setenv("WORKBOOK_EXERCISES", "skeletons")
    assert exercises.path_of("00.predict_path") == exercises.SKELETONS / "00_predict_path.py"
