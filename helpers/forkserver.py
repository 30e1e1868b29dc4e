"""A fork server for the test command: one Python that imports torch once and forks a child for each program that
isolated.run gives it.

Why: isolated.run starts a new interpreter for each demonstration, and the test command runs about twenty of them
(lessons, tests, the exercise 08 check). Each paid 2.5 s to import torch, 4 s where it then exported, compiled or
loaded an AOTInductor package; a fork costs milliseconds. The root conftest.py starts one server per test session
and names its socket in WORKBOOK_FORKSERVER, which pytest's workers and the notebook kernels nbval starts inherit.
isolated.run uses the server where that variable is set; elsewhere (your JupyterLab) it starts a new Python.

A child is what `python -c program` would be once the modules in PRELOAD are imported: a process of its own (a crash
ends only the child), with the caller's environment, working directory, stdout and stderr (tests/test_forkserver.py
compares the two). The server imports nothing of the workbook, and never runs a kernel: it holds no OpenMP threads
that a fork would break.

Protocol, over a Unix socket: the client sends a JSON request (program, environment, working directory) with two file
descriptors, the files that become the child's stdout and stderr; it reads back the child's pid, then its return
code as subprocess reports it (-N: killed by signal N).
"""

from __future__ import annotations

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
import traceback
import types

VARIABLE = "WORKBOOK_FORKSERVER"
# torch, and what opcheck, torch.export and AOTInductor's loader import on first use (3.5 s together, here once).
PRELOAD = ("torch", "torch._dynamo", "torch._functorch.aot_autograd", "torch.export._trace", "torch._inductor.package")


def start(address: str) -> subprocess.Popen:
    """Start a server listening at `address` (a socket path). It serves until the returned process's stdin is closed;
    a client that connects while it is still importing waits."""
    server = subprocess.Popen([sys.executable, __file__, address], stdin=subprocess.PIPE)
    while not os.path.exists(address):  # bound before it imports anything: a few milliseconds
        if server.poll() is not None:
            raise RuntimeError(f"the fork server exited at start (exit {server.returncode})")
        select.select([], [], [], 0.01)
    return server


def run(program: str, env: dict[str, str], cwd: str, timeout: float) -> subprocess.CompletedProcess:
    """Run `program` in a child of the server named by WORKBOOK_FORKSERVER, as subprocess.run would in a new Python."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        try:
            connection.connect(os.environ[VARIABLE])
        except (FileNotFoundError, ConnectionRefusedError) as error:
            raise RuntimeError(f"no fork server at {os.environ[VARIABLE]} ({VARIABLE}): it serves only while the "
                               "test session that started it runs") from error
        request = json.dumps({"program": program, "env": env, "cwd": str(cwd)}).encode()
        socket.send_fds(connection, [request], [out.fileno(), err.fileno()])
        connection.shutdown(socket.SHUT_WR)
        connection.settimeout(timeout)
        replies, pid = connection.makefile("r"), None
        try:
            pid = int(replies.readline())
            returncode = int(replies.readline())
        except TimeoutError:
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired(["<forkserver child>"], timeout) from None
        return subprocess.CompletedProcess(["<forkserver child>"], returncode, _text(out), _text(err))


def _text(file) -> str:
    """What the child wrote, read as subprocess.run(text=True) reads it: the locale's encoding, universal newlines."""
    file.seek(0)
    return io.TextIOWrapper(file).read()


def _serve(address: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
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
    """In a process per request: fork the child, tell the client its pid, wait for it and send its return code."""
    request, fds, _, _ = socket.recv_fds(connection, 1 << 16, 2)
    while chunk := connection.recv(1 << 16):
        request += chunk
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this process waits for its child
    pid = os.fork()
    if pid == 0:
        connection.close()
        _execute(json.loads(request), *fds)
    try:
        connection.sendall(f"{pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    except BrokenPipeError:  # the client stopped waiting (its timeout) and killed the child
        pass
    os._exit(0)


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
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    # Run as a script, Python put helpers/ first on sys.path: its trace.py would hide the standard library's `trace`.
    del sys.path[0]
    _serve(sys.argv[1])
