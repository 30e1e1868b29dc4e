"""pytest configuration for the whole run: the notebooks under nbval, the session's fork server, the order in which
files go to the workers (the unit tests' fixtures: tests/conftest.py)."""

import collections
import json
import os
import pathlib
import shutil
import tempfile

import pytest

# Exercise checks run on the untouched skeletons, never on a reader's copies in my_exercises/: the notebooks' stored
# outputs are those of the skeletons (exercises/__init__.py). The notebooks' kernels inherit this.
os.environ["WORKBOOK_EXERCISES"] = "skeletons"

# OpenMP threads that wait for each other sleep instead of spinning. The test command runs three workers on two cores
# (Makefile), each with OpenMP threads in torch and in the workbook's kernels: a thread spinning for a peer that is
# not scheduled burns the core another worker needs (measured: the warm run took a quarter longer spinning, and
# lesson 02's kernel table four times as long).
# Results do not change: the same threads split the same work.
# Set before anything imports torch, whose OpenMP runtime reads it once, at load; kernels and child processes
# inherit it. A reader's JupyterLab runs one kernel and keeps OpenMP's default.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The lessons' measurements short (bench/timing.py: 3 rounds, not 9; samples of 2 ms): nbval compares none of their
# numbers.
os.environ.setdefault("WORKBOOK_QUICK_TIMING", "1")


# The notebooks' kernel: ipykernel forked from the session's fork server (helpers/forked_kernel.py), found in
# .jupyter/kernels/ (JupyterLab, without this path, offers only the usual kernel). A kernel named on the command line
# (--nbval-kernel-name, --nbval-current-env) wins.
os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [os.path.join(os.path.dirname(__file__), ".jupyter"),
                                                          os.environ.get("JUPYTER_PATH")]))
FORKED_KERNEL = "workbook-forked"


def pytest_configure(config):
    # One fork server for the session (helpers/forkserver.py): isolated.run, in pytest's workers and in the notebooks'
    # kernels (both inherit its address), forks a child from it instead of starting a Python that imports torch again.
    # WORKBOOK_FORK=0, any system but Linux, and a machine with a GPU: no server, and the notebooks run in the usual
    # kernel.
    from helpers import forkserver

    if not forkserver.wanted():
        return
    if not (config.option.nbval_kernel_name or config.option.nbval_current_env):
        config.option.nbval_kernel_name = FORKED_KERNEL
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the main process started it
        return
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


# How pytest-xdist hands out the work (Makefile: --dist loadfile --no-loadscope-reorder): a file at a time, so that a
# notebook, and a test file's module fixtures, stay on one worker; but test_exercise_mistakes.py an exercise at a
# time, its longest part by far, which on one worker would end the run alone. Longest first, by each part's duration in
# the runs before (kept in build/, beside the compiled layers), so that no long part starts last; a first run, with
# nothing measured, keeps collection order.
DURATIONS = "test_durations.json"
_measured: dict[str, float] = collections.defaultdict(float)


def _part(nodeid: str) -> str:
    """The unit of work a node belongs to: its file, or for a mistake, its exercise's mistakes."""
    if nodeid.startswith("tests/test_exercise_mistakes.py::"):
        return nodeid.split("-", 1)[0]  # test_check_catches_the_mistake[<exercise id>-<mistake name>]
    return nodeid.split("::")[0]


@pytest.hookimpl(optionalhook=True)  # known only where pytest-xdist is loaded
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadFileScheduling

    class ByPart(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _part(nodeid)

    return ByPart(config, log)


def _durations_file(config) -> pathlib.Path:
    return pathlib.Path(os.environ.get("WORKBOOK_BUILD_DIR", config.rootpath / "build")) / DURATIONS


def pytest_collection_modifyitems(config, items):
    durations_file = _durations_file(config)
    durations = json.loads(durations_file.read_text()) if durations_file.exists() else {}
    items.sort(key=lambda item: -durations.get(_part(item.nodeid), 0.0))


def pytest_runtest_logreport(report):
    _measured[_part(report.nodeid)] += report.duration  # in the main process: every worker's reports


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput") or not _measured:
        return
    durations_file = _durations_file(session.config)
    durations = json.loads(durations_file.read_text()) if durations_file.exists() else {}
    durations_file.parent.mkdir(parents=True, exist_ok=True)
    durations_file.write_text(json.dumps({**durations, **_measured}, indent=1, sort_keys=True))
