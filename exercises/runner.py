"""Run a check in a process of its own: whatever the reader's code registers, and however it crashes, the process it
ran in is gone afterwards, so the verdict on a file never depends on what was checked before.

The process is a child of a fork server (helpers/forkserver.py) that has imported torch once: the test session's, or
in your JupyterLab one of the kernel's own, started on the first check. A child costs milliseconds, not the seconds of
a new interpreter.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import traceback
from pathlib import Path

from helpers import forkserver, progress

from .toolkit import EXERCISES, Result


def check_here(exercise_id: str, path: str, verdict: str) -> None:
    """In the child: run the check on `path`, write the Result to the file `verdict` as JSON."""
    from . import checks  # noqa: F401 - registers every check

    try:
        result = EXERCISES[exercise_id].check(Path(path))
    except Exception as error:  # noqa: BLE001 - the reader's code may raise anything; that is the diagnosis
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == path]
        where = f" (line {frames[-1].lineno} of your file)" if frames else ""
        result = Result(False, f"your code raised {type(error).__name__}{where}: {str(error).splitlines()[0] if str(error) else ''}")
    Path(verdict).write_text(json.dumps({"passed": result.passed, "diagnosis": result.diagnosis}))


def run(exercise_id: str, path: Path, timeout: float = 600) -> Result:
    """The check's verdict on `path`, from a child process."""
    from . import checks  # noqa: F401 - the registry this process reads when the child dies

    # The child's output goes to a log: compiler progress and crash messages (an abort prints "terminate called ...")
    # stay out of the notebook, and the diagnosis can quote them.
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log, tempfile.NamedTemporaryFile("r") as verdict:
        program = f"from exercises.runner import check_here\ncheck_here({exercise_id!r}, {str(path)!r}, {verdict.name!r})"
        with forkserver.spawn(program, dict(os.environ), os.getcwd(), log.fileno(), log.fileno()) as child:
            try:
                returncode = child.wait(timeout)
            except TimeoutError:  # leaving the `with` kills the child
                return Result(False, f"the check did not finish within {timeout:.0f} s: does your code loop forever?")
        if returncode == 0 and (written := verdict.read()):
            return Result(**json.loads(written))
        output = log.read().strip()
    if returncode < 0:
        said = [line for line in output.splitlines() if line.strip() and not progress.is_progress_line(line)]
        last = said[-1] if said else ""
        why = EXERCISES[exercise_id].on_crash
        return Result(False, f"the check's process died ({signal.Signals(-returncode).name}) while running your code"
                             + (f"; its last words: {last}" if last else ".") + (f"\n{why(path)}" if why else ""))
    return Result(False, f"the check's process failed (exit {returncode}):\n{output[-1500:]}")
