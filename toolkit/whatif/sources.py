"""Trace sources and cohort selection.

A source yields :class:`Trace` objects, each already labelled ``failure`` or ``baseline``;
:func:`select_cohorts` then applies each cohort's ``filter`` and ``limit`` (the reference reads
the whole source and ignores both, docs/design/whatif.md §11.2). Selection rules, from the reference's
design defaults (docs/design/whatif.md §5): the failure cohort takes the most recent traces first (file
order when traces carry no timestamp); the baseline cohort is a seeded random sample (hash
draw per trace id, so it does not depend on source order). Truncation is recorded and
disclosed as an info finding.

Labels are matched case- and whitespace-insensitively (``Failure``, `` FAILURE `` are the
failure cohort); a trace whose label is neither cohort is not selected but is counted by label
(:attr:`CohortSelections.unrecognised_labels`), and a trace with no label at all is counted
too (:attr:`CohortSelections.unlabelled`), so nothing leaves the experiment silently. Before
any filter or limit, duplicates are collapsed (the first kept): a repeated trace id, or a
trace with the same user message, original output and cohort as an earlier one (a trace
exported twice under two ids would otherwise count twice towards the trust floor and weigh
twice in the statistics); the count and the first 20 dropped ids are on the selection.

Adapters:
- ``stub``: synthetic, seeded support-ticket traces, offline (see :func:`stub_traces`);
- ``jsonl``: rows v1 (``tk.read_rows``) or tau-bench result files (``tk.read_tau_bench``);
  the cohort comes from ``label_field`` when set, else ``reward < failure_below`` is a failure;
- ``phoenix``: OpenInference span dicts returned by a ``python:<module>:<attr>`` provider
  (tracer-neutral: wrap the Phoenix client, read a dump, pull from any OTLP store); a trace's
  root span gives input/output, TOOL spans give the recorded tool calls, the span attribute
  ``tag.failed`` (or ``label_field``) gives the cohort; the original score is chosen by
  ``tk.read_openinference``'s own code (root and trace-scope feedback, the latest of the
  first name seen), and only spans with no feedback at all fall back to an
  ``eval.score``/``score`` attribute;
- ``langfuse``: the public REST API (``GET /api/public/traces`` paged, then
  ``GET /api/public/traces/{id}`` for observations and scores) with HTTP basic auth from two
  environment variables; the original score is chosen by ``tk.read_langfuse``'s own code
  (trace-level scores, the latest of ``score_name``, else of the first name seen). Our tests
  exercise it against recorded responses served by a local HTTP server started in the test;
  it has not been run against a live Langfuse here;
- ``inspect_log``: an inspect_ai eval log read with ``tk.read_inspect_log`` (``inspect_scorer``
  picks the scorer whose value is the reward), one trace per sample x epoch;
- ``tau2``: tau2-bench results read with ``tk.read_tau2``, one trace per simulation;
  for both the cohort comes from ``label_field`` or ``reward < failure_below`` as for ``jsonl``,
  and a row with no reward (an errored sample, an infrastructure error) has no cohort, so it
  is counted as unlabelled rather than dropped unseen. ``label_field`` is looked up in the
  row, then in the row's privileged ``*_metadata`` (an inspect sample's own ``metadata``); a
  ``label_field`` that no row carries is a SetupError, not a run of unlabelled traces.

For ``phoenix``, ``langfuse``, ``inspect_log`` and ``tau2`` every UserWarning raised while
loading (a scorer chosen among several, simulations that never ran, an empty file) is kept on
the loaded traces and becomes a ``source_warnings`` finding of the verdict, besides being shown.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import importlib
import json
import math
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from toolkit._util.hashing import canonical_json, stable_uniform
from toolkit.errors import RowError, SetupError, ToolkitError
from toolkit.rows import read_inspect_log, read_rows, read_tau2, read_tau_bench

# The readers' own score rules, so one export gives the same score in tk.compare_runs and here
# (docs/design/readers.md, "What-if sources").
from toolkit.rows._traces import _latest_number, _reward_name, _score_names
from toolkit.rows.langfuse import _trace_scores
from toolkit.rows.openinference import _nest, _trace_feedback

__all__ = [
    "Trace", "ToolRecord", "CohortSelectionResult", "CohortSelections", "SetupError", "load_traces",
    "select_cohorts", "stub_traces", "resolve_reference", "cohort_of_label",
]

FAILURE = "failure"
BASELINE = "baseline"
# The most distinct unrecognised labels and dropped duplicate ids a selection lists: enough
# to recognise the pattern (a typo, a third label, one export run twice) while keeping the
# report bounded on a source of a million traces with a million distinct labels.
_MAX_LISTED = 20
# An unrecognised label is a user's string; the report quotes at most this much of it.
_LABEL_CHARS = 80


def _normal(value: Any) -> str:
    return str(value).strip().casefold()


def cohort_of_label(label: Any) -> str | None:
    """``"failure"`` or ``"baseline"`` for a label naming one (any case, outer spaces); else None."""
    if label is None:
        return None
    normal = _normal(label)
    return normal if normal in (FAILURE, BASELINE) else None


@dataclasses.dataclass(frozen=True)
class ToolRecord:
    """One recorded tool call of the original trace: its name, arguments and output."""

    name: str
    arguments: Any
    result: Any


@dataclasses.dataclass(frozen=True)
class Trace:
    trace_id: str
    cohort: str
    user_message: str
    original_output: str
    tool_calls: tuple[ToolRecord, ...] = ()
    original_score: float | None = None
    label: str | None = None
    task_id: str | None = None
    timestamp: float | None = None  # seconds since the epoch, UTC
    system_prompt: str | None = None
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    skip_reason: str | None = None


@dataclasses.dataclass(frozen=True)
class CohortSelectionResult:
    name: str
    traces: tuple[Trace, ...]
    available: int  # traces of this cohort that passed the filter, before the limit
    labelled: int  # traces of this cohort in the source (duplicates collapsed), before the filter
    limit: int
    filter: str | None
    duplicates_collapsed: int = 0  # traces of this cohort dropped as duplicates of an earlier one
    duplicate_ids: tuple[str, ...] = ()  # the first 20 distinct ids of those dropped traces

    @property
    def truncated(self) -> bool:
        return self.available > len(self.traces)


class CohortSelections(dict):
    """What :func:`select_cohorts` returns: ``{cohort name: CohortSelectionResult}`` plus
    what the selection left out, so it can be disclosed.

    Attributes
    ----------
    unrecognised_labels : dict[str, int]
        Traces whose label names neither cohort, counted per label as the source wrote it
        (cut to 80 characters), in first-seen order; at most 20 labels, the rest summed
        under ``"(other labels)"``. Such traces are never selected.
    unlabelled : int
        Traces that carry no label at all (a missing ``label_field`` value, or no reward to
        compare with ``failure_below``); never selected.
    duplicates_collapsed : int
        Traces dropped, before any filter or limit, as a repeat of an earlier trace's id or
        of its (user message, original output, cohort).
    duplicate_ids : tuple[str, ...]
        The first 20 distinct ids of the dropped traces.
    """

    def __init__(self, cohorts: Mapping[str, CohortSelectionResult], *, unrecognised_labels: Mapping[str, int] | None = None,
                 unlabelled: int = 0, duplicates_collapsed: int = 0, duplicate_ids: Iterable[str] = ()) -> None:
        super().__init__(cohorts)
        self.unrecognised_labels: dict[str, int] = dict(unrecognised_labels or {})
        self.unlabelled = unlabelled
        self.duplicates_collapsed = duplicates_collapsed
        self.duplicate_ids: tuple[str, ...] = tuple(duplicate_ids)


# --- python references ------------------------------------------------------------------------


def resolve_reference(reference: str, what: str) -> Callable:
    """Import ``python:<module.path>:<attr>`` and return the callable; SetupError otherwise.

    The current directory goes first on the import path (once), so a notebook's or a CI job's
    own modules resolve, as the reference does.
    """
    parts = reference.split(":")
    if len(parts) != 3 or parts[0] != "python" or not parts[1] or not parts[2]:
        raise SetupError(f"{what} {reference!r} must be 'python:<module.path>:<attr>'")
    _, module_name, attribute = parts
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any import-time failure is a setup failure, named
        raise SetupError(f"{what} {reference!r}: cannot import {module_name!r}: {type(error).__name__}: {error}") from None
    if not hasattr(module, attribute):
        raise SetupError(f"{what} {reference!r}: module {module_name!r} has no attribute {attribute!r}")
    target = getattr(module, attribute)
    if not callable(target):
        raise SetupError(f"{what} {reference!r} is not callable")
    return target


# --- stub ---------------------------------------------------------------------------------------

_STUB_TOPICS = ("order", "refund", "delivery", "invoice", "account")
_STUB_STATUSES = ("shipped", "pending review", "delivered", "on hold", "cancelled")


def stub_traces(per_cohort: int = 20, seed: int = 0) -> list[Trace]:
    """Synthetic support-ticket traces: a user asks about a record, the agent looked it up.

    Each trace recorded one ``lookup`` tool call whose output holds an id, a status and a date.
    Baseline traces' original answers state the status (most also the date); failure traces'
    original answers state neither ("I'm looking into it", or only the id), which is the
    failure a prompt change can rescue. Draws are
    sha256 hashes of (seed, trace id), so the traces do not depend on anything else.
    """
    traces = []
    for cohort in (FAILURE, BASELINE):
        for index in range(per_cohort):
            trace_id = f"{cohort[0]}-{index:03d}"
            topic = _STUB_TOPICS[int(stable_uniform(seed, trace_id, "topic") * len(_STUB_TOPICS))]
            status = _STUB_STATUSES[int(stable_uniform(seed, trace_id, "status") * len(_STUB_STATUSES))]
            record = f"{topic[:3].upper()}-{int(stable_uniform(seed, trace_id, 'id') * 90000) + 10000}"
            day = 1 + int(stable_uniform(seed, trace_id, "day") * 28)
            result = {"id": record, "status": status, "date": f"2026-12-{day:02d}"}
            variant = stable_uniform(seed, trace_id, "variant")
            # Answers vary in how much of the looked-up record they state, as real ones do:
            # most baselines state all of it, some omit the date; most failures state nothing,
            # some only repeat the record id.
            if cohort == BASELINE:
                output = (f"Your {topic} {record} is {status}; the date on file is 2026-12-{day:02d}."
                          if variant < 0.7 else f"Your {topic} {record} is {status}.")
            else:
                output = ("Thanks for reaching out, I'm looking into it and will get back to you."
                          if variant < 0.6 else f"Your {topic} {record} is being processed.")
            traces.append(
                Trace(
                    trace_id=trace_id,
                    cohort=cohort,
                    user_message=f"What is the status of my {topic} {record}?",
                    original_output=output,
                    tool_calls=(ToolRecord("lookup", {"id": record}, result),),
                    original_score=None,
                    label=cohort,
                    timestamp=None,
                    metadata={"topic": topic},
                )
            )
    return traces


# --- jsonl (rows v1, tau-bench) ----------------------------------------------------------------


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None if value is None else float(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _timestamp(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        parsed = _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.timezone.utc)
    return parsed.timestamp()


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return canonical_json(value)


def _system_message(messages: Any) -> str | None:
    if isinstance(messages, list) and messages and isinstance(messages[0], Mapping):
        if messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
            return messages[0]["content"]
    return None


def _complete_head(lineage: Mapping[str, Any]) -> str | None:
    """The lineage's system-prompt head when it is the whole prompt (rows keep 120 chars)."""
    head = lineage.get("system_prompt_head")
    if isinstance(head, str) and lineage.get("system_prompt_chars") == len(head):
        return head
    return None


def _row_label(row: Mapping[str, Any], label_field: str) -> Any:
    """``row[label_field]``, else the same key of the row's privileged metadata: the readers
    keep a sample's or trace's own metadata there (``inspect_metadata``, ...), which is
    where a user labels an inspect sample. Only the ``*_metadata`` blocks are looked in: the
    rest of ``privileged`` is the answer key, not a label."""
    value = row.get(label_field)
    if value is not None:
        return value
    privileged = row.get("privileged")
    if isinstance(privileged, Mapping):
        for key, block in privileged.items():
            if str(key).endswith("_metadata") and isinstance(block, Mapping) and block.get(label_field) is not None:
                return block[label_field]
    return None


def _trace_from_row(row: Mapping[str, Any], position: int, label_field: str | None, failure_below: float) -> Trace:
    steps = row.get("steps") or []
    tools = tuple(
        ToolRecord(str(step["tool"]), step.get("arguments") or {}, step.get("result"))
        for step in steps
        if isinstance(step, Mapping) and "tool" in step
    )
    reward = _float_or_none(row.get("reward"))
    label = None
    if label_field is not None:
        raw = _row_label(row, label_field)
        label = None if raw is None else str(raw)
        cohort = cohort_of_label(label)
    else:
        cohort = None if reward is None else (FAILURE if reward < failure_below else BASELINE)
    task = row.get("task_id", row.get("scenario_id"))
    trace_id = row.get("trace_id") or row.get("rollout_id")
    if not trace_id:
        trace_id = f"{task}#{row.get('rollout_index', row.get('trial', 0))}" if task is not None else f"row-{position}"
    skip = None
    if not isinstance(row.get("prompt"), str) or not row.get("prompt"):
        skip = "trace has no user prompt to replay"
    metadata = {
        k: v
        for k, v in row.items()
        if k not in ("prompt", "steps", "final_text", "messages", "privileged") and not str(k).startswith("_")
    }
    lineage = row.get("lineage") if isinstance(row.get("lineage"), Mapping) else {}
    return Trace(
        trace_id=str(trace_id),
        cohort=cohort or "",
        user_message=str(row.get("prompt") or ""),
        original_output=_text(row.get("final_text")),
        tool_calls=tools,
        original_score=reward,
        label=label,
        task_id=None if task is None else str(task),
        timestamp=_timestamp(row.get("ts", row.get("timestamp"))),
        system_prompt=row.get("system_prompt") or lineage.get("system_prompt") or _system_message(row.get("messages"))
        or _complete_head(lineage),
        metadata=metadata,
        skip_reason=skip,
    )


class LoadedTraces(list):
    """The traces a source gave, with what the fork must disclose about them:
    ``lines_skipped``, the line numbers of its file that held no trace (a torn last line,
    finding ``source_lines_skipped``), and ``source_warnings``, what the reader warned while
    loading (finding ``source_warnings``)."""

    lines_skipped: list[int] = []
    source_warnings: list[str] = []


def _keeping_warnings(load: Callable[[], list[Trace]]) -> LoadedTraces:
    """``load()``, with the warnings it raised kept on the result for the verdict, not only
    printed: a reader's warning (a scorer chosen among several, infrastructure errors, an
    empty file) changes what the traces mean. Each is shown as well, as before."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            traces = load()
        finally:
            shown = list(caught)
    for warning in shown:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    loaded = traces if isinstance(traces, LoadedTraces) else LoadedTraces(traces)
    # UserWarning is what the readers warn with; a ResourceWarning or DeprecationWarning that
    # garbage collection or a library happens to raise meanwhile says nothing about the traces
    loaded.source_warnings = list(dict.fromkeys(str(w.message) for w in shown if issubclass(w.category, UserWarning)))
    return loaded


def _loaded(rows, label_field: str | None, failure_below: float) -> LoadedTraces:
    traces = LoadedTraces(_trace_from_row(row, i, label_field, failure_below) for i, row in enumerate(rows))
    if getattr(rows, "torn_tail", False):
        # the reader kept every intact row and skipped the cut-off last line; the verdict
        # must say a trace is missing, not only a warning on stderr (issue 21, row 16)
        traces.lines_skipped = list(getattr(rows, "skipped_lines", []) or [])
    return traces


def _jsonl_traces(source) -> list[Trace]:
    path = source.option("path")
    if not os.path.exists(path):
        where = "" if os.path.isabs(path) else f" (relative paths resolve against the current directory {os.getcwd()})"
        raise SetupError(f"source.path {path!r} does not exist{where}")
    if not os.path.isfile(path):
        raise SetupError(f"source.path {path!r} is not a file (a .jsonl rows file or a tau-bench .json results file)")
    fmt = source.option("format")
    if fmt == "auto":
        try:
            with open(path, encoding="utf-8") as handle:
                head = handle.read(1).strip() or " "
        except (OSError, UnicodeDecodeError) as error:
            raise SetupError(f"source.path {path!r} cannot be read: {type(error).__name__}: {error}") from None
        # tau-bench result files are one JSON array; rows files are JSON lines of objects
        fmt = "tau_bench" if head == "[" else "rows"
    try:
        rows = read_tau_bench(path) if fmt == "tau_bench" else read_rows(path)
    except ToolkitError as error:
        raise SetupError(f"source.path {path!r}: {error}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SetupError(f"source.path {path!r} cannot be read: {type(error).__name__}: {error}") from None
    label_field = source.option("label_field")
    failure_below = float(source.option("failure_below"))
    return _loaded(rows, label_field, failure_below)


# --- inspect_log, tau2 (the rows readers) -------------------------------------------------------


def _reader_traces(source, read: Callable[[str], Any], what: str) -> list[Trace]:
    path = source.option("path")
    if not os.path.exists(path):
        where = "" if os.path.isabs(path) else f" (relative paths resolve against the current directory {os.getcwd()})"
        raise SetupError(f"source.path {path!r} does not exist{where}")
    try:
        rows = read(path)
    except ImportError as error:
        raise SetupError(f"source adapter {source.adapter!r}: {error}") from None
    except ToolkitError as error:
        raise SetupError(f"source.path {path!r}: {error}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SetupError(f"source.path {path!r} cannot be read as {what}: {type(error).__name__}: {error}") from None
    label_field = source.option("label_field")
    if label_field is not None and rows and all(_row_label(row, label_field) is None for row in rows):
        raise SetupError(
            f"source.label_field {label_field!r} is in no row read from {path!r}: neither a row field (e.g. "
            f"{', '.join(sorted(k for k in rows[0] if not str(k).startswith('_') and k != 'privileged')[:8])}) nor a key "
            "of the sample's or trace's own metadata; drop label_field to split the cohorts by failure_below"
        )
    failure_below = float(source.option("failure_below"))
    return _loaded(rows, label_field, failure_below)


def _inspect_log_traces(source) -> list[Trace]:
    scorer = source.option("inspect_scorer")
    return _reader_traces(source, lambda path: read_inspect_log(path, scorer=scorer), "an inspect_ai eval log")


def _tau2_traces(source) -> list[Trace]:
    return _reader_traces(source, read_tau2, "tau2-bench results")


# --- phoenix (OpenInference span dicts) ---------------------------------------------------------


def _attribute(span: Mapping[str, Any], key: str) -> Any:
    attributes = span.get("attributes") or {}
    if key in attributes:
        return attributes[key]
    # nested form {"input": {"value": ...}} as some exporters write it
    node: Any = attributes
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            node = None
            break
        node = node[part]
    if node is not None:
        return node
    return span.get(f"attributes.{key}")


def _span_field(span: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if "." in name:
            head, _, tail = name.partition(".")
            inner = span.get(head)
            if isinstance(inner, Mapping) and tail in inner:
                return inner[tail]
        if name in span:
            return span[name]
    return None


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


_TRUE_FLAGS = ("true", "1", "yes")
_FALSE_FLAGS = ("false", "0", "no", "")


def _failed_flag_cohort(failed: Any) -> str:
    """The cohort of a ``tag.failed`` value: absent or false-like is baseline, true-like failure.

    Any other value ("maybe", "2") is neither: the trace is counted as an unrecognised label
    instead of being taken as a baseline, which it may not be.
    """
    if failed is None or failed is False:
        return BASELINE
    if failed is True:
        return FAILURE
    normal = _normal(failed)
    if normal in _TRUE_FLAGS:
        return FAILURE
    if normal in _FALSE_FLAGS:
        return BASELINE
    return ""


def _span_attributes(span: Mapping[str, Any], trace_id: str) -> Any:
    """A span's attributes in the nested form the OpenInference reader walks, from the
    ``attributes`` object and any flattened ``attributes.<key>`` fields beside it."""
    given = span.get("attributes")
    attributes = dict(given) if isinstance(given, Mapping) else {}
    attributes.update({key[len("attributes."):]: value for key, value in span.items() if str(key).startswith("attributes.")})
    try:
        return _nest(attributes)
    except RowError as error:
        raise SetupError(f"source.spans_provider: trace {trace_id!r}, span {span.get('name')!r}: {error}") from None


def phoenix_traces_from_spans(spans: Iterable[Mapping[str, Any]], label_field: str | None = None) -> list[Trace]:
    """Group OpenInference spans by trace id into :class:`Trace` objects.

    The original score follows ``tk.read_openinference``'s rule, through its own code: the
    root span's feedback and every span's trace-scope feedback, the latest of the first
    feedback name seen in the spans (a warning names the others). Only when no span of any
    trace carries feedback does the score come from a root ``eval.score`` / ``score``
    attribute, which the OpenInference conventions do not define and the reader does not read.
    """
    by_trace: dict[str, list[Mapping[str, Any]]] = {}
    order: list[str] = []
    for span in spans:
        trace_id = _span_field(span, "context.trace_id", "trace_id")
        if trace_id is None:
            continue
        trace_id = str(trace_id)
        if trace_id not in by_trace:
            by_trace[trace_id] = []
            order.append(trace_id)
        by_trace[trace_id].append(span)
    traces = []
    feedback: dict[str, dict[str, Any]] = {}
    for trace_id in order:
        spans_of = by_trace[trace_id]
        roots = [s for s in spans_of if not _span_field(s, "parent_id", "parent_span_id")]
        root = roots[0] if roots else spans_of[0]
        feedback[trace_id] = _trace_feedback(_span_attributes(root, trace_id), [_span_attributes(s, trace_id) for s in spans_of])
        tools = []
        for span in sorted(spans_of, key=lambda s: str(_span_field(s, "start_time") or "")):
            kind = str(_span_field(span, "span_kind") or _attribute(span, "openinference.span.kind") or "").upper()
            if kind != "TOOL":
                continue
            name = _attribute(span, "tool.name") or span.get("name") or "tool"
            arguments = _maybe_json(_attribute(span, "tool.parameters") or _attribute(span, "input.value") or {})
            tools.append(ToolRecord(str(name), arguments, _maybe_json(_attribute(span, "output.value"))))
        if label_field:
            raw = _attribute(root, label_field)
            label = None if raw is None else str(raw)
            cohort = cohort_of_label(label) or ""
        else:
            failed = _attribute(root, "tag.failed")
            label = None if failed is None else str(failed)
            cohort = _failed_flag_cohort(failed)
        score = _float_or_none(_attribute(root, "eval.score"))
        if score is None:
            score = _float_or_none(_attribute(root, "score"))
        message = _attribute(root, "input.value")
        message = _maybe_json(message)
        if isinstance(message, Mapping):
            message = message.get("input") or message.get("question") or message.get("content") or canonical_json(message)
        traces.append(
            Trace(
                trace_id=trace_id,
                cohort=cohort,
                user_message=_text(message),
                original_output=_text(_attribute(root, "output.value")),
                tool_calls=tuple(tools),
                original_score=score,
                label=label,
                timestamp=_timestamp(_span_field(root, "start_time")),
                metadata={"root_span_name": root.get("name")},
                skip_reason=None if message else "root span has no input.value",
            )
        )
    names = _score_names(feedback.values())
    if not names:
        return traces
    chosen = _reward_name(names, None, "whatif source phoenix", "the span export",
                          "The phoenix source has no option to choose; give the reward one feedback name")
    return [dataclasses.replace(t, original_score=_latest_number(feedback[t.trace_id].get(chosen, []), None)) for t in traces]


def _phoenix_traces(source) -> list[Trace]:
    provider = resolve_reference(source.option("spans_provider"), "source.spans_provider")
    try:
        spans = list(provider())
    except Exception as error:
        raise SetupError(f"source.spans_provider raised {type(error).__name__}: {error}") from None
    bad = next((i for i, span in enumerate(spans) if not isinstance(span, Mapping)), None)
    if bad is not None:
        raise SetupError(
            f"source.spans_provider must yield OpenInference span dicts; item {bad} is a {type(spans[bad]).__name__}"
        )
    return phoenix_traces_from_spans(spans, source.option("label_field"))


# --- langfuse public API ------------------------------------------------------------------------


def _langfuse_get(host: str, path: str, params: dict, auth: str, timeout: float = 30.0) -> Any:
    url = host.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    request = urllib.request.Request(url, headers={"Authorization": "Basic " + auth, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (user's host)
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        raise SetupError(f"langfuse {path}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise SetupError(f"langfuse {path}: {type(error).__name__}: {error}") from None


def _langfuse_message(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("input", "question", "query", "content", "message"):
            if isinstance(value.get(key), str):
                return value[key]
        messages = value.get("messages")
        if isinstance(messages, list):
            users = [m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
            if users and isinstance(users[-1], str):
                return users[-1]
    if isinstance(value, list):
        users = [m.get("content") for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
        if users and isinstance(users[-1], str):
            return users[-1]
    return _text(value)


def _langfuse_traces(source) -> list[Trace]:
    host = source.option("host")
    public = os.environ.get(source.option("public_key_env"), "")
    secret = os.environ.get(source.option("secret_key_env"), "")
    if not public or not secret:
        raise SetupError(
            f"langfuse needs credentials in ${source.option('public_key_env')} and ${source.option('secret_key_env')}"
        )
    auth = base64.b64encode(f"{public}:{secret}".encode()).decode()
    page_size = int(source.option("page_size"))
    failure_tag = source.option("failure_tag")
    score_name = source.option("score_name")
    summaries: list[Mapping[str, Any]] = []
    page = 1
    while True:
        body = _langfuse_get(host, "/api/public/traces", {"page": page, "limit": page_size}, auth)
        data = body.get("data") if isinstance(body, Mapping) else None
        if not isinstance(data, list):
            raise SetupError("langfuse /api/public/traces: response has no 'data' list")
        summaries.extend(data)
        meta = body.get("meta") or {}
        total_pages = meta.get("totalPages")
        if len(data) < page_size or (isinstance(total_pages, int) and page >= total_pages):
            break
        page += 1
    traces = []
    scores: dict[str, dict[str, Any]] = {}
    for summary in summaries:
        trace_id = str(summary.get("id"))
        detail = _langfuse_get(host, f"/api/public/traces/{urllib.parse.quote(trace_id, safe='')}", {}, auth)
        if not isinstance(detail, Mapping):
            raise SetupError(f"langfuse /api/public/traces/{trace_id}: expected a JSON object, got {type(detail).__name__}")
        tags = list(detail.get("tags") or summary.get("tags") or [])
        cohort = FAILURE if any(_normal(tag) == _normal(failure_tag) for tag in tags) else BASELINE
        tools = []
        observations = sorted(detail.get("observations") or [], key=lambda o: str(o.get("startTime") or ""))
        for observation in observations:
            kind = str(observation.get("type") or "").upper()
            metadata = observation.get("metadata") or {}
            is_tool = kind == "TOOL" or (isinstance(metadata, Mapping) and metadata.get("kind") == "tool")
            if is_tool:
                tools.append(ToolRecord(str(observation.get("name")), observation.get("input") or {}, observation.get("output")))
        listed = detail.get("scores")
        try:
            scores[trace_id] = _trace_scores(listed if isinstance(listed, list) else [], f"langfuse trace {trace_id!r}")
        except RowError as error:
            raise SetupError(f"langfuse /api/public/traces/{trace_id}: {error}") from None
        message = _langfuse_message(detail.get("input"))
        traces.append(
            Trace(
                trace_id=trace_id,
                cohort=cohort,
                user_message=message,
                original_output=_langfuse_message(detail.get("output")) if not isinstance(detail.get("output"), str) else detail["output"],
                tool_calls=tuple(tools),
                original_score=None,
                label=",".join(tags) or None,
                timestamp=_timestamp(detail.get("timestamp")),
                metadata={"name": detail.get("name"), "tags": tags},
                skip_reason=None if message else "trace has no input",
            )
        )
    # tk.read_langfuse's score rule, through its own code: trace-level scores only, the latest
    # of the chosen name (score_name, else the first name seen), categorical ones without a
    # number (no labels= here), so one export scores the same in compare_runs and here
    names = _score_names(scores.values())
    if score_name is not None:
        chosen = score_name
        if score_name not in names and traces:
            warnings.warn(
                f"whatif source langfuse: score_name {score_name!r} is on no trace (trace-level scores: "
                f"{', '.join(names) or 'none'}); every original score is None",
                UserWarning,
                stacklevel=2,
            )
    else:
        chosen = _reward_name(names, None, "whatif source langfuse", "the trace listing", "Set source.score_name to choose")
    if chosen is None:
        return traces
    return [dataclasses.replace(t, original_score=_latest_number(scores[t.trace_id].get(chosen, []), None)) for t in traces]


# --- dispatch and selection ---------------------------------------------------------------------


def load_traces(source) -> list[Trace]:
    """All traces of the configured source (``source`` is ``WhatIfConfig.source``)."""
    adapter = source.adapter
    if adapter == "stub":
        return stub_traces(int(source.option("synthetic_traces")), int(source.option("seed")))
    if adapter == "jsonl":
        return _jsonl_traces(source)
    if adapter == "phoenix":
        return _keeping_warnings(lambda: _phoenix_traces(source))
    if adapter == "langfuse":
        return _keeping_warnings(lambda: _langfuse_traces(source))
    if adapter == "inspect_log":
        return _keeping_warnings(lambda: _inspect_log_traces(source))
    if adapter == "tau2":
        return _keeping_warnings(lambda: _tau2_traces(source))
    raise SetupError(f"unknown trace-source adapter {adapter!r}")  # the config's Literal stops this


def _passes(trace: Trace, clauses, now: float) -> bool:
    for clause in clauses:
        if clause.name == "score-below" and not (trace.original_score is not None and trace.original_score < clause.number):
            return False
        if clause.name == "score-above" and not (trace.original_score is not None and trace.original_score > clause.number):
            return False
        if clause.name == "since" and not (trace.timestamp is not None and now - trace.timestamp <= clause.number):
            return False
        if clause.name == "label" and (trace.label is None or _normal(trace.label) != _normal(clause.value)):
            return False
        if clause.name == "has-tool" and all(call.name != clause.value for call in trace.tool_calls):
            return False
        if clause.name == "task" and trace.task_id != clause.value:
            return False
    return True


def _collapse_duplicates(traces: list[Trace]) -> tuple[list[Trace], list[Trace]]:
    """(kept, dropped): a trace repeating an earlier id, or an earlier (message, output, cohort).

    Traces that cannot be replayed (``skip_reason``) are compared by id only: each stays a
    record of its own in the report.
    """
    seen_ids: set[str] = set()
    seen_content: set[tuple[str, str, str]] = set()
    kept, dropped = [], []
    for trace in traces:
        content = None if trace.skip_reason else (trace.user_message, trace.original_output, trace.cohort)
        if trace.trace_id in seen_ids or (content is not None and content in seen_content):
            dropped.append(trace)
            continue
        seen_ids.add(trace.trace_id)
        if content is not None:
            seen_content.add(content)
        kept.append(trace)
    return kept, dropped


def _label_counts(traces: list[Trace]) -> tuple[dict[str, int], int]:
    """Counts of the labels naming no cohort (at most 20, the rest summed), and of no label."""
    counts: dict[str, int] = {}
    other = unlabelled = 0
    for trace in traces:
        if trace.cohort in (FAILURE, BASELINE):
            continue
        if trace.label is None:
            unlabelled += 1
            continue
        label = trace.label if len(trace.label) <= _LABEL_CHARS else trace.label[:_LABEL_CHARS] + "…"
        if label in counts or len(counts) < _MAX_LISTED:
            counts[label] = counts.get(label, 0) + 1
        else:
            other += 1
    if other:
        counts["(other labels)"] = other
    return counts, unlabelled


def select_cohorts(traces: list[Trace], config, now: float | None = None) -> CohortSelections:
    """Apply each configured cohort's filter and limit; only configured cohorts are selected.

    In ``regression_check`` no failure cohort is configured, so traces labelled failure are
    never selected (the reference still evaluated them, docs/design/whatif.md §11.8).
    Duplicates are collapsed first (see the module docstring), so neither the limit nor the
    trust floor ever counts a trace twice.

    Returns
    -------
    CohortSelections
        ``{cohort: CohortSelectionResult}`` with the counts of unrecognised labels, unlabelled
        traces and collapsed duplicates as attributes.
    """
    now = _dt.datetime.now(_dt.timezone.utc).timestamp() if now is None else now
    seed = config.decision.seed
    traces, dropped = _collapse_duplicates(list(traces))
    dropped_by_cohort: dict[str, list[Trace]] = {}
    for trace in dropped:
        dropped_by_cohort.setdefault(trace.cohort, []).append(trace)
    chosen = {}
    for name in (FAILURE, BASELINE):
        selection = getattr(config.selection, f"{name}_cohort")
        if selection is None:
            continue
        labelled = [t for t in traces if t.cohort == name]
        passing = [t for t in labelled if _passes(t, selection.clauses, now)]
        if name == FAILURE:
            # most recent first; traces without a time keep source order, after timed ones
            ordered = sorted(
                enumerate(passing),
                key=lambda item: (item[1].timestamp is None, -(item[1].timestamp or 0.0), item[0]),
            )
            picked = [t for _, t in ordered][: selection.limit]
        else:
            ranked = sorted(
                range(len(passing)),
                key=lambda i: (stable_uniform(seed, "baseline-sample", passing[i].trace_id), i),
            )
            picked = [passing[i] for i in sorted(ranked[: selection.limit])]
        chosen[name] = CohortSelectionResult(
            name=name,
            traces=tuple(picked),
            available=len(passing),
            labelled=len(labelled),
            limit=selection.limit,
            filter=selection.filter,
            duplicates_collapsed=len(dropped_by_cohort.get(name, ())),
            duplicate_ids=_first_ids(dropped_by_cohort.get(name, ())),
        )
    unrecognised, unlabelled = _label_counts(traces)
    return CohortSelections(
        chosen,
        unrecognised_labels=unrecognised,
        unlabelled=unlabelled,
        duplicates_collapsed=len(dropped),
        duplicate_ids=_first_ids(dropped),
    )


def _first_ids(traces: Iterable[Trace]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.trace_id for t in traces))[:_MAX_LISTED]
