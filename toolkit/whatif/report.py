"""The Verdict object and what it renders: JSON (versioned schema), Markdown, CI line, diff.

Profiles decide how much user content leaves the process (every export reads the profile
the run was made with; numbers are never redacted):

=========== ============================================================================
profile     per-trace content in JSON, Markdown and ``verdict.traces``
=========== ============================================================================
minimal     counts, findings and the verdict; no per-trace rows in reports (the JSON
            failure records keep code, stage, trace id and a redacted message)
default     trace ids, scores, deltas, classes, failure codes; texts as SHA-256 prefixes,
            failure messages as safe summaries; Evidence (top improvements, regressions)
            in Markdown by trace id
review      default + excerpts (first 160 characters) of input, both outputs, rationales
            and failure messages, also in the Markdown Evidence table
forensic    review + full texts; needs the config acknowledgment AND the CLI flag
=========== ============================================================================

Failure messages follow the same profiles. A runner's or scorer's exception text usually
quotes the user's prompt (``ValueError(f"bad prompt {prompt}")``), so under ``minimal`` and
``default`` no export carries it: ``failures[].message``, ``failures[].details`` and
``traces[].failure_message`` become a summary rebuilt from the record's code, stage, trace id
and the details known to hold no user text (``timeout_seconds``, ``tool_name``,
``exception_type``, ``returned_type``, ``which``, cache paths; each checked for its shape),
plus a length and SHA-256-prefix fingerprint of the withheld text. ``review`` keeps a
160-character excerpt, ``forensic`` the full text. The in-memory ``verdict.failures`` keep
the raw records: the process that ran the runner has seen the text anyway.

Markdown and HTML escape every value that came from a trace (ids, messages, outputs,
rationales, filter strings, finding messages that may quote them) with one helper each
(:func:`_md_cell`, :func:`_html_cell`): a trace id cannot open a heading, close a table cell
or a code span, start a link or inject a tag. Outside ``forensic`` a Markdown or HTML cell
quotes at most 200 characters of a trace value (cut with "…").

The verdict records the profile in force (``profile``) and the one the config asked for
(``configured_profile``; ``None`` when the caller did not pass it, shown as "configured
profile not recorded").

The reference wrote the same two files for every profile and no per-trace evidence at all
(docs/design/whatif.md §8.1, docs/design/whatif.md §11.6); ``diff`` here also lists traces whose class changed.
"""

from __future__ import annotations

import dataclasses
import html
import json
import numbers
import re
import textwrap
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
_CELL_CAP = 200  # characters of one trace value in a Markdown/HTML cell (outside forensic)
_FINGERPRINT = 16  # hex characters of a SHA-256 prefix, as for the redacted text fields
_TEXT_FIELDS = ("user_message", "original_output", "replayed_output", "rationale_original", "rationale_replayed")
_PROFILES = ("default", "review", "minimal", "forensic")
_MAX_FAILURE_ROWS = 20  # failure records listed in Markdown/HTML; the JSON has all of them


# --- escaping: one helper per output format, used for every trace-derived value ------------------

# Every line separator str.splitlines() knows, not only the \n and \r Markdown itself splits on:
# a renderer or a reader's splitlines() must never see a trace value begin a line.
_LINE_BREAKS = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f]")  # terminal escapes and NULs in a CI log
# Entities, not backslashes: a backslash escape does not work inside a code span, and an
# entity has no "|" for the GFM table splitter to see. translate() maps each character once,
# so the "&" of an entity it wrote is never escaped again.
_MD_ESCAPES = str.maketrans({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "`": "&#96;",
    "[": "&#91;", "]": "&#93;", "\\": "&#92;",
})


def _clip(text: str, cap: int | None) -> str:
    return text if cap is None or len(text) <= cap else text[:cap] + "…"


def _md_cell(value: Any, cap: int | None = _CELL_CAP) -> str:
    """A trace-derived value made inert for Markdown: one line, no markup, at most ``cap`` chars.

    Parameters
    ----------
    value : any
        The value (``str()`` is taken; None becomes an empty string).
    cap : int or None, optional
        Characters of the value kept before escaping (longer values end in "…"); default
        200. None keeps everything (the forensic profile).

    Returns
    -------
    str
        The text with line breaks replaced by " ↵ ", control characters by U+FFFD, ``& < > |
        ` [ ] \\`` as HTML entities, and a leading ``#`` neutralised, so it can sit in a table
        cell, a list item or a code span without changing the document's structure.
    """
    text = _clip("" if value is None else str(value), cap)
    text = _CONTROLS.sub("\ufffd", _LINE_BREAKS.sub(" ↵ ", text))
    text = text.translate(_MD_ESCAPES)
    if text.lstrip().startswith("#"):
        head = len(text) - len(text.lstrip())
        text = text[:head] + "&#35;" + text[head + 1:]
    return text


def _html_cell(value: Any, cap: int | None = _CELL_CAP) -> str:
    """A trace-derived value escaped for HTML (``html.escape``, quotes included), capped like Markdown."""
    return html.escape(_clip("" if value is None else str(value), cap), quote=True)


# --- failure messages: redacted like prompts ----------------------------------------------------

# Details whose value is produced by the toolkit (or is a code identifier), each with the shape
# it must have to be shown under minimal/default. A value of the wrong shape is withheld: a
# dynamically built exception class name could hold anything.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/\-]{1,100}")
_REFERENCE = re.compile(r"[A-Za-z0-9_.:/\-]{1,200}")
_HOST = re.compile(r"[A-Za-z0-9_.:\-]{1,253}")
_TIMESTAMP = re.compile(r"[0-9T:+\-.Z]{1,40}")
# The scorer_invalid_output reasons scoring._normalise_score writes; nothing else passes.
_SCORE_REASONS = re.compile(
    r"the scorer returned no score \(None\)"
    r"|the scorer returned [A-Za-z_][A-Za-z0-9_.]{0,99}; expected a number in \[0, 1\]"
    r"|score [-+0-9.eEinfa]{1,40} is outside \[0, 1\]"
)
# The skip reasons the sources write (sources.py); an unknown reason is withheld.
_SKIP_REASONS = frozenset({"trace has no user prompt to replay", "root span has no input.value", "trace has no input"})


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _matches(pattern: re.Pattern, value: Any) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def _safe_details(code: str, details: Mapping[str, Any]) -> dict[str, Any]:
    """The details of a failure record that carry no user text (each checked for its shape)."""
    safe: dict[str, Any] = {}
    for key, value in details.items():
        if key == "timeout_seconds":
            keep = _is_number(value)
        elif key in ("exception_type", "returned_type"):
            keep = _matches(_IDENTIFIER, value)
        elif key == "tool_name":
            keep = _matches(_TOOL_NAME, value)
        elif key == "which":
            keep = value in ("original", "replayed")
        elif key == "provider":
            keep = _matches(_REFERENCE, value)
        elif key in ("cache_path", "lock_path"):
            # paths come from scorer.cache_dir (the config) and hex entry names, not from a trace
            keep = isinstance(value, str) and code in ("cache_corruption_detected", "cache_lock_unavailable")
        elif key == "reason":
            keep = ((code == "scorer_invalid_output" and _matches(_SCORE_REASONS, value))
                    or (code == "trace_skipped" and value in _SKIP_REASONS)
                    # cache.py writes these reasons: fixed texts, JSON decoder positions, OS errors on its own files
                    or (code == "cache_corruption_detected" and isinstance(value, str)))
        elif key == "holder_pid":
            keep = _is_number(value)
        elif key == "holder_hostname":
            keep = _matches(_HOST, value)
        elif key == "holder_started_at":
            keep = _matches(_TIMESTAMP, value)
        else:
            keep = False
        if keep:
            safe[key] = value
    return safe


def _failure_summary(code: str, stage: str | None, trace_id: str | None, details: Mapping[str, Any]) -> str:
    """The failure message rebuilt from its code and safe details only (no free text)."""
    safe = _safe_details(code, details)
    where = f"trace {trace_id}: " if trace_id else ""
    which = safe.get("which", "?")
    if code == "runner_timeout" and "timeout_seconds" in safe:
        return f"{where}replay exceeded {safe['timeout_seconds']:g} s"
    if code == "scorer_timeout" and "timeout_seconds" in safe:
        return f"{where}scoring the {which} output exceeded {safe['timeout_seconds']:g} s"
    if code == "tool_cache_miss" and "tool_name" in safe:
        return f"{where}the runner called tool {safe['tool_name']!r} with arguments the trace did not record"
    if code == "runner_invalid_output" and "returned_type" in safe:
        return f"{where}runner returned {safe['returned_type']}; expected str or {{'text': str}}"
    if code == "runner_exception":
        return f"{where}runner raised {safe.get('exception_type', 'an exception')}"
    if code == "scorer_failed":
        return f"{where}scorer raised {safe.get('exception_type', 'an exception')} on the {which} output"
    if code == "scorer_invalid_output" and "reason" in safe:
        return f"{where}{safe['reason']} for the {which} output"
    if code == "trace_skipped":
        return f"trace {trace_id} skipped: {safe.get('reason', 'reason withheld')}"
    if code == "cache_corruption_detected" and "cache_path" in safe:
        return f"score cache entry {safe['cache_path']} is corrupt: {safe.get('reason', 'reason withheld')}"
    if code == "cache_lock_unavailable" and "lock_path" in safe:
        holder = ", ".join(f"{k[len('holder_'):]} {safe[k]}" for k in ("holder_pid", "holder_hostname", "holder_started_at") if k in safe)
        return f"score cache lock {safe['lock_path']} is held by another run ({holder or 'unknown holder'})"
    return f"{where}{code} at stage {stage or 'unknown'}"


def _redact_message(message: str | None, code: str, stage: str | None, trace_id: str | None,
                    details: Mapping[str, Any], profile: str) -> str | None:
    """A failure message as ``profile`` lets it leave the process (see the module docstring)."""
    if message is None:
        return None
    if profile == "forensic":
        return message
    if profile == "review":
        return _clip(message, _EXCERPT)
    summary = _failure_summary(code, stage, trace_id, details)
    if summary == message:  # a fixed template: nothing was withheld
        return summary
    # parentheses, not brackets: brackets would be escaped as link syntax in every Markdown cell
    return (f"{summary} ({stage or 'unknown'}/{code}; message withheld under profile {profile}: "
            f"{len(message)} chars, sha256 {sha256_hex(message)[:_FINGERPRINT]})")


def _redact_failure(record: Any, profile: str) -> dict[str, Any]:
    """One failure record as a JSON dict, its message and details redacted by ``profile``."""
    data = record.to_dict()
    details = dict(record.details or {})
    if profile == "forensic":
        return data
    data["message"] = _redact_message(record.message, record.code, record.stage, record.trace_id, details, profile)
    if profile == "review":
        data["details"] = {k: _clip(v, _EXCERPT) if isinstance(v, str) else json_safe(v) for k, v in details.items()}
        return data
    safe = _safe_details(record.code, details)
    withheld = sorted(set(details) - set(safe))
    text = details.get("message")
    if isinstance(text, str):  # the runner's exception text: fingerprinted, like a prompt
        safe["message_chars"] = len(text)
        safe["message_sha256"] = sha256_hex(text)[:_FINGERPRINT]
    if withheld:
        safe["withheld_keys"] = withheld  # key names are the toolkit's, never user text
    data["details"] = json_safe(safe)
    data["message_chars"] = len(record.message or "")
    data["message_sha256"] = sha256_hex(record.message or "")[:_FINGERPRINT]
    return data


@dataclasses.dataclass(frozen=True)
class TraceResult(Result):
    """One trace's outcome, in memory with its full texts; exports use :meth:`redacted`."""

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

    def redacted(self, profile: str, record: Any = None) -> dict[str, Any]:
        """This row as ``profile`` lets it leave the process.

        Parameters
        ----------
        profile : str
            ``"minimal"``, ``"default"``, ``"review"`` or ``"forensic"``.
        record : FailureRecord or None, optional
            The failure record behind ``failure_message``; its safe details (timeout,
            exception type, ...) make the redacted message more useful. Default None: the
            message is summarised from ``status`` alone.

        Returns
        -------
        dict
            Ids, scores, status and the failure message (redacted like the failure records);
            texts as SHA-256 prefixes (minimal, default), excerpts (review) or in full
            (forensic).
        """
        row = {f: json_safe(getattr(self, f)) for f in (
            "trace_id", "cohort", "status", "original_score", "replayed_score", "delta", "delta_class",
            "failure_message", "replay_seconds")}
        details = dict(record.details or {}) if record is not None else {}
        stage = record.stage if record is not None else None
        row["failure_message"] = _redact_message(self.failure_message, self.status, stage, self.trace_id, details, profile)
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
    """One what-if verdict: Ship, Don't Ship or Inconclusive, with all its evidence.

    ``profile`` is the reporting profile in force (it decides every export);
    ``configured_profile`` the config's ``reporting.profile`` (None: not recorded by the
    caller). ``failures`` and ``trace_results`` hold the raw in-memory records; every export
    redacts them by ``profile``.
    """

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
    configured_profile: str | None = None

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

    # -- redaction helpers ------------------------------------------------------------------
    @property
    def _cap(self) -> int | None:
        """Characters of a trace value quoted in a Markdown/HTML cell: all of it only in forensic."""
        return None if self.profile == "forensic" else _CELL_CAP

    def _md(self, value: Any) -> str:
        return _md_cell(value, self._cap)

    def _html(self, value: Any) -> str:
        return _html_cell(value, self._cap)

    def _trace_rows(self) -> list[dict[str, Any]]:
        """Per-trace rows redacted by the profile, each with the failure record behind it.

        A TraceResult holds only its failure message; the record (matched on cohort, trace id,
        code and message) adds the safe details the redacted summary is built from.
        """
        records: dict[tuple, Any] = {}
        for record in self.failures:
            records.setdefault((record.cohort, record.trace_id, record.code, record.message), record)
        return [t.redacted(self.profile, records.get((t.cohort, t.trace_id, t.status, t.failure_message)))
                for t in self.trace_results]

    def _failure_rows(self) -> list[dict[str, Any]]:
        return [_redact_failure(r, self.profile) for r in self.failures]

    def _profile_note(self) -> str:
        if self.configured_profile is None:
            return f"effective profile {self.profile} (configured profile not recorded)"
        return f"effective profile {self.profile} (configured profile {self.configured_profile})"

    # -- tables ---------------------------------------------------------------------------
    def to_pandas(self):
        """Per-trace results as a DataFrame, redacted by the run's profile (text columns)."""
        import pandas as pd

        columns = ["trace_id", "cohort", "status", "original_score", "replayed_score", "delta", "delta_class",
                   "failure_message", "replay_seconds"]
        rows = self._trace_rows()
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
        traces = [] if self.profile == "minimal" else self._trace_rows()
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
            "configured_profile": self.configured_profile,
            "headline": self.headline(),
            "cohort_results": cohorts,
            "findings": [f.to_dict() for f in self.findings],
            "floor": {"passed": self.floor_passed, "failures": [f.to_dict() for f in self.floor_failures],
                      **self.manifest.get("trust_floor", {})},
            "failures": self._failure_rows(),
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
        """The CI status: glyph, verdict, reason, never cut.

        It fits one line of ``width`` characters when it can; a longer reason wraps at word
        boundaries onto lines indented by two spaces, so the first line always starts with the
        glyph and the verdict and no part of the reason is lost (whatifd cuts it with "…",
        docs/design/whatif.md §8.4, which hid the very words that said why). A single word
        longer than ``width`` (a path, an id) is kept whole on its own line.

        Parameters
        ----------
        width : int, default 80
            The most characters a line should hold.

        Returns
        -------
        str
            One line, or several joined by newlines.
        """
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
        if len(line) <= width:
            return line
        return "\n".join(textwrap.wrap(line, width=width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False))

    def to_markdown(self) -> str:
        """The Markdown report; every trace-derived value goes through :func:`_md_cell`.

        Returns
        -------
        str
            Verdict, stats, replay validity, selection, floor, findings, evidence (not under
            minimal), failure records, methodology and manifest.
        """
        md = self._md
        lines = [f"# What-if verdict: {self.label}", "", f"**{_md_cell(self.headline(), None)}**", ""]
        lines += ["## Stats", ""]
        for cohort in self.cohorts:
            ci = (f"{cohort.ci_level:.0%} CI [{_fmt(cohort.ci_low, True)}, {_fmt(cohort.ci_high, True)}]"
                  if cohort.ci_computable else f"(CI not computed: {md(cohort.ci_unavailable_reason)})")
            p = "" if cohort.sign_flip_p is None else f", sign-flip p {cohort.sign_flip_p:.3g}"
            n_clusters = getattr(cohort, "n_clusters", None)
            if n_clusters is not None:
                p += f" ({n_clusters} clusters)"
            mean = ""
            if cohort.mean_delta is not None:
                bounds = ("" if cohort.mean_ci_low is None
                          else f" [{_fmt(cohort.mean_ci_low, True)}, {_fmt(cohort.mean_ci_high, True)}] ({md(cohort.mean_ci_method)})")
                mean = f"; mean Δ {_fmt(cohort.mean_delta, True)}{bounds}"
            extra = f"; {cohort.severe_drops} severe drop(s), worst Δ {_fmt(cohort.worst_delta, True)}" if cohort.severe_drops else ""
            if cohort.replays > 1:
                extra += f"; {cohort.replays} replays a trace, {cohort.flaky} flaky"
            if cohort.aa_scored:
                versus = "" if cohort.vs_aa_low is None else f" [{_fmt(cohort.vs_aa_low, True)}, {_fmt(cohort.vs_aa_high, True)}]"
                extra += (f"; A/A Δ {_fmt(cohort.aa_mean_delta, True)} over {cohort.aa_scored} traces, "
                          f"change − A/A {_fmt(cohort.vs_aa_mean, True)}{versus}")
            lines.append(f"- **{md(cohort.name.capitalize())} ({cohort.scored} scored):** improved {cohort.improved}, "
                         f"unchanged {cohort.unchanged}, regressed {cohort.regressed}; median Δ "
                         f"{_fmt(cohort.median_delta, True)}, {ci}{p}{mean}{extra}")
        if not self.cohorts:
            lines.append("- no cohort was scored")
        lines += ["", "## Replay validity", ""]
        for cohort in self.cohorts:
            rate = lambda k: f"{100 * k / cohort.selected:.1f}%" if cohort.selected else "n/a"  # noqa: E731
            failures = ", ".join(f"{n} {md(code)}" for code, n in sorted(cohort.failure_counts.items()))
            lines.append(f"- {md(cohort.name)}: {cohort.selected} selected, {cohort.replayed} replayed ({rate(cohort.replayed)}), "
                         f"{cohort.scored} scored ({rate(cohort.scored)})" + (f"; failures: {failures}" if failures else ""))
        lines += ["", "## Selection", ""]
        for name, info in self.selection.items():
            if name == "left_out":
                if info.get("unrecognised_labels") or info.get("unlabelled"):
                    labels = ", ".join(f"{md(k)} ×{v}" for k, v in (info.get("unrecognised_labels") or {}).items())
                    lines.append(f"- left out: {info.get('unlabelled', 0)} unlabelled trace(s)"
                                 + (f"; unrecognised labels {labels}" if labels else ""))
                continue
            lines.append(f"- {md(name)}: {info['selected']} selected of {info['available']} matching "
                         f"(limit {info['limit']}, filter {md(info['filter'] or 'none')}, {info['labelled']} labelled {md(name)})")
        lines += ["", "## Floor evaluation", ""]
        if self.floor_passed:
            lines.append("All floor rules passed.")
        elif not self.floor_failures:
            lines.append("The floor was not evaluated: the run stopped before scoring.")
        else:
            lines += ["| cohort | rule | threshold | observed |", "|---|---|---|---|"]
            lines += [f"| {md(f.cohort or '(run)')} | {md(f.rule)} | {md(f.threshold)} | {md(f.observed)} |"
                      for f in self.floor_failures]
        lines += ["", "## Findings and next steps", ""]
        actionable = sorted((f for f in self.findings if f.next_step), key=lambda f: -SEVERITY_RANK[f.severity])
        info = [f for f in self.findings if not f.next_step]
        if not actionable:
            lines.append("No actionable findings.")
        for finding in actionable:
            # next_step and next_steps are the toolkit's own texts (decide.FIX_SUGGESTIONS); the
            # message may quote trace values, so it is escaped (not cut: it is not a table cell)
            lines += [f"### {finding.next_step} (`{md(finding.code)}`, {md(finding.severity)})", "",
                      _md_cell(finding.message, None), ""]
            lines += [f"{i}. {step}" for i, step in enumerate(finding.next_steps, 1)]
            lines.append("")
        for finding in info:
            lines.append(f"- info `{md(finding.code)}`: {_md_cell(finding.message, None)}")
        if self.profile != "minimal" and self.trace_results:
            lines += ["", "## Evidence", ""]
            texts = self.profile in ("review", "forensic")
            scored = [t for t in self.trace_results if t.delta is not None]
            best = sorted(scored, key=lambda t: -t.delta)[:3]
            worst = [t for t in sorted(scored, key=lambda t: t.delta) if t.delta_class == "regressed"][:3]
            header = "| trace | Δ | original → replayed |"
            if texts:
                header += " input | original output | replayed output | rationale (replayed) |"
            for title, group in (("Top improvements", best), ("Regressions", worst)):
                if not group:
                    lines += [f"**{title}:** none", ""]
                    continue
                lines += [f"**{title}:**", "", header, "|" + "---|" * header.count(" |")]
                for trace in group:
                    cells = [f"`{md(trace.cohort)}/{md(trace.trace_id)}`", f"{trace.delta:+.3f}",
                             f"{_fmt(trace.original_score)} → {_fmt(trace.replayed_score)}"]
                    if texts:
                        row = trace.redacted(self.profile)
                        cells += [md(row.get(name)) for name in
                                  ("user_message", "original_output", "replayed_output", "rationale_replayed")]
                    lines.append("| " + " | ".join(cells) + " |")
                lines.append("")
            unscored = [t for t in self.trace_results if t.delta is None]
            if unscored:
                lines.append("**Not scored:** " + ", ".join(f"`{md(t.trace_id)}` ({md(t.status)})" for t in unscored[:20])
                             + (" …" if len(unscored) > 20 else ""))
        lines += ["", "## Failure records", ""]
        records = self._failure_rows()
        if self.profile == "minimal":
            # minimal lists no per-trace rows; run-level records (cache lock, corruption) carry no trace
            withheld = sum(1 for r in records if r.get("scope") != "run")
            records = [r for r in records if r.get("scope") == "run"]
            if withheld:
                lines += [f"{withheld} per-trace failure record(s) not listed under profile minimal "
                          "(counts by code are under Replay validity).", ""]
        if not records and not (self.profile == "minimal" and self.failures):
            lines.append("No failure records.")
        if records:
            lines += ["| id | code | stage | trace | message |", "|---|---|---|---|---|"]
            for record in records[:_MAX_FAILURE_ROWS]:
                trace = (f"`{md(record.get('cohort') or '')}/{md(record['trace_id'])}`"
                         if record.get("trace_id") else "(run)")
                lines.append(f"| {md(record['id'])} | {md(record['code'])} | {md(record['stage'])} | {trace} "
                             f"| {md(record['message'])} |")
            if len(records) > _MAX_FAILURE_ROWS:
                lines.append(f"\n… {len(records) - _MAX_FAILURE_ROWS} more in the JSON report.")
        method = self.methodology
        boot = method.get("bootstrap", {})
        lines += ["", "## Methodology", "",
                  f"- unit: {method.get('unit_of_analysis')}; delta = {method.get('delta')}",
                  f"- required cohorts: {', '.join(md(c) for c in method.get('required_cohorts', []))}; shape {self.experiment_shape}",
                  f"- bootstrap: {boot.get('method')} CI of the {boot.get('statistic')}, B={boot.get('resamples')}, "
                  f"seed {boot.get('seed')}, level {boot.get('ci_level')}; {boot.get('assumption')}",
                  f"- {method.get('test')}",
                  f"- practical delta {self.policy.practical_delta_epsilon:g} (source: policy); per-trace inference: descriptive only",
                  f"- scorer: {md(method.get('scorer'))}; score cache: mode {md(self.cache.get('mode'))} "
                  f"({self.cache.get('hits')} hits, {self.cache.get('misses')} misses, {self.cache.get('writes')} writes)",
                  f"- causal scope: {method.get('causal_claim_scope')}"]
        lines += [f"- limitation: {item}" for item in method.get("limitations", [])]
        lines += ["", "## Manifest", "",
                  f"- config sha256 `{md(str(self.manifest.get('config_hash', ''))[:16])}`, "
                  f"toolkit {md(self.manifest.get('toolkit_version'))}, "
                  f"floor {md(self.manifest.get('trust_floor', {}).get('version'))}, {self._profile_note()}",
                  f"- runner `{md(self.manifest.get('target'))}`, scorer `{md(self.manifest.get('scorer'))}`, "
                  f"source {md(self.manifest.get('source'))}, started {md(self.manifest.get('started_at'))}"]
        return "\n".join(lines) + "\n"

    def _repr_html_(self) -> str:
        esc = self._html
        colour = {"ship": "#009E73", "dont_ship": "#D55E00", "inconclusive": "#E69F00"}[self.state]
        rows = "".join(
            f"<tr><td>{esc(c.name)}</td><td>{c.selected}</td><td>{c.replayed}</td><td>{c.scored}</td>"
            f"<td>{c.improved}</td><td>{c.unchanged}</td><td>{c.regressed}</td><td>{_fmt(c.median_delta, True)}</td>"
            f"<td>{'[' + _fmt(c.ci_low, True) + ', ' + _fmt(c.ci_high, True) + ']' if c.ci_computable else esc(c.ci_unavailable_reason)}</td>"
            f"<td>{'n/a' if c.sign_flip_p is None else f'{c.sign_flip_p:.3g}'}</td></tr>"
            for c in self.cohorts
        )
        findings = "".join(
            f"<li><b>{esc(f.severity)}</b> <code>{esc(f.code)}</code>: {_html_cell(f.message, None)}"
            + (f"<br><i>next:</i> {html.escape(f.next_steps[0])}" if f.next_steps else "") + "</li>"
            for f in self.findings
        )
        records = self._failure_rows()
        if self.profile == "minimal":
            records = [r for r in records if r.get("scope") == "run"]
        failure_table = ""
        if records:
            failure_table = (
                "<table><tr><th>code</th><th>stage</th><th>trace</th><th>message</th></tr>"
                + "".join(f"<tr><td>{esc(r['code'])}</td><td>{esc(r['stage'])}</td>"
                          f"<td>{esc(r.get('trace_id') or '(run)')}</td><td>{esc(r['message'])}</td></tr>"
                          for r in records[:_MAX_FAILURE_ROWS])
                + "</table>"
            )
        return (
            f"<div><h3 style='color:{colour}'>What-if verdict: {html.escape(self.label)}</h3>"
            f"<p><b>{_html_cell(self.headline(), None)}</b></p>"
            "<table><tr><th>cohort</th><th>selected</th><th>replayed</th><th>scored</th><th>improved</th>"
            "<th>unchanged</th><th>regressed</th><th>median Δ</th><th>CI</th><th>sign-flip p</th></tr>"
            f"{rows}</table><ul>{findings}</ul>{failure_table}"
            f"<p style='font-size:smaller'>floor {'passed' if self.floor_passed else 'failed'}; "
            f"{esc(self._profile_note())}; {len(self.failures)} failure record(s)</p></div>"
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
        "profile": {"enum": list(_PROFILES)},
        # optional: reports written before it existed stay valid and loadable; null = not recorded
        "configured_profile": {"enum": [*_PROFILES, None]},
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
        "failures": {"type": "array", "items": {
            "type": "object", "required": ["id", "code", "stage", "scope", "message"],
            # under minimal/default: the fingerprint of the withheld message (absent otherwise)
            "properties": {"message": {"type": ["string", "null"]}, "message_chars": {"type": "integer", "minimum": 0},
                           "message_sha256": {"type": "string", "pattern": "^[0-9a-f]{16}$"}},
        }},
        "traces": {"type": "array", "items": {
            "type": "object", "required": ["trace_id", "cohort", "status", "delta"],
            "properties": {"failure_message": {"type": ["string", "null"]}},
        }},
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
        before, after = _md_cell(before), _md_cell(after)
        lines = ["# What-if diff", "",
                 f"**Verdict:** {before} → {after}" if before != after else f"**Verdict:** unchanged ({after})", ""]
        # both reports are read from files anyone can edit: every value is escaped and cut
        md = _md_cell
        lines += ["| cohort | field | before | after | change |", "|---|---|---|---|---|"]
        for cohort in self.cohort_changes:
            for field, (old, new) in cohort["changes"].items():
                numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (old, new))
                delta = f"{new - old:+.3g}" if numeric else ""
                lines.append(f"| {md(cohort['name'])} | {md(field)} | {md(old)} | {md(new)} | {delta} |")
        lines.append("")
        for title, codes in (("Findings added", self.findings_added), ("Findings removed", self.findings_removed)):
            if codes:
                lines += [f"**{title}:** " + ", ".join(f"`{md(c)}`" for c in codes), ""]
        if self.trace_changes:
            lines += ["**Traces that changed class:**", ""]
            lines += [f"- `{md(t['cohort'])}/{md(t['trace_id'])}`: {md(t['before'])} → {md(t['after'])}"
                      for t in self.trace_changes]
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
