"""Verdict object, JSON schema, Markdown, CI line, profiles, diff and figure (docs/design/whatif.md §8)."""

import json

import jsonschema
import pytest
from matplotlib.figure import Figure
from test_whatif_walkthroughs import config_for, install_fixture, row, write_rows

import toolkit as tk

FORENSIC = {"profile": "forensic", "forensic_acknowledgment": {
    "accepted_by": "ops-7", "accepted_at": "2026-11-30", "reason": "incident review"}}


@pytest.fixture
def fixture_dir(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    return tmp_path


def rows_with_text():
    rows = [row(f"f-{i:02d}", "failure", 0.2) for i in range(6)] + [row(f"b-{i:02d}", "baseline", -0.2 if i == 0 else 0.0) for i in range(10)]
    for entry in rows:
        entry["prompt"] = f"SECRET-PROMPT {entry['trace_id']} " + "x" * 300
    return rows


def fork(tmp_path, profile=None, reporting=None, rows=None):
    path = write_rows(tmp_path / "traces.jsonl", rows or rows_with_text())
    config = config_for(path, tmp_path, reporting=reporting or {})
    return tk.whatif.fork(config, profile=profile)


def test_json_report_matches_the_versioned_schema(fixture_dir):
    verdict = fork(fixture_dir)
    data = json.loads(verdict.to_json())
    jsonschema.validate(data, tk.whatif.REPORT_SCHEMA)
    assert data["schema_version"] == "1.0" and data["verdict_state"] == verdict.state
    assert data["exit_code"] == verdict.exit_code
    for cohort in data["cohort_results"]:
        assert cohort["improved"] + cohort["unchanged"] + cohort["regressed"] <= cohort["scored"] <= cohort["replayed"] <= cohort["selected"]
    assert tk.whatif.load_report(data)["verdict_state"] == verdict.state


def test_each_profile_changes_the_output(fixture_dir):
    outputs = {}
    for profile in ("minimal", "default", "review"):
        verdict = fork(fixture_dir, reporting={"profile": profile})
        outputs[profile] = (verdict.to_json(), verdict.to_markdown(), verdict.traces)
    forensic = fork(fixture_dir, profile="forensic", reporting=FORENSIC)
    outputs["forensic"] = (forensic.to_json(), forensic.to_markdown(), forensic.traces)
    minimal_json = json.loads(outputs["minimal"][0])
    assert minimal_json["traces"] == [] and "## Evidence" not in outputs["minimal"][1]
    assert "user_message_sha256" not in outputs["minimal"][2].columns
    default_json = json.loads(outputs["default"][0])
    assert default_json["traces"] and "user_message_sha256" in default_json["traces"][0]
    assert "SECRET-PROMPT" not in outputs["default"][0] + outputs["default"][1]
    review_json = json.loads(outputs["review"][0])
    excerpt = review_json["traces"][0]["user_message"]
    assert excerpt.startswith("SECRET-PROMPT") and len(excerpt) <= 161
    assert "SECRET-PROMPT" in outputs["review"][1] and "x" * 300 not in outputs["review"][0]
    forensic_json = json.loads(outputs["forensic"][0])
    assert forensic_json["traces"][0]["user_message"].endswith("x" * 300)
    assert forensic_json["manifest"]["forensic_acknowledgment"]["accepted_by"] == "ops-7"
    assert len({o[0] for o in outputs.values()}) == 4


def test_forensic_needs_both_affirmations(fixture_dir):  # fact 14
    with pytest.raises(tk.whatif.ForensicAffirmationError, match="--profile forensic"):
        fork(fixture_dir, reporting=FORENSIC)
    with pytest.raises(tk.whatif.ForensicAffirmationError, match="alone is not enough"):
        fork(fixture_dir, profile="forensic")
    assert fork(fixture_dir, profile="forensic", reporting=FORENSIC).profile == "forensic"


def test_profile_from_config_is_used(fixture_dir):
    assert fork(fixture_dir, reporting={"profile": "review"}).profile == "review"


def test_repr_str_html_and_status_line(fixture_dir):
    verdict = fork(fixture_dir)
    assert repr(verdict).startswith("<Verdict ") and "\n" not in repr(verdict)
    assert "\n" not in str(verdict)
    html = verdict._repr_html_()
    assert "What-if verdict" in html and "<table>" in html and "baseline" in html
    whole = verdict.status_line(width=1000)
    assert "\n" not in whole and whole.startswith(("✓", "✗", "⚠")) and "…" not in whole
    # a status longer than the width wraps instead of being cut (it was cut with "…"): every
    # word is still there, the first line keeps the glyph and the verdict
    for width in (80, 30):
        lines = verdict.status_line(width=width).splitlines()
        assert len(lines) > 1 and all(len(x) <= width for x in lines)
        assert lines[0].startswith(whole[:1]) and all(x.startswith("  ") for x in lines[1:])
        assert " ".join(lines).split() == whole.split()


def test_per_trace_dataframe(fixture_dir):
    verdict = fork(fixture_dir)
    frame = verdict.traces
    assert len(frame) == 16 and {"trace_id", "cohort", "delta", "delta_class", "status"} <= set(frame.columns)
    assert frame.equals(verdict.to_pandas())
    assert sorted(frame[frame.cohort == "baseline"].delta_class.unique()) == ["regressed", "unchanged"]


def test_markdown_sections_in_order(fixture_dir):
    markdown = fork(fixture_dir).to_markdown()
    order = ["# What-if verdict", "## Stats", "## Replay validity", "## Selection", "## Floor evaluation",
             "## Findings and next steps", "## Evidence", "## Methodology", "## Manifest"]
    positions = [markdown.index(h) for h in order]
    assert positions == sorted(positions)


def test_dont_ship_markdown_lists_next_steps(fixture_dir):
    rows = [row(f"f-{i:02d}", "failure", 0.2) for i in range(6)] + [row(f"b-{i:02d}", "baseline", -0.2) for i in range(6)]
    verdict = fork(fixture_dir, rows=rows)
    markdown = verdict.to_markdown()
    assert verdict.state == "dont_ship"
    assert "The change breaks traces that used to work." in markdown and "1. Read the regressed" in markdown
    assert "**Regressions:**" in markdown and "`baseline/b-00`" in markdown


def test_figure_shows_cohorts_and_epsilon_band(fixture_dir):
    verdict = fork(fixture_dir)
    figure = verdict.figure()
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].startswith("failure") and labels[1].startswith("baseline")
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("±0.05" in t for t in legend) and any("median" in t for t in legend)


def test_write_and_load_report(fixture_dir):
    verdict = fork(fixture_dir)
    written = verdict.write(fixture_dir / "a" / "r.json", fixture_dir / "b" / "r.md")
    assert json.loads(open(written["report_json"]).read())["verdict_state"] == verdict.state
    assert open(written["report_md"]).read().startswith("# What-if verdict")
    change = tk.whatif.diff(written["report_json"], verdict)
    assert not change.changed and str(change) == "(No changes detected.)"


def test_load_report_errors(tmp_path):
    with pytest.raises(tk.whatif.ReportError, match="not found"):
        tk.whatif.load_report(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(tk.whatif.ReportError, match="cannot read"):
        tk.whatif.load_report(bad)
    with pytest.raises(tk.whatif.ReportError, match="not a toolkit what-if report"):
        tk.whatif.load_report({"a": 1})
    with pytest.raises(tk.whatif.ReportError, match="not supported"):
        tk.whatif.load_report({"schema_version": "0.2", "verdict_state": "ship"})


def test_reports_are_deterministic_apart_from_run_times(fixture_dir):
    def stable(verdict):
        data = verdict.to_dict()
        for key in ("started_at", "finished_at", "duration_seconds"):
            data["manifest"].pop(key)
        for trace in data["traces"]:
            trace.pop("replay_seconds")
        return json.dumps(data, sort_keys=True)

    assert stable(fork(fixture_dir)) == stable(fork(fixture_dir))


def test_unknown_profile_suggests_the_nearest(fixture_dir):
    with pytest.raises(tk.whatif.WhatIfConfigError, match="did you mean 'review'"):
        fork(fixture_dir, profile="reveiw")
