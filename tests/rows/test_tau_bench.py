"""Tests for toolkit.rows.tau_bench.read_tau_bench on a small tau-bench-shaped fixture of our own."""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict

import pytest

import toolkit as tk

SYSTEM = "# Shop Agent Policy\n\n" + "Always confirm before refunding. " * 10


def trajectory(task_id: int, trial: int) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Hi, I want a refund for order #{task_id}."},
        {"role": "assistant", "content": "Sure. What is your user id?"},
        {"role": "user", "content": "It is user_7."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"call_a{trial}", "type": "function", "function": {"name": "get_user", "arguments": '{"user_id": "user_7"}'}},
                {"id": f"call_b{trial}", "type": "function", "function": {"name": "get_order", "arguments": json.dumps({"order_id": f"#{task_id}"})}},
            ],
        },
        {"role": "tool", "tool_call_id": f"call_a{trial}", "name": "get_user", "content": '{"name": "Ada", "orders": ["#1"]}'},
        {"role": "tool", "tool_call_id": f"call_b{trial}", "name": "get_order", "content": "Error: order not found"},
        {
            "role": "assistant",
            "content": "Let me try the refund.",
            "tool_calls": [{"id": f"call_c{trial}", "type": "function", "function": {"name": "refund", "arguments": "not json"}}],
        },
        {"role": "tool", "tool_call_id": f"call_c{trial}", "name": "refund", "content": "[1, 2]"},
        {"role": "assistant", "content": f"Done: refund issued for #{task_id}."},
        {"role": "user", "content": "Thanks! ###STOP###"},
    ]


def results(rewards: dict[int, list[float]]) -> list[dict]:
    out = []
    for task_id, trial_rewards in rewards.items():
        for trial, reward in enumerate(trial_rewards):
            out.append(
                {
                    "task_id": task_id,
                    "reward": reward,
                    "trial": trial,
                    "info": {
                        "task": {"user_id": "user_7", "actions": [{"name": "refund", "kwargs": {}}], "instruction": "secret goal"},
                        "source": "user",
                        "user_cost": 0.001,
                        "reward_info": {"reward": reward},
                    },
                    "traj": trajectory(task_id, trial),
                }
            )
    return out


REWARDS = {0: [1.0, 0.0, 0.9999999, 1.0], 1: [0.0, 0.0, 0.5, 0.0], 2: [1.0, 1.0, 1.0, 1.0]}


@pytest.fixture()
def tau_file(tmp_path):
    path = tmp_path / "tau-fixture.json"
    path.write_text(json.dumps(results(REWARDS)))
    return path


def test_maps_one_row_per_trial_with_ids_and_binary_reward(tau_file):
    rows = tk.read_tau_bench(tau_file)
    assert isinstance(rows, tk.rows.Rows) and len(rows) == 12 and rows.shapes == {"v1": 12}
    first = rows[0]
    assert first["schema_version"] == "1"
    assert first["scenario_id"] == "tau-0" and first["task_id"] == 0 and first["rollout_index"] == 0
    assert first["rollout_id"] == "tau-0-0"
    assert [r["reward"] for r in rows[:4]] == [1.0, 0.0, 1.0, 1.0]
    assert rows[2]["raw_reward"] == 0.9999999
    assert rows[6]["reward"] == 0.0 and rows[6]["raw_reward"] == 0.5  # partial credit is not a pass
    assert first["judge_name"] == "tau-bench"
    for row in rows:
        tk.validate_row(row)


def test_prompt_steps_final_text_and_messages(tau_file):
    row = tk.read_tau_bench(tau_file)[5]
    traj = trajectory(1, 1)
    assert row["prompt"] == "Hi, I want a refund for order #1."
    assert row["messages"] == traj[1:]
    assert row["final_text"] == "Done: refund issued for #1."
    assert row["steps"] == [
        {"text": "Sure. What is your user id?"},
        {"user": "It is user_7."},
        {"tool": "get_user", "arguments": {"user_id": "user_7"}, "call_id": "call_a1", "result": {"name": "Ada", "orders": ["#1"]}},
        {"tool": "get_order", "arguments": {"order_id": "#1"}, "call_id": "call_b1", "result": "Error: order not found"},
        {"tool": "refund", "arguments": {}, "raw_arguments": "not json", "call_id": "call_c1", "text": "Let me try the refund.", "result": [1, 2]},
        {"text": "Done: refund issued for #1."},
        {"user": "Thanks! ###STOP###"},
    ]
    assert row["ended_by"] == "user" and row["user_cost"] == 0.001


def test_lineage_carries_the_system_prompt_hash(tau_file):
    lineage = tk.read_tau_bench(tau_file)[0]["lineage"]
    assert lineage["system_prompt_sha"] == hashlib.sha256(SYSTEM.encode("utf-8")).hexdigest()[:16]
    assert lineage["system_prompt_head"] == SYSTEM[:120] and len(lineage["system_prompt_head"]) == 120
    assert lineage["system_prompt_chars"] == len(SYSTEM)


def test_answer_key_is_privileged_and_never_written(tau_file, tmp_path):
    rows = tk.read_tau_bench(tau_file)
    assert rows[0]["privileged"]["tau_bench_info"]["task"]["instruction"] == "secret goal"
    out = tmp_path / "tau.jsonl"
    tk.save_rows(rows, out)
    text = out.read_text()
    assert "secret goal" not in text and "privileged" not in text
    back = tk.read_rows(out)
    assert len(back) == 12 and back[0]["reward"] == 1.0
    # messages are rebuilt from steps on write; the tool calls keep their ids.
    assert back[0]["messages"][3]["tool_calls"][0]["id"] == "call_a0"


def test_pass_hat_k_from_rows_matches_tau_bench_definition(tau_file):
    # tau-bench: pass^k = mean over tasks of C(c, k) / C(n, k), success = reward within 1e-6 of 1.
    raw = results(REWARDS)
    successes = defaultdict(int)
    for entry in raw:
        successes[entry["task_id"]] += abs(entry["reward"] - 1) <= 1e-6
    rows = tk.read_tau_bench(tau_file)
    from_rows = defaultdict(int)
    for row in rows:
        from_rows[row["task_id"]] += int(row["reward"])
    assert from_rows == successes == {0: 3, 1: 0, 2: 4}
    pass_hat_2 = sum(math.comb(c, 2) / math.comb(4, 2) for c in from_rows.values()) / 3
    assert pass_hat_2 == pytest.approx((3 / 6 + 0 + 1) / 3)


def test_bad_files_are_named(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"task_id": 1}))
    with pytest.raises(tk.RowError, match="expected a JSON list"):
        tk.read_tau_bench(path)
    entry = results({3: [1.0]})[0]
    del entry["traj"]
    path.write_text(json.dumps([results({2: [1.0]})[0], entry]))
    with pytest.raises(tk.RowError, match=r"bad\.json\[1\]\.traj: required"):
        tk.read_tau_bench(path)
    entry = results({3: [True]})[0]
    path.write_text(json.dumps([entry]))
    with pytest.raises(tk.RowError, match=r"\[0\]\.reward: expected a number, got bool"):
        tk.read_tau_bench(path)
    path.write_text("not json")
    with pytest.raises(tk.RowError, match="not valid JSON"):
        tk.read_tau_bench(path)


def test_tool_message_without_id_pairs_with_the_oldest_open_call(tmp_path):
    entry = results({4: [0.0]})[0]
    for message in entry["traj"]:
        message.pop("tool_call_id", None)
        for call in message.get("tool_calls") or []:
            call.pop("id")
    path = tmp_path / "noid.json"
    path.write_text(json.dumps([entry]))
    steps = tk.read_tau_bench(path)[0]["steps"]
    tools = [s for s in steps if "tool" in s]
    assert [t["result"] for t in tools] == [{"name": "Ada", "orders": ["#1"]}, "Error: order not found", [1, 2]]


def test_the_answer_key_stays_out_of_to_pandas_csv_and_row_repr(tau_file, tmp_path):
    # Issue 21 row 11, as the attack: tk.to_pandas(tk.read_tau_bench(...)).to_csv(...).
    rows = tk.read_tau_bench(tau_file)
    out = tmp_path / "tau.csv"
    tk.to_pandas(rows).to_csv(out)
    text = out.read_text()
    assert "secret goal" not in text and "privileged" not in text and "tau_bench_info" not in text
    import pandas as pd

    assert len(pd.read_csv(out)) == 12  # every trial is there: only the block was left out
    assert "secret goal" not in repr(rows[0]) and "secret goal" not in str(rows[0])
    assert "tau_bench_info" in repr(rows[0])  # the repr says the block is there
    # still readable in memory, still JSON, and the rows themselves are unchanged
    assert rows[0]["privileged"]["tau_bench_info"]["task"]["instruction"] == "secret goal"
    assert "secret goal" in json.dumps(rows[0]["privileged"])
    import copy

    assert "secret goal" not in repr(copy.deepcopy(rows[0]))
