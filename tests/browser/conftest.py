"""Fixtures for the real-browser tests: a private JupyterLab on 127.0.0.1 and headless Chromium.

What was measured on this machine kind (see the project's docs/design/jupyter.md notes) and is relied on here:

* ``jupyter lab`` refuses to start as root without ``--allow-root``; it is ready in ~2 s.
* Three flags keep it off the network for good (news feed, update check, extension manager);
  the user-settings file below silences the news toast as well.
* It is stopped by its own PID with SIGTERM (it shuts its kernels down first, < 1 s);
  SIGINT is ignored by a backgrounded job. Sessions are deleted through the REST API before
  and after each test, because a kernel outlives the browser tab and a re-opened notebook
  would re-attach to the old kernel.
* Chromium is Debian's ``/usr/bin/chromium`` driven by Playwright's Python package through
  ``executable_path``; ``playwright install`` (a browser download) is never run.
* The server serves a COPY of the notebooks in a temporary directory: JupyterLab autosaves an
  open notebook, and the repository's notebooks must stay committed without outputs.

When Chromium or Playwright is missing the tests are skipped with the fix in the reason,
unless ``TOOLKIT_REQUIRE_BROWSER=1`` (set by ``.ci/run``), where a missing browser fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
TOKEN = "toolkit-browser-test"
# Flags measured to keep a headless Chromium quiet and working as root in a container.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAB_NO_NETWORK_FLAGS = [
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.extension_manager=readonly",
]


def _missing_browser() -> str | None:
    if not CHROMIUM.exists():
        return "Debian chromium is missing: apt-get update && apt-get install -y chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing: pip install playwright (never `playwright install`)"
    return None


@pytest.fixture(autouse=True, scope="session")
def _browser_available():
    reason = _missing_browser()
    if reason is None:
        return
    if os.environ.get("TOOLKIT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TOOLKIT_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LabServer:
    """A JupyterLab process we started, its URL, and REST helpers authenticated by token."""

    def __init__(self, process: subprocess.Popen, url: str, root_dir: Path, log_path: Path):
        self.process = process
        self.url = url
        self.root_dir = root_dir
        self.log_path = log_path

    def api(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}",
            method=method,
            data=data,
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def delete_sessions(self) -> int:
        """Shut every session (and so its kernel) down; returns how many there were."""
        sessions = self.api("GET", "/api/sessions") or []
        for session in sessions:
            self.api("DELETE", f"/api/sessions/{session['id']}")
        return len(sessions)

    def kernels(self) -> list:
        return self.api("GET", "/api/kernels") or []

    def notebook_url(self, relative_path: str) -> str:
        # ``reset`` ignores any saved workspace layout
        return f"{self.url}/lab/tree/{relative_path}?token={TOKEN}&reset"

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def _wait_ready(url: str, process: subprocess.Popen, timeout: float = 90.0) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with code {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return time.monotonic() - started
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"jupyter lab not ready after {timeout:.0f} s: {url}")


def _stop(process: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM our own server by PID (it shuts its kernels down first); SIGKILL if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def lab_server(_browser_available):
    """JupyterLab serving a temporary copy of notebooks/, isolated from the user's profile."""
    base = Path(tempfile.mkdtemp(prefix="toolkit-lab-", dir="/tmp"))
    config_dir = base / "config"
    settings = config_dir / "lab-user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    root_dir = base / "notebooks"
    shutil.copytree(NOTEBOOKS, root_dir, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config_dir),
        JUPYTER_RUNTIME_DIR=str(config_dir / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(config_dir / "lab-user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(config_dir / "workspaces"),
        MPLBACKEND="Agg",
        # the notebook's own first run (Run All) stays small; the test then sets its own budget
        TOOLKIT_SMALL="1",
    )
    # The kernel is the venv's interpreter: its python3 kernelspec lives in the venv.
    lab = Path(sys.executable).parent / "jupyter-lab"
    port = free_port()
    log_path = base / "lab.log"
    log = open(log_path, "w")
    process = subprocess.Popen(
        [
            str(lab),
            "--allow-root",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root_dir}",
            *LAB_NO_NETWORK_FLAGS,
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root_dir,
    )
    server = LabServer(process, f"http://127.0.0.1:{port}", root_dir, log_path)
    try:
        _wait_ready(f"{server.url}/api/status?token={TOKEN}", process)
        yield server
    finally:
        try:
            if process.poll() is None:
                server.delete_sessions()
        except OSError:
            pass
        _stop(process)
        log.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def browser_page():
    """A fresh headless Chromium page (fresh profile) that records console errors."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="toolkit-chromium-", dir="/tmp")
    with sync_playwright() as playwright:
        # Playwright refuses --user-data-dir in args: a persistent context takes the dir instead.
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1100},
        )
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(60_000)
            page.console_errors = []
            page.on("console", lambda message: page.console_errors.append(message.text) if message.type == "error" else None)
            yield page
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def screenshots_dir() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
