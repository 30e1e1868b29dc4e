"""pytest configuration for the notebooks, which run under nbval (unit tests: tests/conftest.py)."""

import os

# Exercise checks run on the untouched skeletons, never on a reader's copies in my_exercises/: the notebooks' stored
# outputs are those of the skeletons (exercises/__init__.py). The notebooks' kernels inherit this.
os.environ["WORKBOOK_EXERCISES"] = "skeletons"


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
