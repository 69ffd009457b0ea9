"""Read Langfuse trace exports (JSON) as toolkit rows, one trace per row, so Langfuse users can
put a significance test on the difference between two experiment runs.

The format is Langfuse's public API (langfuse/langfuse at commit
``62751446149b702b419a9292ddfc2280cdf74b8c``, ``fern/apis/server/definition/commons.yml``):
``TraceWithFullDetails`` (what ``GET /api/public/traces/{traceId}`` returns: ``id``,
``timestamp``, ``name``, ``input``, ``output``, ``sessionId``, ``release``, ``version``,
``metadata``, ``tags``, ``environment``, ``observations`` and ``scores``), ``Observation``
(``id``, ``type``, ``name``, ``startTime``, ``model``, ``input``, ``output``, ``level``,
``statusMessage``, ``usageDetails``) and ``ScoreV1`` (``name``, ``value``, ``stringValue``,
``dataType`` NUMERIC / BOOLEAN / CATEGORICAL / TEXT, ``comment``, ``source``,
``observationId``, ``timestamp``); observation types from ``ingestion.yml``
(``ObservationType``). docs/design/readers.md restates them. The file holds a JSON list of
such traces, ``{"data": [...]}``, or one trace.

Mapping to rows v1, one row per trace:

- ``metadata[task_key]`` (default ``"task_id"``) -> ``scenario_id``; a trace with none is
  keyed by its prompt (``"langfuse-<12 hex of sha256>"``) so two runs over the same inputs
  still pair. Repeats of a task, in file order, are ``rollout_index`` 0, 1, ...;
  ``rollout_id = "langfuse-<trace id>"``.
- ``prompt``: the first user message of the first GENERATION (by ``startTime``; its input as
  OpenAI-shaped messages, a ``{"messages": [...]}`` object or text), else the trace's
  ``input`` (text as it is, JSON as compact JSON); the generation's system messages are the
  system prompt. ``steps``: each GENERATION's output in time order (an assistant message's
  ``tool_calls`` in OpenAI shape -> ``{"tool", "arguments", "call_id"}``, its text ->
  ``{"text"}`` or onto the first call), each TOOL observation's ``output`` into the next
  waiting call's ``result`` (Langfuse stores no call id on it; one with no call becomes its own
  step with its ``input`` as arguments); a TOOL observation at level ERROR keeps its
  ``statusMessage`` in ``tool_error``. ``final_text``: the last assistant text, else the
  trace's ``output``.
- scores: the trace-level scores (``observationId`` empty; an observation's score judges that
  step, not the trace), latest ``timestamp`` last. ``reward=`` names the reward (default the
  first name seen, with a warning when there are several). NUMERIC and BOOLEAN (1 = True, as
  Langfuse stores it) use ``value``, which must be in [0, 1]; CATEGORICAL needs ``labels=``
  (Langfuse stores 0 as the value of a category with no config, so that number is not read);
  TEXT and CORRECTION scores carry no number and are left out. Every other name is a marker.
- ``lineage``: ``source``, ``eval_run`` (``run_id=``, else ``metadata.run_id``, else the file
  stem), ``model`` (the first GENERATION's), ``trace_id``, ``trace_name``, ``session_id``,
  ``release``, ``version``, ``langfuse_environment``, ``tags``; ``userId`` is personal data
  and is not copied. ``usage`` sums the generations' ``usageDetails`` ``input`` / ``output``.
  ``trace_status`` is ``"ERROR"`` when an observation is at level ERROR.
- ``metadata`` may hold the expected answer, so it goes under ``privileged`` as
  ``langfuse_metadata``: in memory, removed by ``scrub`` on every write.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.errors import RowError
from toolkit.rows._io import MAX_NESTING, deeper_than, json_loads
from toolkit.rows._read import Rows
from toolkit.rows._traces import _number, _Score, _Trace, _trace_rows
from toolkit.rows.tau_bench import _CallPairing, _decode_result, _text, _tool_step

__all__ = ["read_langfuse"]

# Score types with no number to read (commons.yml ScoreDataType): a text note, a correction.
_NO_NUMBER = {"TEXT", "CORRECTION"}


def _time(value: Any) -> float:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return float("inf")
    return float("inf")


def _messages(value: Any) -> list[Mapping[str, Any]]:
    if isinstance(value, Mapping) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, Mapping) and "role" in value:
        value = [value]
    if isinstance(value, list):
        return [m for m in value if isinstance(m, Mapping) and "role" in m]
    return []


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _trace_scores(scores_in: list[Any], where: str) -> dict[str, list[_Score]]:
    """A trace's scores by name, oldest first (a name's last entry is its latest): trace-level
    only (an ``observationId`` means the score judges that observation, not the trace), TEXT
    and CORRECTION left out (no number). The what-if ``langfuse`` source scores a trace
    through this same function."""
    scores: dict[str, list[_Score]] = {}
    trace_scores = [
        (index, s)
        for index, s in enumerate(scores_in)
        if isinstance(s, Mapping) and not s.get("observationId") and s.get("dataType") not in _NO_NUMBER
    ]
    for index, score in sorted(trace_scores, key=lambda item: (_time(item[1].get("timestamp")), item[0])):
        name = score.get("name")
        if not isinstance(name, str) or not name:
            raise RowError(f"{where}.scores[{index}].name: a score needs a name")
        value = score.get("value")
        label = score.get("stringValue")
        scores.setdefault(name, []).append(
            _Score(
                value=float(value) if _number(value) else None,
                label=label if isinstance(label, str) else None,
                comment=score.get("comment") if isinstance(score.get("comment"), str) else None,
                kind=score.get("source") if isinstance(score.get("source"), str) else None,
                data_type=score.get("dataType") if isinstance(score.get("dataType"), str) else None,
            )
        )
    return scores


def _trace(entry: Any, where: str) -> _Trace:
    if not isinstance(entry, Mapping):
        raise RowError(f"{where}: expected a Langfuse trace object, got {type(entry).__name__}")
    trace_id = entry.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise RowError(f"{where}.id: required Langfuse trace field is missing or not a string")
    where = f"{where} (trace {trace_id!r})"
    if deeper_than(entry, MAX_NESTING):
        raise RowError(f"{where}: the trace nests deeper than {MAX_NESTING} levels")
    observations = entry.get("observations", [])
    scores_in = entry.get("scores", [])
    if not isinstance(observations, list) or not all(isinstance(o, Mapping) for o in observations):
        raise RowError(f"{where}.observations: expected a list of observation objects")
    if not isinstance(scores_in, list) or not all(isinstance(s, Mapping) for s in scores_in):
        raise RowError(f"{where}.scores: expected a list of score objects")
    ordered = sorted(enumerate(observations), key=lambda item: (_time(item[1].get("startTime")), item[0]))
    generations = [o for _, o in ordered if o.get("type") == "GENERATION"]
    system_parts: list[str] = []
    prompt = None
    if generations:
        given = generations[0].get("input")
        for message in _messages(given):
            if message["role"] == "system":
                system_parts.append(_text(message.get("content")) or "")
            elif message["role"] == "user" and prompt is None:
                prompt = _text(message.get("content")) or ""
        if prompt is None and isinstance(given, str):
            prompt = given
    if prompt is None:
        prompt = _as_text(entry.get("input"))
    if prompt is None:
        raise RowError(f"{where}: no user message and no trace input, so the trace has no prompt")
    steps: list[dict[str, Any]] = []
    pairing = _CallPairing()
    last_text = ""
    usage = {"input_tokens": 0, "output_tokens": 0}
    counted = False
    errored = False
    for position, observation in ordered:
        at = f"{where}.observations[{position}]"
        kind = observation.get("type")
        if observation.get("level") == "ERROR":
            errored = True
        if kind == "GENERATION":
            details = observation.get("usageDetails") or observation.get("usage") or {}
            if isinstance(details, Mapping):
                for key, name in (("input", "input_tokens"), ("output", "output_tokens")):
                    if _number(details.get(key)):
                        usage[name] += int(details[key])
                        counted = True
            output = observation.get("output")
            outputs = _messages(output)
            if not outputs and isinstance(output, str):
                outputs = [{"role": "assistant", "content": output}]
            for message in outputs:
                if message.get("role") != "assistant":
                    continue
                text = _text(message.get("content")) or ""
                calls = message.get("tool_calls") or []
                if not isinstance(calls, list):
                    raise RowError(f"{at}.output.tool_calls: expected a list")
                for index, call in enumerate(calls):
                    step = _tool_step(call if isinstance(call, Mapping) else {}, f"{at}.output.tool_calls[{index}]")
                    if index == 0 and text:
                        step["text"] = text
                    steps.append(step)
                    pairing.called(step)
                if not calls and text:
                    steps.append({"text": text})
                if text:
                    last_text = text
        elif kind == "TOOL":
            step = pairing.answered(None, observation.get("name"), steps)
            if step.get("orphan_result"):
                given = observation.get("input")
                step["arguments"] = dict(given) if isinstance(given, Mapping) else {}
            step["result"] = _decode_result(observation.get("output"))
            if observation.get("level") == "ERROR":
                step["tool_error"] = str(observation.get("statusMessage") or "ERROR")
    final_text = last_text or (_as_text(entry.get("output")) or "")
    if not steps and final_text:
        steps.append({"text": final_text})
    if deeper_than(steps, MAX_NESTING):
        # a tool output string may decode to JSON deeper than the trace itself
        raise RowError(f"{where}: a tool result nests deeper than {MAX_NESTING} levels")
    scores = _trace_scores(scores_in, where)
    model = next((g.get("model") for g in generations if isinstance(g.get("model"), str)), None)
    lineage: dict[str, Any] = {}
    for key, name in (
        ("name", "trace_name"),
        ("sessionId", "session_id"),
        ("release", "release"),
        ("version", "version"),
        ("environment", "langfuse_environment"),
    ):
        if isinstance(entry.get(key), str):
            lineage[name] = entry[key]
    if isinstance(entry.get("tags"), list):
        lineage["tags"] = [t for t in entry["tags"] if isinstance(t, str)]
    metadata = entry.get("metadata")
    return _Trace(
        where=where,
        trace_id=trace_id,
        prompt=prompt,
        steps=steps,
        final_text=final_text,
        scores=scores,
        system="\n\n".join(system_parts) if system_parts else None,
        model=model,
        metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
        usage=usage if counted else None,
        status="ERROR" if errored else None,
        lineage=lineage,
    )


def read_langfuse(
    path: str | os.PathLike[str],
    *,
    reward: str | None = None,
    labels: Mapping[str, float] | None = None,
    task_key: str = "task_id",
    run_id: str | None = None,
    strict: bool = True,
) -> Rows:
    """Read a Langfuse trace export (JSON) as :class:`~toolkit.rows.Rows`, one row per trace.

    The mapping (``metadata[task_key]`` -> ``scenario_id``, repeats -> ``rollout_index``, the
    named trace score -> ``reward``, other scores -> ``markers``) is the module docstring's.
    ``tk.compare_runs(read_langfuse(a), read_langfuse(b))`` pairs two runs task by task.

    Parameters
    ----------
    path : str or os.PathLike
        The export: UTF-8 JSON holding a list of ``TraceWithFullDetails`` objects (traces
        with their ``observations`` and ``scores``), ``{"data": [...]}`` of them, or one.
    reward : str or None, optional
        The score name that is the reward. Default None: the first name seen, with a warning
        when there are several.
    labels : mapping of str to float, optional
        Numbers for CATEGORICAL score values (``stringValue``), e.g. ``{"pass": 1, "fail":
        0}``. Default None: a categorical reward is an error, a categorical marker None.
    task_key : str, optional
        The trace metadata key naming the task (default ``"task_id"``).
    run_id : str, optional
        ``lineage.eval_run`` for every row (default: ``metadata.run_id``, else the file stem).
    strict : bool, optional
        Default True: the first malformed trace raises, naming its position. False: it is
        skipped, counted in ``Rows.skipped`` with its 0-based position in
        ``Rows.skipped_lines``, and one warning names them; the rest are kept.

    Returns
    -------
    Rows
        One validated row per trace, in file order.

    Raises
    ------
    RowError
        When the file is not JSON or holds no traces in a known shape, for a malformed trace
        (under ``strict``; one nested deeper than ``toolkit.rows._io.MAX_NESTING`` levels, tool
        results decoded, is malformed), and when a trace's reward is outside [0, 1] or categorical
        without ``labels`` (whatever ``strict``).
    ConfigError
        When ``reward`` names no score in the file, or ``labels`` / ``task_key`` is malformed.
    OSError
        When the file cannot be read (``FileNotFoundError`` for a missing one).

    Warns
    -----
    UserWarning
        For skipped traces, several score names with ``reward`` None, and traces without the
        reward score.

    References
    ----------
    .. [1] Langfuse, public API definition, https://github.com/langfuse/langfuse
       (fern/apis/server/definition/commons.yml: TraceWithFullDetails, Observation, ScoreV1).
    """
    path = Path(path)
    try:
        data = json_loads(path.read_text(encoding="utf-8-sig"))
    except ValueError as error:
        raise RowError(f"{path}: not valid JSON ({error}); expected a Langfuse trace export") from None
    if isinstance(data, Mapping) and isinstance(data.get("data"), list):
        entries = data["data"]
    elif isinstance(data, Mapping) and "id" in data:
        entries = [data]
    elif isinstance(data, list):
        entries = data
    else:
        raise RowError(
            f"{path}: expected a list of Langfuse traces, {{'data': [...]}} or one trace, got "
            f"{type(data).__name__}{' without id or data' if isinstance(data, Mapping) else ''}"
        )
    traces: list[_Trace] = []
    skipped: list[tuple[int, str]] = []
    for index, entry in enumerate(entries):
        try:
            traces.append(_trace(entry, f"{path.name}[{index}]"))
        except RowError as error:
            if strict:
                raise
            skipped.append((index, str(error)))
    return _trace_rows(
        traces,
        source="langfuse",
        label=path.name,
        path=path,
        reward=reward,
        labels=labels,
        task_key=task_key,
        run_id=run_id,
        skipped=skipped,
    )
