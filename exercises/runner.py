"""Run a check in a process of its own: whatever the reader's code registers, and however it crashes, the process it
ran in is gone afterwards, so the verdict on a file never depends on what was checked before.

The processes come from a fork server (multiprocessing's "forkserver"): one fresh Python, started on the first check,
that has imported torch and the checks once and forks a child per check. A child costs milliseconds, not the seconds
of a new interpreter. The server never runs a kernel, so it holds no OpenMP threads that a fork would break.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
import traceback
from pathlib import Path

from helpers import progress

from .toolkit import EXERCISES, Result

_forkserver = multiprocessing.get_context("forkserver")
# Imported once, not per check: torch, helpers, every check; torch._dynamo (opcheck and torch.compile need it: 2 s);
# AOTAutograd and torch.export's tracer, which opcheck and export import on first use (every reference solution checked
# once on this 2-core AVX2 machine: 11.0 to 12.5 s without them, 9.3 to 9.9 s with them; tests/test_exercise*.py on
# two workers: 45 s -> 38 s; the server starts 0.3 s later).
_forkserver.set_forkserver_preload(["exercises.checks", "torch._dynamo", "torch._functorch.aot_autograd",
                                    "torch.export._trace"])


def _child(exercise_id: str, path: str, log: str, results) -> None:
    # The child's output goes to a file: compiler progress and crash messages (an abort prints "terminate called
    # ...") stay out of the notebook, and the parent can quote them.
    with open(log, "w") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
    from . import checks  # noqa: F401 - registers every check (preloaded: free)

    try:
        result = EXERCISES[exercise_id].check(Path(path))
    except Exception as error:  # noqa: BLE001 - the reader's code may raise anything; that is the diagnosis
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == path]
        where = f" (line {frames[-1].lineno} of your file)" if frames else ""
        result = Result(False, f"your code raised {type(error).__name__}{where}: {str(error).splitlines()[0] if str(error) else ''}")
    results.send(result)


def run(exercise_id: str, path: Path, timeout: float = 600) -> Result:
    """The check's verdict on `path`, from a child process."""
    from . import checks  # noqa: F401 - the registry this process reads when the child dies
    receive, send = _forkserver.Pipe(duplex=False)
    with tempfile.NamedTemporaryFile("r", suffix=".log") as log:
        child = _forkserver.Process(target=_child, args=(exercise_id, str(path), log.name, send), daemon=True)
        child.start()
        send.close()
        try:
            result = receive.recv() if receive.poll(timeout) else None
        except EOFError:  # the child died before it could send a verdict
            result = None
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
            child.join()
        if result is not None:
            return result
        output = log.read().strip()
    if child.exitcode is None or child.exitcode == -signal.SIGKILL:
        return Result(False, f"the check did not finish within {timeout:.0f} s: does your code loop forever?")
    if child.exitcode < 0:
        said = [line for line in output.splitlines() if line.strip() and not progress.is_progress_line(line)]
        last = said[-1] if said else ""
        why = EXERCISES[exercise_id].on_crash
        return Result(False, f"the check's process died ({signal.Signals(-child.exitcode).name}) while running your code"
                             + (f"; its last words: {last}" if last else ".") + (f"\n{why(path)}" if why else ""))
    return Result(False, f"the check's process failed (exit {child.exitcode}):\n{output[-1500:]}")
