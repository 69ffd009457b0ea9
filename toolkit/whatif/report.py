"""The Verdict object and what it renders: JSON (versioned schema), Markdown, CI line, diff.

Profiles decide how much user content leaves the process (every export reads the profile
the run was made with; numbers are never redacted):

=========== ============================================================================
profile     per-trace content in JSON, Markdown and ``verdict.traces``
=========== ============================================================================
minimal     none: counts, findings and the verdict only (no per-trace rows in reports)
default     trace ids, scores, deltas, classes, failure codes; texts as SHA-256 prefixes
review      default + excerpts (first 160 characters) of input, both outputs, rationales,
            and an Evidence section (top improvements and regressions) in Markdown
forensic    review + full texts; needs the config acknowledgment AND the CLI flag
=========== ============================================================================

The reference wrote the same two files for every profile and no per-trace evidence at all
(docs/design/whatif.md §8.1, docs/design/whatif.md §11.6); ``diff`` here also lists traces whose class changed.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit._util.results import Result, json_safe
from toolkit.errors import ReportError
from toolkit.whatif.decide import SEVERITY_RANK, CohortResult, Finding, FloorFailure, Policy

__all__ = [
    "Verdict",
    "TraceResult",
    "VerdictDiff",
    "REPORT_SCHEMA",
    "REPORT_SCHEMA_VERSION",
    "diff",
    "load_report",
    "ReportError",
]

REPORT_SCHEMA_VERSION = "1.0"
REPORT_SCHEMA_ID = "toolkit.whatif.report/1.0"
LABELS = {"ship": "Ship", "dont_ship": "Don't Ship", "inconclusive": "Inconclusive"}
EXIT_CODES = {"ship": 0, "dont_ship": 1, "inconclusive": 2}
GLYPHS = {"ship": "✓", "dont_ship": "✗", "inconclusive": "⚠"}
_EXCERPT = 160  # characters: enough to recognise an answer, short enough for a PR comment
_TEXT_FIELDS = ("user_message", "original_output", "replayed_output", "rationale_original", "rationale_replayed")


@dataclasses.dataclass(frozen=True)
class TraceResult(Result):
    trace_id: str
    cohort: str
    status: str  # "scored" or the failure code
    original_score: float | None
    replayed_score: float | None
    delta: float | None
    delta_class: str | None
    failure_message: str | None
    replay_seconds: float | None
    user_message: str | None = None
    original_output: str | None = None
    replayed_output: str | None = None
    rationale_original: str | None = None
    rationale_replayed: str | None = None

    def __str__(self) -> str:
        if self.delta is None:
            return f"{self.cohort}/{self.trace_id}: {self.status}"
        return f"{self.cohort}/{self.trace_id}: Δ {self.delta:+.3f} ({self.delta_class})"

    def redacted(self, profile: str) -> dict[str, Any]:
        row = {f: json_safe(getattr(self, f)) for f in (
            "trace_id", "cohort", "status", "original_score", "replayed_score", "delta", "delta_class",
            "failure_message", "replay_seconds")}
        for name in _TEXT_FIELDS:
            text = getattr(self, name)
            if profile == "forensic":
                row[name] = text
            elif profile == "review":
                row[name] = None if text is None else (text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…")
            else:
                row[f"{name}_sha256"] = None if text is None else sha256_hex(text)[:16]
        return row


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


@dataclasses.dataclass(frozen=True)
class Verdict(Result):
    """One what-if verdict: Ship, Don't Ship or Inconclusive, with all its evidence."""

    state: str
    experiment_shape: str
    profile: str
    cohorts: tuple[CohortResult, ...]
    findings: tuple[Finding, ...]
    floor_passed: bool
    floor_failures: tuple[FloorFailure, ...]
    failures: tuple  # FailureRecord
    trace_results: tuple[TraceResult, ...]
    policy: Policy
    selection: Mapping[str, Any]
    cache: Mapping[str, Any]
    methodology: Mapping[str, Any]
    manifest: Mapping[str, Any]

    # -- small facts ----------------------------------------------------------------------
    @property
    def label(self) -> str:
        return LABELS[self.state]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.state]

    def cohort(self, name: str) -> CohortResult | None:
        return next((c for c in self.cohorts if c.name == name), None)

    @property
    def blocking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity in ("blocks_all", "blocks_ship"))

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def headline(self) -> str:
        if self.state == "ship":
            return "all floor rules passed, all policy rules passed"
        if not self.floor_passed and self.floor_failures:
            return str(self.floor_failures[0])  # the floor is the root cause; guards come after
        ranked = sorted(self.findings, key=lambda f: -SEVERITY_RANK[f.severity])
        if ranked and SEVERITY_RANK[ranked[0].severity] >= 3:
            return ranked[0].message
        return ranked[0].message if ranked else "no finding"

    def __str__(self) -> str:
        parts = []
        for cohort in self.cohorts:
            parts.append(f"{cohort.name} {cohort.improved}↑/{cohort.unchanged}=/{cohort.regressed}↓ of {cohort.scored}"
                         f" (median Δ {_fmt(cohort.median_delta, True)})")
        return f"{self.label} — {self.headline()}" + (f" [{'; '.join(parts)}]" if parts else "")

    def __repr__(self) -> str:
        return f"<Verdict {self.label}: {self.headline()}; {len(self.findings)} finding(s), profile {self.profile}>"

    # -- tables ---------------------------------------------------------------------------
    def to_pandas(self):
        """Per-trace results as a DataFrame, redacted by the run's profile (text columns)."""
        import pandas as pd

        columns = ["trace_id", "cohort", "status", "original_score", "replayed_score", "delta", "delta_class",
                   "failure_message", "replay_seconds"]
        rows = [t.redacted(self.profile if self.profile != "minimal" else "default") for t in self.trace_results]
        if self.profile == "minimal":
            rows = [{k: r[k] for k in columns} for r in rows]
        frame = pd.DataFrame(rows)
        if frame.empty:
            frame = pd.DataFrame(columns=columns)
        return frame

    @property
    def traces(self):
        """Per-trace deltas as a DataFrame (same as :meth:`to_pandas`)."""
        return self.to_pandas()

    def deltas(self, cohort: str) -> list[float]:
        return [t.delta for t in self.trace_results if t.cohort == cohort and t.delta is not None]

    # -- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        traces = [] if self.profile == "minimal" else [t.redacted(self.profile) for t in self.trace_results]
        cohorts = []
        for cohort in self.cohorts:
            entry = cohort.to_dict()
            entry["ci_width"] = json_safe(cohort.ci_width)
            cohorts.append(entry)
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "schema_id": REPORT_SCHEMA_ID,
            "experiment_shape": self.experiment_shape,
            "verdict_state": self.state,
            "verdict_label": self.label,
            "exit_code": self.exit_code,
            "profile": self.profile,
            "headline": self.headline(),
            "cohort_results": cohorts,
            "findings": [f.to_dict() for f in self.findings],
            "floor": {"passed": self.floor_passed, "failures": [f.to_dict() for f in self.floor_failures],
                      **self.manifest.get("trust_floor", {})},
            "failures": [r.to_dict() for r in self.failures],
            "traces": traces,
            "decision_policy": self.policy.to_dict(),
            "selection": json_safe(self.selection),
            "cache_summary": json_safe(self.cache),
            "methodology": json_safe(self.methodology),
            "manifest": json_safe(self.manifest),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=indent, ensure_ascii=False)

    # -- text renderers ---------------------------------------------------------------------
    def status_line(self, width: int = 80) -> str:
        """One line for CI (at most ``width`` characters): glyph, verdict, reason."""
        if self.state == "ship":
            failure, baseline = self.cohort("failure"), self.cohort("baseline")
            if failure is not None and baseline is not None:
                reason = (f"failures {failure.improved}/{failure.scored} ↑, "
                          f"baseline {baseline.scored - baseline.regressed}/{baseline.scored} stable")
            else:
                reason = ", ".join(f"{c.name} {c.scored - c.regressed}/{c.scored} stable" for c in self.cohorts)
        else:
            reason = self.headline()
        line = f"{GLYPHS[self.state]} toolkit.whatif: {self.label} — {reason}"
        return line if len(line) <= width else line[: width - 1] + "…"

    def to_markdown(self) -> str:
        lines = [f"# What-if verdict: {self.label}", "", f"**{self.headline()}**", ""]
        lines += ["## Stats", ""]
        for cohort in self.cohorts:
            ci = (f"{cohort.ci_level:.0%} CI [{_fmt(cohort.ci_low, True)}, {_fmt(cohort.ci_high, True)}]"
                  if cohort.ci_computable else f"(CI not computed: {cohort.ci_unavailable_reason})")
            p = "" if cohort.sign_flip_p is None else f", sign-flip p {cohort.sign_flip_p:.3g}"
            n_clusters = getattr(cohort, "n_clusters", None)
            if n_clusters is not None:
                p += f" ({n_clusters} clusters)"
            lines.append(f"- **{cohort.name.capitalize()} ({cohort.scored} scored):** improved {cohort.improved}, "
                         f"unchanged {cohort.unchanged}, regressed {cohort.regressed}; median Δ "
                         f"{_fmt(cohort.median_delta, True)}, {ci}{p}")
        if not self.cohorts:
            lines.append("- no cohort was scored")
        lines += ["", "## Replay validity", ""]
        for cohort in self.cohorts:
            rate = lambda k: f"{100 * k / cohort.selected:.1f}%" if cohort.selected else "n/a"  # noqa: E731
            failures = ", ".join(f"{n} {code}" for code, n in sorted(cohort.failure_counts.items()))
            lines.append(f"- {cohort.name}: {cohort.selected} selected, {cohort.replayed} replayed ({rate(cohort.replayed)}), "
                         f"{cohort.scored} scored ({rate(cohort.scored)})" + (f"; failures: {failures}" if failures else ""))
        lines += ["", "## Selection", ""]
        for name, info in self.selection.items():
            lines.append(f"- {name}: {info['selected']} selected of {info['available']} matching "
                         f"(limit {info['limit']}, filter {info['filter'] or 'none'}, {info['labelled']} labelled {name})")
        lines += ["", "## Floor evaluation", ""]
        if self.floor_passed:
            lines.append("All floor rules passed.")
        elif not self.floor_failures:
            lines.append("The floor was not evaluated: the run stopped before scoring.")
        else:
            lines += ["| cohort | rule | threshold | observed |", "|---|---|---|---|"]
            lines += [f"| {f.cohort or '(run)'} | {f.rule} | {f.threshold} | {f.observed} |" for f in self.floor_failures]
        lines += ["", "## Findings and next steps", ""]
        actionable = sorted((f for f in self.findings if f.next_step), key=lambda f: -SEVERITY_RANK[f.severity])
        info = [f for f in self.findings if not f.next_step]
        if not actionable:
            lines.append("No actionable findings.")
        for finding in actionable:
            lines += [f"### {finding.next_step} (`{finding.code}`, {finding.severity})", "", finding.message, ""]
            lines += [f"{i}. {step}" for i, step in enumerate(finding.next_steps, 1)]
            lines.append("")
        for finding in info:
            lines.append(f"- info `{finding.code}`: {finding.message}")
        if self.profile != "minimal" and self.trace_results:
            lines += ["", "## Evidence", ""]
            scored = [t for t in self.trace_results if t.delta is not None]
            best = sorted(scored, key=lambda t: -t.delta)[:3]
            worst = [t for t in sorted(scored, key=lambda t: t.delta) if t.delta_class == "regressed"][:3]
            for title, group in (("Top improvements", best), ("Regressions", worst)):
                lines.append(f"**{title}:**" if group else f"**{title}:** none")
                for trace in group:
                    row = trace.redacted(self.profile)
                    lines.append(f"- `{trace.cohort}/{trace.trace_id}` Δ {trace.delta:+.3f} "
                                 f"({_fmt(trace.original_score)} → {_fmt(trace.replayed_score)})")
                    if self.profile in ("review", "forensic"):
                        for name in ("user_message", "original_output", "replayed_output", "rationale_replayed"):
                            if row.get(name):
                                text = str(row[name]).replace("\n", " ")
                                lines.append(f"  - {name.replace('_', ' ')}: {text}")
                lines.append("")
            unscored = [t for t in self.trace_results if t.delta is None]
            if unscored:
                lines.append("**Not scored:** " + ", ".join(f"`{t.trace_id}` ({t.status})" for t in unscored[:20])
                             + (" …" if len(unscored) > 20 else ""))
        method = self.methodology
        boot = method.get("bootstrap", {})
        lines += ["", "## Methodology", "",
                  f"- unit: {method.get('unit_of_analysis')}; delta = {method.get('delta')}",
                  f"- required cohorts: {', '.join(method.get('required_cohorts', []))}; shape {self.experiment_shape}",
                  f"- bootstrap: {boot.get('method')} CI of the {boot.get('statistic')}, B={boot.get('resamples')}, "
                  f"seed {boot.get('seed')}, level {boot.get('ci_level')}; {boot.get('assumption')}",
                  f"- {method.get('test')}",
                  f"- practical delta {self.policy.practical_delta_epsilon:g} (source: policy); per-trace inference: descriptive only",
                  f"- scorer: {method.get('scorer')}; score cache: mode {self.cache.get('mode')} "
                  f"({self.cache.get('hits')} hits, {self.cache.get('misses')} misses, {self.cache.get('writes')} writes)",
                  f"- causal scope: {method.get('causal_claim_scope')}"]
        lines += [f"- limitation: {item}" for item in method.get("limitations", [])]
        lines += ["", "## Manifest", "",
                  f"- config sha256 `{self.manifest.get('config_hash', '')[:16]}`, toolkit {self.manifest.get('toolkit_version')}, "
                  f"floor {self.manifest.get('trust_floor', {}).get('version')}, profile {self.profile}",
                  f"- runner `{self.manifest.get('target')}`, scorer `{self.manifest.get('scorer')}`, "
                  f"source {self.manifest.get('source')}, started {self.manifest.get('started_at')}"]
        return "\n".join(lines) + "\n"

    def _repr_html_(self) -> str:
        colour = {"ship": "#009E73", "dont_ship": "#D55E00", "inconclusive": "#E69F00"}[self.state]
        rows = "".join(
            f"<tr><td>{html.escape(c.name)}</td><td>{c.selected}</td><td>{c.replayed}</td><td>{c.scored}</td>"
            f"<td>{c.improved}</td><td>{c.unchanged}</td><td>{c.regressed}</td><td>{_fmt(c.median_delta, True)}</td>"
            f"<td>{'[' + _fmt(c.ci_low, True) + ', ' + _fmt(c.ci_high, True) + ']' if c.ci_computable else html.escape(str(c.ci_unavailable_reason))}</td>"
            f"<td>{'n/a' if c.sign_flip_p is None else f'{c.sign_flip_p:.3g}'}</td></tr>"
            for c in self.cohorts
        )
        findings = "".join(
            f"<li><b>{html.escape(f.severity)}</b> <code>{html.escape(f.code)}</code>: {html.escape(f.message)}"
            + (f"<br><i>next:</i> {html.escape(f.next_steps[0])}" if f.next_steps else "") + "</li>"
            for f in self.findings
        )
        return (
            f"<div><h3 style='color:{colour}'>What-if verdict: {html.escape(self.label)}</h3>"
            f"<p><b>{html.escape(self.headline())}</b></p>"
            "<table><tr><th>cohort</th><th>selected</th><th>replayed</th><th>scored</th><th>improved</th>"
            "<th>unchanged</th><th>regressed</th><th>median Δ</th><th>CI</th><th>sign-flip p</th></tr>"
            f"{rows}</table><ul>{findings}</ul>"
            f"<p style='font-size:smaller'>floor {'passed' if self.floor_passed else 'failed'}; "
            f"profile {html.escape(self.profile)}; {len(self.failures)} failure record(s)</p></div>"
        )

    def figure(self):
        """Per-cohort deltas with the median's CI and the ±epsilon band (a Figure)."""
        from toolkit.plots.whatif import whatif_figure

        return whatif_figure(self)

    def write(self, json_path: str | Path | None = None, markdown_path: str | Path | None = None) -> dict[str, str]:
        """Write the JSON and/or Markdown report (parents created); return the paths."""
        written = {}
        for path, text, key in ((json_path, self.to_json, "report_json"), (markdown_path, self.to_markdown, "report_md")):
            if path is None:
                continue
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(target.name + ".tmp")
            temporary.write_text(text(), encoding="utf-8")
            temporary.replace(target)
            written[key] = str(target)
        return written


# --- JSON schema of the report (jsonschema draft 2020-12) ----------------------------------------

_NUMBER_OR_NULL = {"type": ["number", "null"]}
REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": REPORT_SCHEMA_ID,
    "type": "object",
    "required": ["schema_version", "schema_id", "experiment_shape", "verdict_state", "exit_code", "profile",
                 "cohort_results", "findings", "floor", "failures", "traces", "decision_policy", "selection",
                 "cache_summary", "methodology", "manifest"],
    "properties": {
        "schema_version": {"const": REPORT_SCHEMA_VERSION},
        "experiment_shape": {"enum": ["failure_rescue", "regression_check"]},
        "verdict_state": {"enum": ["ship", "dont_ship", "inconclusive"]},
        "exit_code": {"enum": [0, 1, 2]},
        "profile": {"enum": ["default", "review", "minimal", "forensic"]},
        "cohort_results": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "selected", "replayed", "scored", "improved", "unchanged", "regressed",
                         "median_delta", "ci_low", "ci_high", "ci_computable", "floor_failures"],
            "properties": {
                "name": {"type": "string"},
                **{k: {"type": "integer", "minimum": 0} for k in ("selected", "replayed", "scored", "improved", "unchanged", "regressed")},
                "median_delta": _NUMBER_OR_NULL, "ci_low": _NUMBER_OR_NULL, "ci_high": _NUMBER_OR_NULL,
                "sign_flip_p": _NUMBER_OR_NULL, "ci_computable": {"type": "boolean"},
            },
        }},
        "findings": {"type": "array", "items": {
            "type": "object", "required": ["code", "severity", "message", "details"],
            "properties": {"severity": {"enum": ["info", "degrades_trust", "blocks_ship", "blocks_all"]}},
        }},
        "floor": {"type": "object", "required": ["passed", "failures"]},
        "failures": {"type": "array", "items": {"type": "object", "required": ["id", "code", "stage", "scope", "message"]}},
        "traces": {"type": "array", "items": {"type": "object", "required": ["trace_id", "cohort", "status", "delta"]}},
    },
}


# --- reading and diffing ----------------------------------------------------------------------


def load_report(source: "Verdict | Mapping | str | Path") -> dict[str, Any]:
    """A report as a dict, from a Verdict, a dict, or a JSON file path; ReportError if unreadable.

    Parameters
    ----------
    source : Verdict, mapping, str or path
        A :class:`Verdict` (converted with ``to_dict()``), a report mapping, or the path of a
        JSON report file.

    Returns
    -------
    dict
        The report.

    Raises
    ------
    ReportError
        When the file is missing or unreadable, the data lacks ``schema_version`` /
        ``verdict_state``, or its schema major version is not supported.
    """
    if isinstance(source, Verdict):
        return source.to_dict()
    if isinstance(source, Mapping):
        data = dict(source)
    else:
        path = Path(source)
        if not path.exists():
            raise ReportError(f"report file not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ReportError(f"cannot read report {path}: {type(error).__name__}: {error}") from None
    if not isinstance(data, dict) or "verdict_state" not in data or "schema_version" not in data:
        raise ReportError("not a toolkit what-if report (no schema_version / verdict_state)")
    major = str(data["schema_version"]).split(".")[0]
    if major != REPORT_SCHEMA_VERSION.split(".")[0]:
        raise ReportError(f"report schema_version {data['schema_version']!r} is not supported (expected {REPORT_SCHEMA_VERSION})")
    return data


@dataclasses.dataclass(frozen=True)
class VerdictDiff(Result):
    verdict_before: str
    verdict_after: str
    cohort_changes: tuple[Mapping[str, Any], ...]
    findings_added: tuple[str, ...]
    findings_removed: tuple[str, ...]
    trace_changes: tuple[Mapping[str, Any], ...]

    @property
    def changed(self) -> bool:
        return bool(self.verdict_before != self.verdict_after or self.findings_added or self.findings_removed
                    or self.trace_changes or any(c["changes"] for c in self.cohort_changes))

    def __str__(self) -> str:
        if not self.changed:
            return "(No changes detected.)"
        return (f"{LABELS.get(self.verdict_before, self.verdict_before)} → {LABELS.get(self.verdict_after, self.verdict_after)}; "
                f"+{len(self.findings_added)}/-{len(self.findings_removed)} findings, {len(self.trace_changes)} trace(s) changed class")

    def to_markdown(self) -> str:
        if not self.changed:
            return "(No changes detected.)\n"
        before, after = LABELS.get(self.verdict_before, self.verdict_before), LABELS.get(self.verdict_after, self.verdict_after)
        lines = ["# What-if diff", "",
                 f"**Verdict:** {before} → {after}" if before != after else f"**Verdict:** unchanged ({after})", ""]
        lines += ["| cohort | field | before | after | change |", "|---|---|---|---|---|"]
        for cohort in self.cohort_changes:
            for field, (old, new) in cohort["changes"].items():
                delta = "" if not isinstance(old, (int, float)) or not isinstance(new, (int, float)) else f"{new - old:+.3g}"
                lines.append(f"| {cohort['name']} | {field} | {old} | {new} | {delta} |")
        lines.append("")
        for title, codes in (("Findings added", self.findings_added), ("Findings removed", self.findings_removed)):
            if codes:
                lines += [f"**{title}:** " + ", ".join(f"`{c}`" for c in codes), ""]
        if self.trace_changes:
            lines += ["**Traces that changed class:**", ""]
            lines += [f"- `{t['cohort']}/{t['trace_id']}`: {t['before']} → {t['after']}" for t in self.trace_changes]
        return "\n".join(lines) + "\n"


def diff(before, after) -> VerdictDiff:
    """What changed between two verdicts or reports (Verdict, dict, or JSON path).

    Parameters
    ----------
    before, after : Verdict, mapping, str or path
        The two reports, each read with :func:`load_report`.

    Returns
    -------
    VerdictDiff
        The two verdict states, per-cohort count and median changes (floats compared at 3
        decimals), findings added and removed, and the traces present in both whose class
        changed.

    Raises
    ------
    ReportError
        When either report cannot be read.
    """
    a, b = load_report(before), load_report(after)
    fields = ("selected", "replayed", "scored", "improved", "unchanged", "regressed", "median_delta")
    cohorts_a = {c["name"]: c for c in a.get("cohort_results", [])}
    cohorts_b = {c["name"]: c for c in b.get("cohort_results", [])}
    changes = []
    for name in sorted(set(cohorts_a) | set(cohorts_b), key=lambda n: (n != "failure", n != "baseline", n)):
        old, new = cohorts_a.get(name, {}), cohorts_b.get(name, {})
        moved = {}
        for field in fields:
            x, y = old.get(field), new.get(field)
            if isinstance(x, float) and isinstance(y, float):
                x, y = round(x, 3), round(y, 3)
            if x != y:
                moved[field] = (x, y)
        changes.append({"name": name, "changes": moved})
    keys_a = {(f["code"], f["severity"]) for f in a.get("findings", [])}
    keys_b = {(f["code"], f["severity"]) for f in b.get("findings", [])}
    traces_a = {(t["cohort"], t["trace_id"]): t for t in a.get("traces", [])}
    trace_changes = []
    for trace in b.get("traces", []):
        old = traces_a.get((trace["cohort"], trace["trace_id"]))
        if old is None:
            continue
        before_class = old.get("delta_class") or old.get("status")
        after_class = trace.get("delta_class") or trace.get("status")
        if before_class != after_class:
            trace_changes.append({"cohort": trace["cohort"], "trace_id": trace["trace_id"], "before": before_class, "after": after_class})
    return VerdictDiff(
        verdict_before=a["verdict_state"], verdict_after=b["verdict_state"], cohort_changes=tuple(changes),
        findings_added=tuple(sorted(c for c, _ in keys_b - keys_a)),
        findings_removed=tuple(sorted(c for c, _ in keys_a - keys_b)),
        trace_changes=tuple(trace_changes),
    )
