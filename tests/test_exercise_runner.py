"""exercises/runner.py: what a check says when the reader's code ends the check's process, or never returns. Each
answer here is a tiny file that does only that, or fails to compile."""

import os
import re
import sys
import time

import pytest

import exercises
from exercises import runner, toolkit
from helpers import paths

# 02.meta_kernel's operator, with kernels that never return. A volatile read each turn: a loop without side effects
# is undefined behaviour in C++, which the compiler may assume ends.
LOOPING_CPP = """\
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace {
volatile bool forever = true;

at::Tensor outer(const at::Tensor& a, const at::Tensor&) {
  while (forever) {
  }
  return a;
}
}  // namespace

TORCH_LIBRARY(exercise02, m) { m.def("outer(Tensor a, Tensor b) -> Tensor"); }
TORCH_LIBRARY_IMPL(exercise02, CPU, m) { m.impl("outer", outer); }
TORCH_LIBRARY_IMPL(exercise02, Meta, m) { m.impl("outer", outer); }
"""


def test_an_exit_in_the_readers_code_names_its_code_and_line(tmp_path):
    answer = tmp_path / "01_schema.py"
    answer.write_text('import sys\n\nsys.exit(3)\nSCHEMA = "scale_(Tensor(a!) x) -> ()"\n')
    result = exercises.run_check("01.schema", answer)
    assert not result.passed and result.diagnosis.startswith("your code exited with code 3 (line 3 of your file)")


def test_an_exit_past_python_names_its_code(tmp_path):
    answer = tmp_path / "01_schema.py"
    answer.write_text("import os\n\nos._exit(3)\n")
    result = exercises.run_check("01.schema", answer)
    assert not result.passed and result.diagnosis.startswith("your code ended the check's process with exit code 3")


def test_a_crash_quotes_the_last_line_the_process_printed(tmp_path):
    answer = tmp_path / "01_schema.py"
    answer.write_text("import os, signal\n\nprint('about to crash', flush=True)\n"
                      "os.kill(os.getpid(), signal.SIGSEGV)\n")
    result = exercises.run_check("01.schema", answer)
    assert not result.passed and result.diagnosis.startswith(
        "the check's process died (SIGSEGV) while running your code; its last words: about to crash")


def test_a_crash_names_what_the_check_was_doing_past_a_cpp_backtrace(tmp_path):
    # What a c10::Error that ends the process prints last (its backtrace), after the check said what it was doing.
    answer = tmp_path / "01_schema.py"
    answer.write_text(f"import os, signal\n\nprint({toolkit.NOW_DOING!r} + 'calling it from four threads', flush=True)\n"
                      "print('terminate called after throwing an instance of c10::Error', flush=True)\n"
                      "print('frame #0: c10::Error::Error() + 0x1 (libc10.so)', flush=True)\n"
                      "print('<omitting python frames>', flush=True)\n"
                      "os.kill(os.getpid(), signal.SIGABRT)\n")
    result = exercises.run_check("01.schema", answer)
    assert not result.passed and result.diagnosis.startswith(
        "the check's process died (SIGABRT) while running your code (the check was calling it from four threads); "
        "its last words: terminate called after throwing an instance of c10::Error")


@pytest.mark.parametrize("code, running_limit, diagnosis", [
    # A loop: reported once it has used the limit in processor time.
    ("n = 0\nwhile True: n += 1  # one line: the stacks may be taken at the test or at the body\n", 0.5,
     "your code used 0.5 s of processor time without finishing (it was at line 2 of your file): does it loop forever?"),
    # A wait uses none: reported after five times the limit on the clock.
    ("import threading\n\nthreading.Event().wait()\n", 0.2,
     "your code ran for 1 s without finishing (it was at line 3 of your file), using little of the processor: does it "
     "wait for something that never comes?")], ids=["loop", "wait"])
def test_code_that_never_finishes_is_reported_with_its_line(tmp_path, code, running_limit, diagnosis):
    answer = tmp_path / "01_schema.py"
    answer.write_text(code)
    start = time.monotonic()
    assert runner.run("01.schema", answer, running_limit=running_limit).diagnosis == diagnosis
    assert time.monotonic() - start < 30


def test_a_check_past_its_time_says_what_it_was_doing(tmp_path):
    # The whole check's limit, builds included (08.load_before_aoti's takes minutes): the step it had reached.
    answer = tmp_path / "01_schema.py"
    answer.write_text(f"import time\n\nprint({toolkit.NOW_DOING!r} + 'running it in a fresh Python', flush=True)\n"
                      "time.sleep(60)\n")
    assert runner.run("01.schema", answer, timeout=10).diagnosis == (
        "the check did not finish within 10 s, builds included (the check was running it in a fresh Python): does "
        "your code loop forever? (A machine busy with other work slows a check too.)")


def test_a_slow_machine_is_not_a_loop(tmp_path):
    # Sleeping uses no processor time: code that takes longer on the clock than the running limit, as on a loaded
    # machine, is judged on what it did.
    answer = tmp_path / "01_schema.py"
    answer.write_text("import time\n\ntime.sleep(0.6)\nSCHEMA = 'scale_(Tensor(a!) x, float factor=2.0, *, float? "
                      "limit=None) -> ()'\n")
    assert runner.run("01.schema", answer, running_limit=0.4).passed


def test_a_loop_in_cpp_is_reported_and_its_compile_is_not_counted():
    # The C++ loop holds the GIL: only a timer outside Python can end it. Cold, the compile alone takes longer than
    # the limit: the clock starts once the library is built. The same path on every run, so that a warm run finds
    # the library built (ninja rebuilds a library whose source path changed).
    answer = paths.BUILD / "runner_tests" / "02_meta_kernel.cpp"
    answer.parent.mkdir(parents=True, exist_ok=True)
    if not answer.exists() or answer.read_text() != LOOPING_CPP:
        answer.write_text(LOOPING_CPP)
    result = runner.run("02.meta_kernel", answer, running_limit=0.5)
    assert result.diagnosis == "your code used 0.5 s of processor time without finishing: does it loop forever?"


def test_a_compile_error_shows_the_compilers_first_errors_with_short_paths():
    answer = paths.BUILD / "runner_tests" / "broken" / "02_meta_kernel.cpp"
    answer.parent.mkdir(parents=True, exist_ok=True)
    broken = (exercises.SOLUTIONS / "02_meta_kernel.cpp").read_text().replace(
        "  check_inputs(a, b);\n  // a's sizes", "  check_inputs(a, b)\n  // a's sizes")
    if not answer.exists() or answer.read_text() != broken:
        answer.write_text(broken)
    diagnosis = runner.run("02.meta_kernel", answer).diagnosis
    assert diagnosis.startswith("Your 02_meta_kernel.cpp failed to compile. First errors:\n\n02_meta_kernel.cpp:")
    assert re.search(r"\n02_meta_kernel\.cpp:\d+:\d+: error: expected", diagnosis), diagnosis
    assert str(paths.BUILD) not in diagnosis, diagnosis


def test_a_python_answer_is_loaded_from_its_text_not_from_a_cached_pyc(tmp_path, monkeypatch):
    # Python trusts a .pyc while the file's size and modification second are unchanged: a one-character edit within
    # a second would otherwise run the code as it was before.
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # as on a reader's machine
    answer = tmp_path / "answer.py"
    loaded = []
    for value in (1, 2):
        answer.write_text(f"VALUE = {value}\n")
        os.utime(answer, ns=(10**18, 10**18))  # the same second both times
        loaded.append(toolkit.load_python(answer).VALUE)
    assert loaded == [1, 2]


def test_a_loop_in_the_fresh_python_of_08_is_reported_in_processor_time(tmp_path):
    # 08.load_before_aoti runs the reader's code in a fresh Python of its own: there too the limit is processor time
    # (a loaded machine slows the clock, not the work), counted from before torch's import.
    answer = tmp_path / "08_load_before_aoti.py"
    answer.write_text("def run(model_pt2, x):\n    while True:\n        pass\n")
    result = runner.run("08.load_before_aoti", answer, running_limit=6)
    assert result.diagnosis.startswith("in the fresh Python, your code used 6 s of processor time without finishing")
