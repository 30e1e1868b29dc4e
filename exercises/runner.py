"""Run a check in a process of its own: whatever the reader's code registers, and however it crashes, the process it
ran in is gone afterwards, so the verdict on a file never depends on what was checked before.

The process is a new Python or, under the test command, a child of the session's fork server (helpers/forkserver.py),
which has imported torch once: a child costs milliseconds, not the seconds of a new interpreter.

A loop in the reader's code is reported once that code has used RUNNING_LIMIT seconds of processor time (on a loaded
machine, later on the clock), and code that waits forever once it has run five times as long (toolkit.Watchdog),
however long the compile before it took; `timeout` bounds the whole check, builds included.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import tempfile
import traceback
from pathlib import Path

from helpers import forkserver, progress

from .toolkit import EXERCISES, NOW_DOING, WATCHDOG, Diagnosis, Result, changed_compile_setting, compile_settings

RUNNING_LIMIT = 60.0


def _where(error: BaseException, path: str) -> str:
    """' (line N of your file)' for the last frame of the traceback in the reader's file, else ''."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == path]
    return f" (line {frames[-1].lineno} of your file)" if frames else ""


def _said(output: str) -> list[str]:
    """The child's lines but compiler progress and a C++ backtrace's frames (c10::Error prints them): the lines
    before those say what was running."""
    return [line for line in output.splitlines() if line.strip() and not progress.is_progress_line(line)
            and not re.match(r"\s*(frame #\d+: |<omitting python frames>)", line)]


def _doing(said: list[str]) -> str | None:
    """What the check last said it was doing (toolkit.now_doing), if it said."""
    return next((line.removeprefix(NOW_DOING) for line in reversed(said) if line.startswith(NOW_DOING)), None)


def check_here(exercise_id: str, path: str, verdict: str, stacks: str, running_limit: float) -> None:
    """In the child: run the check on `path`, write the Result to the file `verdict` as JSON. Should the reader's code
    run longer than `running_limit` seconds, the watchdog writes the Python stacks to the file `stacks` and ends the
    process."""
    import torch

    from . import checks  # noqa: F401 - registers every check

    torch.manual_seed(0)  # the checks' random inputs: the same verdict on the same file, every time
    random.seed(0)  # and the reader's: an answer that draws numbers draws the same ones
    with open(stacks, "w") as stacks_file:  # open as long as the watchdog may write to it
        WATCHDOG.arm(stacks_file, running_limit)
        try:
            settings = compile_settings()
            result = EXERCISES[exercise_id].check(Path(path))
            if result.passed and (changed := changed_compile_setting(settings)):
                name, now, before = changed
                # torch.use_deterministic_algorithms sets this one too (torch/__init__.py): the call to look for
                deterministic = name == "torch._inductor.config.deterministic"
                by = "; torch.use_deterministic_algorithms sets it" if deterministic else ""
                result = Result(False, f"after the check's calls to your code, {name} was {now!r} (it was "
                                       f"{before!r}{by}): a setting of the whole process, which every later "
                                       "torch.compile and torch.export runs with, also on code that never calls "
                                       "yours. What the task asks needs no setting changed")
        except Diagnosis as refused:
            result = Result(False, str(refused))
        except SystemExit as stop:  # sys.exit(), exit(), quit(): the reader's code ended what was running it
            status = f"the message {stop.code!r}" if isinstance(stop.code, str) else f"code {stop.code or 0}"
            result = Result(False, f"your code exited with {status}{_where(stop, path)}: the check calls your code, "
                                   "and needs it to return, not to end the process")
        except Exception as error:  # noqa: BLE001 - the reader's code may raise anything; that is the diagnosis
            message = str(error).splitlines()[0] if str(error) else ""
            result = Result(False, f"your code raised {type(error).__name__}{_where(error, path)}: {message}")
        finally:
            WATCHDOG.stop()
    Path(verdict).write_text(json.dumps({"passed": result.passed, "diagnosis": result.diagnosis}))


def run(exercise_id: str, path: Path, timeout: float = 600, running_limit: float = RUNNING_LIMIT) -> Result:
    """The check's verdict on `path`, from a child process."""
    from . import checks  # noqa: F401 - the registry this process reads when the child dies

    path = Path(path)  # a str too: the crash diagnoses read the file

    # The child's output goes to a log: compiler progress and crash messages (an abort prints "terminate called ...")
    # stay out of the notebook, and the diagnosis can quote them.
    with (tempfile.NamedTemporaryFile("r", suffix=".log") as log, tempfile.NamedTemporaryFile("r") as verdict,
          tempfile.NamedTemporaryFile("r") as stacks):
        program = (f"from exercises.runner import check_here\n"
                   f"check_here({exercise_id!r}, {str(path)!r}, {verdict.name!r}, {stacks.name!r}, {running_limit!r})")
        # Under the test command, from a server that has imported the checks already: nearly half of a quick check.
        checks_imported = forkserver.nested(("exercises.checks",))
        with forkserver.spawn(program, dict(os.environ), os.getcwd(), log.fileno(), log.fileno(),
                              address=checks_imported) as child:
            try:
                returncode = child.wait(timeout)
            except TimeoutError:  # leaving the `with` kills the child
                log.seek(0)
                doing = _doing(_said(log.read()))
                return Result(False, f"the check did not finish within {timeout:.0f} s, builds included"
                                     + (f" (the check was {doing})" if doing else "") + ": does your code loop "
                                     "forever? (A machine busy with other work slows a check too.)")
        if returncode == 0 and (written := verdict.read()):
            return Result(**json.loads(written))
        log.seek(0)  # the child wrote through a descriptor that shares this file's offset, now at its end
        output, stacks_written = log.read().strip(), stacks.read()
    if stacks_written:  # innermost frame first: the first line in the reader's file is where their code was
        lines = [line for file, line in re.findall(r'File "(.*)", line (\d+)', stacks_written) if file == str(path)]
        where = f" (it was at line {lines[0]} of your file)" if lines else ""
        if returncode == -signal.SIGPROF:  # the watchdog's processor-time limit
            return Result(False, f"your code used {running_limit:g} s of processor time without finishing{where}: "
                                 "does it loop forever?")
        waited = running_limit * WATCHDOG.WALL_FACTOR
        return Result(False, f"your code ran for {waited:g} s without finishing{where}, using little of the "
                             "processor: does it wait for something that never comes?")
    said = _said(output)
    last, doing = said[-1] if said else "", _doing(said)
    if returncode < 0:
        why = EXERCISES[exercise_id].on_crash
        return Result(False, f"the check's process died ({signal.Signals(-returncode).name}) while running your code"
                             + (f" (the check was {doing})" if doing else "")
                             + (f"; its last words: {last}" if last and not last.startswith(NOW_DOING) else ".")
                             + (f"\n{why(path)}" if why else ""))
    if "Traceback (most recent call last)" in output:  # the check itself failed: a bug of the workbook's
        return Result(False, f"the check's process failed (exit {returncode}):\n{output[-1500:]}")
    return Result(False, f"your code ended the check's process with exit code {returncode} before the check could "
                         "give its verdict (os._exit, or exit() in C++?)"
                         + (f"; its last words: {last}" if last else ""))
