"""Tests for toolkit.rows: schema, validation, scrub, messages, objects, writers, reader, pandas."""

from __future__ import annotations

import copy
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolkit as tk

SCRUBBED = ("privileged", "principle", "hidden_state", "reference", "rubric", "vector")


def make_row(**fields):
    row = {
        "schema_version": "1",
        "scenario_id": "refund-7",
        "prompt": "Please refund order A17.",
        "steps": [
            {"tool": "lookup_order", "arguments": {"order_id": "A17"}, "result": {"status": "delivered"}},
            {"user": "It arrived broken."},
            {"tool": "refund_order", "arguments": {"order_id": "A17"}, "result": {"ok": True}, "text": "Refunding now."},
            {"text": "Your refund for A17 is on its way."},
        ],
        "final_text": "Your refund for A17 is on its way.",
    }
    row.update(fields)
    return row


def walk_keys(value):
    """Every dict key at any depth of ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from walk_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk_keys(item)


# ---------------------------------------------------------------- schema and validation


def test_schema_is_package_data_and_a_valid_draft_2020_12_schema():
    from importlib import resources

    text = resources.files("toolkit").joinpath("schemas/row-v1.json").read_text(encoding="utf-8")
    schema = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert sorted(schema["required"]) == ["final_text", "prompt", "schema_version", "steps"]
    assert schema["additionalProperties"] is True
    assert tk.rows.row_schema() == schema
    for name in ("reward", "markers", "lineage", "sampling", "judge_status", "gold_reward", "rollout_index"):
        assert name in schema["properties"]


def test_valid_row_passes_and_unknown_fields_ride_along():
    tk.validate_row(make_row(reward=1, my_own_field={"anything": [1, 2]}))
    tk.validate_row(make_row(reward=None, markers={"hedging": 0, "length": 0.5}))
    tk.validate_row(make_row(reward=np.float64(0.5), rollout_index=np.int64(3)))


def test_error_names_nested_field_path_and_expected_type():
    row = make_row()
    row["steps"][2]["arguments"] = '{"order_id": "A17"}'
    with pytest.raises(tk.RowError) as caught:
        tk.validate_row(row)
    assert str(caught.value).startswith("row.steps[2].arguments: expected an object, got str")


def test_bool_reward_is_refused():
    with pytest.raises(tk.RowError, match=r"row\.reward: expected a number or null, got bool"):
        tk.validate_row(make_row(reward=True))


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"prompt": 3}, r"row\.prompt: expected a string, got int"),
        ({"steps": {}}, r"row\.steps: expected a list, got dict"),
        ({"schema_version": "2"}, r'row\.schema_version: expected "1", got \'2\''),
        ({"judge_status": "timout"}, r"row\.judge_status: expected one of .*did you mean 'timeout'"),
        ({"rollout_index": -1}, r"row\.rollout_index: expected a value >= 0"),
        ({"markers": {"hedging": "yes"}}, r"row\.markers\.hedging: expected a number or null, got str"),
        ({"gold_reward": 0.5}, r"row\.gold_reward: expected one of 0, 1, null"),
        ({"lineage": {"system_prompt_sha": "XYZ"}}, r"row\.lineage\.system_prompt_sha: expected 16 lowercase hex"),
        ({"sampling": {"temperature": "hot"}}, r"row\.sampling\.temperature: expected a number or null"),
        ({"steps": [{"thought": "hm"}]}, r"row\.steps\[0\]: expected a step with 'user', 'tool' or 'text'"),
        ({"steps": [{"tool": "lookup", "result": 1}]}, r"row\.steps\[0\]\.arguments: a tool step needs 'arguments'"),
    ],
)
def test_each_problem_is_named(change, expected):
    with pytest.raises(tk.RowError, match=expected):
        tk.validate_row(make_row(**change))


def test_missing_required_field_suggests_the_typo():
    row = make_row()
    row["final_txt"] = row.pop("final_text")
    with pytest.raises(tk.RowError, match=r"row\.final_text: required field is missing .*'final_txt'"):
        tk.validate_row(row)


def test_several_problems_reported_together():
    with pytest.raises(tk.RowError) as caught:
        tk.validate_row(make_row(prompt=1, reward="high"))
    message = str(caught.value)
    assert "row.prompt" in message and "row.reward" in message and "; also: " in message


def test_version_zero_rows_only_need_to_be_non_empty_dicts():
    tk.validate_row({"messages": [{"role": "user", "content": "hi"}]})
    tk.validate_row({"prompt": 5})  # unstamped: types are not checked
    with pytest.raises(tk.RowError, match="non-empty"):
        tk.validate_row({})
    with pytest.raises(tk.RowError, match="expected an object"):
        tk.validate_row(["not", "a", "row"])


def test_row_error_is_a_toolkit_error_and_value_error():
    with pytest.raises(tk.ToolkitError):
        tk.validate_row({})
    with pytest.raises(ValueError):
        tk.validate_row({})


# ---------------------------------------------------------------- messages_from_steps


def test_messages_from_steps_builds_openai_chat_messages():
    row = make_row()
    messages = tk.rows.messages_from_steps(row["prompt"], row["steps"], system_prompt="Be kind.")
    assert messages == [
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Please refund order A17."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_0", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order_id":"A17"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": '{"status":"delivered"}'},
        {"role": "user", "content": "It arrived broken."},
        {
            "role": "assistant",
            "content": "Refunding now.",
            "tool_calls": [
                {"id": "call_2", "type": "function", "function": {"name": "refund_order", "arguments": '{"order_id":"A17"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": '{"ok":true}'},
        {"role": "assistant", "content": "Your refund for A17 is on its way."},
    ]
    # The arguments string is JSON of the step's object, encoded exactly once.
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "A17"}


def test_messages_keep_call_ids_string_results_and_skip_unanswered_calls():
    steps = [
        {"tool": "search", "arguments": {"q": "x"}, "result": "Error: timeout", "call_id": "abc"},
        {"tool": "search", "arguments": '{"q": "y"}'},  # imported, already encoded, never answered
    ]
    messages = tk.rows.messages_from_steps("find x", steps, prefix=[{"role": "assistant", "content": "Hello!"}])
    assert [m["role"] for m in messages] == ["assistant", "user", "assistant", "tool", "assistant"]
    assert messages[3] == {"role": "tool", "tool_call_id": "abc", "content": "Error: timeout"}
    assert messages[4]["tool_calls"][0]["function"]["arguments"] == '{"q": "y"}'


def test_messages_from_steps_refuses_a_shapeless_step():
    with pytest.raises(tk.RowError, match=r"steps\[1\]"):
        tk.rows.messages_from_steps("p", [{"text": "a"}, {"thought": "b"}])


# ---------------------------------------------------------------- scrub


def test_scrub_removes_privileged_keys_at_every_depth_and_rebuilds_messages():
    row = make_row(
        privileged={"reference": "the answer"},
        rubric="secret",
        vector=[0.1, 0.2],
        _scratch=1,
        judge_meta={"model": "m", "rubric": "criteria"},
        world_state="unknown",
        faults=[{"tool": "lookup_order", "mode": "timeout"}, "garbage"],
        messages=[{"role": "system", "content": "Policy."}, {"role": "user", "content": "stale"}],
    )
    row["steps"][0]["result"] = {"status": "delivered", "hidden_state": {"fraud": True}, "_id": "keep me"}
    row["steps"][1]["_engine"] = "scratch"
    row["steps"][2]["arguments"]["notes"] = [{"principle": "never refund"}, {"ok": 1}]
    original = copy.deepcopy(row)

    clean = tk.rows.scrub(row)

    assert row == original  # never mutates its input
    assert not set(walk_keys(clean)) & set(SCRUBBED)
    assert "_scratch" not in clean and "_engine" not in clean["steps"][1]
    assert clean["steps"][0]["result"]["_id"] == "keep me"  # data inside results is kept
    assert "world_state" not in clean
    assert clean["faults"] == [{"tool": "lookup_order", "mode": "timeout"}]
    assert clean["judge_meta"] == {"model": "m"}
    assert clean["messages"] == tk.rows.messages_from_steps(clean["prompt"], clean["steps"], system_prompt="Policy.")
    assert "hidden_state" not in json.dumps(clean["messages"])


def test_scrub_keeps_messages_of_a_training_row_without_steps():
    row = {"messages": [{"role": "user", "content": "hi", "vector": [1]}]}
    assert tk.rows.scrub(row) == {"messages": [{"role": "user", "content": "hi"}]}


json_leaves = st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
key_names = st.sampled_from(SCRUBBED + ("_tmp", "a", "result", "reference_id", "data")) | st.text(max_size=5)
nested_json = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(key_names, children, max_size=4),
    max_leaves=25,
)


@given(
    extras=st.dictionaries(key_names, nested_json, max_size=5),
    results=st.lists(nested_json, min_size=1, max_size=3),
)
def test_property_no_privileged_key_survives_any_nesting(extras, results):
    row = make_row()
    row.update({k: v for k, v in extras.items() if k not in ("schema_version", "prompt", "steps", "final_text")})
    for position, result in enumerate(results):
        row["steps"].insert(0, {"tool": "t", "arguments": {"x": result}, "result": result})
    before = copy.deepcopy(row)
    clean = tk.rows.scrub(row)
    assert row == before
    assert not set(walk_keys(clean)) & set(SCRUBBED)
    assert not any(isinstance(k, str) and k.startswith("_") for k in clean)
    assert tk.rows.scrub(clean) == clean  # idempotent


# ---------------------------------------------------------------- from_row / to_row


def test_from_row_splits_into_objects():
    row = make_row(
        task_id=17,
        rollout_index=2,
        rollout_id="r-2",
        reward=1.0,
        judge_name="rule",
        judge_status="ok",
        markers={"hedging": 1, "apology": 0.0},
        tier="hard",
        seed=4,
        model_version="m-1",
        sampling=None,
        lineage={"eval_run": 0},
        favourite_colour="blue",
    )
    task, rollout, judgment, markers = tk.rows.from_row(row)
    assert isinstance(task, tk.rows.Task) and task.prompt == row["prompt"] and task.key == "refund-7"
    assert task.axes == {"tier": "hard"} and task.world == {"seed": 4}
    assert rollout.index == 2 and rollout.rollout_id == "r-2" and len(rollout.steps) == 4
    assert rollout.policy == {"model_version": "m-1", "sampling": None}
    assert rollout.extra == {"favourite_colour": "blue"}
    assert judgment.reward == 1.0 and judgment.status == "ok" and judgment.scorer == {"judge_name": "rule"}
    assert [(m.name, m.value, m.rollout_id) for m in markers] == [("hedging", 1, "r-2"), ("apology", 0.0, "r-2")]
    with pytest.raises(dataclasses_frozen_error()):
        task.prompt = "changed"
    assert tk.rows.to_row(task, rollout, judgment, markers) == row


def dataclasses_frozen_error():
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_ungraded_row_has_no_judgment_and_explicit_null_reward_is_kept():
    task, rollout, judgment, markers = tk.rows.from_row(make_row())
    assert judgment is None and markers == []
    row = make_row(reward=None, markers={})
    parts = tk.rows.from_row(row)
    assert parts[2] is not None and parts[2].reward is None
    assert tk.rows.to_row(*parts) == row


def test_to_row_accepts_a_marker_mapping_and_validates():
    task = tk.rows.Task(prompt="hi", scenario_id="s1")
    rollout = tk.rows.Rollout(steps=({"text": "hello"},), final_text="hello", index=0)
    row = tk.rows.to_row(task, rollout, tk.rows.Judgment(reward=0.0), {"hedging": 1})
    assert row == {
        "schema_version": "1",
        "prompt": "hi",
        "scenario_id": "s1",
        "steps": [{"text": "hello"}],
        "final_text": "hello",
        "rollout_index": 0,
        "reward": 0.0,
        "markers": {"hedging": 1},
    }
    with pytest.raises(tk.RowError, match="row.final_text"):
        tk.rows.to_row(task, tk.rows.Rollout(steps=()), None)
    with pytest.raises(tk.RowError, match="reward"):
        tk.rows.to_row(task, tk.rows.Rollout(steps=(), final_text="", extra={"reward": 1.0}))
    with pytest.raises(tk.RowError, match="did you mean 'model_version'"):
        tk.rows.to_row(task, tk.rows.Rollout(steps=(), final_text="", policy={"model_verison": "m"}))
    with pytest.raises(TypeError, match="Task"):
        tk.rows.to_row({"prompt": "hi"}, rollout)


def test_marker_evidence_round_trips():
    task, rollout, judgment, markers = tk.rows.from_row(make_row(markers={"hedging": 1}, marker_evidence={"hedging": "I think"}))
    assert markers[0].evidence == "I think"
    row = tk.rows.to_row(task, rollout, judgment, [tk.rows.Marker("hedging", 1, evidence="maybe")])
    assert row["marker_evidence"] == {"hedging": "maybe"}


def test_version_zero_row_round_trips_without_a_stamp():
    row = {"scenario_id": "old", "steps": "not even a list", "reward": 1, "markers": [1, 2]}
    parts = tk.rows.from_row(row)
    assert parts[1].schema_version is None
    assert tk.rows.to_row(*parts) == row


_text = st.text(max_size=8)
_number = st.integers(-50, 50) | st.floats(-10, 10, allow_nan=False)
_step = st.one_of(
    st.fixed_dictionaries({"user": _text}),
    st.fixed_dictionaries(
        {"text": _text},
        optional={"logprob": st.floats(-50, 0), "n_tokens": st.integers(0, 99), "truncated": st.booleans()},
    ),
    st.fixed_dictionaries(
        {"tool": st.text(min_size=1, max_size=6), "arguments": st.dictionaries(_text, nested_json, max_size=3)},
        optional={"result": nested_json, "text": _text, "call_id": _text},
    ),
)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": _text})
_optional_fields = {
    "scenario_id": _text,
    "task_id": _text | st.integers(0, 99),
    "spec_id": st.none() | _text,
    "rollout_id": _text,
    "rollout_index": st.integers(0, 9),
    "group_id": st.none() | _text,
    "prefix": st.lists(_message, max_size=2),
    "messages": st.lists(_message, max_size=3),
    "privileged": st.none() | st.dictionaries(st.sampled_from(["principle", "reference"]), _text),
    "opener": nested_json,
    "tier": nested_json,
    "stance": nested_json,
    "history": nested_json,
    "world_state": nested_json,
    "faults": st.lists(nested_json, max_size=2),
    "usable": st.none() | st.booleans(),
    "reward": st.none() | _number,
    "raw_reward": st.none() | _number,
    "reason": st.none() | _text,
    "judge_name": st.none() | _text,
    "judge_status": st.sampled_from(["ok", "missing_reward", "invalid_result", "error", "timeout", None]),
    "judge_meta": st.none() | st.dictionaries(_text, nested_json, max_size=2),
    "failure_class": st.none() | _text,
    "llm_reward": st.none() | _number,
    "gold_reward": st.sampled_from([0, 1, None]),
    "markers": st.dictionaries(_text, st.none() | _number, max_size=3),
    "marker_evidence": st.dictionaries(_text, nested_json, max_size=2),
    "logprob": st.none() | st.floats(-100, 0),
    "n_tokens": st.none() | st.integers(0, 500),
    "sampling": st.none()
    | st.fixed_dictionaries({}, optional={"temperature": st.floats(0, 2), "max_tokens": st.integers(1, 99), "model": _text}),
    "policy_version": st.none() | _text,
    "model_version": st.none() | _text,
    "finish_reason": st.sampled_from(["stop", "length", "tool", "error", None]),
    "writer_model": st.none() | _text,
    "lineage": st.fixed_dictionaries(
        {},
        optional={
            "system_prompt_sha": st.sampled_from(["0123456789abcdef", "fedcba9876543210"]),
            "system_prompt_head": _text,
            "eval_run": st.integers(0, 3),
            "replayed": st.booleans(),
        },
    ),
    "scenario_dimensions": st.dictionaries(_text, nested_json, max_size=2),
    "seed": st.integers(0, 99),
    "seeded": st.lists(_text, max_size=2),
    "usage": st.fixed_dictionaries({"input_tokens": st.integers(0, 99), "output_tokens": st.integers(0, 99)}),
    "tools": st.lists(nested_json, max_size=2),
    "quality": nested_json,
    "calibration": st.none() | st.fixed_dictionaries({"n": st.integers(0, 9), "pass_rate": st.floats(0, 1)}),
}
_schema_fields = set(tk.rows.row_schema()["properties"]) | {"marker_evidence"}
rows_v1 = st.builds(
    lambda base, unknown: {**unknown, **base},
    st.fixed_dictionaries(
        {
            "schema_version": st.just("1"),
            "prompt": _text,
            "steps": st.lists(_step, max_size=4),
            "final_text": _text,
        },
        optional=_optional_fields,
    ),
    st.dictionaries(_text.filter(lambda k: k not in _schema_fields), nested_json, max_size=3),
)


@given(rows_v1)
def test_property_round_trip_is_lossless(row):
    tk.validate_row(row)
    before = copy.deepcopy(row)
    parts = tk.rows.from_row(row)
    assert row == before
    assert tk.rows.to_row(*parts) == row


# ---------------------------------------------------------------- RowWriter


def test_row_writer_validates_scrubs_and_appends(tmp_path):
    path = tmp_path / "out" / "run.jsonl"
    with tk.RowWriter(path) as writer:
        written = writer.write(make_row(privileged={"rubric": "x"}, reward=np.float32(1.0), logprob=float("nan")))
        with pytest.raises(tk.RowError, match=r"row\.reward"):
            writer.write(make_row(reward=True))
        writer.write(make_row(scenario_id="second"))
        assert writer.count == 2
    assert "privileged" not in written and written["logprob"] is None and written["reward"] == 1.0
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and json.loads(lines[0]) == written
    with tk.RowWriter(path) as writer:  # append keeps what is there
        writer.write(make_row(scenario_id="third"))
    assert [r["scenario_id"] for r in tk.read_rows(path)] == ["refund-7", "second", "third"]
    with pytest.raises(tk.RowError, match="closed"):
        writer.write(make_row())


def test_row_writer_modes(tmp_path):
    path = tmp_path / "run.jsonl"
    with tk.RowWriter(path, mode="x") as writer:
        writer.write(make_row())
    with pytest.raises(FileExistsError):
        tk.RowWriter(path, mode="x")
    with tk.RowWriter(path, mode="w") as writer:
        writer.write(make_row(scenario_id="fresh"))
    assert [r["scenario_id"] for r in tk.read_rows(path)] == ["fresh"]
    with pytest.raises(tk.ConfigError, match="did you mean 'a'|valid names"):
        tk.RowWriter(path, mode="append")


def test_row_writer_is_thread_safe(tmp_path):
    path = tmp_path / "threads.jsonl"
    with tk.RowWriter(path) as writer:

        def work(thread):
            for index in range(25):
                writer.write(make_row(scenario_id=f"t{thread}", rollout_index=index, final_text="x" * 3000))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    rows = tk.read_rows(path)
    assert len(rows) == 150 and rows.skipped == 0
    assert {(r["scenario_id"], r["rollout_index"]) for r in rows} == {(f"t{t}", i) for t in range(6) for i in range(25)}


def test_torn_tail_is_truncated_on_append(tmp_path):
    path = tmp_path / "torn.jsonl"
    good = json.dumps(make_row()) + "\n"
    path.write_text(good + good + '{"schema_version": "1", "prompt": "half wri', encoding="utf-8")
    with pytest.warns(UserWarning, match="torn final line"):
        writer = tk.RowWriter(path)
    assert writer.repaired == "truncated"
    with writer:
        writer.write(make_row(scenario_id="after"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = tk.read_rows(path)
    assert [r["scenario_id"] for r in rows] == ["refund-7", "refund-7", "after"]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "handmade.jsonl"
    path.write_text(json.dumps(make_row(scenario_id="one")) + "\n" + json.dumps(make_row(scenario_id="two")), encoding="utf-8")
    with tk.RowWriter(path) as writer:
        assert writer.repaired == "newline_added"
        writer.write(make_row(scenario_id="three"))
    assert [r["scenario_id"] for r in tk.read_rows(path)] == ["one", "two", "three"]


_KILLED_WRITER = r"""
import sys
import toolkit as tk
payload = "x" * int(sys.argv[2])
with tk.RowWriter(sys.argv[1]) as writer:
    index = 0
    while True:
        writer.write({"schema_version": "1", "prompt": f"p{index}", "steps": [{"text": payload}],
                      "final_text": payload, "rollout_index": index})
        print(index, flush=True)
        index += 1
"""


def test_rows_reported_written_survive_sigkill(tmp_path):
    path = tmp_path / "killed.jsonl"
    payload = 50_000  # rows of ~150 KB on disk: a kill can land inside a write
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(path), str(payload)],
        stdout=subprocess.PIPE,
        text=True,
    )
    reported = []
    try:
        for line in child.stdout:
            reported.append(int(line))
            if len(reported) >= 25:
                break
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        reported.extend(int(line) for line in child.stdout.read().split())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert len(reported) >= 25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a torn tail warns; that is the case under test
        rows = tk.read_rows(path)  # strict: a torn tail is the only tolerated defect
    indices = [r["rollout_index"] for r in rows]
    assert set(reported) <= set(indices)
    assert indices == list(range(len(indices)))
    assert all(len(r["final_text"]) == payload for r in rows)
    # Appending after the crash leaves a file that reads cleanly, tail repaired.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with tk.RowWriter(path) as writer:
            writer.write(make_row(scenario_id="resumed"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = tk.read_rows(path)
    assert len(again) == len(rows) + 1 and again[-1]["scenario_id"] == "resumed" and not again.torn_tail


def _written_file(path):
    with tk.RowWriter(path) as writer:
        for index in range(5):
            writer.write(make_row(rollout_index=index, final_text="é" * (index * 7)))
    return path.read_bytes()


def _check_cut(path, data, cut):
    path.write_bytes(data[:cut])
    kept = data[:cut]
    expected = kept.count(b"\n")
    tail = kept[kept.rfind(b"\n") + 1 :]
    try:  # cut just before a newline: the row is complete and is kept
        expected += isinstance(json.loads(tail), dict)
    except ValueError:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = tk.read_rows(path)
        assert [r["rollout_index"] for r in rows] == list(range(expected))
        with tk.RowWriter(path) as writer:
            writer.write(make_row(rollout_index=99))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = tk.read_rows(path)
    assert [r["rollout_index"] for r in again] == list(range(expected)) + [99]


_CUT_DATA: dict[str, bytes] = {}  # the file is the same for every example; write it once


@given(cut_fraction=st.floats(0, 1))
def test_property_a_file_cut_at_any_byte_reads_every_complete_row(tmp_path_factory, cut_fraction):
    # A kill can stop the file at any byte of the row being written; model it by cutting a
    # finished file at an arbitrary offset (UTF-8 characters included, so cuts split them).
    path = tmp_path_factory.mktemp("cut") / "rows.jsonl"
    data = _CUT_DATA.get("data") or _CUT_DATA.setdefault("data", _written_file(path))
    _check_cut(path, data, int(cut_fraction * len(data)))


def test_cuts_next_to_every_newline(tmp_path):
    path = tmp_path / "rows.jsonl"
    data = _written_file(path)
    offsets = [i for i, byte in enumerate(data) if byte == ord("\n")]
    for offset in offsets:
        for cut in (offset - 1, offset, offset + 1):
            _check_cut(path, data, cut)


# ---------------------------------------------------------------- save_rows


def test_save_rows_is_atomic_scrubbed_and_writes_a_sidecar(tmp_path):
    path = tmp_path / "run.jsonl"
    rows = [
        make_row(privileged={"reference": "x"}, lineage={"system_prompt_sha": "0123456789abcdef"}),
        make_row(scenario_id="b", rollout_index=1),
    ]
    before = copy.deepcopy(rows)
    assert tk.save_rows(rows, path, meta={"model": "m-1", "note": np.float64(0.5)}) == path
    assert rows == before
    back = tk.read_rows(path)
    assert len(back) == 2 and "privileged" not in back[0] and back[0]["messages"][1]["role"] == "assistant"
    sidecar = json.loads((tmp_path / "run.meta.json").read_text())
    assert sidecar["schema_version"] == "1" and sidecar["n_rows"] == 2
    assert sidecar["model"] == "m-1" and sidecar["note"] == 0.5
    assert sidecar["system_prompt_shas"] == ["0123456789abcdef"]
    assert sidecar["created"].endswith("+00:00")
    assert back.meta == sidecar
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl", "run.meta.json"]  # no temp files left


def test_save_rows_refuses_empty_and_bad_rows_leaving_the_old_file(tmp_path):
    path = tmp_path / "run.jsonl"
    tk.save_rows([make_row()], path)
    original = path.read_bytes()
    with pytest.raises(tk.RowError, match="empty"):
        tk.save_rows([], path)
    with pytest.raises(tk.RowError, match=r"rows\[1\]: row\.reward"):
        tk.save_rows([make_row(), make_row(reward="x")], path)
    with pytest.raises(tk.RowError, match="n_rows"):
        tk.save_rows([make_row()], path, meta={"n_rows": 3})
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl", "run.meta.json"]


def test_save_rows_sidecar_for_other_suffixes(tmp_path):
    tk.save_rows([make_row()], tmp_path / "rows.json")
    assert (tmp_path / "rows.json.meta.json").exists()


# ---------------------------------------------------------------- read_rows


def test_read_rows_strict_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(make_row()) + "\n\n" + "{not json}\n" + json.dumps(make_row()) + "\n")
    with pytest.raises(tk.RowError, match=r"bad\.jsonl line 3: not valid JSON"):
        tk.read_rows(path)


def test_read_rows_lenient_skips_warns_and_counts(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [json.dumps(make_row()), "", "[1, 2]", json.dumps(make_row(reward=True)), "{oops", json.dumps({"scenario_id": "legacy"})]
    path.write_text("\n".join(lines) + "\n")
    with pytest.warns(UserWarning, match=r"skipped 3 malformed line\(s\) .*line 3, 4, 5"):
        rows = tk.read_rows(path, strict=False)
    assert len(rows) == 2 and rows.skipped == 3 and rows.skipped_lines == [3, 4, 5]
    assert rows.shapes == {"v1": 1, "engine": 1}
    with pytest.raises(tk.RowError, match=r"bad\.jsonl line 3: expected one JSON object per line, got list"):
        tk.read_rows(path)
    path.write_text("\n".join(lines[:2] + lines[3:4]) + "\n")
    with pytest.raises(tk.RowError, match=r"line 3: row\.reward: expected a number"):
        tk.read_rows(path)


def test_read_rows_skips_a_torn_tail_even_when_strict(tmp_path):
    path = tmp_path / "torn.jsonl"
    path.write_text(json.dumps(make_row()) + "\n" + '{"schema_version": "1", "pro')
    with pytest.warns(UserWarning, match="torn final line 2"):
        rows = tk.read_rows(path)
    assert len(rows) == 1 and rows.torn_tail and rows.skipped_lines == [2]


def test_read_rows_detects_legacy_shapes():
    legacy = [
        {"scenario_id": "s", "prompt": "p", "steps": [], "final_text": ""},
        {"messages": [{"role": "user", "content": "hi"}], "loss_mask": [1]},
        {"prompt": "p", "tool_trace": []},
        {"conversation_id": "c1", "ts": 1.0},
        {"prompt": "p", "steps_json": "[]"},
        {"prompt": "p", "answer": "a"},
    ]
    text = "\n".join(json.dumps(r) for r in legacy) + "\n"
    rows = tk.read_rows(io.StringIO(text))
    assert rows == legacy
    assert rows.shapes == {"engine": 1, "training": 1, "platform": 1, "otel": 1, "hf_flat": 1, "v0": 1}
    assert rows.path is None and rows.meta is None


def test_read_rows_accepts_binary_files_and_hints_at_tau_bench(tmp_path):
    rows = tk.read_rows(io.BytesIO((json.dumps(make_row()) + "\n").encode()))
    assert len(rows) == 1 and isinstance(rows, list)
    path = tmp_path / "tau.json"
    path.write_text(json.dumps([{"task_id": 0}]))
    with pytest.raises(tk.RowError, match="read_tau_bench"):
        tk.read_rows(path)
    with pytest.raises(FileNotFoundError):
        tk.read_rows(tmp_path / "missing.jsonl")
    with pytest.raises(TypeError, match="path or an open file"):
        tk.read_rows(42)


# ---------------------------------------------------------------- to_pandas


def test_to_pandas_one_row_per_rollout_with_flattened_dicts():
    rows = [
        make_row(reward=1.0, markers={"hedging": 0}, lineage={"eval_run": 0, "system_prompt_sha": "0123456789abcdef"}),
        make_row(scenario_id=None, task_id=9, reward=0.0, markers={"hedging": 1}, steps=[{"text": "no"}], final_text="no"),
        {"prompt": "legacy prompt", "reward": 1},
    ]
    rows[1].pop("scenario_id")
    frame = tk.to_pandas(rows)
    assert isinstance(frame, pd.DataFrame) and len(frame) == 3
    assert frame.columns[0] == "task"
    assert frame["task"].tolist() == ["refund-7", "9", "legacy prompt"]
    assert frame["n_steps"].tolist() == [4, 1, 0]
    assert frame["n_tool_calls"].tolist() == [2, 0, 0]
    assert frame["markers.hedging"].tolist()[:2] == [0, 1] and math.isnan(frame["markers.hedging"][2])
    assert frame.loc[0, "lineage.eval_run"] == 0
    assert isinstance(frame.loc[0, "steps"], list) and len(frame.loc[0, "steps"]) == 4
    assert frame["reward"].tolist() == [1.0, 0.0, 1.0]


def test_to_pandas_empty_and_from_path(tmp_path):
    empty = tk.to_pandas([])
    assert list(empty.columns) == ["task", "n_steps", "n_tool_calls"] and len(empty) == 0
    path = tmp_path / "r.jsonl"
    tk.save_rows([make_row(task="field named task")], path)
    frame = tk.to_pandas(str(path))
    assert frame.loc[0, "task"] == "refund-7" and frame.loc[0, "task (row field)"] == "field named task"
    assert "messages" in frame.columns


def test_rows_is_a_list_with_reader_attributes(tmp_path):
    path = tmp_path / "r.jsonl"
    tk.save_rows([make_row()], path)
    rows = tk.read_rows(str(path))
    assert isinstance(rows, tk.rows.Rows) and rows.path == Path(path) and rows.skipped == 0
    assert "Rows(n=1" in repr(rows)
    assert os.fspath(rows.path).endswith("r.jsonl")


# ---------------------------------------------------------------- shipped demo runs


DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def test_demo_runs_are_paired_scrubbed_v1_rows_regenerated_by_their_script(tmp_path):
    import importlib.util

    before = tk.read_rows(DATASETS / "demo_before.jsonl")
    after = tk.read_rows(DATASETS / "demo_after.jsonl")
    for rows, model in ((before, "agent-1.0"), (after, "agent-1.1")):
        assert rows.shapes == {"v1": len(rows)} and rows.skipped == 0
        assert rows.meta["n_rows"] == len(rows) and rows.meta["model_version"] == model
        tasks = {}
        for row in rows:
            tasks.setdefault(row["scenario_id"], []).append(row["rollout_index"])
            assert row["reward"] in (0.0, 1.0) and row["markers"]["hedging"] in (0, 1)
            assert row["lineage"]["eval_run"] == row["rollout_index"] // 2
            assert row == tk.rows.scrub(row)  # written through save_rows: scrubbed, messages derived
        assert all(sorted(indices) == [0, 1, 2, 3] for indices in tasks.values())
        assert len(tasks) >= 30
    assert {r["scenario_id"] for r in before} == {r["scenario_id"] for r in after}
    size = sum(p.stat().st_size for p in DATASETS.glob("demo_*"))
    assert size < 300_000
    # The generator reproduces the shipped rows byte for byte.
    spec = importlib.util.spec_from_file_location("make_demo_runs", DATASETS / "make_demo_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in ("demo_before.jsonl", "demo_after.jsonl"):
        assert (tmp_path / name).read_bytes() == (DATASETS / name).read_bytes()


def test_every_schema_field_maps_to_exactly_one_object_attribute():
    from toolkit.rows import _views as rows_module

    groups = [
        set(rows_module._TASK_DIRECT),
        *[set(v) for v in rows_module._TASK_BUCKETS.values()],
        set(rows_module._ROLLOUT_DIRECT),
        *[set(v) for v in rows_module._ROLLOUT_BUCKETS.values()],
        set(rows_module._JUDGMENT_DIRECT),
        *[set(v) for v in rows_module._JUDGMENT_BUCKETS.values()],
        {"markers", "marker_evidence"},
    ]
    counted = [name for group in groups for name in group]
    assert len(counted) == len(set(counted))
    assert set(tk.rows.row_schema()["properties"]) <= set(counted)


def test_objects_are_results_with_json_safe_dicts():
    task, rollout, judgment, markers = tk.rows.from_row(make_row(reward=1.0, markers={"hedging": 0}))
    assert json.loads(json.dumps(rollout.to_dict()))["steps"][0]["tool"] == "lookup_order"
    assert task.to_dict()["scenario_id"] == "refund-7" and markers[0].to_dict()["name"] == "hedging"


def test_row_writer_fsync_policies(tmp_path, monkeypatch):
    import toolkit.rows._write as rows_module

    calls = []
    real_fsync = rows_module.os.fsync
    monkeypatch.setattr(rows_module.os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    per_row = tmp_path / "per_row.jsonl"
    per_row.touch()  # an existing file: no directory fsync at open, only the rows' own
    with tk.RowWriter(per_row) as writer:
        for i in range(5):
            writer.write(make_row(scenario_id=f"r{i}"))
    assert len(calls) == 5 + 1  # one per row, one at close
    calls.clear()
    grouped = tmp_path / "grouped.jsonl"
    grouped.touch()
    writer = tk.RowWriter(grouped, fsync="interval", fsync_interval=60)
    for i in range(5):
        writer.write(make_row(scenario_id=f"g{i}"))
        # kill-safety does not wait for fsync: the row is in the file (the kernel) already
        assert len(grouped.read_bytes().splitlines()) == i + 1
    assert calls == []  # no write found the last fsync 60 s old
    writer.close()
    assert len(calls) == 1  # close always fsyncs
    with pytest.raises(tk.ConfigError, match="interval"):
        tk.RowWriter(tmp_path / "x.jsonl", fsync="intervall")
    for bad in (0, -1, 61, True, "1"):
        with pytest.raises(tk.ConfigError, match=r"fsync_interval"):
            tk.RowWriter(tmp_path / "y.jsonl", fsync="interval", fsync_interval=bad)


def test_row_writer_interval_fsyncs_when_the_interval_has_passed(tmp_path, monkeypatch):
    import toolkit.rows._write as rows_module

    calls = []
    monkeypatch.setattr(rows_module.os, "fsync", lambda fd: calls.append(fd))
    clock = [1000.0]
    monkeypatch.setattr(rows_module.time, "monotonic", lambda: clock[0])
    (tmp_path / "t.jsonl").touch()
    writer = tk.RowWriter(tmp_path / "t.jsonl", fsync="interval", fsync_interval=1.0)
    writer.write(make_row())
    assert calls == []
    clock[0] += 1.5
    writer.write(make_row())
    assert len(calls) == 1
    clock[0] += 0.5
    writer.write(make_row())
    assert len(calls) == 1
    writer.close()


# ---------------------------------------------------------------------------------------
# The compiled validity check (fastjsonschema) against jsonschema itself
# ---------------------------------------------------------------------------------------

_BROKEN_VALUES = [None, True, 0, -1, 1.5, "", "x", [], [1, 2, 3], ["a", "b"], {}, {"user": "hi"}, {"tool": "t"},
                  {"tool": "", "arguments": {}}, {"text": 3}, {"note": "no kind"}, "0123456789abcdeg"]  # fmt: skip


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


@pytest.fixture(scope="module")
def simulated_rows():
    data = tk.simulate(budget=30, progress=False, seed=11, fault_rate=0.5, logprobs=True)
    return data.rows + data.trajectories + [make_row()]


def _jsonschema_says_valid(row):
    from toolkit.rows import _schema as rows_module

    return not list(rows_module._validator().iter_errors(row))


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_compiled_check_agrees_with_jsonschema_on_broken_rows(simulated_rows, data):
    from toolkit.rows import _schema as rows_module

    fast = rows_module._fast_validator()
    assert fast is not None
    row = copy.deepcopy(data.draw(st.sampled_from(simulated_rows)))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(list(_paths(row))[1:]))
        parent = row
        for part in path[:-1]:
            parent = parent[part]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(_BROKEN_VALUES)))
    assert fast(row) == _jsonschema_says_valid(row)


def test_compiled_check_agrees_on_every_simulated_row_and_the_special_rules(simulated_rows):
    from toolkit.rows import _schema as rows_module

    fast = rows_module._fast_validator()
    assert all(fast(row) and _jsonschema_says_valid(row) for row in simulated_rows)
    base = make_row(steps=[{"tool": "get_order", "arguments": {"order_id": "A1"}, "result": {}}])
    cases = {
        "step naming no kind": {**base, "steps": [{"result": {}}]},
        "tool without arguments": {**base, "steps": [{"tool": "get_order"}]},
        "interval of three": {**base, "calibration": {"pass_rate_ci95": [0.1, 0.2, 0.3]}},
        "interval of strings": {**base, "calibration": {"pass_rate_ci95": ["a", "b"]}},
        "pass rate above 1": {**base, "calibration": {"pass_rate": 1.5}},
        "bad prompt sha": {**base, "lineage": {"system_prompt_sha": "0123456789abcdeg"}},
        "bool reward": {**base, "reward": True},
    }
    for name, row in cases.items():
        assert fast(row) == _jsonschema_says_valid(row), name
        assert not fast(row), name


def test_to_pandas_leaves_out_teacher_only_keys_at_any_depth():
    rows = [make_row(reward=1.0, privileged={"reference": "ANSWER"}), make_row(reward=0.0)]
    rows[1]["steps"][0]["result"] = {"status": "ok", "hidden_state": "ANSWER"}
    frame = tk.to_pandas(rows)
    assert "ANSWER" not in frame.to_csv() and "privileged" not in "".join(frame.columns)
    assert frame["reward"].tolist() == [1.0, 0.0] and frame["n_steps"].tolist() == [4, 4]
    assert rows[0]["privileged"] == {"reference": "ANSWER"}  # the caller's rows are not changed


# ---------------------------------------------------------------- mistaken files (issue 21, row 16)


def test_an_empty_or_blank_file_says_it_holds_no_rows(tmp_path):
    for name, content, said in (("empty.jsonl", b"", "is empty (0 bytes)"), ("blank.jsonl", b"\n\n", "is blank (2 empty lines)")):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.warns(UserWarning, match=re.escape(said)) as caught:
            assert len(tk.read_rows(path)) == 0
        assert name in str(caught[0].message)
        with pytest.warns(UserWarning, match=re.escape(said)):
            assert len(tk.load(path)) == 0
    good = tmp_path / "good.jsonl"
    tk.save_rows([make_row()], good)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a file with rows says nothing
        assert len(tk.read_rows(good)) == 1


@pytest.mark.parametrize("strict", [True, False])
def test_a_pretty_printed_json_array_is_named_as_such_in_either_mode(tmp_path, strict):
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([make_row(), make_row()], indent=2))
    with pytest.raises(tk.RowError) as info:
        tk.read_rows(path, strict=strict)
    assert "rows.json line 1" in str(info.value) and "pretty-printed JSON array, not JSON Lines" in str(info.value)
    obj = tmp_path / "row.json"
    obj.write_text(json.dumps(make_row(), indent=2))
    with pytest.raises(tk.RowError, match="pretty-printed JSON object"):
        tk.read_rows(obj, strict=strict)


def test_a_utf8_byte_order_mark_is_ignored_with_a_warning(tmp_path):
    path = tmp_path / "bom.jsonl"
    tk.save_rows([make_row(), make_row(reward=0.0)], path)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    with pytest.warns(UserWarning, match="bom.jsonl starts with a UTF-8 byte-order mark"):
        rows = tk.read_rows(path)
    assert len(rows) == 2 and rows[0]["schema_version"] == "1"


@pytest.mark.parametrize("row, field", [
    ({"prompt": "p", "steps": "oops", "final_text": "x"}, "field 'steps' must be a list, got str"),
    ({"prompt": "p", "steps": ["oops"], "final_text": "x"}, "field 'steps[0]' must be an object"),
    ({"prompt": 7, "steps": [], "final_text": "x"}, "field 'prompt' must be a string"),
    ({"messages": {"role": "user"}}, "field 'messages' must be a list"),
])  # fmt: skip
def test_a_malformed_unstamped_row_is_a_malformed_line(tmp_path, row, field):
    path = tmp_path / "legacy.jsonl"
    path.write_text(json.dumps({"prompt": "fine", "steps": [], "final_text": "ok"}) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(tk.RowError) as info:
        tk.read_rows(path)
    assert "legacy.jsonl line 2" in str(info.value) and field in str(info.value)
    with pytest.warns(UserWarning, match=r"skipped 1 malformed line\(s\) in .*legacy.jsonl \(line 2\)"):
        lax = tk.read_rows(path, strict=False)
    assert len(lax) == 1 and lax.skipped_lines == [2]


@pytest.mark.parametrize("reader", ["read_rows", "read_tau_bench", "read_tau2", "read_langfuse", "read_openinference"])
def test_json_nested_too_deep_is_a_row_error_naming_the_file(reader, tmp_path):
    # 5,000 nested brackets made every reader raise a bare RecursionError
    path = tmp_path / "deep.json"
    path.write_text("[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(tk.RowError, match=r"deep\.json.*nested deeper than the JSON decoder allows"):
        getattr(tk, reader)(path)


@pytest.mark.parametrize(("reader", "text", "says"), [
    ("read_openinference", "", "holds no trace: 0 rows"),
    ("read_langfuse", "[]", "holds no trace: 0 rows"),
    ("read_tau2", '{"info": {}, "tasks": [], "simulations": []}', "holds no simulation: 0 rows"),
    ("read_tau_bench", "[]", "holds no result: 0 rows"),
])
def test_an_empty_export_warns_instead_of_passing_for_an_empty_run(reader, text, says, tmp_path):
    path = tmp_path / "export.json"
    path.write_text(text)
    with pytest.warns(UserWarning, match=says):
        assert len(getattr(tk, reader)(path)) == 0


@pytest.mark.parametrize("reader", ["read_tau_bench", "read_tau2"])
def test_a_utf8_bom_is_read_like_the_other_readers(reader, tmp_path):
    # read_rows, read_langfuse and read_openinference accept a BOM; these two refused it
    path = tmp_path / "bom.json"
    path.write_text("\ufeff[]" if reader == "read_tau_bench" else '\ufeff{"info": {}, "tasks": [], "simulations": []}', encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert len(getattr(tk, reader)(path)) == 0
