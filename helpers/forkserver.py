"""A fork server: one Python that imports torch once and forks a child for each program it is given. A fork costs
milliseconds; a new Python spends seconds importing torch, more where it then exports, compiles or loads an AOTInductor
package. Only the test command runs one: the root conftest.py starts a server per test session and names its socket in
WORKBOOK_FORKSERVER, which pytest's workers and the notebooks' kernels inherit. Through spawn() and run() it serves

- isolated.run (lessons' demonstrations that crash, build.load_all's side-by-side builds, the OpenMP probe);
- the exercise checks (exercises/runner.py);
- the notebooks' kernels (forked_kernel.py).

It is a speed-up, never a dependency. WORKBOOK_FORK=0 turns it off: every fresh process is a new Python, and the test
command passes so too, slower. It is off by default except on Linux (forking a process that has imported torch is
untested elsewhere; macOS's Python itself starts new processes by spawning). Your JupyterLab runs no server: an
exercise check there is a new Python. Where WORKBOOK_FORKSERVER names a server that is gone (a variable inherited from
a test session that ended), spawn() starts a new Python instead.

A child is what `python -c program` would be once the modules in PRELOAD are imported: a process of its own (a crash
ends only the child), with the caller's environment, working directory, stdout and stderr (tests/test_forkserver.py
compares the two). The server imports nothing of the workbook and runs nothing itself: it holds no OpenMP threads
that a fork would break.

Protocol, over a Unix socket: the client sends two file descriptors (the files that become the child's stdout and
stderr), then a JSON line (program, environment, working directory); it reads back the child's pid, then its return
code as subprocess reports it (-N: killed by signal N). A child lives as long as its client's connection.
"""

from __future__ import annotations

import atexit
import importlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
import types

VARIABLE = "WORKBOOK_FORKSERVER"  # the session's server's socket
SWITCH = "WORKBOOK_FORK"  # "0": no server, every fresh process a new Python; "1": a server, on any system
# torch, and what opcheck, torch.export and AOTInductor's loader import on first use (seconds together, here once).
PRELOAD = ("torch", "torch._dynamo", "torch._functorch.aot_autograd", "torch.export._trace", "torch._inductor.package")


def wanted() -> bool:
    """Whether the test command starts a server: as WORKBOOK_FORK says, else only on Linux."""
    setting = os.environ.get(SWITCH)
    return sys.platform == "linux" if setting is None else setting != "0"


def start(address: str) -> subprocess.Popen:
    """Start a server listening at `address` (a socket path). It serves until the returned process's stdin is closed;
    a client that connects while it is still importing waits."""
    server = subprocess.Popen([sys.executable, __file__, address], stdin=subprocess.PIPE)
    while not os.path.exists(address):  # bound before it imports anything: a few milliseconds
        if server.poll() is not None:
            raise RuntimeError(f"the fork server exited at start (exit {server.returncode})")
        select.select([], [], [], 0.01)
    return server


class Child:
    """A program running in a child of the server. The child lives as long as this connection: closing it, or the
    end of the process that holds it, kills the child."""

    def __init__(self, connection: socket.socket):
        self._connection = connection
        self._replies = connection.makefile("r")
        self.pid = int(self._replies.readline())

    def wait(self, timeout: float | None = None) -> int:
        """Its return code, as subprocess reports it (-N: killed by signal N); TimeoutError after `timeout` s."""
        self._connection.settimeout(timeout)
        return int(self._replies.readline())

    def close(self) -> None:
        self._replies.close()
        self._connection.close()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exception) -> None:
        self.close()


class NewPython(Child):
    """The same program in a new Python, where there is no server: the same methods, and closing kills it too."""

    def __init__(self, process: subprocess.Popen):
        self._process = process
        self.pid = process.pid

    def wait(self, timeout: float | None = None) -> int:
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError from None

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def spawn(program: str, env: dict[str, str], cwd: str, stdout: int, stderr: int) -> Child:
    """Start `program` as `python -c program` would, writing to the file descriptors `stdout` and `stderr`: in a child
    of the session's server where there is one and WORKBOOK_FORK allows it, else in a new Python."""
    address = os.environ.get(VARIABLE)
    if address and wanted():
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(address)
        except OSError:  # the server is gone: its test session ended
            connection.close()
        else:
            socket.send_fds(connection, [b"\0"], [stdout, stderr])
            connection.sendall(json.dumps({"program": program, "env": env, "cwd": str(cwd)}).encode() + b"\n")
            return Child(connection)
    return NewPython(subprocess.Popen([sys.executable, "-c", program], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                      stdout=stdout, stderr=stderr))


def run(program: str, env: dict[str, str], cwd: str, timeout: float) -> subprocess.CompletedProcess:
    """Run `program` as subprocess.run(capture_output=True, text=True) would in a new Python: in a child of the
    session's server where spawn() finds one."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with spawn(program, env, cwd, out.fileno(), err.fileno()) as child:
            try:
                returncode = child.wait(timeout)
            except TimeoutError:  # leaving the `with` kills the child
                raise subprocess.TimeoutExpired([sys.executable, "-c", program], timeout) from None
        return subprocess.CompletedProcess([sys.executable, "-c", program], returncode, _text(out), _text(err))


def _text(file) -> str:
    """What the child wrote, read as subprocess.run(text=True) reads it: the locale's encoding, universal newlines."""
    file.seek(0)
    return io.TextIOWrapper(file).read()


def _serve(address: str) -> None:
    # Ctrl-C in a terminal, or a Jupyter kernel's interrupt or shutdown, reaches the whole process group: the server
    # lives until its stdin closes, not until an interrupt (it printed a KeyboardInterrupt traceback and died). Each
    # child takes Python's usual handler back (_execute).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # The path appears only once the socket listens (start() waits for it): bound and listening under another name,
    # then renamed. A client connecting between bind() and listen() was refused.
    listener.bind(address + ".starting")
    listener.listen(64)
    os.rename(address + ".starting", address)
    for module in PRELOAD:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the per-request processes are reaped by the kernel
    while True:
        ready, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in ready:  # closed: the test session is over
            os.unlink(address)
            os._exit(0)  # at once: no interpreter teardown (a second, with torch loaded)
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _supervise(connection)
        connection.close()


def _supervise(connection: socket.socket) -> None:
    """In a process per request: fork the child, tell the client its pid, wait for the child and send its return
    code. Kill the child if the client goes away first (its timeout, or its own end)."""
    try:
        _, fds, _, _ = socket.recv_fds(connection, 1, 2)
        request = json.loads(connection.makefile("rb").readline())
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this process waits for its child
        pid = os.fork()
        if pid == 0:
            connection.close()
            try:
                _execute(request, *fds)  # exits the child
            except BaseException:  # noqa: BLE001 - it could not start the program (a missing cwd)
                traceback.print_exc()
                os._exit(1)
        for fd in fds:
            os.close(fd)
        lock, exited = threading.Lock(), False

        def kill_the_child_when_the_client_is_gone():
            connection.recv(1)  # b"": the client closed its end
            with lock:
                if not exited:
                    os.kill(pid, signal.SIGKILL)

        threading.Thread(target=kill_the_child_when_the_client_is_gone, daemon=True).start()
        connection.sendall(f"{pid}\n".encode())
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped: its pid cannot be reused
        with lock:
            exited = True
        _, status = os.waitpid(pid, 0)
        connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    except OSError:  # the client is gone
        pass
    finally:
        os._exit(0)  # never back into the server's loop


def _execute(request: dict, stdout: int, stderr: int) -> None:
    """Become `python -c program`: its streams, directory, environment, sys.argv and sys.path[0], a new __main__."""
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv[:] = ["-c"]
    sys.path.insert(0, "")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a new Python: Ctrl-C raises KeyboardInterrupt
    main = sys.modules["__main__"] = types.ModuleType("__main__")
    code = 0
    try:
        exec(compile(request["program"], "<string>", "exec"), main.__dict__)
    except SystemExit as stop:  # sys.exit(n), sys.exit(), sys.exit("message")
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException as error:  # noqa: BLE001 - report it as Python would (from the program's frames), exit 1
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        code = 1
    atexit._run_exitfuncs()  # what Python runs at its exit, before it flushes the streams
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # Run as a script, Python put helpers/ first on sys.path: its trace.py would hide the standard library's `trace`.
    del sys.path[0]
    _serve(sys.argv[1])
