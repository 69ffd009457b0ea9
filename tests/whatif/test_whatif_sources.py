"""Sources and cohort selection: stub, jsonl (rows, tau-bench), phoenix spans, langfuse API.

The Langfuse adapter is tested against recorded responses of its public REST API
(``/api/public/traces`` and ``/api/public/traces/{id}``) served by a local HTTP server that
this test starts; no live Langfuse is contacted.
"""

import base64
import dataclasses
import datetime as dt
import http.server
import json
import threading

import pytest
from test_whatif_walkthroughs import install_fixture

import toolkit as tk
from toolkit.whatif.config import load_config
from toolkit.whatif.sources import load_traces, phoenix_traces_from_spans, select_cohorts, stub_traces


def base_config(source, failure=None, baseline=None, **extra):
    return load_config({
        "source": source,
        "target": {"runner": "python:toolkit.whatif.examples:support_agent"},
        "selection": {"failure_cohort": failure or {"limit": 100}, "baseline_cohort": baseline or {"limit": 100}},
        "change": {"system_prompt": "Quote the tool result verbatim."},
        "scorer": {"adapter": "python", "score_fn": "python:toolkit.whatif.examples:grounding_score", "cache_mode": "off"},
        "decision": extra.get("decision", {}), "reporting": {}, "timeouts": {},
    })


def test_stub_traces_are_seeded_and_sized():
    a, b, c = stub_traces(7, seed=1), stub_traces(7, seed=1), stub_traces(7, seed=2)
    assert a == b and a != c and len(a) == 14
    config = base_config({"adapter": "stub", "synthetic_traces": 7, "seed": 1})
    assert [t.trace_id for t in load_traces(config.source)] == [t.trace_id for t in a]
    assert len(load_traces(base_config({"adapter": "stub", "synthetic_traces": 3}).source)) == 6


def test_stub_source_settings_change_the_run():
    few = tk.whatif.fork(base_config({"adapter": "stub", "synthetic_traces": 3}))
    assert few.state == "inconclusive" and few.cohort("failure").selected == 3
    many = tk.whatif.fork(base_config({"adapter": "stub", "synthetic_traces": 8, "seed": 3}), allow_stub=True)
    assert many.state == "ship" and many.cohort("failure").selected == 8


def test_jsonl_rows_cohort_by_reward_threshold(tmp_path):
    rows = tk.whatif.examples.support_rows(6, 6) if hasattr(tk.whatif, "examples") else None
    from toolkit.whatif.examples import support_rows

    rows = support_rows(6, 6)
    for entry in rows[:2]:
        entry["reward"] = 0.4
    tk.save_rows(rows, tmp_path / "r.jsonl")
    default = load_traces(base_config({"adapter": "jsonl", "path": str(tmp_path / "r.jsonl")}).source)
    assert sum(t.cohort == "failure" for t in default) == 6
    lower = load_traces(base_config({"adapter": "jsonl", "path": str(tmp_path / "r.jsonl"), "failure_below": 0.3}).source)
    assert sum(t.cohort == "failure" for t in lower) == 4  # the 0.4 rewards are baselines now
    trace = default[0]
    assert trace.user_message.startswith("What is the status") and trace.tool_calls[0].name == "lookup"


def test_jsonl_tau_bench_file(tmp_path):
    # a tiny tau-bench results file written by the test (shape of the public results files)
    entries = []
    for task in range(3):
        for trial in range(2):
            entries.append({
                "task_id": task, "trial": trial, "reward": float(trial == 1), "info": {},
                "traj": [
                    {"role": "system", "content": "You are an airline agent."},
                    {"role": "user", "content": f"Change my flight {task}"},
                    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                        "name": "get_reservation", "arguments": json.dumps({"id": f"R{task}"})}}]},
                    {"role": "tool", "tool_call_id": "c1", "name": "get_reservation", "content": json.dumps({"status": "ok"})},
                    {"role": "assistant", "content": f"Done {task}"},
                ],
            })
    path = tmp_path / "tau.json"
    path.write_text(json.dumps(entries))
    traces = load_traces(base_config({"adapter": "jsonl", "path": str(path)}).source)
    assert len(traces) == 6 and sum(t.cohort == "failure" for t in traces) == 3
    first = traces[0]
    assert first.user_message == "Change my flight 0" and first.original_output == "Done 0"
    assert first.tool_calls and first.tool_calls[0].name == "get_reservation"
    assert first.system_prompt == "You are an airline agent."
    forced = load_traces(base_config({"adapter": "jsonl", "path": str(path), "format": "tau_bench"}).source)
    assert [t.trace_id for t in forced] == [t.trace_id for t in traces]


def timed_trace_rows(n, now):
    rows = []
    for i in range(n):
        rows.append({"schema_version": "1", "trace_id": f"t{i}", "task_id": f"task{i % 2}", "prompt": f"q{i}",
                     "steps": [{"tool": "search" if i % 3 else "fetch", "arguments": {}, "result": 1}],
                     "final_text": "a", "reward": 0.1 * (i % 10), "cohort": "failure" if i < n // 2 else "baseline",
                     "ts": (now - dt.timedelta(hours=i)).isoformat()})
    return rows


def test_filters_and_limits(tmp_path):
    now = dt.datetime(2026, 11, 30, 12, tzinfo=dt.timezone.utc)
    tk.save_rows(timed_trace_rows(20, now), tmp_path / "t.jsonl")
    source = {"adapter": "jsonl", "path": str(tmp_path / "t.jsonl"), "label_field": "cohort"}

    def select(failure, baseline=None):
        config = base_config(source, failure, baseline or {"limit": 100})
        return select_cohorts(load_traces(config.source), config, now=now.timestamp())

    assert [t.trace_id for t in select({"limit": 3})["failure"].traces] == ["t0", "t1", "t2"]  # most recent first
    since = select({"limit": 100, "filter": "since:4h"})["failure"]
    assert [t.trace_id for t in since.traces] == ["t0", "t1", "t2", "t3", "t4"]
    assert since.available == 5 and since.labelled == 10
    assert {t.trace_id for t in select({"limit": 100, "filter": "score-above:0.55"})["failure"].traces} == {"t6", "t7", "t8", "t9"}
    assert {t.trace_id for t in select({"limit": 100, "filter": "task:task1,has-tool:fetch"})["failure"].traces} == {"t3", "t9"}
    assert select({"limit": 100, "filter": "label:baseline"})["failure"].traces == ()
    chosen = select({"limit": 100}, {"limit": 4})["baseline"]
    assert len(chosen.traces) == 4 and chosen.truncated and chosen.available == 10


def test_baseline_sample_is_seeded_and_order_free(tmp_path):
    now = dt.datetime(2026, 11, 30, 12, tzinfo=dt.timezone.utc)
    rows = timed_trace_rows(20, now)
    tk.save_rows(rows, tmp_path / "a.jsonl")
    tk.save_rows(list(reversed(rows)), tmp_path / "b.jsonl")

    def sample(name, seed):
        config = base_config({"adapter": "jsonl", "path": str(tmp_path / name), "label_field": "cohort"},
                             baseline={"limit": 4}, decision={"seed": seed})
        return {t.trace_id for t in select_cohorts(load_traces(config.source), config)["baseline"].traces}

    assert sample("a.jsonl", 1) == sample("b.jsonl", 1)
    assert any(sample("a.jsonl", 1) != sample("a.jsonl", s) for s in (2, 3, 4))


def openinference_spans():
    spans = []
    for i in range(12):
        trace_id = f"tr{i}"
        record = f"ORD-{10000 + i}"
        failed = i < 6
        spans.append({"name": "agent", "context": {"trace_id": trace_id, "span_id": f"{trace_id}-root"}, "parent_id": None,
                      "span_kind": "AGENT", "start_time": f"2026-11-29T10:{i:02d}:00+00:00",
                      "attributes": {"input.value": f"What is the status of my order {record}?",
                                     "output.value": "I'm looking into it." if failed else f"Order {record} is shipped; 2026-12-0{1 + i % 9}.",
                                     "tag.failed": failed, "eval.score": 0.0 if failed else 1.0}})
        spans.append({"name": "lookup", "context": {"trace_id": trace_id, "span_id": f"{trace_id}-tool"},
                      "parent_id": f"{trace_id}-root", "span_kind": "TOOL",
                      "attributes": {"tool.name": "lookup", "input.value": json.dumps({"id": record}),
                                     "output.value": json.dumps({"id": record, "status": "shipped", "date": f"2026-12-0{1 + i % 9}"})}})
    return spans


def test_phoenix_spans_become_traces():
    traces = phoenix_traces_from_spans(openinference_spans())
    assert len(traces) == 12 and sum(t.cohort == "failure" for t in traces) == 6
    first = traces[0]
    assert first.tool_calls[0].name == "lookup" and first.tool_calls[0].arguments == {"id": "ORD-10000"}
    assert first.original_score == 0.0 and first.timestamp is not None
    flattened = [{"context.trace_id": s["context"]["trace_id"], "parent_id": s["parent_id"], "span_kind": s["span_kind"],
                  **{f"attributes.{k}": v for k, v in s["attributes"].items()}} for s in openinference_spans()]
    assert [t.user_message for t in phoenix_traces_from_spans(flattened)] == [t.user_message for t in traces]


def test_phoenix_source_end_to_end(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    (tmp_path / "phoenix_wiring.py").write_text(
        "import json\n"
        f"SPANS = json.loads({json.dumps(json.dumps(openinference_spans()))})\n"
        "def get_spans():\n    return SPANS\n")
    verdict = tk.whatif.fork(base_config({"adapter": "phoenix", "spans_provider": "python:phoenix_wiring:get_spans"}))
    assert verdict.state == "ship" and verdict.cohort("failure").improved == 6
    assert verdict.cohort("baseline").regressed == 0


# --- langfuse against a local server with recorded responses ------------------------------------

LANGFUSE_TRACES = [
    {"id": f"lf-{i}", "name": "support", "timestamp": f"2026-11-29T0{i % 10}:00:00.000Z",
     "tags": ["failure"] if i < 6 else ["prod"],
     "input": {"messages": [{"role": "system", "content": "You are support."},
                            {"role": "user", "content": f"What is the status of my order ORD-{20000 + i}?"}]},
     "output": "I'm looking into it." if i < 6 else f"ORD-{20000 + i} shipped 2026-12-02",
     "observations": [{"id": f"o{i}", "type": "SPAN", "name": "lookup", "metadata": {"kind": "tool"},
                       "startTime": "2026-11-29T00:00:01.000Z", "input": {"id": f"ORD-{20000 + i}"},
                       "output": {"id": f"ORD-{20000 + i}", "status": "shipped", "date": "2026-12-02"}},
                      {"id": f"g{i}", "type": "GENERATION", "name": "llm", "input": "x", "output": "y"}],
     "scores": [{"name": "helpfulness", "value": 0.0 if i < 6 else 1.0}]}
    for i in range(12)
]


class RecordedLangfuse(http.server.BaseHTTPRequestHandler):
    requests = []

    def do_GET(self):  # noqa: N802 (http.server API)
        RecordedLangfuse.requests.append(self.path)
        expected = "Basic " + base64.b64encode(b"pk-test:sk-test").decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.end_headers()
            return
        from urllib.parse import parse_qs, urlparse

        url = urlparse(self.path)
        if url.path == "/api/public/traces":
            query = parse_qs(url.query)
            page, limit = int(query["page"][0]), int(query["limit"][0])
            items = LANGFUSE_TRACES[(page - 1) * limit: page * limit]
            summaries = [{k: v for k, v in t.items() if k not in ("observations", "scores")} for t in items]
            body = {"data": summaries, "meta": {"page": page, "limit": limit, "totalItems": len(LANGFUSE_TRACES),
                                                "totalPages": -(-len(LANGFUSE_TRACES) // limit)}}
        elif url.path.startswith("/api/public/traces/"):
            trace_id = url.path.rsplit("/", 1)[1]
            body = next((t for t in LANGFUSE_TRACES if t["id"] == trace_id), None)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
        else:
            self.send_response(404)
            self.end_headers()
            return
        payload = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def langfuse_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordedLangfuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    RecordedLangfuse.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_langfuse_pages_and_maps_traces(langfuse_server, monkeypatch):
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-test")
    config = base_config({"adapter": "langfuse", "host": langfuse_server, "page_size": 5})
    traces = load_traces(config.source)
    assert len(traces) == 12
    pages = [r for r in RecordedLangfuse.requests if r.startswith("/api/public/traces?")]
    assert len(pages) == 3  # 5 + 5 + 2: the short page ends the listing
    first = traces[0]
    assert first.cohort == "failure" and first.user_message == "What is the status of my order ORD-20000?"
    assert [c.name for c in first.tool_calls] == ["lookup"] and first.original_score == 0.0
    assert sum(t.cohort == "failure" for t in traces) == 6
    verdict = tk.whatif.fork(config)
    assert verdict.state == "ship" and verdict.cohort("failure").improved == 6


def test_langfuse_credentials_and_http_errors(langfuse_server, monkeypatch):
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY", raising=False)
    monkeypatch.delenv("LANGFUSE_SECRET_KEY", raising=False)
    config = base_config({"adapter": "langfuse", "host": langfuse_server})
    with pytest.raises(tk.whatif.SetupError, match="credentials"):
        load_traces(config.source)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-test")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "wrong")
    with pytest.raises(tk.whatif.SetupError, match="HTTP 401"):
        load_traces(config.source)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-test")
    score_named = base_config({"adapter": "langfuse", "host": langfuse_server, "score_name": "other"})
    assert all(t.original_score is None for t in load_traces(score_named.source))


def test_phoenix_label_field():
    spans = openinference_spans()
    for span in spans:
        if span["parent_id"] is None:
            span["attributes"]["cohort"] = "baseline" if span["attributes"]["tag.failed"] else "failure"
    traces = phoenix_traces_from_spans(spans, label_field="cohort")
    assert [t.cohort for t in traces[:6]] == ["baseline"] * 6 and traces[6].cohort == "failure"


def test_langfuse_custom_tag_and_key_variables(langfuse_server, monkeypatch):
    monkeypatch.setenv("MY_PK", "pk-test")
    monkeypatch.setenv("MY_SK", "sk-test")
    config = base_config({"adapter": "langfuse", "host": langfuse_server, "public_key_env": "MY_PK",
                          "secret_key_env": "MY_SK", "failure_tag": "prod"})
    traces = load_traces(config.source)
    assert [t.cohort for t in traces] == ["baseline"] * 6 + ["failure"] * 6


def test_phoenix_provider_yielding_non_spans_is_a_setup_error(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    (tmp_path / "phoenix_bad.py").write_text("def get_spans():\n    return [{'context': {'trace_id': 't'}}, 'not a span']\n")
    with pytest.raises(tk.whatif.SetupError, match="item 1 is a str"):
        tk.whatif.fork(base_config({"adapter": "phoenix", "spans_provider": "python:phoenix_bad:get_spans"}))


def test_missing_relative_source_path_names_the_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tk.whatif.SetupError, match="relative paths resolve against the current directory"):
        tk.whatif.fork(base_config({"adapter": "jsonl", "path": "nowhere.jsonl"}))


# --- hostile sources: labels that would drop traces silently, traces that count twice ------------


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def labelled_row(trace_id, label, prompt=None, output="Your order is shipped."):
    row = {"schema_version": "1", "trace_id": trace_id, "task_id": trace_id, "prompt": prompt or f"question {trace_id}",
           "steps": [{"tool": "lookup", "arguments": {"id": trace_id}, "result": {"id": trace_id}}, {"text": output}],
           "final_text": output, "reward": 0.5}
    if label is not ...:
        row["cohort"] = label
    return row


def test_labels_match_any_case_and_outer_spaces(tmp_path):
    labels = ["failure", "Failure", "FAILURE", " failure ", "\tFailure\n", "baseline", "Baseline ", " BASELINE"]
    path = write_jsonl(tmp_path / "t.jsonl", [labelled_row(f"t{i}", label) for i, label in enumerate(labels)])
    config = base_config({"adapter": "jsonl", "path": path, "label_field": "cohort"})
    selection = select_cohorts(load_traces(config.source), config)
    assert len(selection["failure"].traces) == 5 and len(selection["baseline"].traces) == 3
    assert selection.unrecognised_labels == {} and selection.unlabelled == 0


def test_unrecognised_labels_are_counted_not_dropped_silently(tmp_path):
    labels = ["failure"] * 3 + ["baseline"] * 3 + ["failed", "failed", "good", "FAILURE!", "", None, ...]
    path = write_jsonl(tmp_path / "t.jsonl", [labelled_row(f"t{i}", label) for i, label in enumerate(labels)])
    config = base_config({"adapter": "jsonl", "path": path, "label_field": "cohort"})
    selection = select_cohorts(load_traces(config.source), config)
    assert selection.unrecognised_labels == {"failed": 2, "good": 1, "FAILURE!": 1, "": 1}
    assert selection.unlabelled == 2  # a null label and a row without the field
    assert len(selection["failure"].traces) == 3 and len(selection["baseline"].traces) == 3


def test_unrecognised_labels_are_bounded(tmp_path):
    rows = [labelled_row(f"t{i}", f"label-{i}-" + "x" * 200) for i in range(100)]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    config = base_config({"adapter": "jsonl", "path": path, "label_field": "cohort"})
    counts = select_cohorts(load_traces(config.source), config).unrecognised_labels
    assert len(counts) == 21 and counts["(other labels)"] == 80 and sum(counts.values()) == 100
    assert all(len(label) <= 81 for label in counts)


def test_phoenix_failed_flag_any_case_and_unknown_values_counted():
    spans = openinference_spans()
    flags = ["TRUE", "True", " yes ", "1", "maybe", "2", "FALSE", "no", False, None, "0", "false"]
    roots = [s for s in spans if s["parent_id"] is None]
    for span, flag in zip(roots, flags):
        span["attributes"]["tag.failed"] = flag
    traces = phoenix_traces_from_spans(spans)
    assert [t.cohort for t in traces] == ["failure"] * 4 + ["", ""] + ["baseline"] * 6
    config = base_config({"adapter": "stub"})
    assert select_cohorts(traces, config).unrecognised_labels == {"maybe": 1, "2": 1}


def test_label_filter_ignores_case_and_spaces(tmp_path):
    rows = [dict(labelled_row(f"t{i}", "failure"), tier=tier) for i, tier in enumerate(["Gold", " gold", "silver"])]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    config = base_config({"adapter": "jsonl", "path": path, "label_field": "tier"},
                         failure={"limit": 100, "filter": "label:GOLD"})
    # label_field tier: no trace is a cohort, so the label filter is checked on the raw label
    traces = [dataclasses.replace(t, cohort="failure") for t in load_traces(config.source)]
    assert [t.trace_id for t in select_cohorts(traces, config)["failure"].traces] == ["t0", "t1"]


def test_copied_traces_collapse_before_the_limit_and_the_floor(tmp_path):
    failure, baseline = labelled_row("f-1", "failure"), labelled_row("b-1", "baseline", output="Other answer.")
    path = write_jsonl(tmp_path / "t.jsonl", [failure] * 5 + [baseline] * 5)  # each exported 5 times
    config = base_config({"adapter": "jsonl", "path": path, "label_field": "cohort"})
    selection = select_cohorts(load_traces(config.source), config)
    assert len(selection["failure"].traces) == 1 and len(selection["baseline"].traces) == 1
    assert selection["failure"].labelled == 1 and selection["failure"].duplicates_collapsed == 4
    assert selection.duplicates_collapsed == 8 and selection.duplicate_ids == ("f-1", "b-1")
    assert selection["baseline"].duplicate_ids == ("b-1",)
    verdict = tk.whatif.fork(config)  # 1 trace per cohort: the trust floor refuses, whatever the copies said
    assert verdict.state == "inconclusive" and verdict.cohort("failure").selected == 1


def test_same_content_under_new_ids_collapses_too(tmp_path):
    rows = [labelled_row(f"f-{i}", "failure", prompt="same question", output="same answer") for i in range(5)]
    rows += [labelled_row("b-0", "baseline", prompt="same question", output="same answer")]  # another cohort: kept
    rows += [labelled_row(f"skip-{i}", "failure", prompt="") for i in range(2)]  # unreplayable: each its own record
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    config = base_config({"adapter": "jsonl", "path": path, "label_field": "cohort"}, failure={"limit": 2})
    selection = select_cohorts(load_traces(config.source), config)
    assert [t.trace_id for t in selection["failure"].traces] == ["f-0", "skip-0"]  # the limit counts after collapsing
    assert selection["failure"].available == 3 and not selection["baseline"].duplicates_collapsed
    assert selection.duplicates_collapsed == 4 and selection.duplicate_ids == ("f-1", "f-2", "f-3", "f-4")


def test_duplicate_ids_listed_at_most_twenty(tmp_path):
    rows = [labelled_row(f"t{i}", "failure", prompt="q", output="a") for i in range(50)]
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    config = base_config({"adapter": "jsonl", "path": path, "label_field": "cohort"})
    selection = select_cohorts(load_traces(config.source), config)
    assert selection.duplicates_collapsed == 49 and len(selection.duplicate_ids) == 20


def test_a_torn_last_trace_is_a_finding_not_a_silent_drop(tmp_path, monkeypatch):
    # issue 21, row 16: a trace file whose writer was killed mid-line lost its last trace
    # with no word in the verdict. Now the intact traces are used and a finding names the line.
    from toolkit.whatif.examples import support_rows

    monkeypatch.chdir(tmp_path)
    tk.save_rows(support_rows(6, 6), tmp_path / "r.jsonl")
    whole = (tmp_path / "r.jsonl").read_text()

    def fork(text):
        (tmp_path / "r.jsonl").write_text(text)
        config = {**VALID_FORK, "source": {"adapter": "jsonl", "path": str(tmp_path / "r.jsonl")}}
        return tk.whatif.fork(config)

    torn = fork(whole + whole.splitlines()[0][:40])  # a 13th line cut off mid-write
    findings = [f for f in torn.findings if f.code == "source_lines_skipped"]
    assert len(findings) == 1 and findings[0].details["count"] == 1 and findings[0].details["lines"] == "13"
    assert findings[0].severity == "degrades_trust"
    assert sum(c.selected for c in torn.cohorts) == 12  # every intact trace is still used
    clean = fork(whole)
    assert not any(f.code == "source_lines_skipped" for f in clean.findings)


VALID_FORK = {
    "target": {"runner": "python:toolkit.whatif.examples:support_agent"},
    "selection": {"failure_cohort": {"limit": 20}, "baseline_cohort": {"limit": 20}},
    "change": {"system_prompt": "Quote the tool result verbatim."},
    "scorer": {"adapter": "python", "score_fn": "python:toolkit.whatif.examples:grounding_score", "cache_mode": "off"},
    "decision": {}, "reporting": {}, "timeouts": {},
}
