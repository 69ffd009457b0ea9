"""One export, one score: the what-if ``langfuse`` and ``phoenix`` sources pick a trace's score
by the readers' rule (``tk.read_langfuse`` / ``tk.read_openinference``), so ``compare_runs`` and
``whatif`` never disagree about the same traces.

The Langfuse fixtures follow its public API (langfuse/langfuse commit
62751446149b702b419a9292ddfc2280cdf74b8c, fern/apis/server/definition/commons.yml:
TraceWithFullDetails, Observation, ScoreV1 with ``observationId``, ``dataType``,
``timestamp``), served over HTTP by the recorded-API server of test_whatif_sources.py. The
OpenInference spans follow its specification (Arize-ai/openinference commit
1fe497f1d9f45a07eee55d97fe185e020560f9c7: spec/traces.md, spec/semantic_conventions.md,
spec/annotations.md). The reference is the reader's own reading of the same export.
"""

from __future__ import annotations

import json

import pytest
import test_whatif_sources
from test_whatif_sources import base_config, langfuse_server  # noqa: F401 (the fixture)

import toolkit as tk
from toolkit.whatif.sources import load_traces, phoenix_traces_from_spans

STAMP = "2026-01-01T00:00:0{}Z"


def score(name, value, second, *, observation=None, data_type="NUMERIC"):
    return {"id": f"{name}-{second}", "name": name, "value": value, "dataType": data_type, "source": "EVAL",
            "timestamp": STAMP.format(second), "observationId": observation}


def langfuse_trace(trace_id, scores):
    return {
        "id": trace_id, "timestamp": STAMP.format(0), "name": "support", "tags": ["prod"],
        "input": {"messages": [{"role": "user", "content": f"Where is order {trace_id}?"}]},
        "output": f"Order {trace_id} shipped.", "metadata": {"task_id": trace_id},
        "observations": [
            {"id": f"{trace_id}-g", "type": "GENERATION", "name": "chat", "startTime": STAMP.format(1),
             "input": [{"role": "user", "content": f"Where is order {trace_id}?"}],
             "output": {"role": "assistant", "content": f"Order {trace_id} shipped."}},
            {"id": f"{trace_id}-t", "type": "TOOL", "name": "lookup", "startTime": STAMP.format(2),
             "input": {"id": trace_id}, "output": {"status": "shipped"}},
        ],
        "scores": scores,
    }


# Each trace is a case where "the first score that matches" and the reader's rule differ.
LANGFUSE = [
    # an observation's score judges that step, not the trace: the trace-level 1.0 counts
    langfuse_trace("t0", [score("correct", 0.0, 3, observation="t0-t"), score("correct", 1.0, 5)]),
    # the latest score of a name wins, whatever the list order
    langfuse_trace("t1", [score("correct", 1.0, 9), score("correct", 0.0, 4), score("helpfulness", 0.5, 6)]),
    # a TEXT note has no number; a categorical has none without labels=
    langfuse_trace("t2", [score("notes", None, 1, data_type="TEXT"), score("correct", 0.25, 7)]),
    # no trace-level score of the name at all
    langfuse_trace("t3", [score("correct", 1.0, 2, observation="t3-g"), score("helpfulness", 0.75, 3)]),
]


@pytest.mark.parametrize("name", ["correct", None], ids=["named", "first-seen"])
def test_langfuse_source_scores_like_read_langfuse(langfuse_server, monkeypatch, tmp_path, name):  # noqa: F811
    monkeypatch.setattr(test_whatif_sources, "LANGFUSE_TRACES", LANGFUSE)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-test")
    path = tmp_path / "export.json"
    path.write_text(json.dumps(LANGFUSE))
    with pytest.warns(UserWarning):  # t3 has no trace-level 'correct'; first-seen: two names
        rows = tk.read_langfuse(path, reward=name)
    expected = {row["lineage"]["trace_id"]: row["reward"] for row in rows}
    assert expected == {"t0": 1.0, "t1": 1.0, "t2": 0.25, "t3": None}
    source = {"adapter": "langfuse", "host": langfuse_server, **({"score_name": name} if name else {})}
    if name is None:
        with pytest.warns(UserWarning, match=r"2 score names \(correct, helpfulness\); the reward is 'correct'"):
            traces = load_traces(base_config(source).source)
    else:
        traces = load_traces(base_config(source).source)
    assert {t.trace_id: t.original_score for t in traces} == expected


def test_langfuse_score_name_on_no_trace_is_said(langfuse_server, monkeypatch):  # noqa: F811
    monkeypatch.setattr(test_whatif_sources, "LANGFUSE_TRACES", LANGFUSE)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-test")
    with pytest.warns(UserWarning, match="score_name 'notes' is on no trace"):
        traces = load_traces(base_config({"adapter": "langfuse", "host": langfuse_server, "score_name": "notes"}).source)
    assert {t.original_score for t in traces} == {None}
    assert any("score_name 'notes'" in said for said in traces.source_warnings)


def phoenix_spans(trace_id, root_score, child_score):
    """Root CHAIN span with its own feedback, an LLM span carrying trace-scope feedback (later
    in the file, so the latest), and the TOOL span it called."""
    root = {"openinference.span.kind": "CHAIN", "input.value": f"Where is order {trace_id}?",
            "output.value": f"Order {trace_id} shipped.", "metadata": json.dumps({"task_id": trace_id})}
    if root_score is not None:
        root.update({"annotations.0.annotation.name": "correctness", "annotations.0.annotation.score": root_score,
                     "annotations.0.annotation.annotator_kind": "LLM"})
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "m",
           "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": f"Where is order {trace_id}?",
           "llm.output_messages.0.message.role": "assistant",
           "llm.output_messages.0.message.tool_calls.0.tool_call.id": f"c-{trace_id}",
           "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
           "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": json.dumps({"id": trace_id}),
           # another span's own feedback judges that span: neither rule reads it
           "annotations.0.annotation.name": "correctness", "annotations.0.annotation.score": 0.0}
    if child_score is not None:
        llm.update({"trace.evaluations.0.evaluation.name": "correctness", "trace.evaluations.0.evaluation.score": child_score})
    tool = {"openinference.span.kind": "TOOL", "tool.name": "lookup", "tool.id": f"c-{trace_id}",
            "input.value": json.dumps({"id": trace_id}), "output.value": json.dumps({"status": "shipped"})}

    def span(number, parent, name, attrs):
        return {"name": name, "context": {"trace_id": trace_id, "span_id": f"{trace_id}-{number}"}, "parent_id": parent,
                "start_time": f"2026-01-01T00:00:0{number}+00:00", "status_code": "OK", "attributes": attrs}

    return [span(1, None, "agent", root), span(2, f"{trace_id}-1", "llm", llm), span(3, f"{trace_id}-1", "lookup", tool)]


def test_phoenix_source_scores_like_read_openinference(tmp_path):
    spans = phoenix_spans("p0", 0.0, 1.0) + phoenix_spans("p1", 1.0, None) + phoenix_spans("p2", None, 0.5) + phoenix_spans("p3", None, None)
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in spans))
    with pytest.warns(UserWarning, match="1 of 4 traces"):  # p3 has no feedback
        rows = tk.read_openinference(path)
    expected = {row["lineage"]["trace_id"]: row["reward"] for row in rows}
    assert expected == {"p0": 1.0, "p1": 1.0, "p2": 0.5, "p3": None}
    traces = phoenix_traces_from_spans(spans)
    assert {t.trace_id: t.original_score for t in traces} == expected
    assert traces[0].tool_calls[0].name == "lookup"


def test_phoenix_spans_without_feedback_keep_the_eval_score_attribute():
    spans = phoenix_spans("p0", None, None)
    spans[0]["attributes"]["eval.score"] = 0.25
    assert phoenix_traces_from_spans(spans)[0].original_score == 0.25
