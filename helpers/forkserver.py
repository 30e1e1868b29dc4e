"""A fork server: one Python that imports torch once and forks a child for each program it is given. A fork costs
milliseconds; a new Python spends seconds importing torch, more where it then exports, compiles or loads an AOTInductor
package. Only the test command runs one: the root conftest.py starts a server per test session and names its socket in
WORKBOOK_FORKSERVER, which pytest's workers and the notebooks' kernels inherit. Through spawn() and run() it serves

- isolated.run (lessons' demonstrations that crash, build.load_all's side-by-side builds, the OpenMP probe);
- the exercise checks (exercises/runner.py), from a nested() server, forked from it, that has imported the checks;
- the notebooks' kernels (forked_kernel.py).

It is a speed-up, never a dependency. WORKBOOK_FORK=0 turns it off: every fresh process is a new Python, and the test
command passes so too, slower. It is off on a machine with a GPU (a child could not start CUDA: wanted()). It runs on
Linux only: forking a process that has imported torch is untested elsewhere (macOS's Python itself starts new processes
by spawning), and the server watches its children through Linux's pidfds. Your JupyterLab runs no server: an exercise
check there is a new Python. Where WORKBOOK_FORKSERVER names a server that is gone (a variable inherited from
a test session that ended), spawn() starts a new Python instead.

A child is what `python -c program` would be once the modules in PRELOAD are imported: a process of its own (a crash
ends only the child), with the caller's environment, working directory, stdout and stderr (tests/test_forkserver.py
compares the two). One difference: its $TMPDIR is a folder of its own, removed when it exits (_start says why), so a
program hands a file to its caller where the caller says, not in tempfile's folder. The server imports nothing of the
workbook and runs nothing itself: it holds no OpenMP threads that a fork would break. (A nested server imports the
modules it is asked for, which start no thread either: tests/test_forkserver.py.) It forks each child itself, and
waits for them all in one loop, without a thread; when its session ends, it kills the children still running.

Protocol, over a Unix socket: the client sends two file descriptors (the files that become the child's stdout and
stderr), then a JSON line (program, environment, working directory); it reads back the child's pid, then its return
code as subprocess reports it (-N: killed by signal N). A child lives as long as its client's connection.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import io
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
import types
import warnings
import weakref

VARIABLE = "WORKBOOK_FORKSERVER"  # the session's server's socket
SWITCH = "WORKBOOK_FORK"  # "0": no server, every fresh process a new Python
# torch, and what opcheck, torch.export, AOTInductor's loader, the JIT builds (cpp_extension, which imports
# setuptools) and forward-mode AD (its decompositions, JIT-scripted at import: 0.14 s) import on first use (seconds
# together, here once).
PRELOAD = ("torch", "torch._dynamo", "torch._functorch.aot_autograd", "torch.export._trace", "torch._inductor.package",
           "torch.utils.cpp_extension", "torch._decomp.decompositions_for_jvp")


# A GPU's device files: NVIDIA's, and AMD's (ROCm).
GPU_DEVICES = ("/dev/nvidia0", "/dev/kfd")


def wanted() -> bool:
    """Whether the test command starts a server: on Linux, where no GPU is, unless WORKBOOK_FORK=0. A child of the
    server cannot start CUDA: importing torch.utils.cpp_extension (PRELOAD) asks CUDA how many devices it has, after
    which torch calls every forked child a bad fork, and refuses to initialize CUDA there ("Cannot re-initialize CUDA
    in forked subprocess"; tests/test_forkserver.py shows the mark). Where there is a GPU to run the CUDA lessons on,
    every fresh process is a new Python."""
    return (sys.platform == "linux" and os.environ.get(SWITCH) != "0"
            and not any(os.path.exists(device) for device in GPU_DEVICES))


def start(address: str, preload: tuple[str, ...] = PRELOAD) -> subprocess.Popen:
    """Start a server listening at `address` (a socket path), which imports the modules `preload` names. It serves
    until the returned process's stdin is closed; a client that connects while it is still importing waits."""
    server = subprocess.Popen([sys.executable, __file__, address, *preload], stdin=subprocess.PIPE)
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


def spawn(program: str, env: dict[str, str], cwd: str, stdout: int, stderr: int, address: str | None = None) -> Child:
    """Start `program` as `python -c program` would, writing to the file descriptors `stdout` and `stderr`: in a child
    of the session's server (or of the server at `address`, a nested() one) where there is one and WORKBOOK_FORK allows
    it, else in a new Python."""
    address = address or os.environ.get(VARIABLE)
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


_NESTED: dict[tuple[str, ...], tuple[Child, str]] = {}  # this process's nested servers: preload -> (server, address)


def nested(preload: tuple[str, ...]) -> str | None:
    """The address of a server forked from the session's that has imported the modules `preload` names as well, for
    this process's own use, started at the first call; None where spawn() would start a new Python. The exercise checks
    fork from one that has imported the checks (nearly half of a quick check's time, each time otherwise), while the
    session's server, which the notebooks' kernels fork from too, imports nothing of the workbook. It ends with this
    process: the session's server kills a child whose client is gone."""
    if not (os.environ.get(VARIABLE) and wanted()):
        return None
    if preload in _NESTED:
        server, address = _NESTED.pop(preload)
        if not select.select([server._connection], [], [], 0)[0]:  # no return code came: it serves still
            _NESTED[preload] = server, address
            return address
        server.close()
    # Beside the session's socket, where there is one: the test session removes that folder at its end, however the
    # process that made this one exits.
    session_folder = os.path.dirname(os.environ[VARIABLE])
    folder = tempfile.mkdtemp(prefix="workbook-nested-", dir=session_folder if os.path.isdir(session_folder) else None)
    address = os.path.join(folder, "socket")
    program = (f"from helpers import forkserver\n"
               f"forkserver._serve({address!r}, {list(preload)!r}, until_stdin_closes=False, huge_pages=False)")
    with open(os.devnull, "w") as null:
        server = spawn(program, dict(os.environ), os.getcwd(), null.fileno(), null.fileno())
    if isinstance(server, NewPython):  # the session's server is gone: no nesting
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
        return None
    while not os.path.exists(address):  # bound before it imports anything: a few milliseconds
        if select.select([server._connection], [], [], 0.01)[0]:  # it exited (its return code came)
            server.close()
            shutil.rmtree(folder, ignore_errors=True)
            return None
    _NESTED[preload] = server, address
    atexit.register(shutil.rmtree, folder, ignore_errors=True)  # the socket: the server, killed, leaves it
    return address


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


def _serve(address: str, preload: list[str], until_stdin_closes: bool = True, huge_pages: bool = True) -> None:
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
    # cpp_extension warns at import, on a machine without CUDA, that it found none: once here, for no child.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    with warnings.catch_warnings():  # the JIT's deprecation warning at that import: the server's, not a child's
        warnings.simplefilter("ignore", FutureWarning)
        for module in preload:
            importlib.import_module(module)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.NOTSET)
    # What the imports made, kept out of every child's garbage collections: a full collection walks every object and
    # writes into each, so a child's first one copied the server's whole heap (a quarter of a second of a check that
    # calls gc.collect(); tests/test_forkserver.py). A child's own objects are collected as usual.
    gc.freeze()
    if huge_pages:  # not in a nested server: its inherited memory, moved, would be copied
        in_huge_pages()
    # What the imports made that Python finalizes at its exit (torch.library's Library objects, two hundred of them,
    # each taken out of the dispatcher's tables: 30 ms of CPU time, a third of a quick check's) is the server's: a
    # child's exit runs only the finalizers of what the child made. Nothing a child or its caller sees changes: the
    # child ends right after (tests/test_forkserver.py compares a child's output with a new Python's).
    for finalizer in list(weakref.finalize._registry):  # noqa: SLF001 - the registry of every live finalize
        finalizer.atexit = False
    # One loop, no thread: each child is forked from this process, and watched through two descriptors, its client's
    # connection (readable: the client is gone, kill the child) and its pidfd (readable: it exited, send the code).
    children: dict[int, tuple[socket.socket, int, str]] = {}  # pidfd -> (connection, pid, temporary folder)
    killed: set[int] = set()  # pidfds of children killed, not yet exited
    lifeline = [sys.stdin] if until_stdin_closes else []  # a nested server ends when its parent kills it
    while True:
        clients = {connection.fileno(): pidfd for pidfd, (connection, *_) in children.items() if pidfd not in killed}
        ready, _, _ = select.select([listener, *lifeline, *children, *clients], [], [])
        if sys.stdin in ready:  # closed: the test session is over, and so are the children still running
            for pidfd, (_, pid, folder) in children.items():  # a nested server among them: it never ends by itself
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                os.waitpid(pid, 0)
                shutil.rmtree(folder, ignore_errors=True)
            os.unlink(address)
            os._exit(0)  # at once: no interpreter teardown (a second, with torch loaded)
        for fd in ready:
            if fd in children:  # exited
                connection, pid, folder = children.pop(fd)
                killed.discard(fd)
                _, status = os.waitpid(pid, 0)
                shutil.rmtree(folder, ignore_errors=True)  # gone before the caller hears that the child ended
                with contextlib.suppress(OSError):  # the client may be gone already
                    connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                connection.close()
                os.close(fd)
            elif fd in clients and clients[fd] in children:  # the client closed its end first: kill the child
                signal.pidfd_send_signal(clients[fd], signal.SIGKILL)
                killed.add(clients[fd])
        if listener in ready:
            connection = listener.accept()[0]
            with contextlib.suppress(OSError):  # a client that went away before its child started
                pidfd, pid, folder = _start(connection, [listener, *(c for c, *_ in children.values()), *children])
                children[pidfd] = connection, pid, folder
                continue
            connection.close()


HUGE_PAGE = 2 << 20
MADV_COLLAPSE = 25  # linux/mman.h; Linux 6.1 on


def libc_madvise():
    """The C library's madvise(address, length, advice) -> 0, or -1 where the kernel refuses."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc.madvise


def in_huge_pages() -> int:
    """Move this process's writable anonymous memory (the objects of its imports: 400 MB here) into 2 MB pages, and
    return how many bytes moved. fork() copies a process's page tables: one entry per 4 kB page, a hundred thousand
    for the server, against one per 2 MB page. Measured here (AVX512, Linux 6.18): a child that does nothing 27 -> 8 ms
    of fork and exit, an exercise check 54 -> 37 ms, for one second once (tests/test_forkserver.py checks that a child
    starts with them). Where the kernel cannot (before Linux 6.1, or no huge page free), madvise refuses and nothing
    changes: a child is the same process either way."""
    madvise, moved = libc_madvise(), 0
    with open("/proc/self/maps") as maps:
        for line in maps:  # "start-end perms offset device inode [path]"
            fields = line.split()
            if (len(fields) > 5 and fields[5] != "[heap]") or not fields[1].startswith("rw"):
                continue  # a file's mapping (a library's code and data), or memory not written to
            start, end = (int(address, 16) for address in fields[0].split("-"))
            start = -(-start // HUGE_PAGE) * HUGE_PAGE  # the whole huge pages inside
            end = end // HUGE_PAGE * HUGE_PAGE
            if end > start and madvise(start, end - start, MADV_COLLAPSE) == 0:
                moved += end - start
    return moved


def _start(connection: socket.socket, not_for_the_child: list) -> tuple[int, int, str]:
    """Fork the child a client asked for and tell the client its pid: (its pidfd, its pid, its temporary folder).

    A child ends at once (os._exit), without the teardown of a new Python's exit, which frees what the program's
    modules hold: AOTInductor's package loader, freed, removes the folder it unpacked the package into
    (/tmp/aotinductor_*), and a child's was left behind. So each child's temporary folder ($TMPDIR) is a folder of its
    own, inside the one its caller named, which the server removes once the child has exited, killed or not."""
    _, fds, _, _ = socket.recv_fds(connection, 1, 2)
    request = b""
    while not request.endswith(b"\n"):  # the client sends its request at once, whole
        if not (received := connection.recv(65536)):
            raise ConnectionResetError("the client left before it sent its request")
        request += received
    request = json.loads(request)
    asked = request["env"].get("TMPDIR")
    folder = tempfile.mkdtemp(prefix="workbook-child-", dir=asked if asked and os.path.isdir(asked) else None)
    request["env"]["TMPDIR"] = folder
    try:
        pid = os.fork()
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if pid == 0:
        for other in not_for_the_child:  # another client's end stays with the server alone
            other.close() if isinstance(other, socket.socket) else os.close(other)
        connection.close()
        try:
            _execute(request, *fds)  # exits the child
        except BaseException:  # noqa: BLE001 - it could not start the program (a missing cwd)
            traceback.print_exc()
            os._exit(1)
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    try:
        connection.sendall(f"{pid}\n".encode())
    except OSError:  # the client is gone: so is its child
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(pidfd)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return pidfd, pid, folder


def _execute(request: dict, stdout: int, stderr: int) -> None:
    """Become `python -c program`: its streams, directory, environment, sys.argv and sys.path[0], a new __main__."""
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((null, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read from $TMPDIR again, as a new Python would
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
    _serve(sys.argv[1], sys.argv[2:])
