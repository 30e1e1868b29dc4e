"""pytest configuration for the notebooks, which run under nbval (unit tests: tests/conftest.py)."""


def pytest_collectstart(collector):
    # Build logs, progress lines and warnings go to stderr by design; compare only stdout and results.
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
