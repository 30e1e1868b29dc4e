"""pytest configuration for the notebooks, which run under nbval (unit tests: tests/conftest.py)."""

import os
import shutil
import tempfile

# Exercise checks run on the untouched skeletons, never on a reader's copies in my_exercises/: the notebooks' stored
# outputs are those of the skeletons (exercises/__init__.py). The notebooks' kernels inherit this.
os.environ["WORKBOOK_EXERCISES"] = "skeletons"

# OpenMP threads that wait for each other sleep instead of spinning. The test command runs three workers on two cores
# (Makefile), each with OpenMP threads in torch and in the workbook's kernels: a thread spinning for a peer that is
# not scheduled burns the core another worker needs. Warm runs on 2 cores (AVX2), pytest's time: 2 min 38 s and
# 2 min 49 s spinning, 1 min 51 s to 2 min 24 s (five runs) not; lesson 02's kernel table, 18.8 s -> 4.0 s.
# Results do not change: the same threads split the same work.
# Set before anything imports torch, whose OpenMP runtime reads it once, at load; kernels and child processes
# inherit it. A reader's JupyterLab runs one kernel and keeps OpenMP's default.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_configure(config):
    # One fork server for the session (helpers/forkserver.py): isolated.run, in pytest's workers and in the notebooks'
    # kernels (both inherit its address), forks a child from it instead of starting a Python that imports torch again.
    from helpers import forkserver

    if os.environ.get(forkserver.VARIABLE):  # a pytest-xdist worker: the controller started it
        return
    folder = tempfile.mkdtemp(prefix="workbook-forkserver-")
    server = forkserver.start(os.path.join(folder, "socket"))
    os.environ[forkserver.VARIABLE] = os.path.join(folder, "socket")

    def stop():
        server.stdin.close()
        server.wait(timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
        del os.environ[forkserver.VARIABLE]

    config.add_cleanup(stop)


def pytest_collectstart(collector):
    # Not compared: stderr (warnings, the compiler probe's report) and text/html, which only the build
    # progress lines use alone (helpers/progress.py); every other HTML output also has a text/plain
    # form, which is compared.
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr", "text/html")


def pytest_collection_modifyitems(items):
    # The files that need none of the workbook's layers run first. On a cold run (nothing built yet)
    # one worker then runs them while the other compiles the layers everyone needs, instead of both
    # waiting for the same compile. (pytest-xdist hands out files in this order.)
    needs_no_layer = ("test_cuda.py", "test_build.py")
    items.sort(key=lambda item: item.path.name not in needs_no_layer)
