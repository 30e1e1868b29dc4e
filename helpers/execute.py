"""Run notebooks top to bottom in a fresh kernel and store their outputs (what `make execute` does).

    python -m helpers.execute notebooks/00_dispatcher_tour.ipynb [...]

Stored outputs are what nbval compares against, so re-run a notebook this way after changing it or
anything it uses. A cell meant to fail carries the `raises-exception` tag (nbclient) and the
`# NBVAL_RAISES_EXCEPTION` comment (nbval).
"""

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path) -> float:
    os.environ["WORKBOOK_EXERCISES"] = "skeletons"  # stored outputs are the checks' on untouched skeletons
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # nbclient's timestamps: they would change every line of the diff
    nbformat.write(notebook, path)
    return time.perf_counter() - start


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {execute(Path(name)):.1f} s", flush=True)
