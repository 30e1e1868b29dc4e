"""helpers/forkserver.py: a child of the fork server behaves as the new Python isolated.run starts without it, and
without a server (WORKBOOK_FORK=0, or a server that is gone) every fresh process is a new Python. (The programs import
no torch, which would cost each new Python seconds. The lessons' demonstrations, which all import it, run through the
server under nbval, and their stored outputs come from new Pythons: make execute runs no server.)"""

import ctypes
import mmap
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest
from jupyter_client.manager import start_new_kernel

from helpers import forkserver, isolated

PROGRAMS = {
    "output on both streams": "import sys; print('out'); print('err', file=sys.stderr)",
    "an exception": "raise ValueError('raised in the program')",
    "sys.exit(3)": "import sys; sys.exit(3)",
    "sys.exit()": "import sys; print('leaving'); sys.exit()",
    "sys.exit with a message": "import sys; sys.exit('a message')",
    "an abort": "import os; print('before', flush=True); os.abort()",
    "__main__, argv, sys.path[0], cwd": "import os, sys; print(__name__, sys.argv, repr(sys.path[0]), os.getcwd())",
    "the environment": "import os; print(os.environ['WORKBOOK_TEST_VARIABLE'])",
    "an atexit handler": "import atexit; atexit.register(print, 'at exit'); print('main')",
    "a finalizer at exit": ("import weakref\nclass Kept: pass\nkept = Kept()\n"
                            "weakref.finalize(kept, print, 'finalized at exit'); print('main')"),
    "no workbook module": "import sys; print([name for name in ('helpers', 'exercises') if name in sys.modules])",
}


with_the_sessions_server = pytest.mark.skipif(not forkserver.wanted(), reason="WORKBOOK_FORK=0: no fork server")


@pytest.fixture
def new_python(monkeypatch):
    """isolated.run as it runs outside the test command: a new Python each time."""
    def run(code, **kwargs):
        with monkeypatch.context() as patch:
            patch.delenv(forkserver.VARIABLE)
            return isolated.run(code, **kwargs)
    return run


@with_the_sessions_server
@pytest.mark.parametrize("program", PROGRAMS.values(), ids=PROGRAMS.keys())
def test_a_child_of_the_server_gives_what_a_new_python_gives(program, new_python):
    assert os.environ.get(forkserver.VARIABLE), "the root conftest.py starts a server for the session"
    env = {"WORKBOOK_TEST_VARIABLE": "passed"}
    forked, fresh = isolated.run(program, env=env), new_python(program, env=env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_what_a_child_imports_or_sets_is_gone_for_the_next():
    isolated.run("import wave, os; os.environ['LEFT_BEHIND'] = '1'")
    assert isolated.run("import os, sys; print('wave' in sys.modules, 'LEFT_BEHIND' in os.environ)").stdout == \
        "False False\n"


def test_a_child_past_its_timeout_is_killed():
    with pytest.raises(subprocess.TimeoutExpired):
        isolated.run("import time; time.sleep(60)", timeout=1)
    assert isolated.run("print('the server still serves')").stdout == "the server still serves\n"


def gone(pid: int, within: float = 10) -> bool:
    """Whether process `pid` ends within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@with_the_sessions_server
def test_a_child_whose_client_is_gone_is_killed():
    child = forkserver.spawn("import time; time.sleep(60)", dict(os.environ), os.getcwd(), 1, 2)
    child.close()
    assert gone(child.pid)


@with_the_sessions_server
def test_children_run_side_by_side_and_a_client_that_leaves_unserved_is_harmless():
    # One loop serves every client (helpers/forkserver.py, _serve): a child that runs on blocks no other.
    slow = forkserver.spawn("import time; time.sleep(60)", dict(os.environ), os.getcwd(), 1, 2)
    try:
        leaving = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        leaving.connect(os.environ[forkserver.VARIABLE])
        leaving.close()  # before sending its request
        assert isolated.run("print('served')", timeout=10).stdout == "served\n"
    finally:
        slow.close()
    assert gone(slow.pid)


@with_the_sessions_server
def test_the_forked_kernel_runs_is_interrupted_and_ends_with_its_launcher():
    """helpers/forked_kernel.py, as nbval starts it (the root conftest.py names its kernelspec)."""
    manager, client = start_new_kernel(kernel_name="workbook-forked")

    def run(code):
        outputs = []
        reply = client.execute_interactive(code, timeout=60, output_hook=lambda message: outputs.append(
            message["content"].get("text") or message["content"].get("ename", "")))
        return reply["content"]["status"], "".join(outputs)

    try:
        launcher = manager.provisioner.pid
        status, kernel = run("import os, sys; print(os.getpid(), 'torch' in sys.modules)")
        kernel, preloaded = kernel.split()
        assert (status, preloaded) == ("ok", "True"), "a child of the fork server, which imported torch"
        threading.Timer(1, manager.interrupt_kernel).start()
        assert run("import time; time.sleep(60)") == ("error", "KeyboardInterrupt")
        assert run("print('still running')") == ("ok", "still running\n")
        os.kill(launcher, signal.SIGKILL)  # what jupyter_client does when a kernel will not shut down
        assert gone(int(kernel))
    finally:
        client.stop_channels()
        # Reaps the launcher too (killed above, or still running): a Popen never waited for warns when collected
        # ("subprocess ... is still running"), and in a later test that makes warnings errors, it fails that test.
        manager.shutdown_kernel(now=True)


@with_the_sessions_server
def test_the_server_outlives_an_interrupt_and_its_children_are_interruptible(monkeypatch, tmp_path):
    # A Jupyter kernel's interrupt or shutdown, or Ctrl-C, signals the whole process group: the reader's server must
    # go on serving (it used to print a KeyboardInterrupt traceback and die), and a program it runs must still get
    # Python's KeyboardInterrupt.
    address = str(tmp_path / "socket")
    server = forkserver.start(address, preload=())  # torch's import is not what is tested: seconds saved
    monkeypatch.setenv(forkserver.VARIABLE, address)
    try:
        server.send_signal(signal.SIGINT)
        assert not gone(server.pid, within=0.5)
        interrupted = forkserver.run("import os, signal\ntry:\n    os.kill(os.getpid(), signal.SIGINT)\n"
                                     "except KeyboardInterrupt:\n    print('KeyboardInterrupt')",
                                     dict(os.environ), str(tmp_path), 60)
        assert interrupted.stdout == "KeyboardInterrupt\n" and interrupted.stderr == ""
    finally:
        server.stdin.close()
        server.wait(timeout=60)


@with_the_sessions_server
def test_a_childs_collections_walk_its_own_objects_only():
    # The objects of the server's imports are frozen (gc.freeze): a child's full collection skips them, instead of
    # writing into each and so copying the server's heap; a cycle the child makes is still collected.
    program = ("import gc, weakref\nclass Node: pass\nnode = Node(); node.me = node; alive = weakref.ref(node)\n"
               "del node; gc.collect(); print(gc.get_freeze_count() > 100_000, alive() is None)")
    assert isolated.run(program).stdout == "True True\n"


@with_the_sessions_server
def test_a_childs_exit_finalizes_only_what_the_child_made():
    # torch's import makes two hundred Library objects that Python finalizes at exit (each taken out of the
    # dispatcher's tables): the server's, not run again at each child's exit. The child's own still are (PROGRAMS).
    program = "import weakref; print(sum(finalizer.atexit for finalizer in weakref.finalize._registry))"
    assert isolated.run(program).stdout == "0\n"


@with_the_sessions_server
def test_a_childs_temporary_folder_is_its_own_and_goes_with_it(tmp_path):
    # A child ends without a new Python's teardown: what its modules hold is never freed (AOTInductor's loader, freed,
    # removes the folder it unpacked a package into). So the server removes the child's $TMPDIR once it has exited.
    program = ("import os, tempfile; folder = tempfile.mkdtemp(); open(os.path.join(folder, 'left'), 'w').close(); "
               "print(os.environ['TMPDIR'], folder)")
    child_folder, made = isolated.run(program, env={"TMPDIR": str(tmp_path)}).stdout.split()
    assert os.path.dirname(child_folder) == str(tmp_path) and made.startswith(child_folder + os.sep)
    assert list(tmp_path.iterdir()) == []  # removed before the server sends the exit code


def huge_pages_here() -> bool:
    """Whether this kernel moves memory into huge pages when asked (Linux 6.1 on, a huge page free)."""
    with mmap.mmap(-1, 2 * forkserver.HUGE_PAGE) as memory:
        memory.write(b"x" * len(memory))
        start = ctypes.addressof(ctypes.c_char.from_buffer(memory))
        start = -(-start // forkserver.HUGE_PAGE) * forkserver.HUGE_PAGE
        return forkserver.libc_madvise()(start, forkserver.HUGE_PAGE, forkserver.MADV_COLLAPSE) == 0


@with_the_sessions_server
def test_a_child_starts_with_the_servers_memory_in_huge_pages():
    # A fork copies one page-table entry per page: the server's imports in 2 MB pages make each child cheaper.
    if not huge_pages_here():
        pytest.skip("this kernel does not move memory into huge pages on request (MADV_COLLAPSE: Linux 6.1 on)")
    program = "print(int(open('/proc/self/smaps_rollup').read().split('AnonHugePages:')[1].split()[0]) // 1024)"
    assert int(isolated.run(program).stdout) > 100  # MB, of the server's 400


def preloaded(run) -> str:
    """Whether the process that ran a program had imported torch before it: a child of the server has."""
    return run("import sys; print('torch' in sys.modules)").stdout


@with_the_sessions_server
def test_with_fork_0_every_fresh_process_is_a_new_python(monkeypatch):
    assert preloaded(isolated.run) == "True\n"
    monkeypatch.setenv(forkserver.SWITCH, "0")
    assert preloaded(isolated.run) == "False\n"
    with pytest.raises(subprocess.TimeoutExpired):
        isolated.run("import time; time.sleep(60)", timeout=1)
    child = forkserver.spawn("import time; time.sleep(60)", dict(os.environ), os.getcwd(), 1, 2)
    child.close()
    assert gone(child.pid, within=1)  # killed and reaped by close()


@with_the_sessions_server
def test_a_server_that_stops_ends_its_children_too(tmp_path):
    # A nested server (the checks') never ends by itself: the session's server, stopping, kills what still runs, and
    # removes each child's temporary folder.
    address = str(tmp_path / "socket")
    server = forkserver.start(address, preload=())
    child = forkserver.spawn("import time; time.sleep(60)", {**os.environ, "TMPDIR": str(tmp_path)}, os.getcwd(), 1, 2,
                             address=address)
    server.stdin.close()
    assert server.wait(timeout=10) == 0
    assert gone(child.pid, within=1) and list(tmp_path.iterdir()) == []
    child.close()


def test_a_server_that_is_gone_is_bypassed(monkeypatch, tmp_path):
    # A variable inherited from a test session that ended: a new Python runs the program, nothing to decode.
    monkeypatch.setenv(forkserver.VARIABLE, str(tmp_path / "socket"))
    assert preloaded(isolated.run) == "False\n"


@with_the_sessions_server
def test_a_child_of_the_server_cannot_start_cuda():
    # torch marks it a bad fork (torch.cuda._is_in_bad_fork, private): its CUDA initialization refuses to run. Hence
    # no server where there is a GPU (forkserver.wanted). A CPU-only build of torch (the CPU wheel) never asks CUDA,
    # so it marks nothing.
    import torch

    built_with_cuda = torch.version.cuda is not None
    assert isolated.run("import torch; print(torch.cuda._is_in_bad_fork())").stdout == f"{built_with_cuda}\n"


@pytest.mark.parametrize(("system", "switch", "gpu", "wanted"),
                         [("linux", None, False, True), ("darwin", None, False, False), ("win32", None, False, False),
                          ("linux", "0", False, False), ("darwin", "1", False, False), ("linux", "1", False, True),
                          ("linux", None, True, False), ("linux", "1", True, False)])
def test_the_server_is_wanted_on_linux_without_a_gpu_unless_the_switch_says_otherwise(monkeypatch, tmp_path, system,
                                                                                       switch, gpu, wanted):
    device = tmp_path / "nvidia0"
    if gpu:
        device.touch()
    monkeypatch.setattr(forkserver, "GPU_DEVICES", (str(device),))
    monkeypatch.setattr(forkserver.sys, "platform", system)
    if switch is None:
        monkeypatch.delenv(forkserver.SWITCH, raising=False)
    else:
        monkeypatch.setenv(forkserver.SWITCH, switch)
    assert forkserver.wanted() is wanted



@with_the_sessions_server
def test_a_check_forks_from_a_nested_server_that_imported_the_checks_and_a_dead_one_is_replaced():
    """exercises/runner.py's checks fork from a server of this process's own that has imported exercises.checks; the
    session's server, which the notebooks' kernels fork from too, still imports nothing of the workbook."""
    program = "import sys; print('exercises.checks' in sys.modules)"
    address = forkserver.nested(("exercises.checks",))
    assert address and forkserver.nested(("exercises.checks",)) == address  # one per process

    def printed_by_a_child(of: str | None) -> str:
        with tempfile.TemporaryFile("w+") as out:
            with forkserver.spawn(program, dict(os.environ), os.getcwd(), out.fileno(), out.fileno(),
                                  address=of) as child:
                assert child.wait(60) == 0
            out.seek(0)
            return out.read()

    assert (printed_by_a_child(address), printed_by_a_child(None)) == ("True\n", "False\n")
    server, _ = forkserver._NESTED[("exercises.checks",)]
    # One thread, the server's loop: the imports started none (a child would inherit a broken OpenMP pool).
    assert len(os.listdir(f"/proc/{server.pid}/task")) == 1
    os.kill(server.pid, signal.SIGKILL)
    assert gone(server.pid)
    replaced = forkserver.nested(("exercises.checks",))
    assert replaced and replaced != address and printed_by_a_child(replaced) == "True\n"
