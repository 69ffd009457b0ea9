"""Failure paths: flaky, dead and hanging agents; SIGKILL mid-run and checkpoint resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import toolkit as tk
from toolkit._util.hashing import stable_uniform

TOOLS = str(tk.dataset_path("tools/airline_support.json"))


def _flaky_agent(message: str) -> dict:
    # raises on ~30% of calls, decided by a hash so the test is deterministic per message
    if stable_uniform("flaky", message, time.perf_counter_ns() % 3) < 0.3:
        raise RuntimeError("flaky backend")
    return {"steps": [], "final_text": f"I looked at: {message[:40]}"}


def test_agent_raising_on_30_percent_completes_and_counts():
    data = tk.simulate(_flaky_agent, tools=TOOLS, budget=40, progress=False, mode="sft", repeats=2)
    assert len(data.rows) == 40 and data.stopped_because == "budget"
    report = data.report()
    assert report["rollouts_rerolled"] > 0
    assert all(r["ended_by"] != "lost" for r in data.rows)


def test_agent_raising_always_stops_as_agent_failed():
    calls = []

    def dead(message: str) -> dict:
        calls.append(message)
        raise RuntimeError("no model here")

    data = tk.simulate(dead, tools=TOOLS, budget=10, progress=False)
    assert data.stopped_because == "agent_failed" and len(data.rows) == 0
    assert len(calls) <= max(16, 2 * 10) + 32  # the dead-agent budget plus at most one round in flight
    assert "agent_failed" in data.warnings[0] and "no model here" in data.warnings[0]


def test_agent_that_always_loses_with_some_rows_counts_by_reason():
    def empty_sometimes(message: str) -> dict:
        return {"steps": [], "final_text": "" if "booking" in message.lower() else "ok, done"}

    data = tk.simulate(empty_sometimes, tools=TOOLS, budget=30, progress=False, reproducible=True)
    report = data.report()
    assert report["rollouts_lost"] > 0  # booking asks always get an empty reply, so some are lost
    assert set(report["rollouts_lost_by"]) == {"empty_reply"}
    assert any("not missing at random" in w for w in data.warnings)


def test_hanging_agent_times_out_per_completion():
    def hang(message: str) -> dict:
        time.sleep(30)
        return {"steps": [], "final_text": "late"}

    started = time.perf_counter()
    data = tk.simulate(hang, tools=TOOLS, budget=2, timeout=0.2, progress=False, advanced={"dead_agent_errors": 2, "concurrency": 4})
    assert time.perf_counter() - started < 20
    assert data.stopped_because == "agent_failed"
    assert "timeout" in data.warnings[0] or "Timeout" in data.warnings[0] or "timed out" in data.warnings[0]


def test_privileged_never_in_output(tmp_path):
    path = tmp_path / "rows.jsonl"
    data = tk.simulate(budget=60, output=path, progress=False, reproducible=True, advanced={"seed": 3})
    assert any(r.get("privileged") for r in data.trajectories)
    text = path.read_text()
    for word in ("privileged", "hidden_state"):
        assert word not in text
    # the answer key reaches disk only where the agent itself quoted it (a planted "leak",
    # which the conduct grader catches) -- never as a carried block
    for line in text.splitlines():
        row = json.loads(line)
        if "expected conduct" in line:
            assert "leak" in (row.get("seeded") or [])
    assert "privileged" not in json.dumps(data.rows)


def test_sigkill_mid_run_then_checkpoint_resumes_without_duplicates(tmp_path):
    path = tmp_path / "ckpt.jsonl"
    code = (
        "import time, toolkit as tk\n"
        "def slow(messages, tools):\n"
        "    time.sleep(0.02)\n"
        "    return {'role': 'assistant', 'content': 'Noted, I will look into it.'}\n"
        f"tk.simulate(slow, tools={TOOLS!r}, budget=80, checkpoint={str(path)!r}, reproducible=True, concurrency=4, progress=False)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 10):
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    partial = tk.read_rows(path, strict=False)
    assert 10 <= len(partial) < 80
    resume = (
        "import time, toolkit as tk\n"
        "def slow(messages, tools):\n"
        "    time.sleep(0.02)\n"
        "    return {'role': 'assistant', 'content': 'Noted, I will look into it.'}\n"
        f"d=tk.simulate(slow, tools={TOOLS!r}, budget=80, checkpoint={str(path)!r}, reproducible=True, concurrency=4, progress=False)\n"
        "print(len(d.rows))\n"
    )
    out = subprocess.run([sys.executable, "-c", resume], capture_output=True, text=True, timeout=120, check=True).stdout
    rows = tk.read_rows(path)
    keys = [(r["prompt"], r["rollout_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 80
    assert int(out.strip().splitlines()[-1]) == 80
