"""simulate(): parameters, modes, the loop's records, output, callbacks, stop, executors."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

import toolkit as tk

FAST = {"progress": False, "reproducible": True}


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "timing"} for r in rows]


def test_defaults_offline_and_report_says_so():
    data = tk.simulate(budget=24, **FAST)
    assert len(data.rows) == 24 and data.stopped_because == "budget"
    report = data.report()
    assert {"agent", "simulator", "tools"} <= set(report["offline_defaults"])
    assert set(report["knobs"]) == set(tk.RunKnobs.names())
    assert report["pairwise"]["pairs_planned"] > 0 and 0 < report["pairwise"]["fraction"] <= 1
    assert report["mode"] == "explore" and report["rollouts_per_request"] == 1
    assert all(r["writer_model"] == "template" for r in data.rows)
    assert all("privileged" not in r for r in data.rows) and all("privileged" in r for r in data.trajectories)
    assert data.rows() is data.rows
    assert len(data.search["arm_history"]) == 0 or "yields" in data.search["arm_history"][0]


def test_parameter_errors():
    with pytest.raises(TypeError, match="budget"):
        tk.simulate(budgett=10)
    with pytest.raises(tk.ConfigError, match="aliases disagree"):
        tk.simulate(n=2, phrasings=3, budget=5, progress=False)
    with pytest.raises(tk.ConfigError, match="aliases disagree"):
        tk.simulate(fault_rate=0.2, risk=0.3, budget=5, progress=False)
    with pytest.raises(ValueError):
        tk.simulate(runs=2, checkpoint="x.jsonl", progress=False)
    with pytest.raises(ValueError):
        tk.simulate(hard_share=1.5, progress=False)
    with pytest.raises(TypeError):
        tk.simulate(grader="judge", progress=False)
    with pytest.raises(ValueError):
        tk.simulate(situations=True, progress=False)
    with pytest.raises(ValueError):
        tk.simulate(patience="lazy", progress=False)
    with pytest.raises(ValueError, match="floor 0.0"):
        tk.simulate(advanced={"collect_wait_s": -1}, progress=False)
    with pytest.raises(ValueError, match="integer"):
        tk.simulate(advanced={"empty_rounds_to_stop": 2.5}, progress=False)
    with pytest.raises(tk.ConfigError, match="disagree"):
        tk.simulate(seed=1, advanced={"seed": 2}, progress=False)
    with pytest.raises(tk.ConfigError, match="grader"):
        tk.simulate(advanced={"mutate_graded_failures": True}, progress=False)
    with pytest.raises(tk.ConfigError, match="mode"):
        tk.simulate(mode="explor", progress=False)


def test_sft_fixed_guarantees_k_and_rl_successive_probes():
    sft = tk.simulate(mode="sft", budget=48, **FAST)
    sizes = Counter(Counter(r["group_id"] for r in sft.rows).values())
    assert sizes == Counter({4: 12}) and sft.report()["requests_per_situation"] == 3
    sft_stream = tk.simulate(mode="sft", budget=48, progress=False)
    assert set(Counter(r["group_id"] for r in sft_stream.rows).values()) == {4}
    rl = tk.simulate(mode="rl", budget=80, grade=True, **FAST)
    groups = rl.search["groups"]
    assert groups["k"] == 8 and groups["probe"] == 2
    sizes = Counter(r["group_id"] for r in rl.rows)
    assert min(sizes.values()) >= 1 and rl.report()["fault_rate"] == 0.8
    # a group that split got filled (unless the budget cut it)
    by_group = {}
    for r in rl.trajectories:
        by_group.setdefault(r["group_id"], []).append(int(r["reward"] >= 0.5))
    assert any(len(set(v)) > 1 and len(v) > 2 for v in by_group.values())


def test_situations_exhausted_and_unique():
    data = tk.simulate(situations=5, budget=100, **FAST)
    assert data.stopped_because == "situations_exhausted"
    assert len({r["scenario_id"] for r in data.rows}) <= 5
    explore = tk.simulate(budget=40, **FAST)
    assert len({r["prompt"] for r in explore.rows}) == 40


def test_reproducible_same_rows_at_concurrency_1_and_32():
    a = tk.simulate(budget=40, concurrency=1, **FAST)
    b = tk.simulate(budget=40, concurrency=32, **FAST)
    assert _strip(a.rows) == _strip(b.rows)
    # The seeded agent runs on the engine's thread by default; on 32 real threads (where
    # rollouts finish in any order) the rows must still be the same.
    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        c = tk.simulate(budget=40, concurrency=32, executor=pool, **FAST)
    assert _strip(c.rows) == _strip(a.rows)
    assert (a.report()["execution"], c.report()["execution"]) == ("inline", "ThreadPoolExecutor")


def test_seeded_rollouts_run_inline_and_other_agents_on_threads():
    seen: list[str] = []
    seeded = tk.simulate(budget=12, concurrency=8, progress=False, on_row=lambda row: seen.append(threading.current_thread().name))
    assert seeded.report()["execution"] == "inline"
    workers: set[str] = set()

    def agent(message):
        workers.add(threading.current_thread().name)
        return {"steps": [], "final_text": "Done."}

    data = tk.simulate(agent, tools=str(tk.dataset_path("tools/airline_support.json")), budget=12, concurrency=8, progress=False)
    assert data.report()["execution"] == "threads"
    # (a user's agent is called on a timeout worker thread, never on the engine's thread)
    assert workers and threading.main_thread().name not in workers
    assert len(seen) == 12


def test_reproducible_across_processes(tmp_path):
    code = (
        "import json,sys,toolkit as tk\n"
        "d=tk.simulate(budget=20, concurrency=4, reproducible=True, progress=False)\n"
        "print(json.dumps([{k:v for k,v in r.items() if k!='timing'} for r in d.rows], sort_keys=True))\n"
    )
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout for _ in range(2)]
    assert outs[0] == outs[1] and len(json.loads(outs[0])) == 20


def test_output_streams_rows_progress_and_meta(tmp_path):
    path = tmp_path / "run.jsonl"
    seen, progress = [], []
    data = tk.simulate(budget=30, output=path, on_row=seen.append, on_progress=progress.append, **FAST)
    rows = tk.read_rows(path)
    assert len(rows) == 30 and len(seen) == 30
    assert (tmp_path / "run.progress.json").exists()
    meta = json.loads((tmp_path / "run.meta.json").read_text())
    assert meta["n_rows"] == 30 and meta["simulation"]["report"]["rows"] == 30
    assert progress[-1]["final"] is True and progress[-1]["rows"] == 30
    assert "privileged" not in path.read_text()
    loaded = tk.load(path)
    assert len(loaded) == 30 and loaded.report()["budget"] == 30 and loaded.stopped_because == "budget"
    saved = data.save(tmp_path / "saved.jsonl")
    assert len(tk.load(saved)) == 30


def test_an_existing_output_is_refused_unless_overwrite(tmp_path):
    path = tmp_path / "run.jsonl"
    tk.simulate(budget=3, output=path, **FAST)
    before = path.read_bytes()
    with pytest.raises(tk.ConfigError, match=r"^output='.*run\.jsonl' already exists.*overwrite=True"):
        tk.simulate(budget=5, output=path, **FAST)
    assert path.read_bytes() == before  # refused before anything ran
    with pytest.raises(tk.ConfigError, match=r"^overwrite must be True or False; got 'yes'$"):
        tk.simulate(budget=5, output=path, overwrite="yes", **FAST)
    data = tk.simulate(budget=5, output=path, overwrite=True, **FAST)
    assert len(tk.read_rows(path)) == len(data) == 5
    assert tk.load(path).report()["rows"] == 5  # the sidecar is the new run's too


def test_a_resumed_checkpoint_needs_no_overwrite_and_its_output_keeps_every_row(tmp_path):
    # output= at the checkpoint's own path is appended to; a separate output= is rebuilt from
    # the checkpoint's rows plus the new ones (it held only the new ones before)
    same, checkpoint, separate = tmp_path / "same.jsonl", tmp_path / "ckpt.jsonl", tmp_path / "out.jsonl"
    tk.simulate(budget=6, output=same, checkpoint=same, **FAST)
    tk.simulate(budget=6, output=separate, checkpoint=checkpoint, **FAST)
    resumed = tk.simulate(budget=10, output=same, checkpoint=same, **FAST)
    assert sum(bool((r.get("lineage") or {}).get("resumed")) for r in resumed.rows) == 6
    tk.simulate(budget=10, output=separate, checkpoint=checkpoint, **FAST)
    for path in (same, checkpoint, separate):
        keys = [(r["prompt"], r["rollout_index"]) for r in tk.read_rows(path)]
        assert len(keys) == len(set(keys)) == 10, path.name


def test_stop_event_keeps_rows():
    stop = threading.Event()
    count = []

    def on_row(row):
        count.append(row)
        if len(count) == 12:
            stop.set()

    data = tk.simulate(budget=500, stop=stop, on_row=on_row, progress=False)
    assert data.stopped_because == "stopped"
    assert 12 <= len(data.rows) < 500 and len(data.rows) == len(count)


def test_on_row_errors_never_lose_rows():
    def broken(row):
        raise RuntimeError("boom")

    data = tk.simulate(budget=15, on_row=broken, **FAST)
    assert len(data.rows) == 15 and data.report()["callback_errors"] == 15
    assert any("on_row raised" in w for w in data.warnings)


def test_grader_runs_beside_and_steers():
    def grader(row):
        return {"reward": 0.0 if row.get("faults") else 1.0, "reason": "fault rows fail"}

    data = tk.simulate(budget=40, grader=grader, **FAST)
    assert all(r["judge_status"] == "ok" for r in data.rows)
    assert data.search["mutation_aims"].get("graded_failure", 0) > 0
    assert data.pass_at is not None and 0 <= data.pass_at.pass_at_1 <= 1
    graded = tk.simulate(budget=10, **FAST).grade()
    assert all(r.get("label_source") == "conduct" for r in graded.rows)


def test_tasks_replay_and_runs_stamp_eval_run():
    base = tk.simulate(mode="sft", budget=24, **FAST)
    replay = tk.simulate(tasks=base, **FAST)
    assert replay.stopped_because == "tasks_done"
    assert sorted(r["prompt"] for r in replay.rows) == sorted(r["prompt"] for r in base.rows)
    assert all(r["lineage"]["replayed"] for r in replay.rows)
    two = tk.simulate(budget=12, runs=2, **FAST)
    runs = Counter(r["lineage"]["eval_run"] for r in two.rows)
    assert runs == Counter({0: 12, 1: 12})
    assert {r["prompt"] for r in two.rows if r["lineage"]["eval_run"] == 0} == {r["prompt"] for r in two.rows if r["lineage"]["eval_run"] == 1}


def test_traces_aim_the_grid_and_seed_failing_asks():
    failing = [{"schema_version": "1", "prompt": f"cancel booking KQN4{i}8 now", "steps": [], "final_text": "x", "reward": 0.0,
                "scenario_dimensions": {"tool": "cancel_booking", "tool_condition": "timeout"}} for i in range(3)]
    data = tk.simulate(traces=failing, budget=30, **FAST)
    assert data.report()["seeds"] == 3
    assert sum(1 for r in data.rows if r["arm"] == "trace_seed") == 3
    structured = [r for r in data.rows if r["arm"] == "structured"]
    share = sum(r["scenario_dimensions"]["tool"] == "cancel_booking" for r in structured) / max(1, len(structured))
    baseline = tk.simulate(budget=30, **FAST)
    base_structured = [r for r in baseline.rows if r["arm"] == "structured"]
    base_share = sum(r["scenario_dimensions"]["tool"] == "cancel_booking" for r in base_structured) / max(1, len(base_structured))
    assert share >= base_share


def test_pinned_arm_weights_and_knobs_recorded():
    data = tk.simulate(budget=40, advanced={"arm_weights": {"structured": 1.0}, "per_round": 8}, **FAST)
    assert {r["arm"] for r in data.rows} <= {"structured"}
    assert data.report()["knobs"]["per_round"] == 8
    assert all(h["moved_because"].startswith("arm_weights pinned") for h in data.search["arm_history"])


def test_fault_rate_zero_injects_nothing_and_warning_only_when_named():
    data = tk.simulate(budget=40, fault_rate=0, **FAST)
    assert not any(r.get("faults") for r in data.rows)
    default = tk.simulate(budget=40, **FAST)
    assert not any("fault_rate" in w for w in default.warnings)


def test_dask_executor():
    from dask import distributed  # a declared dependency (dask[distributed]): never skipped

    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            data = tk.simulate(budget=12, executor=client.get_executor(), **FAST)
    reference = tk.simulate(budget=12, **FAST)
    assert _strip(data.rows) == _strip(reference.rows)


def test_until_saturation_and_time_budget():
    # one tool keeps the grid small: the flat-batch rule waits until every reachable cell has run once
    one_tool = [{"type": "function", "function": {"name": "get_booking", "description": "Look up a booking by its id",
                 "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}}}]
    data = tk.simulate(tools=one_tool, mode="sft", budget=3000, until="saturation",
                       advanced={"saturation_flat_batches": 1, "saturation_fresh_share": 1.0, "copies_needed": 100_000}, **FAST)
    assert data.stopped_because == "saturation" and data.report()["saturation_rule"] == "flat_batches" and len(data.rows) < 3000
    started = time.perf_counter()
    timed = tk.simulate(budget=100_000, time_budget=2.0, progress=False)
    assert timed.stopped_because == "time_budget" and len(timed.rows) < 100_000
    assert time.perf_counter() - started < 2.0 + 10.0  # the clock plus stop_grace and the report


def test_rows_are_held_compactly_and_read_like_lists(tmp_path):
    from toolkit.rows import scrub

    path = tmp_path / "run.jsonl"
    seen = []
    data = tk.simulate(budget=25, output=path, on_row=seen.append, advanced={"seed": 5}, **FAST)
    assert len(data) == 25 and data._rows is None  # len() does not decode the rows
    rows, trajectories = data.rows, data.trajectories
    assert isinstance(rows, list) and rows() is rows and len(rows) == 25
    assert rows == seen == tk.read_rows(path)  # rows as written, in land order
    assert all(r.get("privileged") for r in trajectories) and not any("privileged" in r for r in rows)
    assert [scrub(t) for t in trajectories] == rows  # a trajectory is its row plus the privileged blocks
    assert "privileged" not in json.dumps(data.rows)
    data.rows[0]["note"] = "kept"  # decoded once, so edits persist like on any list
    assert data.rows[0]["note"] == "kept" and data[0]["note"] == "kept"
    assert data.report()["output_durability"].startswith("every landed row is written to the kernel")
    assert tk.simulate(budget=3, **FAST).report()["output_durability"] is None


def test_report_counts_from_one_pass_and_retired_groups_match_the_rows():
    data = tk.simulate(budget=120, advanced={"seed": 2, "per_round": 8}, **FAST)
    report = data.report()
    groups = data.search["groups"]
    # explore mode, k = 1: every group reached k and was retired from memory, yet counted
    assert groups["reached_k"] == len({r["group_id"] for r in data.rows}) and groups["below_k"] == 0
    assert report["rows"] == 120
    assert report["unique_prompts"] == len({r["prompt"] for r in data.rows})
    assert report["pairwise"]["pairs_covered"] == tk.situation_grid(
        tk.dataset_path("tools/airline_support.json"),
        tk.dataset_path("tools/airline_support_policy.md").read_text(encoding="utf-8"), seed=2,
    ).coverage_of([r for r in data.rows if r.get("scenario_dimensions")])["pairs_covered"]


def test_family_cap_counts_rows_in_flight():
    # reference: the knob's definition, max(family_cap_floor, n x family_cap_per_phrasing x k)
    # rows of one situation; with every factor 1 the cap is 1. Counting only landed rows let a
    # round that drew one cell twice (a tier-class fallback) give it 2.
    one_tool = [{"type": "function", "function": {"name": "get_booking", "description": "Look up a booking by its id",
                 "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}}}]
    advanced = {"arm_weights": {"structured": 1.0}, "family_cap_floor": 1, "family_cap_per_phrasing": 1}
    data = tk.simulate(tools=one_tool, unique=False, budget=160, advanced=advanced, **FAST)
    per_cell = Counter(row["scenario_id"] for row in data.rows)
    assert len(data) > 0 and max(per_cell.values()) == 1


def test_grader_verdicts_as_numpy_numbers_count_and_non_finite_ones_do_not():
    # numpy scalars are real numbers (numbers.Real); NaN and inf are no reward at all
    import numpy as np

    for verdict, status, reward in ((np.float32(0.5), "ok", 0.5), ({"reward": np.int64(1)}, "ok", 1.0),
                                    (float("nan"), "invalid_result", None), ({"reward": float("inf")}, "invalid_result", None)):
        data = tk.simulate(budget=3, grader=lambda row, v=verdict: v, **FAST)
        assert [r["judge_status"] for r in data.rows] == [status] * 3, verdict
        assert [r["reward"] for r in data.rows] == [reward] * 3
