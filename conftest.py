"""pytest configuration shared by the unit tests and the notebooks (run under nbval)."""

import os

# Figures render off-screen in tests; notebooks use Jupyter's inline backend regardless.
os.environ.setdefault("MPLBACKEND", "Agg")


def pytest_collectstart(collector):
    # Build logs, progress lines and warnings go to stderr by design; compare only stdout and results.
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
