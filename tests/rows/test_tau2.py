"""Tests for toolkit.rows.tau2.read_tau2 on small results files written by hand.

The fixtures follow tau2-bench's data model at sierra-research/tau2-bench commit
a2c024725189473d2d7cea3a5cfdbcc67478e41f: ``Results`` / ``SimulationRun`` / ``RewardInfo`` in
src/tau2/data_model/simulation.py, ``Task`` / ``EvaluationCriteria`` / ``RewardType`` in
src/tau2/data_model/tasks.py, ``AssistantMessage`` / ``UserMessage`` / ``ToolMessage`` /
``MultiToolMessage`` / ``ToolCall`` in src/tau2/data_model/message.py. The pass rule the
rewards are checked against is tau2's metrics/agent_metrics.py ``is_successful``
(|reward - 1| <= 1e-6), and pass^k / the sign-flip p against closed forms (math.comb).
"""

from __future__ import annotations

import json
import math
import warnings

import pytest

import toolkit as tk
from toolkit.errors import RowError

POLICY = "# Airline agent policy\n\nNever change a basic economy flight. " * 4
TRIALS = 4


def task(task_id: str) -> dict:
    return {
        "id": task_id,
        "user_scenario": {
            "instructions": {
                "domain": "airline",
                "reason_for_call": "change flight",
                "known_info": "user mia_1",
                "task_instructions": "secret: insist twice",
            }
        },
        "evaluation_criteria": {
            "actions": [{"action_id": "a1", "name": "update_reservation", "arguments": {"reservation_id": "R1"}}],
            "communicate_info": ["R1"],
            "reward_basis": ["DB", "COMMUNICATE"],
        },
    }


def messages(task_id: str, trial: int) -> list[dict]:
    return [
        {"role": "assistant", "content": "Hi! How can I help you today?", "turn_idx": 0},
        {"role": "user", "content": f"I need to change reservation R{task_id}.", "turn_idx": 1},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": f"c{trial}a", "name": "get_reservation", "arguments": {"reservation_id": f"R{task_id}"}, "requestor": "assistant"},
                {"id": f"c{trial}b", "name": "get_user", "arguments": {"user_id": "mia_1"}, "requestor": "assistant"},
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
            "turn_idx": 2,
        },
        {
            "role": "tool",
            "tool_messages": [
                {
                    "id": f"c{trial}a",
                    "role": "tool",
                    "content": '{"status": "ok", "cabin": "economy"}',
                    "requestor": "assistant",
                    "error": False,
                },
                {"id": f"c{trial}b", "role": "tool", "content": "Error: user not found", "requestor": "assistant", "error": True},
            ],
        },
        {
            "role": "user",
            "content": "Also let me restart my phone.",
            "tool_calls": [{"id": f"u{trial}", "name": "reboot_device", "arguments": {}, "requestor": "user"}],
        },
        {"id": f"u{trial}", "role": "tool", "content": "Device rebooted", "requestor": "user", "error": False},
        {"role": "assistant", "content": f"Done: reservation R{task_id} changed.", "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
        {"role": "user", "content": "Thanks ###STOP###"},
    ]


def results(rewards: dict[str, list[float]], llm: str = "gpt-4.1", timestamp: str = "2026-01-01T00:00:00") -> dict:
    sims = []
    for task_id, trial_rewards in rewards.items():
        for trial, reward in enumerate(trial_rewards):
            sims.append(
                {
                    "id": f"sim-{task_id}-{trial}-{llm}",
                    "task_id": task_id,
                    "start_time": timestamp,
                    "end_time": timestamp,
                    "duration": 1.5,
                    "termination_reason": "user_stop",
                    "agent_cost": 0.01,
                    "user_cost": 0.002,
                    "reward_info": {
                        "reward": reward,
                        "db_check": {"db_match": reward > 0.5, "db_reward": 1.0 if reward > 0.5 else 0.0},
                        "action_checks": [
                            {
                                "action": {"action_id": "a1", "name": "update_reservation", "arguments": {"reservation_id": "R1"}},
                                "action_match": reward > 0.5,
                                "action_reward": 1.0,
                            },
                            {
                                "action": {"action_id": "a2", "name": "get_user", "arguments": {}},
                                "action_match": True,
                                "action_reward": 1.0,
                            },
                        ],
                        "reward_basis": ["DB", "COMMUNICATE"],
                        "reward_breakdown": {"DB": 1.0 if reward > 0.5 else 0.0, "COMMUNICATE": 1.0},
                    },
                    "messages": messages(task_id, trial),
                    "trial": trial,
                    "seed": 300 + trial,
                    "mode": "half_duplex",
                }
            )
    return {
        "timestamp": timestamp,
        "info": {
            "git_commit": "abc123",
            "num_trials": TRIALS,
            "max_steps": 100,
            "max_errors": 10,
            "seed": 300,
            "user_info": {"implementation": "user_simulator", "llm": "gpt-4.1-mini"},
            "agent_info": {"implementation": "llm_agent", "llm": llm},
            "environment_info": {"domain_name": "airline", "policy": POLICY},
        },
        "tasks": [task(t) for t in rewards],
        "simulations": sims,
    }


# 0.9999995 passes under tau2's 1e-6 tolerance; 0.5 (a partial reward) does not.
BEFORE = {
    "0": [1.0, 0.0, 0.9999995, 1.0],
    "1": [0.0, 0.0, 0.5, 0.0],
    "2": [1.0, 1.0, 1.0, 0.0],
    "3": [0.0, 0.0, 0.0, 0.0],
    "4": [0.0, 1.0, 0.0, 0.0],
    "5": [1.0, 0.0, 0.0, 0.0],
}
AFTER = {t: [1.0] * TRIALS for t in BEFORE}


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def is_successful(reward: float) -> bool:
    # tau2-bench src/tau2/metrics/agent_metrics.py, restated
    return (1 - 1e-6) <= reward <= (1 + 1e-6)


def test_one_row_per_simulation_with_tau2s_pass_rule(tmp_path):
    rows = tk.read_tau2(write(tmp_path, "results.json", results(BEFORE)))
    assert isinstance(rows, tk.rows.Rows) and len(rows) == 24 and rows.shapes == {"v1": 24}
    for row in rows:
        tk.rows.validate_row(row)
        raw = BEFORE[row["task_id"]][row["rollout_index"]]
        assert row["raw_reward"] == raw
        assert row["reward"] == (1.0 if is_successful(raw) else 0.0)
        assert row["scenario_id"] == f"tau2-{row['task_id']}"
        assert row["judge_status"] == "ok" and row["ended_by"] == "user_stop"
        assert row["lineage"]["model"] == "gpt-4.1" and row["lineage"]["user_model"] == "gpt-4.1-mini"
        assert row["lineage"]["domain"] == "airline" and row["lineage"]["eval_run"] == "2026-01-01T00:00:00"
        assert row["lineage"]["system_prompt_chars"] == len(POLICY)
        assert row["usage"] == {"input_tokens": 150, "output_tokens": 15}
    by_key = {(r["task_id"], r["rollout_index"]): r for r in rows}
    assert by_key[("0", 2)]["reward"] == 1.0 and by_key[("1", 2)]["reward"] == 0.0


def test_steps_pair_tool_results_and_keep_user_tool_calls_apart(tmp_path):
    row = tk.read_tau2(write(tmp_path, "results.json", results({"7": [1.0]})))[0]
    assert row["prefix"] == [{"role": "assistant", "content": "Hi! How can I help you today?"}]
    assert row["prompt"] == "I need to change reservation R7."
    assert row["steps"] == [
        {
            "tool": "get_reservation",
            "arguments": {"reservation_id": "R7"},
            "call_id": "c0a",
            "text": "Let me look.",
            "result": {"status": "ok", "cabin": "economy"},
        },
        {"tool": "get_user", "arguments": {"user_id": "mia_1"}, "call_id": "c0b", "result": "Error: user not found", "tool_error": True},
        {
            "user": "Also let me restart my phone.",
            "user_tool_calls": [{"tool": "reboot_device", "arguments": {}, "call_id": "u0", "result": "Device rebooted"}],
        },
        {"text": "Done: reservation R7 changed."},
        {"user": "Thanks ###STOP###"},
    ]
    assert row["final_text"] == "Done: reservation R7 changed."
    assert row["messages"][0] == {"role": "system", "content": POLICY}


def test_reward_breakdown_becomes_markers_and_answer_key_is_privileged(tmp_path):
    rows = tk.read_tau2(write(tmp_path, "results.json", results({"0": [1.0, 0.0]})))
    passed, failed = rows
    assert passed["markers"] == {"tau2_db": 1.0, "tau2_communicate": 1.0, "tau2_action_match_share": 1.0}
    assert failed["markers"] == {"tau2_db": 0.0, "tau2_communicate": 1.0, "tau2_action_match_share": 0.5}
    assert passed["privileged"]["tau2_task"]["evaluation_criteria"]["actions"][0]["name"] == "update_reservation"
    scrubbed = tk.rows.scrub(passed)
    assert "privileged" not in scrubbed
    assert "update_reservation" not in json.dumps(scrubbed) and "secret" not in json.dumps(scrubbed)
    assert "secret" not in repr(passed)
    out = tmp_path / "rows.jsonl"
    tk.rows.save_rows(list(rows), out)
    assert "secret" not in out.read_text() and "evaluation_criteria" not in out.read_text()


def test_pass_at_and_paired_compare_on_two_files(tmp_path):
    """Reference: pass^4 by math.comb over each task's passes; the exact sign-flip p of 6
    tasks all improving is 2 / 2**6."""
    before = tk.read_tau2(write(tmp_path, "before.json", results(BEFORE, llm="small")))
    after = tk.read_tau2(write(tmp_path, "after.json", results(AFTER, llm="big", timestamp="2026-01-02T00:00:00")))
    result = tk.pass_at(before)
    assert result.k == TRIALS
    passes = {t: sum(is_successful(r) for r in rs) for t, rs in BEFORE.items()}
    assert result.pass_at_1 == pytest.approx(sum(c / TRIALS for c in passes.values()) / len(passes))
    assert result.pass_pow_k == pytest.approx(sum(math.comb(c, TRIALS) for c in passes.values()) / len(passes))
    comparison = tk.compare_runs(before, after)
    assert comparison.n_paired == len(BEFORE)
    assert comparison.pvalue == pytest.approx(2 / 2 ** len(BEFORE))
    assert comparison.verdict == "b_better"
    report = tk.delta_report(before, after)  # the same paired comparison, as the report's target
    assert report[report.target].delta == pytest.approx(comparison.delta) and report[report.target].n_paired == len(BEFORE)
    variance = tk.eval_variance(before, after)
    assert variance.n_runs == 2 and variance.run_std > 0


def test_dir_format_reads_like_the_json_format(tmp_path):
    """Reference: tau2's Results.save(format="dir"): results.json without simulations, one
    simulations/<id>.json per simulation; the same rows as the monolithic file."""
    data = results(BEFORE)
    whole = tk.read_tau2(write(tmp_path, "results.json", data))
    run = tmp_path / "run"
    (run / "simulations").mkdir(parents=True)
    meta = {k: v for k, v in data.items() if k != "simulations"}
    (run / "results.json").write_text(json.dumps(meta))
    for sim in data["simulations"]:
        (run / "simulations" / f"{sim['id']}.json").write_text(json.dumps(sim))
    for target in (run, run / "results.json"):
        split = tk.read_tau2(target)

        def key(rows):
            return sorted((r["task_id"], r["rollout_index"], r["reward"], r["raw_reward"]) for r in rows)

        assert key(split) == key(whole)


def test_bad_simulation_named_and_rest_kept(tmp_path):
    data = results(BEFORE)
    data["simulations"][3]["reward_info"]["reward"] = "high"
    del data["simulations"][5]["task_id"]
    path = write(tmp_path, "results.json", data)
    with pytest.raises(RowError, match=r"simulations\[3\]\.reward_info\.reward"):
        tk.read_tau2(path)
    with pytest.warns(UserWarning, match="skipped 2 malformed simulation"):
        rows = tk.read_tau2(path, strict=False)
    assert len(rows) == 22 and rows.skipped == 2 and rows.skipped_lines == [3, 5]


def test_infrastructure_errors_kept_with_reward_none_and_missing_reward(tmp_path):
    data = results({"0": [1.0, 1.0, 0.0]})
    data["simulations"][1]["termination_reason"] = "infrastructure_error"
    data["simulations"][2]["reward_info"] = None
    with pytest.warns(UserWarning, match="1 of 3 simulations.*infrastructure error"):
        rows = tk.read_tau2(write(tmp_path, "results.json", data))
    assert [r["reward"] for r in rows] == [1.0, None, None]
    assert [r["judge_status"] for r in rows] == ["ok", "error", "missing_reward"]


def test_not_tau2_results(tmp_path):
    with pytest.raises(RowError, match=r"\.info: required"):
        tk.read_tau2(write(tmp_path, "a.json", {"simulations": []}))
    with pytest.raises(RowError, match="expected a tau2-bench Results object"):
        tk.read_tau2(write(tmp_path, "b.json", [1, 2]))
    (tmp_path / "c.json").write_text("{nope")
    with pytest.raises(RowError, match="not valid JSON"):
        tk.read_tau2(tmp_path / "c.json")
    with pytest.raises(FileNotFoundError):
        tk.read_tau2(tmp_path / "missing.json")
    data = results({"0": [1.0]})
    data["simulations"][0]["messages"] = None
    with pytest.raises(RowError, match="half-duplex"):
        tk.read_tau2(write(tmp_path, "d.json", data))
    data = results({"0": [1.0]})
    data["simulations"][0]["messages"][2]["tool_calls"][0]["arguments"] = '{"a": 1}'
    with pytest.raises(RowError, match=r"tool_calls\[0\]\.arguments"):
        tk.read_tau2(write(tmp_path, "e.json", data))


def test_missing_trial_numbers_count_per_task(tmp_path):
    data = results({"0": [1.0, 0.0], "1": [1.0]})
    for sim in data["simulations"]:
        sim.pop("trial")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = tk.read_tau2(write(tmp_path, "results.json", data))
    assert [(r["task_id"], r["rollout_index"]) for r in rows] == [("0", 0), ("0", 1), ("1", 0)]


def deep(levels: int) -> dict:
    """A JSON object nested ``levels`` deep: valid JSON, below the decoder's own limit."""
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_inline_simulations_win_over_a_neighbouring_directory(tmp_path):
    """Reference: the file states tasks 1 and 2; a simulations/ directory beside it (another
    run saved in the same folder) holds task 99. The file's own are its run."""
    write(tmp_path, "results.json", results({"1": [1.0], "2": [0.0]}))
    (tmp_path / "simulations").mkdir()
    neighbour = results({"99": [1.0]})["simulations"][0]
    (tmp_path / "simulations" / f"{neighbour['id']}.json").write_text(json.dumps(neighbour))
    with pytest.warns(UserWarning, match=r"both results\.json \(2 simulation\(s\) of its own\) and .*simulations \(1 file\(s\)\)"):
        rows = tk.read_tau2(tmp_path / "results.json")
    assert [r["task_id"] for r in rows] == ["1", "2"]
    # the directory given is tau2's dir format by request: its simulations/ is read, with the same warning
    with pytest.warns(UserWarning, match=r"read .*simulations's and not results\.json's"):
        rows = tk.read_tau2(tmp_path)
    assert [r["task_id"] for r in rows] == ["99"]


def test_a_repeated_task_and_trial_is_refused_or_skipped(tmp_path):
    data = results({"0": [1.0, 0.0, 1.0]})
    data["simulations"][2]["trial"] = 0  # a second trial 0 of task 0: the same rollout_id
    path = write(tmp_path, "results.json", data)
    with pytest.raises(RowError, match=r"simulations\[2\]: task '0' trial 0 again \(first at results\.json\.simulations\[0\]\)"):
        tk.read_tau2(path)
    with pytest.warns(UserWarning, match=r"skipped 1 malformed simulation.*trial 0 again"):
        rows = tk.read_tau2(path, strict=False)
    assert [r["rollout_index"] for r in rows] == [0, 1] and rows.skipped == 1 and rows.skipped_lines == [2]


def test_a_missing_trial_number_never_takes_one_stated_later(tmp_path):
    data = results({"0": [1.0, 0.0, 1.0]})
    data["simulations"][0].pop("trial")  # before one stating trial 0: it must not become 0 too
    data["simulations"][1]["trial"] = 0
    data["simulations"][2]["trial"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = tk.read_tau2(write(tmp_path, "results.json", data))
    assert [r["rollout_index"] for r in rows] == [2, 0, 1]
    assert len({r["rollout_id"] for r in rows}) == 3


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_reward_that_is_not_a_finite_number_is_refused(tmp_path, bad):
    data = results({"0": [1.0, 0.0]})
    data["simulations"][1]["reward_info"]["reward"] = bad  # json.dumps writes NaN / Infinity
    path = write(tmp_path, "results.json", data)
    with pytest.raises(RowError, match=rf"simulations\[1\]\.reward_info\.reward: expected a finite number, got {bad!r}"):
        tk.read_tau2(path)
    with pytest.warns(UserWarning, match="skipped 1 malformed simulation"):
        rows = tk.read_tau2(path, strict=False)
    assert [r["reward"] for r in rows] == [1.0] and rows.skipped_lines == [1]


def test_json_nested_too_deep_is_a_row_error_not_a_recursion_error(tmp_path):
    data = results({"0": [1.0, 1.0]})
    data["simulations"][1]["messages"][2]["tool_calls"][0]["arguments"] = deep(900)
    path = write(tmp_path, "results.json", data)
    json.loads(path.read_text())  # valid JSON: the decoder itself reads it
    with pytest.raises(RowError, match=r"simulations\[1\]: the simulation nests deeper than 100 levels"):
        tk.read_tau2(path)
    with pytest.warns(UserWarning, match="skipped 1 malformed simulation"):
        rows = tk.read_tau2(path, strict=False)
    assert len(rows) == 1 and rows.skipped_lines == [1]
