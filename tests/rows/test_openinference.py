"""Tests for toolkit.rows.openinference.read_openinference on span exports written by hand.

The fixtures follow the OpenInference specification at Arize-ai/openinference commit
1fe497f1d9f45a07eee55d97fe185e020560f9c7: the span object of spec/traces.md (name, context
{trace_id, span_id}, parent_id, start_time, status_code, attributes), the attribute names of
spec/semantic_conventions.md (openinference.span.kind, input.value, output.value,
llm.input_messages / llm.output_messages with message.* and tool_call.*, llm.model_name,
llm.token_count.*, tool.name, tool.id, metadata, session.id) and the feedback fields of
spec/annotations.md (annotations.<i>.annotation.{name, score, label, explanation,
annotator_kind}, trace.evaluations.<i>.evaluation.*). Reference numbers are closed forms: the
designed pass counts, pass^k by math.comb, the exact sign-flip p 2 / 2**n.
"""

from __future__ import annotations

import json
import math

import pytest

import toolkit as tk
from toolkit.errors import ConfigError, RowError

SYSTEM = "You are a careful refunds agent."


def flat(prefix: str, items: list[dict]) -> dict:
    """A list attribute flattened the OpenTelemetry way (spec: zero-based indices)."""
    out = {}
    for index, item in enumerate(items):
        for key, value in item.items():
            out[f"{prefix}.{index}.{key}"] = value
    return out


def trace(trace_id: str, task: str, passed: bool, *, run: str = "run-a", model: str = "gpt-4o", flat_form: bool = True) -> list[dict]:
    """One agent trace: root CHAIN, an LLM span that calls a tool, the TOOL span, a final LLM span."""
    root_attrs = {
        "openinference.span.kind": "CHAIN",
        "input.value": f"Refund order {task}",
        "output.value": f"Refunded {task}.",
        "metadata": json.dumps({"task_id": task, "run_id": run, "expected": "SECRET-ANSWER"}),
        "session.id": "sess-1",
    }
    feedback = [
        {
            "annotation.name": "correctness",
            "annotation.score": 1 if passed else 0,
            "annotation.label": "correct" if passed else "incorrect",
            "annotation.explanation": "checked",
            "annotation.annotator_kind": "CODE",
        },
        {"annotation.name": "politeness", "annotation.label": "polite"},
    ]
    root_attrs.update(flat("annotations", feedback) if flat_form else {"annotations": feedback})
    input_messages = [
        {"message.role": "system", "message.content": SYSTEM},
        {"message.role": "user", "message.content": f"Please refund order {task}"},
    ]
    call = {
        "tool_call.id": f"call-{trace_id}",
        "tool_call.function.name": "refund",
        "tool_call.function.arguments": json.dumps({"order": task}),
    }
    first_llm = {"openinference.span.kind": "LLM", "llm.model_name": model, "llm.token_count.prompt": 20, "llm.token_count.completion": 4}
    if flat_form:
        first_llm.update(flat("llm.input_messages", input_messages))
        first_llm.update({"llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "Refunding now."})
        first_llm.update({f"llm.output_messages.0.message.tool_calls.0.{k}": v for k, v in call.items()})
    else:
        first_llm["llm.input_messages"] = input_messages
        first_llm["llm.output_messages"] = [
            {"message.role": "assistant", "message.content": "Refunding now.", "message.tool_calls": [call]}
        ]
    final_llm = {
        "openinference.span.kind": "LLM",
        "llm.model_name": model,
        "llm.token_count.prompt": 30,
        "llm.token_count.completion": 6,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": f"Refunded {task}.",
    }
    tool = {
        "openinference.span.kind": "TOOL",
        "tool.name": "refund",
        "tool.id": f"call-{trace_id}",
        "input.value": json.dumps({"order": task}),
        "output.value": json.dumps({"ok": True}),
    }

    def span(span_id, parent, name, seconds, attrs):
        return {
            "name": name,
            "context": {"trace_id": trace_id, "span_id": span_id},
            "span_kind": "SPAN_KIND_INTERNAL",
            "parent_id": parent,
            "start_time": f"2026-01-01T00:00:{seconds:02d}+00:00",
            "end_time": f"2026-01-01T00:00:{seconds + 1:02d}+00:00",
            "status_code": "OK",
            "status_message": "",
            "attributes": attrs,
            "events": [],
        }

    # written out of time order on purpose: the reader orders spans by start_time
    return [
        span(f"{trace_id}-4", f"{trace_id}-1", "llm", 4, final_llm),
        span(f"{trace_id}-1", None, "agent", 1, root_attrs),
        span(f"{trace_id}-2", f"{trace_id}-1", "llm", 2, first_llm),
        span(f"{trace_id}-3", f"{trace_id}-1", "refund", 3, tool),
    ]


def export(tmp_path, name, passes: dict[str, list[bool]], **kwargs) -> object:
    lines = []
    for task, outcomes in passes.items():
        for trial, passed in enumerate(outcomes):
            lines += trace(f"{name}-{task}-{trial}", task, passed, **kwargs)
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in lines))
    return path


BEFORE = {f"T{i}": [i % 2 == 0, False, i < 2, False] for i in range(6)}
AFTER = {f"T{i}": [True] * 4 for i in range(6)}


def test_one_row_per_trace(tmp_path):
    rows = tk.read_openinference(export(tmp_path, "a", BEFORE), reward="correctness")
    assert len(rows) == 24 and rows.shapes == {"v1": 24}
    row = rows[0]
    tk.rows.validate_row(row)
    assert row["scenario_id"] == "T0" and row["rollout_index"] == 0 and row["task_id_from"] == "metadata.task_id"
    assert row["prompt"] == "Please refund order T0"
    assert row["steps"] == [
        {"tool": "refund", "arguments": {"order": "T0"}, "call_id": "call-a-T0-0", "text": "Refunding now.", "result": {"ok": True}},
        {"text": "Refunded T0."},
    ]
    assert row["final_text"] == "Refunded T0."
    assert row["usage"] == {"input_tokens": 50, "output_tokens": 10}
    assert row["lineage"]["model"] == "gpt-4o" and row["lineage"]["eval_run"] == "run-a"
    assert row["lineage"]["session_id"] == "sess-1" and row["lineage"]["system_prompt_chars"] == len(SYSTEM)
    assert row["reward"] == 1.0 and row["reason"] == "checked" and row["reward_source"]["judged_by"] == "CODE"
    assert row["markers"] == {"politeness": None}  # a label with no number and no labels=
    by_key = {(r["scenario_id"], r["rollout_index"]): r["reward"] for r in rows}
    assert by_key == {(t, k): float(p) for t, ps in BEFORE.items() for k, p in enumerate(ps)}


def test_flat_and_list_attribute_forms_read_alike(tmp_path):
    a = tk.read_openinference(export(tmp_path, "flat", BEFORE), reward="correctness")
    b = tk.read_openinference(export(tmp_path, "list", BEFORE, flat_form=False), reward="correctness")
    strip = lambda rows: [(r["scenario_id"], r["rollout_index"], r["reward"], r["prompt"], r["final_text"], len(r["steps"])) for r in rows]  # noqa: E731
    assert strip(a) == strip(b)


def test_labels_map_label_only_feedback(tmp_path):
    path = export(tmp_path, "a", {"T0": [True]})
    rows = tk.read_openinference(path, reward="politeness", labels={"polite": 1.0, "rude": 0.0})
    assert rows[0]["reward"] == 1.0 and rows[0]["reward_source"]["mapping"] == "labels"
    assert rows[0]["markers"]["correctness"] == 1.0
    with pytest.raises(RowError, match="label 'polite' with no number"):
        tk.read_openinference(path, reward="politeness")
    with pytest.warns(UserWarning, match="2 score names.*'correctness'"):
        tk.read_openinference(path)
    with pytest.raises(ConfigError, match="correctness"):
        tk.read_openinference(path, reward="corectness")


def test_pass_at_and_paired_compare_on_two_exports(tmp_path):
    before = tk.read_openinference(export(tmp_path, "before", BEFORE, run="r1"), reward="correctness")
    after = tk.read_openinference(export(tmp_path, "after", AFTER, run="r2", model="gpt-5"), reward="correctness")
    result = tk.pass_at(before)
    counts = [sum(ps) for ps in BEFORE.values()]
    assert result.k == 4
    assert result.pass_pow_k == pytest.approx(sum(math.comb(c, 4) for c in counts) / len(counts))
    comparison = tk.compare_runs(before, after)
    assert comparison.n_paired == 6 and comparison.pvalue == pytest.approx(2 / 2**6)
    report = tk.delta_report(before, after)  # the same paired comparison, as the report's target
    assert report[report.target].delta == pytest.approx(comparison.delta) and report[report.target].n_paired == 6
    assert tk.eval_variance(before, after).n_runs == 2


def test_prompt_keyed_when_no_task_and_privileged_scrubbed(tmp_path):
    path = export(tmp_path, "a", {"T0": [True, False]})
    rows = tk.read_openinference(path, reward="correctness", task_key="example_id")
    assert rows[0]["scenario_id"] == rows[1]["scenario_id"] and rows[0]["scenario_id"].startswith("openinference-")
    assert [r["rollout_index"] for r in rows] == [0, 1] and rows[0]["task_id_from"] == "prompt_sha256"
    assert rows[0]["privileged"]["openinference_metadata"]["expected"] == "SECRET-ANSWER"
    out = tmp_path / "rows.jsonl"
    tk.rows.save_rows(list(rows), out)
    assert "SECRET-ANSWER" not in out.read_text()
    assert "SECRET-ANSWER" not in repr(rows[0])


def test_run_id_from_metadata_argument_or_file(tmp_path):
    path = export(tmp_path, "a", {"T0": [True]}, run="from-metadata")
    assert tk.read_openinference(path, reward="correctness")[0]["lineage"]["eval_run"] == "from-metadata"
    assert tk.read_openinference(path, reward="correctness", run_id="given")[0]["lineage"]["eval_run"] == "given"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for span in lines:
        if span["parent_id"] is None:
            span["attributes"]["metadata"] = json.dumps({"task_id": "T0"})
    path.write_text("".join(json.dumps(s) + "\n" for s in lines))
    assert tk.read_openinference(path, reward="correctness")[0]["lineage"]["eval_run"] == "a"  # the file stem


def test_bad_lines_named_and_rest_kept(tmp_path):
    path = export(tmp_path, "a", {"T0": [True], "T1": [False]})
    lines = path.read_text().splitlines()
    lines.insert(2, "{not json")
    lines.insert(5, json.dumps({"name": "orphan", "attributes": {}}))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(RowError, match="line 3: not valid JSON"):
        tk.read_openinference(path)
    with pytest.warns(UserWarning, match=r"skipped 2 malformed record\(s\).*\(3, 6\)"):
        rows = tk.read_openinference(path, reward="correctness", strict=False)
    assert len(rows) == 2 and rows.skipped == 2 and rows.skipped_lines == [3, 6]


def test_trace_without_root_or_reward(tmp_path):
    spans = trace("x", "T0", True)
    no_root = [s for s in spans if s["parent_id"] is not None]
    for s in trace("y", "T1", True):
        if s["parent_id"] is None:
            s["attributes"] = {k: v for k, v in s["attributes"].items() if not k.startswith("annotations.0")}
        no_root.append(s)
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in no_root))
    with pytest.raises(RowError, match="trace 'x'.*expected one root span"):
        tk.read_openinference(path)
    with pytest.warns(UserWarning) as caught:
        rows = tk.read_openinference(path, strict=False, reward="politeness", labels={"polite": 1})
    assert len(rows) == 1 and rows.skipped == 1
    assert any("skipped 1" in str(w.message) for w in caught)
    spans = trace("z", "T2", True)
    spans[1]["attributes"] = {k: v for k, v in spans[1]["attributes"].items() if not k.startswith("annotations.0")}
    path.write_text("".join(json.dumps(s) + "\n" for s in trace("y", "T1", True) + spans))
    with pytest.warns(UserWarning, match="1 of 2 traces.*no 'correctness' score"):
        rows = tk.read_openinference(path, reward="correctness")
    assert [r["reward"] for r in rows] == [1.0, None] and rows[1]["judge_status"] == "missing_reward"


def test_out_of_range_score_refused(tmp_path):
    spans = trace("x", "T0", True)
    spans[1]["attributes"]["annotations.0.annotation.score"] = 7
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in spans))
    with pytest.raises(RowError, match=r"trace 'x'.*value 7.0.*\[0, 1\]"):
        tk.read_openinference(path, reward="correctness")


def deep(levels: int) -> dict:
    """A JSON object nested ``levels`` deep: valid JSON, below the decoder's own limit."""
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "attribute, message",
    [
        ({"llm.invocation_parameters": deep(900)}, "the span nests deeper than 100 levels"),
        ({"a." * 3000 + "b": 1}, r"attribute 'a\.a\.a[.a]*'\.\.\. nests deeper than 100 levels"),
    ],
    ids=["nested-900", "dotted-3000"],
)
def test_attributes_too_deep_are_a_row_error_naming_the_line(tmp_path, attribute, message):
    spans = trace("x", "T0", True) + trace("y", "T1", False)
    spans[2]["attributes"].update(attribute)  # an LLM span of trace x, on line 3
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in spans))
    json.loads(path.read_text().splitlines()[2])  # valid JSON: the decoder itself reads it
    with pytest.raises(RowError, match=rf"x\.jsonl line 3: {message}"):
        tk.read_openinference(path, reward="correctness")
    with pytest.warns(UserWarning, match=r"skipped 1 malformed record\(s\) in x\.jsonl \(3\)"):
        rows = tk.read_openinference(path, reward="correctness", strict=False)
    # the rest of trace x has no LLM span with a tool call now, but it is still read; y is whole
    assert [r["lineage"]["trace_id"] for r in rows] == ["x", "y"] and rows.skipped_lines == [3]


def test_metadata_string_too_deep_is_a_row_error(tmp_path):
    spans = trace("x", "T0", True) + trace("y", "T1", False)
    spans[1]["attributes"]["metadata"] = json.dumps(deep(900))  # the root's metadata, a JSON string
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in spans))
    with pytest.raises(RowError, match=r"trace 'x'.*attribute metadata nests deeper than 100 levels"):
        tk.read_openinference(path, reward="correctness")
    with pytest.warns(UserWarning, match="skipped 1 malformed record"):
        rows = tk.read_openinference(path, reward="correctness", strict=False)
    assert [r["lineage"]["trace_id"] for r in rows] == ["y"]
