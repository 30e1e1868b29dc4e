"""One live line per build: an updating line in JupyterLab, plain lines on stderr elsewhere.

    with progress.Line("layer 'cpu' (cpu.cpp)"):
        compile_it()

In a notebook the line counts seconds while the body runs, then says "built ... in 9.1 s" or "failed".
(Written to stderr instead, each line of a build log would show as a red block.) The line is HTML
only, and nbval is told not to compare text/html (conftest.py): a notebook's stored outputs stay the
same whether a run compiled its layers or found them built.
"""

from __future__ import annotations

import html
import re
import sys
import threading
import time


def in_jupyter() -> bool:
    """Whether this code runs in a Jupyter kernel (JupyterLab, nbclient, nbval), which can show HTML."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython else None
    return getattr(shell, "kernel", None) is not None


class Line:
    def __init__(self, what: str, every: float | None = None):
        self.what = what
        self.jupyter = in_jupyter()
        # seconds between updates (on stderr each is a new line, so fewer)
        self.every = every if every is not None else 1.0 if self.jupyter else 10.0
        self._lock = threading.Lock()  # the ticking thread never overwrites the final state
        self._done = False

    def __enter__(self) -> Line:
        self._start = time.perf_counter()
        if self.jupyter:
            from IPython.display import display

            self._handle = display(self._html("⏳", f"building {self.what} ...", "#555"), raw=True, display_id=True)
        else:
            print(f"Building {self.what} ...", file=sys.stderr)
        threading.Thread(target=self._tick, daemon=True).start()
        return self

    def _tick(self) -> None:
        while True:
            time.sleep(self.every)
            with self._lock:
                if self._done:
                    return
                seconds = time.perf_counter() - self._start
                if self.jupyter:
                    html = self._html("⏳", f"building {self.what} ... {seconds:.0f} s", "#555")
                    self._handle.update(html, raw=True)
                else:
                    print(f"  ... still building {self.what} ({seconds:.0f} s)", file=sys.stderr)

    def __exit__(self, error_type, error, traceback) -> None:
        with self._lock:
            self._done = True
            seconds = time.perf_counter() - self._start
            ok = error_type is None
            text = f"built {self.what} in {seconds:.1f} s" if ok else f"{self.what}: failed after {seconds:.1f} s"
            if self.jupyter:
                self._handle.update(self._html("✔" if ok else "✘", text, "#2e7d32" if ok else "#c62828"), raw=True)
            else:
                print(text[0].upper() + text[1:], file=sys.stderr)

    @staticmethod
    def _html(mark: str, text: str, color: str) -> dict:
        return {"text/html": f'<pre style="margin:0; color:{color}">{mark} {html.escape(text)}</pre>'}


def is_progress_line(line: str) -> bool:
    """Whether `line` is one Line printed on stderr (outside Jupyter): such lines say how long a build took, which
    varies from run to run, so a stored output must never quote them."""
    return _PROGRESS_LINE.fullmatch(line) is not None


_PROGRESS_LINE = re.compile(r"Building .* \.\.\.|  \.\.\. still building .* \(\d+ s\)|Built .* in [\d.]+ s"
                            r"|.*: failed after [\d.]+ s")

