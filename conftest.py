"""pytest configuration for the whole run: the notebooks under nbval, the session's fork server, the order in which
files go to the workers (the unit tests' fixtures: tests/conftest.py)."""

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


# The notebooks' kernel: ipykernel forked from the session's fork server (helpers/forked_kernel.py), found in
# .jupyter/kernels/ (JupyterLab, without this path, offers only the usual kernel). A kernel named on the command line
# (--nbval-kernel-name, --nbval-current-env) wins.
os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [os.path.join(os.path.dirname(__file__), ".jupyter"),
                                                          os.environ.get("JUPYTER_PATH")]))
FORKED_KERNEL = "workbook-forked"


def pytest_configure(config):
    if not (config.option.nbval_kernel_name or config.option.nbval_current_env):
        config.option.nbval_kernel_name = FORKED_KERNEL
    # One fork server for the session (helpers/forkserver.py): isolated.run, in pytest's workers and in the notebooks'
    # kernels (both inherit its address), forks a child from it instead of starting a Python that imports torch again.
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the main process started it
        return
    from helpers import forkserver

    folder = tempfile.mkdtemp(prefix="workbook-forkserver-")
    address = os.path.join(folder, "socket")
    server = forkserver.start(address)
    os.environ[forkserver.VARIABLE] = address

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


# The order in which pytest-xdist hands out files (Makefile: --no-loadscope-reorder; one file per worker at a time).
# First the nvcc check: cold, it needs none of the workbook's layers, and keeps a core busy while another compiles the
# precompiled header and the first layers. Then the files that take longest warm (seconds on a worker, 2-core AVX2
# machine: 25, 24, 21, 20, 17, 17, 15, 13), so that none of them starts last and keeps one worker busy alone at the
# end. The rest in collection order.
FIRST = ["tests/test_cuda.py", "notebooks/06_composition.ipynb", "tests/test_exercise_mistakes.py",
         "notebooks/07_dispatch_cost.ipynb", "tests/test_exercises.py", "notebooks/08_shipping.ipynb",
         "notebooks/09_own_backend.ipynb", "notebooks/02_backend_kernels.ipynb", "tests/test_shipping.py"]


def pytest_collection_modifyitems(config, items):
    def rank(item):
        path = item.path.relative_to(config.rootpath).as_posix()
        return FIRST.index(path) if path in FIRST else len(FIRST)

    items.sort(key=rank)
