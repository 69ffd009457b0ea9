"""Read OpenInference span exports (Arize Phoenix, any OpenInference tracer) as toolkit rows,
one trace per row, so Phoenix users get a significance test between two experiment runs.

The format is OpenInference's specification (Arize-ai/openinference at commit
``1fe497f1d9f45a07eee55d97fe185e020560f9c7``): the span object of ``spec/traces.md``
(``name``, ``context: {trace_id, span_id}``, ``parent_id``, ``start_time``, ``status_code``,
``attributes``), the attribute names of ``spec/semantic_conventions.md`` and the feedback
fields of ``spec/annotations.md``; docs/design/readers.md restates them. The file is JSONL,
one span per line. Attributes may be flat (``"llm.input_messages.0.message.role"``, as an
OpenTelemetry exporter writes them), lists of flat objects (the spec's own examples) or fully
nested; all three are read alike.

Mapping to rows v1, one row per ``trace_id``:

- the root span (no ``parent_id``) is the trace's: its ``metadata`` attribute (a JSON object)
  names the task under ``task_key`` (default ``"task_id"``) -> ``scenario_id``; a trace with
  none is keyed by its prompt (``"openinference-<12 hex of sha256>"``), so two runs over the
  same inputs still pair. Repeats of a task, in file order, are ``rollout_index`` 0, 1, ...
  ``rollout_id = "openinference-<trace_id>"``.
- ``prompt``: the first user message of the first LLM span (by ``start_time``), else the
  root's ``input.value``; its system messages are the system prompt (into lineage).
  ``steps``: each LLM span's output messages in time order (tool calls ->
  ``{"tool", "arguments", "call_id"}``, text -> ``{"text"}``, text that came with calls on the
  first call), each TOOL span's ``output.value`` paired into its call's ``result`` by
  ``tool.id``, else by order (a TOOL span with no call becomes its own step with its
  ``input.value`` as arguments); a TOOL span with ``status_code`` ERROR keeps its message in
  ``tool_error``. ``final_text``: the last assistant text, else the root's ``output.value``.
- scores: the root span's ``annotations`` / ``evaluations`` and every span's
  ``trace.annotations`` / ``trace.evaluations`` (session and other spans' feedback judge
  something else, so they are left out). ``reward=`` names the one that is the reward (default
  the first name seen, with a warning when there are several); its ``score`` must be in
  [0, 1], or its ``label`` mapped by ``labels={"correct": 1, "incorrect": 0}``; any other
  score name becomes a marker. A trace without that score keeps ``reward = None`` with
  ``judge_status = "missing_reward"`` (one warning counts them).
- ``lineage``: ``source``, ``eval_run`` (``run_id=``, else the root metadata's ``run_id``,
  else the file's stem), ``model`` (``llm.model_name`` of the first LLM span), ``trace_id``,
  ``session_id``, ``export_file``; ``usage`` sums ``llm.token_count.prompt`` /
  ``.completion``; ``trace_status`` is the root's ``status_code``.
- the root's metadata may hold the expected answer, so it goes under ``privileged`` as
  ``openinference_metadata``: in memory, removed by ``scrub`` on every write.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.errors import RowError
from toolkit.rows._io import MAX_NESTING, deeper_than, json_loads
from toolkit.rows._read import Rows
from toolkit.rows._traces import _number, _Score, _Trace, _trace_rows
from toolkit.rows.tau_bench import _CallPairing, _decode_result

__all__ = ["read_openinference"]


def _merge(into: dict[str, Any], key: str, value: Any, depth: int) -> None:
    parts = key.split(".")
    depth += len(parts)
    if depth > MAX_NESTING:
        # each dot is one level once nested: a key of 3,000 dots overflowed the walk below
        raise RowError(f"attribute {key[:60]!r}{'...' if len(key) > 60 else ''} nests deeper than {MAX_NESTING} levels")
    cursor = into
    for part in parts[:-1]:
        nxt = cursor.get(part)
        if not isinstance(nxt, dict):
            nxt = {} if nxt is None else {"": nxt}
            cursor[part] = nxt
        cursor = nxt
    last = parts[-1]
    value = _nest(value, depth)
    if isinstance(cursor.get(last), dict) and isinstance(value, dict):
        for k, v in value.items():
            _merge(cursor[last], k, v, depth)
    else:
        cursor[last] = value


def _nest(value: Any, depth: int = 0) -> Any:
    """Flat dotted keys (``a.0.b``) as nested dicts and lists, whatever mix the exporter used.

    ``depth`` counts the levels above ``value`` (a dotted key adds one per part), so a tree
    deeper than ``MAX_NESTING`` is refused with a RowError before the recursion gets near
    Python's limit."""
    if isinstance(value, list):
        if depth + 1 > MAX_NESTING:
            raise RowError(f"attributes nest deeper than {MAX_NESTING} levels")
        return [_nest(v, depth + 1) for v in value]
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            _merge(out, str(key), item, depth)
        return _listify(out)
    return value


def _listify(value: Any) -> Any:
    if isinstance(value, dict):
        value = {k: _listify(v) for k, v in value.items()}
        if value and all(k.isdigit() for k in value):
            return [value[k] for k in sorted(value, key=int)]
    return value


def _at(tree: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(tree, Mapping):
            tree = tree.get(part)
        elif isinstance(tree, list) and part.isdigit() and int(part) < len(tree):
            tree = tree[int(part)]
        else:
            return None
    return tree


def _list(tree: Any, path: str) -> list[Any]:
    found = _at(tree, path)
    return found if isinstance(found, list) else []


def _content(message: Any) -> str:
    content = _at(message, "message.content")
    if isinstance(content, str):
        return content
    parts = [_at(p, "message_content.text") for p in _list(message, "message.contents")]
    return "".join(p for p in parts if isinstance(p, str))


def _time(span: Mapping[str, Any]) -> float:
    stamp = span.get("start_time")
    if isinstance(stamp, str):
        try:
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return float("inf")
    return float(stamp) if _number(stamp) else float("inf")


def _feedback(tree: Any, path: str, singular: str) -> list[tuple[str, _Score]]:
    out = []
    for item in _list(tree, path):
        body = _at(item, singular)
        if not isinstance(body, Mapping) or not isinstance(body.get("name"), str):
            continue
        score = body.get("score")
        label = body.get("label")
        out.append(
            (
                body["name"],
                _Score(
                    value=float(score) if _number(score) else None,
                    label=label if isinstance(label, str) else None,
                    comment=body.get("explanation") if isinstance(body.get("explanation"), str) else None,
                    kind=body.get("annotator_kind") if isinstance(body.get("annotator_kind"), str) else None,
                ),
            )
        )
    return out


def _metadata(attrs: Any, where: str) -> dict[str, Any]:
    raw = _at(attrs, "metadata")
    if isinstance(raw, str):
        try:
            raw = json_loads(raw)
        except ValueError:
            raise RowError(f"{where}: attribute metadata is not a JSON object string") from None
        if deeper_than(raw, MAX_NESTING):
            raise RowError(f"{where}: attribute metadata nests deeper than {MAX_NESTING} levels")
    return dict(raw) if isinstance(raw, Mapping) else {}


def _trace_feedback(root_attrs: Any, span_attrs: Iterable[Any]) -> dict[str, list[_Score]]:
    """A trace's scores by name: the root span's own feedback, then every span's trace-scope
    feedback in span order (a name's last entry is its latest). Another span's own feedback
    judges that span and session feedback judges many traces, so neither is read. The
    what-if ``phoenix`` source scores a trace through this same function."""
    found = _feedback(root_attrs, "annotations", "annotation") + _feedback(root_attrs, "evaluations", "evaluation")
    for attrs in span_attrs:
        found += _feedback(attrs, "trace.annotations", "annotation") + _feedback(attrs, "trace.evaluations", "evaluation")
    scores: dict[str, list[_Score]] = {}
    for name, score in found:
        scores.setdefault(name, []).append(score)
    return scores


def _trace(trace_id: str, spans: list[tuple[int, dict[str, Any], Any]], label: str) -> _Trace:
    lines = ", ".join(str(n) for n, _, _ in spans[:3])
    where = f"{label} trace {trace_id!r} (line {lines}{' ...' if len(spans) > 3 else ''})"
    roots = [(n, s, a) for n, s, a in spans if not s.get("parent_id")]
    if len(roots) != 1:
        raise RowError(f"{where}: expected one root span (no parent_id), found {len(roots)}; a partial export?")
    _, root, root_attrs = roots[0]
    ordered = sorted(spans, key=lambda item: (_time(item[1]), item[0]))
    llm = [(s, a) for _, s, a in ordered if _at(a, "openinference.span.kind") == "LLM"]
    system_parts: list[str] = []
    prompt = None
    if llm:
        for message in _list(llm[0][1], "llm.input_messages"):
            role = _at(message, "message.role")
            if role == "system":
                system_parts.append(_content(message))
            elif role == "user" and prompt is None:
                prompt = _content(message)
    root_input = _at(root_attrs, "input.value")
    if prompt is None:
        prompt = root_input if isinstance(root_input, str) else (json.dumps(root_input) if root_input is not None else None)
    if prompt is None:
        raise RowError(f"{where}: no user message and no root input.value, so the trace has no prompt")
    steps: list[dict[str, Any]] = []
    pairing = _CallPairing()
    last_text = ""
    usage = {"input_tokens": 0, "output_tokens": 0}
    counted = False
    for number, span, attrs in ordered:
        kind = _at(attrs, "openinference.span.kind")
        if kind == "LLM":
            for key, name in (("llm.token_count.prompt", "input_tokens"), ("llm.token_count.completion", "output_tokens")):
                if _number(_at(attrs, key)):
                    usage[name] += int(_at(attrs, key))
                    counted = True
            for message in _list(attrs, "llm.output_messages"):
                if _at(message, "message.role") not in (None, "assistant"):
                    continue
                text = _content(message)
                calls = _list(message, "message.tool_calls")
                for index, call in enumerate(calls):
                    name = _at(call, "tool_call.function.name")
                    if not isinstance(name, str) or not name:
                        raise RowError(f"{where}: line {number}: a tool call has no tool_call.function.name")
                    raw = _at(call, "tool_call.function.arguments")
                    decoded = raw if isinstance(raw, Mapping) else _decode_result(raw) if isinstance(raw, str) else {}
                    step: dict[str, Any] = {"tool": name, "arguments": dict(decoded) if isinstance(decoded, Mapping) else {}}
                    if not isinstance(decoded, Mapping):
                        step["raw_arguments"] = raw
                    call_id = _at(call, "tool_call.id")
                    if isinstance(call_id, str) and call_id:
                        step["call_id"] = call_id
                    if index == 0 and text:
                        step["text"] = text
                    steps.append(step)
                    pairing.called(step)
                if not calls and text:
                    steps.append({"text": text})
                if text:
                    last_text = text
        elif kind == "TOOL":
            tool_id = _at(attrs, "tool.id")
            name = _at(attrs, "tool.name") or span.get("name")
            step = pairing.answered(tool_id if isinstance(tool_id, str) else None, name, steps)
            if step.get("orphan_result"):
                given = _decode_result(_at(attrs, "input.value"))
                step["arguments"] = dict(given) if isinstance(given, Mapping) else {}
            step["result"] = _decode_result(_at(attrs, "output.value"))
            if span.get("status_code") == "ERROR":
                step["tool_error"] = str(span.get("status_message") or "ERROR")
    root_output = _at(root_attrs, "output.value")
    final_text = last_text or (root_output if isinstance(root_output, str) else "")
    if not steps and final_text:
        steps.append({"text": final_text})
    if deeper_than(steps, MAX_NESTING):
        # a tool output string may decode to JSON deeper than the span itself
        raise RowError(f"{where}: a tool result nests deeper than {MAX_NESTING} levels")
    scores = _trace_feedback(root_attrs, (attrs for _, _, attrs in spans))
    model = next((_at(a, "llm.model_name") for _, a in llm if isinstance(_at(a, "llm.model_name"), str)), None)
    lineage: dict[str, Any] = {"n_spans": len(spans)}
    session = _at(root_attrs, "session.id")
    if isinstance(session, str):
        lineage["session_id"] = session
    return _Trace(
        where=where,
        trace_id=trace_id,
        prompt=prompt,
        steps=steps,
        final_text=final_text,
        scores=scores,
        system="\n\n".join(system_parts) if system_parts else None,
        model=model,
        metadata=_metadata(root_attrs, where),
        usage=usage if counted else None,
        status=root.get("status_code") if isinstance(root.get("status_code"), str) else None,
        lineage=lineage,
    )


def read_openinference(
    path: str | os.PathLike[str],
    *,
    reward: str | None = None,
    labels: Mapping[str, float] | None = None,
    task_key: str = "task_id",
    run_id: str | None = None,
    strict: bool = True,
) -> Rows:
    """Read an OpenInference / Arize Phoenix span export (JSONL) as :class:`~toolkit.rows.Rows`.

    One row per trace; the mapping (root metadata's task -> ``scenario_id``, repeats ->
    ``rollout_index``, the named feedback score -> ``reward``, other scores -> ``markers``) is
    the module docstring's. ``tk.compare_runs(read_openinference(a), read_openinference(b))``
    pairs two experiment runs task by task with an exact sign-flip p.

    Parameters
    ----------
    path : str or os.PathLike
        The export: UTF-8 JSONL, one OpenInference span object per line.
    reward : str or None, optional
        The feedback name (``annotation.name`` / ``evaluation.name``) that is the reward.
        Default None: the first name seen, with a warning when there are several.
    labels : mapping of str to float, optional
        Numbers for categorical labels (``{"correct": 1, "incorrect": 0}``), used for a
        feedback that has a label; without it a label-only reward is an error. Default None.
    task_key : str, optional
        The root span's metadata key naming the task (default ``"task_id"``).
    run_id : str, optional
        ``lineage.eval_run`` for every row (default: the root metadata's ``run_id``, else the
        file's stem).
    strict : bool, optional
        Default True: the first malformed line or trace raises, naming its line number.
        False: it is skipped, counted in ``Rows.skipped`` with its (first) line number in
        ``Rows.skipped_lines``, and one warning names them; the rest are kept.

    Returns
    -------
    Rows
        One validated row per trace, in order of each trace's first line.

    Raises
    ------
    RowError
        For a malformed line or trace (under ``strict``; a span, attribute key, metadata or
        decoded tool result nested deeper than ``toolkit.rows._io.MAX_NESTING`` levels is
        malformed), and when the reward score of a trace is outside [0, 1] or a label with no
        number (whatever ``strict``).
    ConfigError
        When ``reward`` names no score in the file, or ``labels`` / ``task_key`` is malformed.
    OSError
        When the file cannot be read (``FileNotFoundError`` for a missing one).

    Warns
    -----
    UserWarning
        For skipped lines or traces, several score names with ``reward`` None, and traces
        without the reward score.

    References
    ----------
    .. [1] Arize AI, "OpenInference specification", https://github.com/Arize-ai/openinference/tree/main/spec
       (traces.md, semantic_conventions.md, annotations.md).
    """
    path = Path(path)
    groups: dict[str, list[tuple[int, dict[str, Any], Any]]] = {}
    skipped: list[tuple[int, str]] = []

    def bad(number: int, message: str) -> None:
        if strict:
            raise RowError(message)
        skipped.append((number, message))

    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                span = json_loads(line)
            except ValueError as error:
                bad(number, f"{path.name} line {number}: not valid JSON ({error})")
                continue
            trace_id = _at(span, "context.trace_id") if isinstance(span, Mapping) else None
            if not isinstance(trace_id, str) or not trace_id:
                bad(number, f"{path.name} line {number}: not an OpenInference span (no context.trace_id)")
                continue
            attrs = span.get("attributes")
            if attrs is not None and not isinstance(attrs, Mapping):
                bad(number, f"{path.name} line {number}: attributes must be an object, got {type(attrs).__name__}")
                continue
            if deeper_than(span, MAX_NESTING):
                bad(number, f"{path.name} line {number}: the span nests deeper than {MAX_NESTING} levels")
                continue
            try:
                nested = _nest(attrs or {})
            except RowError as error:
                bad(number, f"{path.name} line {number}: {error}")
                continue
            groups.setdefault(trace_id, []).append((number, span, nested))
    traces: list[_Trace] = []
    for trace_id, spans in groups.items():
        try:
            traces.append(_trace(trace_id, spans, path.name))
        except RowError as error:
            bad(spans[0][0], str(error))
    skipped.sort()
    return _trace_rows(
        traces,
        source="openinference",
        label=path.name,
        path=path,
        reward=reward,
        labels=labels,
        task_key=task_key,
        run_id=run_id,
        skipped=skipped,
    )
