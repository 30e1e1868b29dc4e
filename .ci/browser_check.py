"""Open a lesson in JupyterLab in a real (headless) Chromium, run all its cells through the UI, and check
what a reader would see: no cell error, the kernel still alive, every figure rendered as an image.

    make browser-check                      (lesson 00)
    make browser-check LESSON=03_fallthrough

The lesson is copied into build/browser-check/ and saved there after the run, so the checkout stays
clean; the screenshot is build/browser-check/<lesson>.png. JupyterLab starts with the project's settings
(.jupyter/settings) and fresh user settings, as on a first run. Needs Chromium (Debian: chromium).
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "build" / "browser-check"
# Without the networking flags Chromium keeps trying to reach Google's hosts from a closed network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_jupyterlab(root: Path, port: int, token: str, fresh_home: Path) -> subprocess.Popen:
    command = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", f"--port={port}",
               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
               f"--LabApp.app_settings_dir={REPO / '.jupyter' / 'settings'}",
               f"--LabApp.user_settings_dir={fresh_home / 'user-settings'}",
               f"--LabApp.workspaces_dir={fresh_home / 'workspaces'}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = open(OUT / "jupyterlab.log", "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=1)
            return server
        except OSError:
            if server.poll() is not None:
                sys.exit(f"JupyterLab exited (rc {server.returncode}); see {OUT / 'jupyterlab.log'}")
            time.sleep(0.5)
    server.kill()
    sys.exit(f"JupyterLab did not answer on port {port} within 60 s; see {OUT / 'jupyterlab.log'}")


def menu_command(page, menu: str, command: str) -> None:
    page.click(f".lm-MenuBar-item:has-text('{menu}')")
    page.click(f"li[data-command='{command}']")


def run_all_cells(page, timeout_s: float) -> None:
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
    menu_command(page, "Edit", "editmenu:clear-all")  # old outputs away, then run
    # JupyterLab can drop a "Run All" clicked before the notebook is ready to run it: once in six runs here, the
    # kernel stayed idle and every prompt empty until the timeout. Click again until a cell has started.
    for _ in range(3):
        menu_command(page, "Run", "runmenu:run-all")
        try:
            page.wait_for_function("""() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                .some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))""", timeout=30_000, polling=500)
            break
        except PlaywrightTimeout:
            continue
    else:
        raise RuntimeError("'Run All' started no cell, three times")
    # Done when every code cell shows an execution count and the kernel is idle again.
    page.wait_for_function("""() => {
        const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent);
        const idle = document.querySelector(".jp-Notebook-ExecutionIndicator[data-status='idle']");
        return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p)) && idle !== null;
    }""", timeout=timeout_s * 1000, polling=1000)
    page.keyboard.press("Control+s")
    page.wait_for_timeout(1500)


def check(lesson: str, timeout_s: float = 600) -> list[str]:
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("browser check SKIPPED: no Chromium found (Debian/Ubuntu: apt install chromium; or set CHROMIUM)")
        return []
    OUT.mkdir(parents=True, exist_ok=True)
    root = OUT / "lessons"
    root.mkdir(exist_ok=True)
    shutil.copy(REPO / "notebooks" / f"{lesson}.ipynb", root)
    port, token = free_port(), secrets.token_hex(16)
    problems = []
    with tempfile.TemporaryDirectory() as fresh_home:
        server = start_jupyterlab(root, port, token, Path(fresh_home))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1800})
                start = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/lab/tree/{lesson}.ipynb?token={token}")
                run_all_cells(page, timeout_s)
                print(f"ran {lesson} through JupyterLab in {time.perf_counter() - start:.0f} s")
                if page.get_by_text("Jupyter news").count():
                    problems.append("the 'Jupyter news' pop-up is shown (project settings not applied)")
                images = page.locator(".jp-RenderedImage img")
                widths = images.evaluate_all("images => images.map(i => i.naturalWidth)")
                if not widths or min(widths) == 0:
                    problems.append(f"figures not rendered as images (natural widths: {widths})")
                if widths:
                    images.first.scroll_into_view_if_needed()
                page.screenshot(path=str(OUT / f"{lesson}.png"))
                browser.close()
            kernels = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernels?token={token}"))
            states = [kernel["execution_state"] for kernel in kernels]
            if states != ["idle"]:
                problems.append(f"kernel not alive and idle after the run: {states}")
        finally:
            server.terminate()
            server.wait(timeout=30)
    saved = json.loads((root / f"{lesson}.ipynb").read_text())
    for index, cell in enumerate(c for c in saved["cells"] if c["cell_type"] == "code"):
        expected = "raises-exception" in cell["metadata"].get("tags", [])
        for output in cell.get("outputs", []):
            if output["output_type"] == "error" and not expected:
                problems.append(f"code cell {index}: {output['ename']}: {output['evalue']}")
    images_saved = sum("image/png" in o.get("data", {}) for c in saved["cells"] for o in c.get("outputs", []))
    print(f"{len(widths)} figures rendered, {images_saved} saved; kernel states after the run: {states}")
    print(f"screenshot: {(OUT / f'{lesson}.png').relative_to(REPO)}")
    return problems


if __name__ == "__main__":
    found = check(sys.argv[1] if len(sys.argv) > 1 else "00_dispatcher_tour")
    for problem in found:
        print("FAIL:", problem)
    sys.exit(1 if found else 0)
