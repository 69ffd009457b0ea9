"""Fixtures for the real-browser tests: a private JupyterLab on 127.0.0.1 and headless Chromium.

What was measured on this machine kind (see the project's docs/design/jupyter.md notes) and is relied on here:

* ``jupyter lab`` refuses to start as root without ``--allow-root``; it is ready in ~2 s.
* The server is started by the Makefile's own ``lab`` recipe, read with ``make -n lab``: its
  three flags keep Lab off the network (news feed, update check, extension manager) and its
  setting defaults silence the "Jupyter news?" toast, which the flags alone do not (Lab 4.6
  asks whenever ``fetchNews`` is unset). So a new user's ``make lab`` is what is tested, and
  the tests write no settings of their own.
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
import re
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

def _missing_browser() -> str | None:
    if shutil.which("make") is None:
        return "make is missing (the Lab server is started from the Makefile's lab recipe): apt-get install -y make"
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

    def __init__(self, process: subprocess.Popen, url: str, root_dir: Path, log_path: Path, log_file=None):
        self.process = process
        self.url = url
        self.root_dir = root_dir
        self.log_path = log_path
        self.log_file = log_file

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

    def home_url(self) -> str:
        """Lab's start page (the launcher and the file browser), ignoring any saved layout."""
        return f"{self.url}/lab?token={TOKEN}&reset"

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


def make_lab_commands(*, port: int, notebook_dir: Path, lab_config: Path) -> list[str]:
    """The shell commands of ``make lab`` (``make -n``), for this venv, port, notebook copy and
    settings directory; the last one starts the server."""
    listing = subprocess.run(
        ["make", "--no-print-directory", "-n", "-s", "-C", str(ROOT), "lab", f"PY={sys.executable}",
         f"PORT={port}", f"NOTEBOOK_DIR={notebook_dir}", f"LAB_CONFIG={lab_config}",
         f"LAB_ARGS=--IdentityProvider.token={TOKEN}"],
        capture_output=True, text=True, check=True,
    ).stdout
    commands, pending = [], ""
    for line in listing.splitlines():
        pending += line + "\n"
        if not line.endswith("\\"):  # a backslash-newline continues the command (sh -c reads it so)
            commands.append(pending.strip())
            pending = ""
    if not commands or "jupyter-lab" not in commands[-1]:
        raise RuntimeError(f"`make -n lab` does not end with the jupyter-lab command:\n{listing}")
    if not re.search(r"(^|\s)exec\s", commands[-1]):
        # without exec the PID we stop would be the shell's, and the server would outlive us
        raise RuntimeError(f"the lab recipe must exec jupyter-lab:\n{commands[-1]}")
    return commands


def start_lab(base: Path, *, setup: bool = True) -> LabServer:
    """Start ``make lab`` serving a copy of notebooks/ under ``base``, isolated from the user's
    profile (fresh Jupyter config, runtime, settings and workspace dirs: a first open).

    ``setup=False`` skips the recipe's commands before the server (the setting defaults it
    writes), which is how a test checks that those commands are what silences the toast."""
    config_dir = base / "config"
    config_dir.mkdir(parents=True)
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
    env.pop("JUPYTER_CONFIG_PATH", None)  # a developer's own config path is not a new user's
    port = free_port()
    # The kernel is the venv's interpreter (PY=sys.executable): its python3 kernelspec lives in the venv.
    commands = make_lab_commands(port=port, notebook_dir=root_dir, lab_config=base / "lab-config")
    if setup:
        for command in commands[:-1]:
            subprocess.run(["/bin/sh", "-c", command], cwd=ROOT, env=env, check=True)
    log_path = base / "lab.log"
    log = open(log_path, "w")
    process = subprocess.Popen(["/bin/sh", "-c", commands[-1]], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    server = LabServer(process, f"http://127.0.0.1:{port}", root_dir, log_path, log)
    try:
        _wait_ready(f"{server.url}/api/status?token={TOKEN}", process)
    except BaseException:
        stop_lab(server)
        raise
    return server


def stop_lab(server: LabServer) -> None:
    try:
        if server.process.poll() is None:
            server.delete_sessions()
    except OSError:
        pass
    _stop(server.process)
    if server.log_file is not None:
        server.log_file.close()


@pytest.fixture(scope="session")
def lab_server(_browser_available):
    """``make lab`` serving a temporary copy of notebooks/, isolated from the user's profile."""
    base = Path(tempfile.mkdtemp(prefix="toolkit-lab-", dir="/tmp"))
    server = start_lab(base)
    try:
        yield server
    finally:
        stop_lab(server)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def another_lab(_browser_available):
    """Start a further ``make lab`` of its own (``another_lab(setup=False)`` skips the recipe's
    setup commands); stopped and removed when the test ends."""
    started = []

    def start(*, setup: bool = True) -> LabServer:
        base = Path(tempfile.mkdtemp(prefix="toolkit-lab-extra-", dir="/tmp"))
        started.append(base)
        server = start_lab(base, setup=setup)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for item in reversed(started):
            if isinstance(item, LabServer):
                stop_lab(item)
            else:
                shutil.rmtree(item, ignore_errors=True)


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
