"""Typed views of a row (Task, Rollout, Judgment, Marker) and the chat messages derived from its steps.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.keys import task_key
from toolkit._util.results import Result
from toolkit.errors import RowError, unknown_name_message
from toolkit.rows._schema import SCHEMA_VERSION, _python_type_word, validate_row

__all__ = ["Task", "Rollout", "Judgment", "Marker", "messages_from_steps", "from_row", "to_row"]

# Compact JSON inside messages: what chat APIs themselves emit for tool arguments, and it
# keeps the derived messages (the largest part of a row on disk) small.
_COMPACT = (",", ":")


def _arguments_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        # Already encoded (an imported row): encoding again is the double-encoding bug.
        return arguments
    if arguments is None:
        return "{}"
    return json.dumps(arguments, ensure_ascii=False, separators=_COMPACT, default=str)


def _result_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, separators=_COMPACT, default=str)


def messages_from_steps(
    prompt: str,
    steps: Sequence[Mapping[str, Any]],
    system_prompt: str | None = None,
    *,
    prefix: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """OpenAI chat messages for a prompt and its steps.

    Order: the system message (when ``system_prompt`` is given), the ``prefix`` messages,
    ``{"role": "user", "content": prompt}``, then one entry per step:

    - ``{"user": text}`` -> ``{"role": "user", "content": text}``
    - ``{"text": text}`` -> ``{"role": "assistant", "content": text}``
    - ``{"tool": name, "arguments": {...}, "result": r, "text"?: t}`` ->
      ``{"role": "assistant", "content": t or None, "tool_calls": [{"id": call_id,
      "type": "function", "function": {"name": name, "arguments": "<JSON string>"}}]}``
      then ``{"role": "tool", "tool_call_id": call_id, "content": r}`` (``r`` as-is when it
      is a string, else compact JSON). ``call_id`` is the step's own, else ``"call_<i>"``
      with ``i`` the step's position, so ids are stable. A step without ``result`` (a call
      the world never answered) gets no tool message.

    One assistant message per tool step: the row does not record which calls were issued in
    parallel, and sequential calls are the reading that never invents concurrency.

    Parameters
    ----------
    prompt : str
        The opening user message.
    steps : sequence of mapping
        The row's steps, in order; each must hold ``"tool"``, ``"user"`` or ``"text"``
        (checked in that order, so a tool step with ``text`` is a tool step). A tool step's
        ``arguments`` that is already a string is used as it is (not encoded twice); a
        missing or None ``arguments`` becomes ``"{}"``.
    system_prompt : str or None, optional
        Content of a leading system message; default None, no system message.
    prefix : sequence of mapping, optional
        Chat messages placed before the prompt, deep-copied as they are (not validated);
        default none.

    Returns
    -------
    list of dict
        New message dicts; the inputs are not changed.

    Raises
    ------
    RowError
        When ``prompt`` is not a string, or a step is not a mapping or has none of
        ``"user"``, ``"tool"`` and ``"text"``.
    """
    if not isinstance(prompt, str):
        raise RowError(f"messages_from_steps: prompt: expected a string, got {_python_type_word(prompt)}")
    messages: list[dict[str, Any]] = []
    if system_prompt is not None:
        messages.append({"role": "system", "content": system_prompt})
    messages.extend(copy.deepcopy(dict(m)) for m in prefix)
    messages.append({"role": "user", "content": prompt})
    for index, step in enumerate(steps):
        if not isinstance(step, Mapping):
            raise RowError(f"steps[{index}]: expected a step (dict), got {_python_type_word(step)}")
        if "tool" in step:
            call_id = step.get("call_id") or f"call_{index}"
            messages.append(
                {
                    "role": "assistant",
                    "content": step.get("text") or None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": step["tool"], "arguments": _arguments_text(step.get("arguments"))},
                        }
                    ],
                }
            )
            if "result" in step:
                messages.append({"role": "tool", "tool_call_id": call_id, "content": _result_text(step["result"])})
        elif "user" in step:
            messages.append({"role": "user", "content": step["user"]})
        elif "text" in step:
            messages.append({"role": "assistant", "content": step["text"]})
        else:
            raise RowError(
                f"steps[{index}]: expected a step with 'user', 'tool' or 'text', got keys "
                + (", ".join(repr(k) for k in list(step)[:6]) or "none")
            )
    return messages


# --------------------------------------------------------------------------------------
# Task / Rollout / Judgment / Marker
# --------------------------------------------------------------------------------------

# The 14 persona / situation-axis fields of docs/design/engine.md §8.
AXIS_FIELDS = (
    "tier", "ask_family", "intent_known", "tool_known", "stance", "tone", "length",
    "ask", "vagueness", "phrasing", "pressure", "user", "texture", "history",
)  # fmt: skip


@dataclass(frozen=True)
class Task(Result):
    """The situation: what the agent was asked, in which world (docs/design/engine.md §8 ``Task``).

    Attribute <- row field: ``prompt``, ``task_id``, ``scenario_id``, ``spec_id``, ``prefix``
    (chat turns before the prompt), ``privileged`` (teacher-only; never written), ``lineage``,
    ``dimensions`` <- ``scenario_dimensions``, ``behaviors`` <- ``seeded`` (planted behaviours),
    ``world`` <- {``seed``, ``tools``}, ``axes`` <- the 14 persona fields (``tier``,
    ``ask_family``, ...), ``extra`` <- the other situation fields (``opener``, ``opening``,
    ``arm``, ``selection_reason``, ``behavior_signature``, ``semantic_cluster``,
    ``semantic_novelty``, ``parent_failure_id``, ``steering``, ``group_id``, ``calibration``).
    ``empty_fields`` names row fields that were present as ``null`` so ``to_row`` restores them.
    """

    prompt: str | None = None
    task_id: str | int | None = None
    scenario_id: str | None = None
    spec_id: str | None = None
    prefix: tuple[dict[str, Any], ...] | None = None
    world: dict[str, Any] = field(default_factory=dict)
    privileged: dict[str, Any] | None = None
    axes: dict[str, Any] = field(default_factory=dict)
    dimensions: dict[str, Any] | None = None
    behaviors: tuple[Any, ...] | None = None
    lineage: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    empty_fields: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        """The task key statistics group by: scenario_id, else task_id, else the prompt."""
        return task_key({"scenario_id": self.scenario_id, "task_id": self.task_id, "prompt": self.prompt or ""})


@dataclass(frozen=True)
class Rollout(Result):
    """One episode (docs/design/engine.md §8 ``Rollout``).

    Attribute <- row field: ``steps``, ``final_text``, ``rollout_id``, ``index`` <-
    ``rollout_index``, ``messages``, ``ledger`` <- ``faults``, ``world_diff``, ``world_state``,
    ``usable``, ``unusable_reason``, ``schema_version``; ``policy`` <- {``model_version``,
    ``policy_version``, ``sampling``, ``writer_model``, ``user_model``}; ``metrics`` <-
    {``logprob``, ``ref_logprob``, ``n_tokens``, ``token_logprobs``, ``logprob_turns``, ``usage``,
    ``finish_reason``, ``ended_by``, ``tools_used``, ``fault_detected``, ``group_cut``,
    ``conversation_id``, ``ts``}; ``extra`` <- every field the schema does not know, so nothing
    is lost. ``task_id`` is the task key (derived; the Task holds the row's own ids).
    """

    steps: tuple[dict[str, Any], ...] = ()
    final_text: str | None = None
    rollout_id: str | None = None
    task_id: str | None = None
    index: int | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    messages: tuple[dict[str, Any], ...] | None = None
    ledger: tuple[Any, ...] | None = None
    world_diff: tuple[Any, ...] | None = None
    world_state: Any = None
    usable: bool | None = None
    unusable_reason: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    schema_version: str | None = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    empty_fields: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Judgment(Result):
    """A scorer's verdict on one rollout (docs/design/engine.md §8 ``Judgment``).

    Attribute <- row field: ``reward``, ``status`` <- ``judge_status`` (ok | missing_reward |
    invalid_result | error | timeout), ``reason``, ``failure_class``; ``scorer`` <-
    {``judge_name``, ``judge_meta``, ``label_source``}; ``extra`` <- {``llm_reward``,
    ``llm_reason``, ``llm_judge_status``, ``qwen_reward``, ``raw_reward``, ``gold_reward``,
    ``gold_labels``, ``quality``}. ``rollout_id`` mirrors the rollout's.
    """

    reward: float | None = None
    status: str | None = None
    reason: str | None = None
    failure_class: str | None = None
    scorer: dict[str, Any] = field(default_factory=dict)
    rollout_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    empty_fields: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Marker(Result):
    """One behaviour measurement on one rollout (row ``markers[name]``; ``evidence`` rides in
    ``marker_evidence[name]``)."""

    name: str
    value: float | None = None
    evidence: Any = None
    rollout_id: str | None = None


# How row fields map onto the objects. DIRECT: row field -> attribute of its own. BUCKETS:
# attribute -> the row fields it holds as a dict keyed by their row names (which keeps explicit
# nulls without bookkeeping). Every property of row-v1.json appears exactly once (tested).
_TASK_DIRECT = {
    "prompt": "prompt", "task_id": "task_id", "scenario_id": "scenario_id", "spec_id": "spec_id",
    "prefix": "prefix", "privileged": "privileged", "lineage": "lineage",
    "scenario_dimensions": "dimensions", "seeded": "behaviors",
}  # fmt: skip
_TASK_BUCKETS = {
    "world": ("seed", "tools"),
    "axes": AXIS_FIELDS,
    "extra": (
        "opener", "opening", "arm", "selection_reason", "behavior_signature", "semantic_cluster",
        "semantic_novelty", "parent_failure_id", "steering", "group_id", "calibration",
    ),
}  # fmt: skip
_ROLLOUT_DIRECT = {
    "steps": "steps", "final_text": "final_text", "rollout_id": "rollout_id",
    "rollout_index": "index", "messages": "messages", "faults": "ledger", "world_diff": "world_diff",
    "world_state": "world_state", "usable": "usable", "unusable_reason": "unusable_reason",
    "schema_version": "schema_version",
}  # fmt: skip
_ROLLOUT_BUCKETS = {
    "policy": ("model_version", "policy_version", "sampling", "writer_model", "user_model"),
    "metrics": (
        "logprob", "ref_logprob", "n_tokens", "token_logprobs", "logprob_turns", "usage", "finish_reason",
        "ended_by", "tools_used", "fault_detected", "group_cut", "conversation_id", "ts",
    ),
}  # fmt: skip
_JUDGMENT_DIRECT = {"reward": "reward", "judge_status": "status", "reason": "reason", "failure_class": "failure_class"}
_JUDGMENT_BUCKETS = {
    "scorer": ("judge_name", "judge_meta", "label_source"),
    "extra": ("llm_reward", "llm_reason", "llm_judge_status", "qwen_reward", "raw_reward", "gold_reward", "gold_labels", "quality"),
}
# Attributes stored as tuples when the row holds a list (frozen objects; lists come back out).
_SEQUENCE_ATTRIBUTES = {"prefix", "behaviors", "steps", "messages", "ledger", "world_diff"}

_JUDGMENT_FIELDS = set(_JUDGMENT_DIRECT) | {f for names in _JUDGMENT_BUCKETS.values() for f in names}
_KNOWN_FIELDS = (
    set(_TASK_DIRECT)
    | {f for names in _TASK_BUCKETS.values() for f in names}
    | set(_ROLLOUT_DIRECT)
    | {f for names in _ROLLOUT_BUCKETS.values() for f in names}
    | _JUDGMENT_FIELDS
    | {"markers", "marker_evidence"}
)


def _split(row: Mapping[str, Any], direct: Mapping[str, str], buckets: Mapping[str, Sequence[str]]):
    values: dict[str, Any] = {}
    empty: set[str] = set()
    for row_field, attribute in direct.items():
        if row_field not in row:
            continue
        value = copy.deepcopy(row[row_field])
        if value is None:
            empty.add(row_field)
        elif attribute in _SEQUENCE_ATTRIBUTES and isinstance(value, list):
            value = tuple(value)
        values[attribute] = value
    for attribute, names in buckets.items():
        values[attribute] = {name: copy.deepcopy(row[name]) for name in names if name in row}
    return values, frozenset(empty)


def _markers_evidence_distributable(row: Mapping[str, Any]) -> bool:
    evidence = row.get("marker_evidence")
    markers = row.get("markers")
    return (
        isinstance(evidence, dict)
        and bool(evidence)
        and isinstance(markers, dict)
        and set(evidence) <= set(markers)
        and all(v is not None for v in evidence.values())
    )


def from_row(row: Mapping[str, Any]) -> tuple[Task, Rollout, Judgment | None, list[Marker]]:
    """Split a row into ``(Task, Rollout, Judgment | None, [Marker, ...])``.

    The row is validated first (:func:`validate_row`). Values are deep-copied, so the objects
    never alias the row. ``Judgment`` is ``None`` when the row carries none of the grading
    fields (``reward``, ``judge_status``, ``reason``, ``failure_class``, ``judge_name``,
    ``judge_meta``, ``label_source``, ``llm_reward``, ``llm_reason``, ``llm_judge_status``,
    ``qwen_reward``, ``raw_reward``, ``gold_reward``, ``gold_labels``, ``quality``). Each ``markers`` entry becomes
    a :class:`Marker`. :func:`to_row` of the result equals the row: every field the schema
    knows, explicit nulls, and unknown fields (kept in ``Rollout.extra``). A version-0 row whose
    fields have unexpected shapes keeps them as they are.

    Parameters
    ----------
    row : mapping
        The row to split; it is not changed.

    Returns
    -------
    tuple
        ``(task, rollout, judgment, markers)``: a :class:`Task`, a :class:`Rollout`, a
        :class:`Judgment` or None, and a list of :class:`Marker` in the order of
        ``row["markers"]`` (empty when the row has none).

    Raises
    ------
    RowError
        When :func:`validate_row` refuses ``row``.
    """
    validate_row(row)
    task_values, task_empty = _split(row, _TASK_DIRECT, _TASK_BUCKETS)
    rollout_values, rollout_empty = _split(row, _ROLLOUT_DIRECT, _ROLLOUT_BUCKETS)
    if "schema_version" not in row:
        rollout_values["schema_version"] = None
    rollout_id = row.get("rollout_id") if isinstance(row.get("rollout_id"), str) else None
    extra = {k: copy.deepcopy(v) for k, v in row.items() if k not in _KNOWN_FIELDS}
    markers: list[Marker] = []
    raw_markers = row.get("markers")
    if isinstance(raw_markers, dict):
        evidence = row.get("marker_evidence") if _markers_evidence_distributable(row) else {}
        if "marker_evidence" in row and not _markers_evidence_distributable(row):
            extra["marker_evidence"] = copy.deepcopy(row["marker_evidence"])
        for name, value in raw_markers.items():
            markers.append(Marker(name=name, value=value, evidence=copy.deepcopy(evidence.get(name)), rollout_id=rollout_id))
        if not raw_markers:
            rollout_empty = rollout_empty | {"markers"}
    else:
        for name in ("markers", "marker_evidence"):
            if name in row:
                extra[name] = copy.deepcopy(row[name])
    task = Task(**task_values, empty_fields=task_empty)
    rollout = Rollout(
        **rollout_values, task_id=task.key, extra=extra, empty_fields=rollout_empty
    )
    judgment = None
    if any(name in row for name in _JUDGMENT_FIELDS):
        judgment_values, judgment_empty = _split(row, _JUDGMENT_DIRECT, _JUDGMENT_BUCKETS)
        judgment = Judgment(**judgment_values, rollout_id=rollout_id, empty_fields=judgment_empty)
    return task, rollout, judgment, markers


def _merge(out: dict[str, Any], obj: Any, direct: Mapping[str, str], buckets: Mapping[str, Sequence[str]], what: str) -> None:
    for row_field, attribute in direct.items():
        value = getattr(obj, attribute)
        if value is None and row_field not in obj.empty_fields:
            continue
        if attribute in _SEQUENCE_ATTRIBUTES and isinstance(value, tuple):
            value = list(value)
        out[row_field] = copy.deepcopy(value)
    for attribute, names in buckets.items():
        bucket = getattr(obj, attribute) or {}
        for key, value in bucket.items():
            if key not in names and attribute != "extra":
                raise RowError(
                    f"to_row: {what}.{attribute} has {unknown_name_message('field', key, names)}"
                )
            out[key] = copy.deepcopy(value)


def to_row(
    task: Task,
    rollout: Rollout,
    judgment: Judgment | None = None,
    markers: Iterable[Marker] | Mapping[str, float | None] = (),
) -> dict[str, Any]:
    """Flatten the four objects back into one row (the inverse of :func:`from_row`).

    The row is validated before it is returned. A field set twice (``Rollout.extra`` holding
    a known field, ``Task.extra`` holding a name that is not a situation field) raises
    :class:`~toolkit.RowError`. Values are deep-copied, so the row never aliases the objects.

    Parameters
    ----------
    task : Task
        The situation fields.
    rollout : Rollout
        The episode fields; its ``schema_version`` (when not None) is written first, and its
        ``extra`` fields ride along as they are.
    judgment : Judgment or None, optional
        The verdict; default None, no grading fields. Its ``rollout_id``, when set, must equal
        ``rollout.rollout_id`` (when that is set too).
    markers : iterable of Marker or mapping, optional
        :class:`Marker` objects, or a plain ``{name: value}`` mapping (names ``str()``-ed, no
        evidence); default none. They become ``markers`` and, for markers with evidence,
        ``marker_evidence``. With no markers the row gets no ``markers`` field, unless the
        rollout recorded an empty one (``"markers"`` in ``rollout.empty_fields``).

    Returns
    -------
    dict
        The row.

    Raises
    ------
    TypeError
        When ``task``, ``rollout`` or ``judgment`` is not of its class, or a marker is not a
        :class:`Marker`.
    RowError
        For a field set twice, a bucket (``Task.world``, ``Rollout.metrics``, ...) or
        ``Judgment.extra`` holding a name it does not own, a ``judgment.rollout_id`` that is
        not the rollout's, a marker name given twice, marker evidence set both on the
        markers and in ``rollout.extra["marker_evidence"]``, or a result :func:`validate_row`
        refuses.
    """
    for value, cls, name in ((task, Task, "task"), (rollout, Rollout, "rollout")):
        if not isinstance(value, cls):
            raise TypeError(f"to_row: {name} must be a {cls.__name__}, got {type(value).__name__}")
    if judgment is not None and not isinstance(judgment, Judgment):
        raise TypeError(f"to_row: judgment must be a Judgment or None, got {type(judgment).__name__}")
    if judgment is not None and None not in (judgment.rollout_id, rollout.rollout_id):
        if judgment.rollout_id != rollout.rollout_id:
            raise RowError(
                f"to_row: judgment.rollout_id {judgment.rollout_id!r} is not rollout.rollout_id "
                f"{rollout.rollout_id!r}; a verdict must belong to the rollout it is flattened with"
            )
    out: dict[str, Any] = {}
    if rollout.schema_version is not None:
        out["schema_version"] = rollout.schema_version
    _merge(out, task, _TASK_DIRECT, _TASK_BUCKETS, "task")
    task_extra = set(task.extra) - set(_TASK_BUCKETS["extra"])
    if task_extra:
        raise RowError(
            f"to_row: task.extra may hold only situation fields; {sorted(task_extra)} belong in "
            "rollout.extra"
        )
    _merge(out, rollout, {k: v for k, v in _ROLLOUT_DIRECT.items() if k != "schema_version"}, _ROLLOUT_BUCKETS, "rollout")
    if judgment is not None:
        _merge(out, judgment, _JUDGMENT_DIRECT, _JUDGMENT_BUCKETS, "judgment")
        judgment_extra = set(judgment.extra) - set(_JUDGMENT_BUCKETS["extra"])
        if judgment_extra:
            raise RowError(f"to_row: judgment.extra may hold only {_JUDGMENT_BUCKETS['extra']}; got {sorted(judgment_extra)}")
    if isinstance(markers, Mapping):
        marker_list = [Marker(name=str(k), value=v) for k, v in markers.items()]
    else:
        marker_list = list(markers)
    for marker in marker_list:
        if not isinstance(marker, Marker):
            raise TypeError(f"to_row: markers must be Marker objects or a {{name: value}} dict, got {type(marker).__name__}")
    if marker_list or "markers" in rollout.empty_fields:
        names = [m.name for m in marker_list]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise RowError(f"to_row: marker {duplicated[0]!r} given more than once")
        out["markers"] = {m.name: copy.deepcopy(m.value) for m in marker_list}
        evidence = {m.name: copy.deepcopy(m.evidence) for m in marker_list if m.evidence is not None}
        if evidence:
            if "marker_evidence" in rollout.extra:
                raise RowError("to_row: marker evidence is set on the markers and in rollout.extra['marker_evidence']")
            out["marker_evidence"] = evidence
    clash = (set(rollout.extra) & (_KNOWN_FIELDS - {"markers", "marker_evidence"})) | (
        set(rollout.extra) & set(out)
    )
    if clash:
        raise RowError(
            f"to_row: rollout.extra holds {sorted(clash)}, which the objects already set; "
            "put known fields on their attribute"
        )
    for key, value in rollout.extra.items():
        out[key] = copy.deepcopy(value)
    validate_row(out)
    return out


