"""Run Python in a fresh process: demonstrations that would kill the notebook's kernel (an aborting
library load, infinite recursion), and work that needs a process of its own (build.load_all's parallel
builds, toolchain's OpenMP probe). The checkout's absolute path is removed from the output so that it
reads the same on every machine.

Under the test command the process is a child of a fork server that has imported torch already
(forkserver.py): the same program, the same output, without importing torch twenty times. Elsewhere, or with
WORKBOOK_FORK=0, it is a new Python."""

import os
import subprocess
import textwrap

from . import forkserver
from .paths import REPO


# A crash writes no core file. Where the core size limit is unlimited (`ulimit -c`), lesson 05's stack
# overflow demo took 14 s instead of 1.4 s and left a 190 MB file named `core` in the checkout.
NO_CORE_FILE = "import resource; resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"


def run(code: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `code` with this Python in a new process (with extra environment variables `env`);
    returns its exit code, stdout and stderr."""
    program = NO_CORE_FILE + textwrap.dedent(code)
    environment = {**os.environ, **(env or {})}
    done = forkserver.run(program, environment, str(REPO), timeout)
    done.stdout = done.stdout.replace(f"{REPO}/", "")
    done.stderr = done.stderr.replace(f"{REPO}/", "")
    return done


def lines_with(text: str, *needles: str) -> str:
    """The lines of `text` that contain any of `needles`."""
    return "\n".join(line for line in text.splitlines() if any(n in line for n in needles))
