"""The notebooks' Jupyter kernel under the test command: ipykernel in a child of the session's fork server
(forkserver.py), which has imported torch already, instead of a new Python that imports it again (seconds of CPU
per notebook).

nbval starts it through the kernelspec in .jupyter/kernels/workbook-forked/, which the root conftest.py selects;
JupyterLab (`make lab`) runs the usual python3 kernel. jupyter_client manages this launcher as it would manage the
kernel itself: the launcher passes on the signals jupyter_client sends (interrupt, terminate) and ends as the kernel
ends; if the launcher is killed, the fork server kills the kernel. Without a fork server it becomes the usual kernel.

    python -m helpers.forked_kernel -f CONNECTION_FILE
"""

import os
import signal
import sys

from . import forkserver

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def main(argv: list[str]) -> None:
    if not (os.environ.get(forkserver.VARIABLE) and forkserver.wanted()):
        os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])
    program = f"from ipykernel import kernelapp\nkernelapp.launch_new_instance(argv={argv!r})"
    with forkserver.spawn(program, dict(os.environ), os.getcwd(), sys.stdout.fileno(), sys.stderr.fileno()) as kernel:
        for signum in FORWARDED:
            signal.signal(signum, lambda received, _: os.kill(kernel.pid, received))
        returncode = kernel.wait()
    if returncode < 0:  # killed by a signal: end the same way
        signal.signal(-returncode, signal.SIG_DFL)
        os.kill(os.getpid(), -returncode)
    sys.exit(returncode)


if __name__ == "__main__":
    main(sys.argv[1:])
