"""Tests for toolkit.rows.langfuse.read_langfuse on trace exports written by hand.

The fixtures follow Langfuse's public API definition at langfuse/langfuse commit
62751446149b702b419a9292ddfc2280cdf74b8c, fern/apis/server/definition/commons.yml:
TraceWithFullDetails (id, timestamp, name, input, output, sessionId, release, version,
metadata, tags, environment, observations, scores), Observation (id, traceId, type, name,
startTime, model, input, output, level, statusMessage, usageDetails) and ScoreV1 (name,
value, stringValue, dataType NUMERIC / BOOLEAN / CATEGORICAL / TEXT, comment, source,
observationId, timestamp); the observation types of ingestion.yml. Reference numbers are
closed forms: the designed pass counts, pass^k by math.comb, the exact sign-flip p 2 / 2**n.
"""

from __future__ import annotations

import json
import math

import pytest

import toolkit as tk
from toolkit.errors import ConfigError, RowError


def trace(trace_id: str, task: str, passed: bool, *, model: str = "gpt-4o", run: str = "exp-1") -> dict:
    stamp = "2026-01-01T00:00:0{}Z"
    return {
        "id": trace_id,
        "timestamp": stamp.format(0),
        "name": "refund-agent",
        "input": {"question": f"Refund {task}"},
        "output": f"Refunded {task}",
        "sessionId": "s-1",
        "release": "v3",
        "version": None,
        "userId": "alice@example.com",
        "metadata": {"task_id": task, "run_id": run, "reference_answer": "SECRET-ANSWER"},
        "tags": ["eval"],
        "public": False,
        "environment": "default",
        "htmlPath": f"/project/p/traces/{trace_id}",
        "latency": 1.2,
        "totalCost": 0.001,
        "observations": [
            # the final generation first: the reader orders by startTime
            {
                "id": f"{trace_id}-g2",
                "traceId": trace_id,
                "type": "GENERATION",
                "name": "chat",
                "startTime": stamp.format(4),
                "model": model,
                "input": [{"role": "user", "content": f"Please refund {task}"}],
                "output": {"role": "assistant", "content": f"Refunded {task}."},
                "level": "DEFAULT",
                "usageDetails": {"input": 30, "output": 6, "total": 36},
            },
            {
                "id": f"{trace_id}-span",
                "traceId": trace_id,
                "type": "SPAN",
                "name": "agent",
                "startTime": stamp.format(1),
                "level": "DEFAULT",
            },
            {
                "id": f"{trace_id}-g1",
                "traceId": trace_id,
                "type": "GENERATION",
                "name": "chat",
                "startTime": stamp.format(2),
                "model": model,
                "input": [{"role": "system", "content": "Be careful."}, {"role": "user", "content": f"Please refund {task}"}],
                "output": {
                    "role": "assistant",
                    "content": "On it.",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "refund", "arguments": json.dumps({"order": task})}}
                    ],
                },
                "level": "DEFAULT",
                "usageDetails": {"input": 20, "output": 4, "total": 24},
            },
            {
                "id": f"{trace_id}-t",
                "traceId": trace_id,
                "type": "TOOL",
                "name": "refund",
                "startTime": stamp.format(3),
                "input": {"order": task},
                "output": {"ok": passed},
                "level": "DEFAULT" if passed else "ERROR",
                "statusMessage": None if passed else "refund refused",
            },
        ],
        "scores": [
            {
                "id": f"{trace_id}-s1",
                "traceId": trace_id,
                "name": "correct",
                "source": "EVAL",
                "dataType": "BOOLEAN",
                "value": 1.0 if passed else 0.0,
                "stringValue": "True" if passed else "False",
                "comment": "judge says so",
                "timestamp": stamp.format(5),
                "observationId": None,
            },
            {
                "id": f"{trace_id}-s2",
                "traceId": trace_id,
                "name": "tone",
                "source": "ANNOTATION",
                "dataType": "CATEGORICAL",
                "value": 0.0,
                "stringValue": "warm",
                "timestamp": stamp.format(5),
                "observationId": None,
            },
            {
                "id": f"{trace_id}-s3",
                "traceId": trace_id,
                "name": "helpfulness",
                "source": "EVAL",
                "dataType": "NUMERIC",
                "value": 0.75,
                "timestamp": stamp.format(5),
            },
            {
                "id": f"{trace_id}-s4",
                "traceId": trace_id,
                "name": "notes",
                "source": "ANNOTATION",
                "dataType": "TEXT",
                "stringValue": "fine",
                "timestamp": stamp.format(5),
            },
            {
                "id": f"{trace_id}-s5",
                "traceId": trace_id,
                "name": "tool_ok",
                "source": "EVAL",
                "dataType": "NUMERIC",
                "value": 1.0,
                "observationId": f"{trace_id}-t",
                "timestamp": stamp.format(5),
            },
        ],
    }


def export(tmp_path, name, passes, shape="list", **kwargs):
    traces = [trace(f"{name}-{t}-{k}", t, p, **kwargs) for t, ps in passes.items() for k, p in enumerate(ps)]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"data": traces} if shape == "data" else traces))
    return path


BEFORE = {f"T{i}": [i % 2 == 0, False, i < 2, False] for i in range(6)}
AFTER = {f"T{i}": [True] * 4 for i in range(6)}


def test_one_row_per_trace(tmp_path):
    rows = tk.read_langfuse(export(tmp_path, "a", BEFORE), reward="correct")
    assert len(rows) == 24 and rows.shapes == {"v1": 24}
    first, second = rows[0], rows[1]
    tk.rows.validate_row(first)
    assert first["scenario_id"] == "T0" and [r["rollout_index"] for r in rows[:4]] == [0, 1, 2, 3]
    assert first["prompt"] == "Please refund T0"
    assert first["steps"] == [
        {"tool": "refund", "arguments": {"order": "T0"}, "call_id": "c1", "text": "On it.", "result": {"ok": True}},
        {"text": "Refunded T0."},
    ]
    assert second["steps"][0]["tool_error"] == "refund refused" and second["trace_status"] == "ERROR"
    assert first["usage"] == {"input_tokens": 50, "output_tokens": 10}
    assert first["reward"] == 1.0 and second["reward"] == 0.0 and first["reason"] == "judge says so"
    assert first["reward_source"]["judged_by"] == "EVAL"
    # TEXT scores and observation-level scores are not trace judgments; CATEGORICAL needs labels
    assert first["markers"] == {"tone": None, "helpfulness": 0.75}
    lineage = first["lineage"]
    assert lineage["model"] == "gpt-4o" and lineage["eval_run"] == "exp-1" and lineage["session_id"] == "s-1"
    assert lineage["trace_name"] == "refund-agent" and lineage["tags"] == ["eval"]
    assert "alice" not in json.dumps(tk.rows.scrub(first))
    assert {(r["scenario_id"], r["rollout_index"]): r["reward"] for r in rows} == {
        (t, k): float(p) for t, ps in BEFORE.items() for k, p in enumerate(ps)
    }


def test_data_envelope_and_single_trace(tmp_path):
    a = tk.read_langfuse(export(tmp_path, "a", {"T0": [True, False]}, shape="data"), reward="correct")
    assert [r["reward"] for r in a] == [1.0, 0.0]
    one = tmp_path / "one.json"
    one.write_text(json.dumps(trace("z", "T9", True)))
    assert len(tk.read_langfuse(one, reward="correct")) == 1


def test_labels_for_categorical_and_reward_choice(tmp_path):
    path = export(tmp_path, "a", {"T0": [True]})
    rows = tk.read_langfuse(path, reward="tone", labels={"warm": 1.0, "cold": 0.0})
    assert rows[0]["reward"] == 1.0 and rows[0]["markers"]["correct"] == 1.0
    with pytest.raises(RowError, match="label 'warm' with no number"):
        tk.read_langfuse(path, reward="tone")
    with pytest.warns(UserWarning, match="3 score names.*'correct'"):
        tk.read_langfuse(path)
    rows = tk.read_langfuse(path, reward="helpfulness")
    assert rows[0]["reward"] == 0.75
    with pytest.raises(ConfigError, match="'helpfulness'"):
        tk.read_langfuse(path, reward="helpfulnes")
    with pytest.raises(ConfigError, match="labels"):
        tk.read_langfuse(path, reward="tone", labels={"warm": "yes"})


def test_latest_score_of_a_name_wins(tmp_path):
    entry = trace("x", "T0", False)
    entry["scores"].append({**entry["scores"][0], "id": "later", "value": 1.0, "timestamp": "2026-01-01T00:00:09Z"})
    path = tmp_path / "x.json"
    path.write_text(json.dumps([entry]))
    row = tk.read_langfuse(path, reward="correct")[0]
    assert row["reward"] == 1.0 and row["reward_source"]["n_values"] == 2


def test_pass_at_and_paired_compare_on_two_exports(tmp_path):
    before = tk.read_langfuse(export(tmp_path, "before", BEFORE, run="r1"), reward="correct")
    after = tk.read_langfuse(export(tmp_path, "after", AFTER, run="r2", model="gpt-5"), reward="correct")
    result = tk.pass_at(before)
    counts = [sum(ps) for ps in BEFORE.values()]
    assert result.k == 4
    assert result.pass_at_1 == pytest.approx(sum(c / 4 for c in counts) / 6)
    assert result.pass_pow_k == pytest.approx(sum(math.comb(c, 4) for c in counts) / 6)
    comparison = tk.compare_runs(before, after)
    assert comparison.n_paired == 6 and comparison.pvalue == pytest.approx(2 / 2**6)
    report = tk.delta_report(before, after)  # the same paired comparison, as the report's target
    assert report[report.target].delta == pytest.approx(comparison.delta) and report[report.target].n_paired == 6
    assert tk.eval_variance(before, after).n_runs == 2


def test_task_key_and_run_id(tmp_path):
    """Reference: the fixture's metadata (task_id, run_id) and its prompts."""
    path = export(tmp_path, "a", {"T0": [True, False], "T1": [True]})
    rows = tk.read_langfuse(path, reward="correct")
    assert [r["lineage"]["eval_run"] for r in rows] == ["exp-1"] * 3
    assert [r["lineage"]["eval_run"] for r in tk.read_langfuse(path, reward="correct", run_id="mine")] == ["mine"] * 3
    by_prompt = tk.read_langfuse(path, reward="correct", task_key="dataset_item")
    assert [r["task_id_from"] for r in by_prompt] == ["prompt_sha256"] * 3
    assert by_prompt[0]["scenario_id"] == by_prompt[1]["scenario_id"] != by_prompt[2]["scenario_id"]
    assert [r["rollout_index"] for r in by_prompt] == [0, 1, 0]


def test_privileged_metadata_never_written(tmp_path):
    rows = tk.read_langfuse(export(tmp_path, "a", {"T0": [True]}), reward="correct")
    assert rows[0]["privileged"]["langfuse_metadata"]["reference_answer"] == "SECRET-ANSWER"
    out = tmp_path / "rows.jsonl"
    tk.rows.save_rows(list(rows), out)
    assert "SECRET-ANSWER" not in out.read_text() and "alice" not in out.read_text()


def test_bad_trace_named_and_rest_kept(tmp_path):
    traces = [trace(f"t{i}", f"T{i}", True) for i in range(4)]
    traces[1]["observations"] = "oops"
    del traces[3]["id"]
    path = tmp_path / "x.json"
    path.write_text(json.dumps(traces))
    with pytest.raises(RowError, match=r"x\.json\[1\] \(trace 't1'\)\.observations"):
        tk.read_langfuse(path)
    with pytest.warns(UserWarning, match=r"skipped 2 malformed record\(s\) in x\.json \(1, 3\)"):
        rows = tk.read_langfuse(path, reward="correct", strict=False)
    assert [r["scenario_id"] for r in rows] == ["T0", "T2"] and rows.skipped_lines == [1, 3]


def test_not_a_langfuse_export(tmp_path):
    (tmp_path / "a.json").write_text("{bad")
    with pytest.raises(RowError, match="not valid JSON"):
        tk.read_langfuse(tmp_path / "a.json")
    (tmp_path / "b.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(RowError, match="expected a list of Langfuse traces"):
        tk.read_langfuse(tmp_path / "b.json")
    with pytest.raises(FileNotFoundError):
        tk.read_langfuse(tmp_path / "missing.json")
    entry = trace("x", "T0", True)
    entry["scores"][2]["value"] = 3.5
    (tmp_path / "c.json").write_text(json.dumps([entry]))
    with pytest.raises(RowError, match=r"trace 'x'.*'helpfulness' has value 3.5"):
        tk.read_langfuse(tmp_path / "c.json", reward="helpfulness")


def deep(levels: int) -> dict:
    """A JSON object nested ``levels`` deep: valid JSON, below the decoder's own limit."""
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_json_nested_too_deep_is_a_row_error_naming_the_trace(tmp_path):
    traces = [trace("x", "T0", True), trace("y", "T1", False)]
    traces[0]["metadata"]["notes"] = deep(900)
    path = tmp_path / "x.json"
    path.write_text(json.dumps(traces))
    json.loads(path.read_text())  # valid JSON: the decoder itself reads it
    with pytest.raises(RowError, match=r"x\.json\[0\] \(trace 'x'\): the trace nests deeper than 100 levels"):
        tk.read_langfuse(path, reward="correct")
    with pytest.warns(UserWarning, match=r"skipped 1 malformed record\(s\) in x\.json \(0\)"):
        rows = tk.read_langfuse(path, reward="correct", strict=False)
    assert [r["lineage"]["trace_id"] for r in rows] == ["y"] and rows.skipped_lines == [0]


def test_a_tool_result_string_decoding_too_deep_is_refused(tmp_path):
    traces = [trace("x", "T0", True), trace("y", "T1", False)]
    traces[0]["observations"][3]["output"] = json.dumps(deep(900))  # the TOOL observation's output, as text
    path = tmp_path / "x.json"
    path.write_text(json.dumps(traces))
    with pytest.raises(RowError, match=r"trace 'x'.*a tool result nests deeper than 100 levels"):
        tk.read_langfuse(path, reward="correct")
    with pytest.warns(UserWarning, match="skipped 1 malformed record"):
        rows = tk.read_langfuse(path, reward="correct", strict=False)
    assert [r["lineage"]["trace_id"] for r in rows] == ["y"]
