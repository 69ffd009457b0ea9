"""Failure paths: flaky, dead and hanging agents; SIGKILL mid-run and checkpoint resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

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


def _disk_full_after(monkeypatch, n_rows):
    """Row writes fail with ENOSPC from the ``n_rows + 1``-th on (the disk fills mid-run)."""
    import errno

    import toolkit.rows._write as write_module

    real, calls = write_module.write_all, {"n": 0}

    def write_all(fd, data):
        calls["n"] += 1
        if calls["n"] > n_rows:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(write_module, "write_all", write_all)


def test_a_full_disk_mid_run_stops_as_write_failed_and_keeps_the_result(tmp_path, monkeypatch):
    # Issue 21 row 5: the disk fills during the run. Two fill points, two outcomes.
    for landed in (5, 12):
        monkeypatch.undo()
        _disk_full_after(monkeypatch, landed)
        out = tmp_path / f"rows{landed}.jsonl"
        data = tk.simulate(tools=TOOLS, budget=300, seed=4, output=out, progress=False)  # returns, does not raise
        assert data.stopped_because == "write_failed"
        assert len(tk.read_rows(out)) == landed  # the file ends at a row boundary
        assert landed < len(data.rows) < 300  # the run stopped early, and kept what landed in memory
        first = data.warnings[0]
        assert str(out) in first and f"after {landed} rows" in first and "Errno 28" in first
        assert f"warning: writing rows to {out} failed" in data.summary()  # the printed summary says so
        meta = json.loads(out.with_name(out.stem + ".meta.json").read_text())
        assert meta["n_rows"] == landed  # the sidecar counts what is in the file


def test_a_sidecar_that_cannot_be_written_is_a_warning_not_a_failure(tmp_path, monkeypatch):
    import errno

    import toolkit.sim.engine as engine

    def full(path, payload):
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "rows.jsonl"
    monkeypatch.setattr(engine, "write_json_atomic", full)
    data = tk.simulate(tools=TOOLS, budget=12, seed=4, output=out, progress=False)
    assert data.stopped_because == "budget" and len(tk.read_rows(out)) == 12 == len(data.rows)
    warned = [w for w in data.warnings if "sidecar" in w]
    assert warned and str(out.with_name("rows.meta.json")) in " ".join(warned)
    assert not out.with_name("rows.meta.json").exists()
    monkeypatch.undo()
    clean = tk.simulate(tools=TOOLS, budget=12, seed=4, output=tmp_path / "clean.jsonl", progress=False)
    assert not [w for w in clean.warnings if "sidecar" in w]


class _HangingGrader:
    """A grader that hangs (waits on an event nobody sets until the test ends) on the calls
    ``hang(n)`` picks, n counting from 1, and passes every row otherwise."""

    def __init__(self, hang, stop=None):
        self.hang, self.stop, self.calls = hang, stop, 0
        self.release = __import__("threading").Event()

    def __call__(self, row):
        self.calls += 1
        if self.hang(self.calls):
            if self.stop is not None:
                self.stop.set()  # the run is asked to stop while its grader hangs
            self.release.wait(60)
        return 1.0


def test_a_hanging_grader_is_cut_off_after_grader_timeout():
    # Issue 21 row 7: a grader that hangs, with the seeded agent (inline execution).
    grader = _HangingGrader(lambda n: n == 2)
    try:
        data = tk.simulate(tools=TOOLS, budget=8, seed=5, grader=grader, progress=False, advanced={"grader_timeout": 0.2})
    finally:
        grader.release.set()
    timed_out = [r for r in data.rows if r.get("judge_status") == "timeout"]
    assert len(data.rows) == 8 and len(timed_out) == 1 and timed_out[0]["reward"] is None
    assert "0.2 s" in timed_out[0]["reason"] and "grader_timeout" in timed_out[0]["reason"]
    assert sum(r.get("reward") == 1.0 for r in data.rows) == 7
    assert "grader_failed" in data.degraded and "timeout" in data.summary() and "grader" in data.warnings[0]
    assert data.report()["grader_failures"] == {"timeout": 1}


def test_time_budget_and_stop_reach_a_hanging_grader():
    grader = _HangingGrader(lambda n: True)  # hangs on every row; grader_timeout stays at 300 s
    try:
        data = tk.simulate(tools=TOOLS, budget=50, seed=5, grader=grader, progress=False, time_budget=1.0)
    finally:
        grader.release.set()
    assert data.stopped_because == "time_budget" and 1 <= len(data.rows) < 50
    assert all(r["judge_status"] == "timeout" and "time_budget" in r["reason"] for r in data.rows)

    import threading

    stop = threading.Event()
    grader = _HangingGrader(lambda n: n == 3, stop=stop)
    try:
        data = tk.simulate(tools=TOOLS, budget=50, seed=5, grader=grader, progress=False, stop=stop)
    finally:
        grader.release.set()
    assert data.stopped_because == "stopped" and len(data.rows) < 50
    cut = [r for r in data.rows if r.get("judge_status") == "timeout"]
    assert len(cut) == 1 and "stop" in cut[0]["reason"]


def _posts(server, model):
    return sum(n for key, n in server.counts.items() if key.endswith(f":{model}"))


def test_an_auth_error_stops_the_run_at_once_and_a_dead_endpoint_is_retried():
    # Issue 21 row 9: a 401/403 is not retried like a timeout; it stops the run at once.
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from _chat_server import ChatServer

    with ChatServer(models=["echo"]) as server:
        for model in ("always-401", "always-403"):
            agent = tk.model_agent(f"vllm:{model}@{server.url}", backoff=(0.001, 0.002))
            data = tk.simulate(agent, tools=TOOLS, budget=200, concurrency=4, progress=False)
            assert data.stopped_because == "agent_failed" and len(data.rows) == 0
            assert _posts(server, model) <= 2 * 4  # what was in flight when the first refusal came back
            first = data.warnings[0]
            assert "refused the credentials" in first and model[-3:] in first and "API key" in first
            assert data.report()["rollouts_lost_by"] == {"auth_failed": data.report()["rollouts_lost"]}
        # the same run against a dead (500) endpoint keeps trying: the auth stop is what cut it
        agent = tk.model_agent(f"vllm:always-500@{server.url}", backoff=(0.001, 0.002), max_retries=0)
        data = tk.simulate(agent, tools=TOOLS, budget=200, concurrency=4, progress=False)
        assert data.stopped_because == "agent_failed" and _posts(server, "always-500") >= 32


def test_an_endpoint_that_dies_mid_run_is_called_off_whatever_the_budget():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from _chat_server import ChatServer

    calls = {}
    for consecutive in (4, 32):
        with ChatServer(models=["echo"]) as server:
            server.die_after = 10
            agent = tk.model_agent(f"vllm:dies-after@{server.url}", backoff=(0.001, 0.002), max_retries=0)
            data = tk.simulate(agent, tools=TOOLS, budget=1000, concurrency=2, progress=False,
                               advanced={"dead_agent_consecutive": consecutive})
            assert data.stopped_because == "agent_failed" and 1 <= len(data.rows) <= 10
            assert "rollouts in a row were lost after" in data.warnings[0] and "dead_agent_consecutive" in data.warnings[0]
            calls[consecutive] = _posts(server, "dies-after")
    # bounded by the knob, not by 2 x budget (2,000 calls before)
    assert calls[4] < calls[32] <= 10 + 32 + 2 * 2 * 2


def test_ctrl_c_lets_the_process_exit_while_agent_calls_hang(tmp_path):
    # Issue 21 row 9: after Ctrl-C the pool's (non-daemon) threads waited out `timeout` (300 s).
    marker = tmp_path / "started"
    code = (
        "import time, toolkit as tk\n"
        "def hang(message):\n"
        f"    open({str(marker)!r}, 'a').close()\n"
        "    time.sleep(600)\n"
        "    return 'late'\n"
        f"d = tk.simulate(hang, tools={TOOLS!r}, budget=8, concurrency=2, timeout=300, progress=False, advanced={{'stop_grace': 0.0}})\n"
        "print('stopped', d.stopped_because, flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not marker.exists():
        time.sleep(0.05)
    assert marker.exists(), "the agent was never called"
    os.kill(process.pid, signal.SIGINT)
    try:
        out, _ = process.communicate(timeout=60)  # well under the 300 s the threads waited before
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the process did not exit after Ctrl-C") from None
    assert "stopped interrupted" in out and process.returncode == 0


def test_a_second_run_on_one_checkpoint_is_refused_naming_the_holder(tmp_path):
    # Issue 21 row 14: two processes on one checkpoint= wrote 600 rows, 300 of them duplicates.
    import socket

    import pytest

    path = tmp_path / "ckpt.jsonl"
    marker, go = tmp_path / "started", tmp_path / "go"
    code = (  # the first run's agent waits for the test's go-ahead: it holds the lock until then
        "import os, time, toolkit as tk\n"
        "def slow(message):\n"
        f"    open({str(marker)!r}, 'a').close()\n"
        f"    while not os.path.exists({str(go)!r}):\n"
        "        time.sleep(0.02)\n"
        "    return 'noted'\n"
        f"tk.simulate(slow, tools={TOOLS!r}, budget=40, checkpoint={str(path)!r}, concurrency=2, progress=False)\n"
    )
    first = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not marker.exists():
            time.sleep(0.05)
        assert first.poll() is None, "the first run ended before the second could try"
        with pytest.raises(tk.ConfigError) as info:
            tk.simulate(lambda message: "noted", tools=TOOLS, budget=40, checkpoint=path, progress=False)
        message = str(info.value)
        assert f"pid {first.pid}" in message and socket.gethostname() in message and "ckpt.lock" in message
    finally:
        go.touch()
        first.wait(timeout=120)
    rows = tk.read_rows(path)
    assert len(rows) == 40 == len({(r["prompt"], r["rollout_index"]) for r in rows})  # the refused run wrote nothing
    # the lock is free once the holder has ended: the same call now runs (and resumes)
    again = tk.simulate(lambda message: "noted", tools=TOOLS, budget=40, checkpoint=path, progress=False)
    assert again.stopped_because == "budget"


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    path = tmp_path / "ckpt.jsonl"
    code = (
        "import time, toolkit as tk\n"
        "def slow(message):\n"
        "    time.sleep(0.05)\n"
        "    return 'noted'\n"
        f"tk.simulate(slow, tools={TOOLS!r}, budget=400, checkpoint={str(path)!r}, concurrency=2, progress=False)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 60
    while time.time() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 3):
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    lock = tmp_path / "ckpt.lock"
    assert f'"pid": {process.pid}' in lock.read_text()  # the dead holder's record is still there
    data = tk.simulate(lambda message: "noted", tools=TOOLS, budget=10, checkpoint=path, progress=False)
    assert data.stopped_because == "budget" and lock.read_text() == ""  # taken over, then released


def _foreign(agent):
    """The seeded policy behind a plain callable: the engine runs it on its thread pool, with
    real concurrency, instead of inline."""
    def call(messages, tools):
        return agent(messages, tools)
    return call


@pytest.mark.parametrize("mode", ["explore", "sft", "rl", "adaptive"])
@pytest.mark.parametrize("concurrency", [1, 8])
def test_no_run_holds_a_duplicate_row(mode, concurrency):
    """Issue 21, row 3: a group is opened once. Over modes, two seeds and two concurrencies
    (threaded, so rows land out of order), no rollout_id repeats, no (prompt, rollout_index)
    repeats, and no two rows are byte-identical apart from their timing."""
    tools = tk.dataset_path("tools/airline_support.json")
    for seed in (0, 1):
        data = tk.simulate(_foreign(tk.seeded_agent(tools, seed=seed)), tools=tools, mode=mode, budget=160,
                           seed=seed, progress=False, advanced={"concurrency": concurrency})
        rows = list(data.rows)
        assert len(rows) == 160
        ids = [row["rollout_id"] for row in rows]
        assert len(set(ids)) == len(ids), (mode, seed)
        slots = [(row["prompt"], row.get("lineage", {}).get("eval_run"), row["rollout_index"]) for row in rows]
        assert len(set(slots)) == len(slots), (mode, seed)
        blobs = [json.dumps({k: v for k, v in row.items() if k != "timing"}, sort_keys=True, default=str) for row in rows]
        assert len(set(blobs)) == len(blobs), (mode, seed)


_RESUMABLE = (
    "import sys, time, toolkit as tk\n"
    "tools = str(tk.dataset_path('tools/airline_support.json'))\n"
    "base = tk.seeded_agent(tools, seed=0)\n"
    "def agent(messages, tools):\n"
    "    time.sleep(0.01)\n"
    "    return base(messages, tools)\n"
    "d = tk.simulate(agent, tools=tools, budget=200, checkpoint=sys.argv[1], output=sys.argv[2], overwrite=True,\n"
    "                progress=False, advanced={'concurrency': 8})\n"
    "print(len(d.rows), d.stopped_because)\n"
)


def test_killed_ten_times_a_non_reproducible_run_ends_at_its_budget_in_both_files(tmp_path):
    """Issue 21, row 2: each resume of a default (non-reproducible) run plans new prompts and
    keeps the checkpoint's rows as leftovers; they now count toward the budget from the start,
    so ten SIGKILLs at seeded random row counts and a resume end at exactly 200 rows, none
    repeated, in the checkpoint and in the separate output= alike (4 kills at budget 300 gave
    383 rows before)."""
    import random

    checkpoint, output = tmp_path / "ckpt.jsonl", tmp_path / "out.jsonl"
    script = tmp_path / "run.py"
    script.write_text(_RESUMABLE)
    for target in sorted(random.Random(21).sample(range(5, 190), 10)):
        process = subprocess.Popen([sys.executable, str(script), str(checkpoint), str(output)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and process.poll() is None:
            if checkpoint.exists() and len(checkpoint.read_text().splitlines()) >= target:
                break
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    out = subprocess.run([sys.executable, str(script), str(checkpoint), str(output)], capture_output=True, text=True,
                         timeout=180, check=True).stdout.split()
    assert out[:2] == ["200", "budget"]
    for path in (checkpoint, output):
        rows = tk.read_rows(path)
        keys = [(row["prompt"], row["rollout_index"]) for row in rows]
        assert len(keys) == len(set(keys)) == 200, path.name
    assert {row["rollout_id"] for row in tk.read_rows(checkpoint)} == {row["rollout_id"] for row in tk.read_rows(output)}
