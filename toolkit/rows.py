"""The row: toolkit's record of one rollout, and everything that reads or writes it.

A row is a plain ``dict`` that JSON can hold. Schema version 1 (``toolkit/schemas/row-v1.json``,
JSON Schema draft 2020-12) requires ``schema_version: "1"``, ``prompt`` (str), ``steps`` (list)
and ``final_text`` (str); it types the optional fields of the reference row (engine.md §8) and
lets any other field ride along (``additionalProperties: true``). A step is one of::

    {"user": "<text>"}                                   # a simulated-user turn
    {"tool": name, "arguments": {...}, "result": <json>, # a tool call and the world's answer
     "text"?, "call_id"?, "logprob"?, "n_tokens"?, "truncated"?, "input_tokens"?, "output_tokens"?}
    {"text": "<assistant text>", "logprob"?, "n_tokens"?, "truncated"?}

The final answer is itself a text step; ``final_text`` is its copy. ``messages`` (OpenAI chat
format) is derived from ``prompt`` + ``steps`` by :func:`messages_from_steps` and rebuilt on every
write, so it can never disagree with the steps that were scrubbed.

Writing. Only :class:`RowWriter` (streaming, fsync per row) and :func:`save_rows` (whole file,
atomic) write rows, and both call :func:`scrub` first, so the teacher-only ``privileged`` block and
its parts never reach a file.

Reading. :func:`read_rows` reads JSONL; stamped rows are validated, unstamped (version 0) rows
load as they are and their legacy shape is reported (``Rows.shapes``).

Where we differ from the reference engine (engine.md §8, §9.12), and why:

- ``save_rows`` refuses an empty list: a 0-byte JSONL crashed downstream loaders.
- A tool step's ``arguments`` must be an object. A JSON *string* there is the double-encoding
  bug of §9.12; :func:`validate_row` names it instead of writing it.
- NaN and infinities are written as ``null`` (JSON has none; strict loaders refuse them), and
  numpy numbers as plain numbers; a value JSON cannot hold raises instead of being ``str()``-ed.
- ``RowWriter`` repairs a torn final line on open (see its docstring) and ``read_rows`` skips
  one at the end of a file even in strict mode, so a process killed mid-write never makes the
  file unreadable, and every row a ``write()`` call returned for stays readable.
- ``_``-prefixed keys are dropped at the row's top level and in each step (engine scratch), but
  not inside tool arguments or results, where a key such as ``_id`` is the world's real data.
"""

from __future__ import annotations

import copy
import datetime as _datetime
import io
import json
import os
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from toolkit._errors import ConfigError, RowError, did_you_mean, unknown_name_message
from toolkit._keys import task_key
from toolkit._results import Result
from toolkit._rowio import atomic_write_bytes, fsync_directory, plain_json, repair_torn_tail, write_all

__all__ = [
    "SCHEMA_VERSION",
    "SCRUBBED_KEYS",
    "Task",
    "Rollout",
    "Judgment",
    "Marker",
    "Rows",
    "RowWriter",
    "row_schema",
    "validate_row",
    "scrub",
    "messages_from_steps",
    "from_row",
    "to_row",
    "save_rows",
    "read_rows",
    "to_pandas",
]

SCHEMA_VERSION = "1"

#: Keys removed at any depth on every write: the teacher's context (engine.md §8) and the
#: in-memory embedding. A block list, not an allow list, so new fields are never lost silently.
SCRUBBED_KEYS = frozenset({"privileged", "principle", "hidden_state", "reference", "rubric", "vector"})

# world_state values that carry no information; the engine omits them on write (§8).
_EMPTY_WORLD_STATES = ("unspecified", "unknown")


# --------------------------------------------------------------------------------------
# Schema and validation
# --------------------------------------------------------------------------------------

_SCHEMA_CACHE: dict[str, Any] = {}


def row_schema() -> dict[str, Any]:
    """The row-v1 JSON Schema (a fresh copy of the package's ``schemas/row-v1.json``)."""
    if "schema" not in _SCHEMA_CACHE:
        text = resources.files("toolkit").joinpath("schemas/row-v1.json").read_text(encoding="utf-8")
        _SCHEMA_CACHE["schema"] = json.loads(text)
    return copy.deepcopy(_SCHEMA_CACHE["schema"])


def _inline_local_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every ``{"$ref": "#/$defs/x"}`` replaced by the definition itself.

    Same meaning (the row schema has no recursive definitions), but jsonschema no longer
    resolves a reference per step and per message: measured 3.2 ms -> 1.6 ms per row on
    tau-bench airline rows (~50 steps and messages each), where validation is the cost of
    every write and every read.
    """
    definitions = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref")
            if isinstance(reference, str) and reference.startswith("#/$defs/"):
                return inline(copy.deepcopy(definitions[reference[len("#/$defs/") :]]))
            return {key: inline(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return inline(schema)


def _validator():
    if "validator" not in _SCHEMA_CACHE:
        from jsonschema import Draft202012Validator

        schema = row_schema()
        Draft202012Validator.check_schema(schema)
        _SCHEMA_CACHE["validator"] = Draft202012Validator(_inline_local_refs(schema))
    return _SCHEMA_CACHE["validator"]


def _as_draft7(node: Any) -> Any:
    """The inlined row schema in draft-07 words, for fastjsonschema (drafts 4/6/7 only):
    ``prefixItems`` -> tuple ``items`` (+ ``additionalItems`` from ``items``),
    ``dependentRequired`` -> ``dependencies``; everything else the schema uses (type, enum,
    const, anyOf, required, properties, additionalProperties, min/max, minLength, maxLength,
    pattern, minItems, maxItems) means the same in both drafts."""
    if isinstance(node, list):
        return [_as_draft7(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _as_draft7(value) for key, value in node.items() if key not in ("$schema", "$id", "prefixItems", "dependentRequired")}
    if node.get("$schema"):
        out["$schema"] = "http://json-schema.org/draft-07/schema#"
    if "prefixItems" in node:
        out["items"] = _as_draft7(node["prefixItems"])
        if "items" in node:
            out["additionalItems"] = _as_draft7(node["items"])
    if "dependentRequired" in node:
        out["dependencies"] = {key: list(value) for key, value in node["dependentRequired"].items()}
    return out


def _step_kinds(schema: dict[str, Any]) -> tuple[str, ...] | None:
    """The keys of a step's ``anyOf: [{"required": [k]}, ...]`` (one of them must be present),
    or None when the step schema has no such rule."""
    step = ((schema.get("properties") or {}).get("steps") or {}).get("items") or {}
    branches = step.get("anyOf")
    if isinstance(branches, list) and all(set(b) == {"required"} and len(b["required"]) == 1 for b in branches):
        return tuple(b["required"][0] for b in branches)
    return None


def _fast_validator() -> Any:
    """A compiled yes/no check of the row schema, or None without fastjsonschema.

    jsonschema walks the schema per row (measured: ~0.5 ms of a ~0.9 ms RowWriter.write for an
    offline simulate() row, a third of a streamed run's CPU); fastjsonschema compiles it to
    Python once. Its ``anyOf`` raises and formats an error with ``locals()`` for every failed
    branch, which made the step rule (a step names user, tool or text) cost 170 us a row; that
    one rule is checked here in Python instead (~40 us a row in all). It only says valid /
    invalid: an invalid row goes to jsonschema for the field-by-field messages, and jsonschema
    has the last word (tests/test_rows.py checks both agree on valid and broken rows).
    """
    if "fast" not in _SCHEMA_CACHE:
        try:
            import fastjsonschema

            schema = _as_draft7(_inline_local_refs(row_schema()))
            kinds = _step_kinds(schema)
            if kinds is not None:
                del schema["properties"]["steps"]["items"]["anyOf"]
            compiled = fastjsonschema.compile(schema)

            def check(row: Any) -> bool:
                try:
                    compiled(row)
                except fastjsonschema.JsonSchemaException:
                    return False
                steps = row.get("steps")
                if kinds is not None and isinstance(steps, list):
                    return all(any(kind in step for kind in kinds) for step in steps)
                return True

            _SCHEMA_CACHE["fast"] = check
        except Exception:  # noqa: BLE001 -- not installed or cannot compile: jsonschema alone
            _SCHEMA_CACHE["fast"] = None
    return _SCHEMA_CACHE["fast"]


_JSON_TYPE_WORDS = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean",
    "null": "null",
}


def _python_type_word(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _path_text(parts: Iterable[Any]) -> str:
    text = "row"
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _describe_error(error: Any) -> tuple[str, str]:
    """(field path, one-line problem) for a jsonschema ValidationError."""
    path = _path_text(error.absolute_path)
    instance = error.instance
    kind = error.validator
    value = error.validator_value
    if kind == "type":
        wanted = [value] if isinstance(value, str) else list(value)
        expected = " or ".join(_JSON_TYPE_WORDS.get(w, w) for w in wanted)
        message = f"expected {expected}, got {_python_type_word(instance)}"
        if isinstance(instance, bool) and ("number" in wanted or "integer" in wanted):
            message += " (a bool is not a number here; write 1 or 0)"
        elif isinstance(instance, str) and wanted == ["object"] and path.endswith(".arguments"):
            message += " (tool arguments are stored decoded; json.loads the string first)"
        return path, message
    if kind == "required":
        missing = [name for name in value if name not in instance]
        name = missing[0] if missing else value[0]
        message = "required field is missing"
        close = did_you_mean(name, [k for k in instance if isinstance(k, str)], n=1)
        if close:
            message += f" (the row has {close[0]!r}; did you mean {name!r}?)"
        return f"{path}.{name}", message
    if kind == "dependentRequired":
        return f"{path}.arguments", "a tool step needs 'arguments' (an object; {} when the tool takes none)"
    if kind == "anyOf" and isinstance(instance, Mapping):
        keys = ", ".join(repr(k) for k in list(instance)[:6]) or "none"
        return path, f"expected a step with 'user', 'tool' or 'text', got keys {keys}"
    if kind == "const":
        return path, f"expected {json.dumps(value)}, got {instance!r}"
    if kind == "enum":
        allowed = ", ".join(json.dumps(v) for v in value)
        message = f"expected one of {allowed}, got {instance!r}"
        if isinstance(instance, str):
            close = did_you_mean(instance, [v for v in value if isinstance(v, str)], n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        return path, message
    if kind in ("minimum", "maximum"):
        sign = ">=" if kind == "minimum" else "<="
        return path, f"expected a value {sign} {value}, got {instance!r}"
    if kind == "minLength":
        return path, "expected a non-empty string" if value == 1 else f"expected at least {value} characters"
    if kind == "maxLength":
        return path, f"expected at most {value} characters, got {len(instance)}"
    if kind == "pattern" and path.endswith("system_prompt_sha"):
        return path, f"expected 16 lowercase hex characters (sha256(system prompt)[:16]), got {instance!r}"
    if kind in ("minItems", "maxItems"):
        return path, f"expected exactly 2 items (low, high), got {len(instance)}"
    return path, error.message


def _row_problems(row: Any, *, plain: bool = False) -> list[str]:
    """Every problem with ``row`` as 'path: message' strings (empty when it is valid).
    ``plain=True``: the caller already made it plain JSON (:func:`plain_json`)."""
    if not isinstance(row, Mapping):
        return [f"row: expected an object (dict), got {_python_type_word(row)}"]
    if "schema_version" not in row:
        # Version 0: rows written before the stamp load by shape and only need content.
        return [] if len(row) else ["row: expected a non-empty object, got {}"]
    if not plain:
        try:
            # json.dumps (C speed) is the cheap proof that the row is already plain JSON; only a
            # row holding numpy numbers or other objects pays for the converting copy.
            json.dumps(row)
        except (TypeError, ValueError):
            try:
                row = plain_json(row)
            except RowError as error:
                return [str(error)]
    fast = _fast_validator()
    if fast is not None and fast(row):
        return []
    errors = sorted(
        _validator().iter_errors(row),
        key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path], str(e.validator)),
    )
    problems = []
    for error in errors:
        path, message = _describe_error(error)
        text = f"{path}: {message}"
        if text not in problems:
            problems.append(text)
    return problems


# Up to this many problems go into one message: enough to fix a row in one pass, short
# enough to read in a traceback.
_PROBLEMS_SHOWN = 4


def validate_row(row: Any) -> None:
    """Raise :class:`~toolkit.RowError` unless ``row`` is a valid row.

    A stamped row (``schema_version`` present) must match ``row-v1.json``; the message names the
    field path and what was expected, e.g. ``row.steps[2].arguments: expected an object, got
    str``, followed by up to three more problems after ``; also:``. An unstamped (version 0) row
    only needs to be a non-empty dict. numpy numbers are checked as the JSON they become.
    A ``bool`` reward is refused: it is not a score (``True`` would count as 1.0 silently).
    """
    _raise_problems(_row_problems(row))


def _raise_problems(problems: list[str]) -> None:
    if problems:
        message = problems[0]
        if len(problems) > 1:
            shown = problems[1:_PROBLEMS_SHOWN]
            message += "; also: " + "; ".join(shown)
            if len(problems) > _PROBLEMS_SHOWN:
                message += f" (and {len(problems) - _PROBLEMS_SHOWN} more)"
        raise RowError(message)


# --------------------------------------------------------------------------------------
# Scrub and messages
# --------------------------------------------------------------------------------------


# Immutable leaves are returned as they are: deepcopy's dispatch on each of a row's ~200
# strings and numbers was a third of scrub's cost (scrub runs once per landed row).
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _strip_scrubbed(value: Any) -> Any:
    """A copy of ``value`` without SCRUBBED_KEYS in any dict at any depth."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {
            key: item if type(item) in _ATOMS else _strip_scrubbed(item)
            for key, item in value.items()
            if key not in SCRUBBED_KEYS
        }
    if kind is list or isinstance(value, (list, tuple)):
        return [item if type(item) in _ATOMS else _strip_scrubbed(item) for item in value]
    return copy.deepcopy(value)


def _is_scratch(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_")


def scrub(row: Mapping[str, Any]) -> dict[str, Any]:
    """A new row that is safe to write; ``row`` itself is never changed.

    - ``privileged``, ``principle``, ``hidden_state``, ``reference``, ``rubric`` and ``vector``
      are removed from every dict at any depth: inside tool arguments and results, nested
      lists, prefix and messages. Text that merely *contains* JSON (a tool result stored as a
      JSON-encoded string) is not parsed, so a privileged key inside such a string survives;
      store results decoded (as the schema expects) to have them scrubbed.
    - keys starting with ``_`` (engine scratch) are dropped at the row's top level and in each
      step, not inside tool arguments or results (where ``_id`` is real data).
    - ``world_state`` of ``"unspecified"`` / ``"unknown"`` is omitted; ``faults`` keeps only its
      dict entries (fault plans and ledger events).
    - ``messages`` is rebuilt from the scrubbed ``prompt`` / ``prefix`` / ``steps`` with
      :func:`messages_from_steps` when the row has a string prompt and a list of dict steps
      (a leading system message of the old ``messages`` is kept); otherwise (a version-0
      training row that has only ``messages``) the scrubbed messages stay as they are.
    """
    if not isinstance(row, Mapping):
        raise RowError(f"scrub: expected a row (dict), got {_python_type_word(row)}")
    out: dict[str, Any] = {}
    for key, value in row.items():
        if (isinstance(key, str) and key in SCRUBBED_KEYS) or _is_scratch(key):
            continue
        out[key] = _strip_scrubbed(value)
    steps = out.get("steps")
    if isinstance(steps, list):
        out["steps"] = [
            {k: v for k, v in step.items() if not _is_scratch(k)} if isinstance(step, dict) else step
            for step in steps
        ]
    if isinstance(out.get("world_state"), str) and out["world_state"] in _EMPTY_WORLD_STATES:
        del out["world_state"]
    if isinstance(out.get("faults"), list):
        out["faults"] = [fault for fault in out["faults"] if isinstance(fault, dict)]
    prompt, steps = out.get("prompt"), out.get("steps")
    if isinstance(prompt, str) and isinstance(steps, list) and all(_is_step(s) for s in steps):
        old = out.get("messages")
        system_prompt = None
        if isinstance(old, list) and old and isinstance(old[0], dict) and old[0].get("role") == "system":
            system_prompt = old[0].get("content")
        prefix = out.get("prefix") if isinstance(out.get("prefix"), list) else ()
        out["messages"] = messages_from_steps(prompt, steps, system_prompt, prefix=prefix)
    return out


def _is_step(step: Any) -> bool:
    return isinstance(step, Mapping) and any(k in step for k in ("user", "tool", "text"))


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

# The 14 persona / situation-axis fields of engine.md §8.
AXIS_FIELDS = (
    "tier", "ask_family", "intent_known", "tool_known", "stance", "tone", "length",
    "ask", "vagueness", "phrasing", "pressure", "user", "texture", "history",
)  # fmt: skip


@dataclass(frozen=True)
class Task(Result):
    """The situation: what the agent was asked, in which world (engine.md §8 ``Task``).

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
    """One episode (engine.md §8 ``Rollout``).

    Attribute <- row field: ``steps``, ``final_text``, ``rollout_id``, ``index`` <-
    ``rollout_index``, ``messages``, ``ledger`` <- ``faults``, ``world_state``, ``usable``,
    ``unusable_reason``, ``schema_version``; ``policy`` <- {``model_version``,
    ``policy_version``, ``sampling``, ``writer_model``, ``user_model``}; ``metrics`` <-
    {``logprob``, ``ref_logprob``, ``n_tokens``, ``token_logprobs``, ``usage``,
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
    world_state: Any = None
    usable: bool | None = None
    unusable_reason: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    schema_version: str | None = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    empty_fields: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Judgment(Result):
    """A scorer's verdict on one rollout (engine.md §8 ``Judgment``).

    Attribute <- row field: ``reward``, ``status`` <- ``judge_status`` (ok | missing_reward |
    invalid_result | error | timeout), ``reason``, ``failure_class``; ``scorer`` <-
    {``judge_name``, ``judge_meta``, ``label_source``}; ``extra`` <- {``llm_reward``,
    ``llm_reason``, ``qwen_reward``, ``raw_reward``, ``gold_reward``, ``gold_labels``,
    ``quality``}. ``rollout_id`` mirrors the rollout's.
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
    "rollout_index": "index", "messages": "messages", "faults": "ledger",
    "world_state": "world_state", "usable": "usable", "unusable_reason": "unusable_reason",
    "schema_version": "schema_version",
}  # fmt: skip
_ROLLOUT_BUCKETS = {
    "policy": ("model_version", "policy_version", "sampling", "writer_model", "user_model"),
    "metrics": (
        "logprob", "ref_logprob", "n_tokens", "token_logprobs", "usage", "finish_reason",
        "ended_by", "tools_used", "fault_detected", "group_cut", "conversation_id", "ts",
    ),
}  # fmt: skip
_JUDGMENT_DIRECT = {"reward": "reward", "judge_status": "status", "reason": "reason", "failure_class": "failure_class"}
_JUDGMENT_BUCKETS = {
    "scorer": ("judge_name", "judge_meta", "label_source"),
    "extra": ("llm_reward", "llm_reason", "qwen_reward", "raw_reward", "gold_reward", "gold_labels", "quality"),
}
# Attributes stored as tuples when the row holds a list (frozen objects; lists come back out).
_SEQUENCE_ATTRIBUTES = {"prefix", "behaviors", "steps", "messages", "ledger"}

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
    ``judge_meta``, ``label_source``, ``llm_reward``, ``llm_reason``, ``qwen_reward``,
    ``raw_reward``, ``gold_reward``, ``gold_labels``, ``quality``). Each ``markers`` entry becomes
    a :class:`Marker`. :func:`to_row` of the result equals the row: every field the schema
    knows, explicit nulls, and unknown fields (kept in ``Rollout.extra``). A version-0 row whose
    fields have unexpected shapes keeps them as they are.
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

    ``markers`` may also be a plain ``{name: value}`` mapping. The row is validated before it is
    returned. A field set twice (``Rollout.extra`` holding a known field, ``Task.extra`` holding
    a name that is not a situation field) raises :class:`~toolkit.RowError`.
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


# --------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------


def _prepare(row: Any, where: str = "row") -> dict[str, Any]:
    """plain JSON -> validated -> scrubbed (the one path every writer takes)."""
    if not isinstance(row, Mapping):
        raise RowError(f"{where}: expected a row (dict), got {_python_type_word(row)}")
    plain = plain_json(row, "row")
    try:
        _raise_problems(_row_problems(plain, plain=True))  # plain already: no second json.dumps
    except RowError as error:
        if where == "row":
            raise
        raise RowError(f"{where}: {error}") from None
    return scrub(plain)


def _encode(row: dict[str, Any]) -> bytes:
    # ensure_ascii=False keeps non-English prompts readable in the file (UTF-8 on disk);
    # compact separators cut about 8% of a typical row's bytes.
    return (json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")


_WRITER_MODES = {"a": "ab", "w": "wb", "x": "xb"}
_FSYNC_POLICIES = ("row", "interval")


class RowWriter:
    """Stream rows to a JSONL file so that a crash never loses a row reported written.

    ``write(row)`` turns numpy numbers into plain ones (NaN into ``null``), validates, scrubs,
    appends the row as ONE line with a single unbuffered write, then ``os.fsync``\\ s before it
    returns the row as written. A process killed at any instant therefore leaves every row
    whose ``write()`` returned intact; at worst the file ends in a partial line.

    Torn tail, decided here: opening an existing file in ``"a"`` mode whose last byte is not a
    newline inspects the last line. If it parses as a JSON object it only lacked its newline
    (a hand-written file), so a newline is added and the row kept; otherwise it is the torn
    fragment of a ``write()`` that never returned, and it is truncated with a warning, so the
    next row starts on a clean line and the file reads back without error. ``.repaired`` says
    which happened (``None``, ``"newline_added"``, ``"truncated"``).

    ``mode``: ``"a"`` append (default), ``"w"`` truncate, ``"x"`` fail if the file exists.
    Thread-safe: rows are prepared in the calling thread and appended under a lock. Use as a
    context manager, or call ``close()``.

    ``fsync``: durability against an OS crash or power loss (a killed *process* never needs it:
    the row is in the kernel once its single ``write(2)`` returns, and the kernel writes it out
    whatever happens to the process).

    * ``"row"`` (default, what issue 5 names): ``os.fsync`` before every ``write()`` returns;
      a row ``write()`` returned for survives an OS crash too. Costs one disk flush per row
      (measured 3-5 ms on this machine's disk, more than the rest of the row's cost).
    * ``"interval"``: the row still reaches the kernel before ``write()`` returns (same
      kill-safety, byte for byte), but ``os.fsync`` runs at most every ``fsync_interval``
      seconds, at a ``write()`` that finds the last fsync older than that, and at
      ``close()``. After an OS crash or power loss, the rows written since the last fsync may
      be missing: those of at most the last ``fsync_interval`` seconds before the final
      ``write()`` (if writing pauses without ``close()``, the kernel's own writeback, ~30 s on
      Linux, covers the tail). ``tk.simulate(output=...)`` uses this with 1 s.

    ``fsync_interval``: seconds, in (0, 60]; only used with ``fsync="interval"``.
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "a", *, fsync: str = "row", fsync_interval: float = 1.0) -> None:
        if mode not in _WRITER_MODES:
            raise ConfigError(unknown_name_message("RowWriter mode", mode, _WRITER_MODES))
        if fsync not in _FSYNC_POLICIES:
            raise ConfigError(unknown_name_message("RowWriter fsync", str(fsync), _FSYNC_POLICIES))
        if isinstance(fsync_interval, bool) or not isinstance(fsync_interval, (int, float)) or not 0 < fsync_interval <= 60:
            raise ConfigError(f"RowWriter fsync_interval must be seconds in (0, 60]; got {fsync_interval!r}")
        self.fsync = fsync
        self.fsync_interval = float(fsync_interval)
        self._last_fsync = time.monotonic()
        self.path = Path(path)
        self.mode = mode
        self.count = 0
        self.repaired: str | None = None
        self._lock = threading.Lock()
        directory = self.path.parent if str(self.path.parent) else Path(".")
        directory.mkdir(parents=True, exist_ok=True)
        existed = self.path.exists()
        if mode == "a" and existed:
            self.repaired = repair_torn_tail(self.path)
        # buffering=0: one os-level write per row, nothing held back in a Python buffer.
        self._file: io.FileIO | None = open(self.path, _WRITER_MODES[mode], buffering=0)  # noqa: SIM115
        if not existed:
            fsync_directory(directory)

    def write(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Validate, scrub and durably append ``row``; return the row as written."""
        clean = _prepare(row)
        data = _encode(clean)
        with self._lock:
            if self._file is None:
                raise RowError(f"RowWriter for {self.path} is closed; open a new one to write more rows")
            write_all(self._file.fileno(), data)
            if self.fsync == "row":
                os.fsync(self._file.fileno())
            else:
                now = time.monotonic()
                if now - self._last_fsync >= self.fsync_interval:
                    os.fsync(self._file.fileno())
                    self._last_fsync = now
            self.count += 1
        return clean

    def write_many(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Write each row in turn (each durable on its own); return how many were written."""
        written = 0
        for row in rows:
            self.write(row)
            written += 1
        return written

    @property
    def closed(self) -> bool:
        return self._file is None

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                try:
                    os.fsync(self._file.fileno())
                finally:
                    self._file.close()
                    self._file = None

    def __enter__(self) -> RowWriter:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"RowWriter({str(self.path)!r}, mode={self.mode!r}, fsync={self.fsync!r}, count={self.count}, {state})"


def _sidecar_path(path: Path) -> Path:
    name = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(name + ".meta.json")


_RESERVED_META = ("schema_version", "n_rows", "created", "toolkit_version", "system_prompt_shas")


def save_rows(
    rows: Any,
    path: str | os.PathLike[str],
    meta: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``rows`` to ``path`` as JSONL, atomically, with a ``.meta.json`` sidecar.

    Every row is validated and scrubbed (the same path as :class:`RowWriter`); the file is
    written to a temporary file in the same directory, fsync'ed and ``os.replace``\\ d over
    ``path``, so a reader sees the old file or the complete new one. The sidecar
    ``<name>.meta.json`` (``run.jsonl`` -> ``run.meta.json``; other names get ``.meta.json``
    appended) holds ``schema_version``, ``n_rows``, ``created`` (ISO 8601, UTC),
    ``toolkit_version``, ``system_prompt_shas`` (the distinct ``lineage.system_prompt_sha``
    values) and every key of ``meta`` (made JSON-safe). An empty ``rows`` raises
    :class:`~toolkit.RowError`: a 0-byte JSONL crashes loaders. Returns the JSONL path.
    """
    from toolkit._coerce import as_row_list
    from toolkit._results import json_safe
    from toolkit._version import __version__

    path = Path(path)
    row_list = as_row_list(rows)
    if not row_list:
        raise RowError(
            f"save_rows: no rows to write to {path}; refusing to create an empty file "
            "(a 0-byte JSONL crashes loaders). Check that the run produced rows."
        )
    if meta is not None and not isinstance(meta, Mapping):
        raise TypeError(f"save_rows: meta must be a dict or None, got {type(meta).__name__}")
    clash = sorted(set(meta or {}) & set(_RESERVED_META))
    if clash:
        raise RowError(f"save_rows: meta key {clash[0]!r} is written by save_rows itself; rename it")
    prepared = [_prepare(row, f"rows[{index}]") for index, row in enumerate(row_list)]
    data = b"".join(_encode(row) for row in prepared)
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    shas = sorted(
        {
            row["lineage"]["system_prompt_sha"]
            for row in prepared
            if isinstance(row.get("lineage"), dict) and row["lineage"].get("system_prompt_sha")
        }
    )
    sidecar = {
        "schema_version": SCHEMA_VERSION,
        "n_rows": len(prepared),
        "created": _datetime.datetime.now(_datetime.timezone.utc).isoformat(timespec="seconds"),
        "toolkit_version": __version__,
        "system_prompt_shas": shas,
        **json_safe(dict(meta or {})),
    }
    atomic_write_bytes(path, data)
    atomic_write_bytes(_sidecar_path(path), (json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return path


# --------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------


class Rows(list):
    """A list of row dicts plus what the reader saw.

    ``skipped``: lines not loaded (malformed lines under ``strict=False``, and a torn final
    line); ``skipped_lines``: their 1-based line numbers; ``torn_tail``: the last line had no
    newline and did not parse (a writer killed mid-line; skipped with a warning even when
    strict); ``shapes``: ``{shape: count}`` over loaded rows, shape one of ``"v1"`` (stamped),
    ``"engine"`` (``scenario_id``), ``"training"`` (``messages`` without ``steps`` /
    ``final_text``), ``"platform"`` (``tool_trace``), ``"otel"`` (``conversation_id``),
    ``"hf_flat"`` (``*_json`` string columns) or ``"v0"`` (unstamped, none of those);
    ``path``: the file read (``None`` for a stream); ``meta``: its ``.meta.json`` sidecar, if
    any. Slicing returns a plain list.
    """

    def __init__(self, rows: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(rows)
        self.skipped = 0
        self.skipped_lines: list[int] = []
        self.torn_tail = False
        self.shapes: dict[str, int] = {}
        self.path: Path | None = None
        self.meta: dict[str, Any] | None = None

    def __repr__(self) -> str:
        extra = f", skipped={self.skipped}" if self.skipped else ""
        return f"Rows(n={len(self)}, shapes={self.shapes}{extra})"


def _legacy_shape(row: Mapping[str, Any]) -> str:
    """The version-0 shape of an unstamped row, detected by key (engine.md §8)."""
    if any(isinstance(k, str) and k.endswith("_json") and isinstance(v, str) for k, v in row.items()):
        return "hf_flat"
    if "conversation_id" in row:
        return "otel"
    if "tool_trace" in row:
        return "platform"
    if "messages" in row and "steps" not in row and "final_text" not in row:
        return "training"
    if "scenario_id" in row:
        return "engine"
    return "v0"


def _lines(source: Any) -> tuple[Iterator[bytes | str], str, Path | None, Any]:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"read_rows: no such file {str(path)!r}")
        handle = open(path, "rb")  # noqa: SIM115 - closed by the caller
        return iter(handle), str(path), path, handle
    if hasattr(source, "read"):
        name = str(getattr(source, "name", "<stream>"))
        return iter(source.readline, source.read(0)), name, None, None
    raise TypeError(
        f"read_rows: expected a path or an open file, got {type(source).__name__}"
    )


def read_rows(path_or_file: Any, strict: bool = True) -> Rows:
    """Read a JSONL rows file (a path, or an open text or binary file).

    One JSON object per line; blank lines are ignored. Stamped rows are validated; unstamped
    (version 0) rows load as they are and their shape is counted in ``Rows.shapes``.

    A malformed line (not JSON, not an object, an empty object, or a stamped row that fails
    the schema) raises :class:`~toolkit.RowError` naming the file and line number; with
    ``strict=False`` it is skipped, counted in ``.skipped`` / ``.skipped_lines`` and one
    warning names them. A final line without a newline that does not parse is a torn write
    (a process killed mid-line): it is skipped with a warning even when ``strict``, and
    ``.torn_tail`` is set, because every row written before it is intact.
    """
    lines, name, path, handle = _lines(path_or_file)
    rows = Rows()
    rows.path = path
    malformed: list[int] = []
    try:
        for number, raw in enumerate(lines, start=1):
            unterminated = not (raw.endswith(b"\n") if isinstance(raw, bytes) else raw.endswith("\n"))
            problem = None
            try:
                text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            except UnicodeDecodeError as error:
                text, problem = None, f"not UTF-8 ({error.reason} at byte {error.start})"
            if text is not None and not text.strip():
                continue
            row = None
            parse_failed = text is None
            if text is not None:
                try:
                    row = json.loads(text)
                except ValueError as error:
                    parse_failed = True
                    problem = f"not valid JSON ({error.msg} at column {error.colno})"
            if row is not None and not isinstance(row, dict):
                problem = f"expected one JSON object per line, got {_python_type_word(row)}"
                if number == 1 and isinstance(row, list):
                    problem += " (a JSON list file? for tau-bench results use tk.read_tau_bench)"
            elif isinstance(row, dict):
                try:
                    validate_row(row)
                except RowError as error:
                    problem = str(error)
            if problem is None:
                rows.append(row)
                shape = "v1" if "schema_version" in row else _legacy_shape(row)
                rows.shapes[shape] = rows.shapes.get(shape, 0) + 1
                continue
            if unterminated and parse_failed:
                rows.torn_tail = True
                rows.skipped += 1
                rows.skipped_lines.append(number)
                warnings.warn(
                    f"read_rows: skipped a torn final line {number} in {name} (no newline, "
                    "not complete JSON: a writer stopped mid-line); the rows before it are intact",
                    UserWarning,
                    stacklevel=2,
                )
                continue
            if strict:
                raise RowError(f"{name} line {number}: {problem}")
            malformed.append(number)
            rows.skipped += 1
            rows.skipped_lines.append(number)
    finally:
        if handle is not None:
            handle.close()
    if malformed:
        shown = ", ".join(str(n) for n in malformed[:10]) + (", ..." if len(malformed) > 10 else "")
        warnings.warn(
            f"read_rows: skipped {len(malformed)} malformed line(s) in {name} (line {shown}); "
            "read with strict=True to see the first problem",
            UserWarning,
            stacklevel=2,
        )
    if path is not None:
        sidecar = _sidecar_path(path)
        if sidecar.exists():
            try:
                rows.meta = json.loads(sidecar.read_text(encoding="utf-8"))
            except ValueError:
                warnings.warn(f"read_rows: sidecar {sidecar} is not valid JSON; .meta is None", UserWarning, stacklevel=2)
    return rows


# --------------------------------------------------------------------------------------
# pandas
# --------------------------------------------------------------------------------------


def to_pandas(rows: Any):
    """A DataFrame with one row per rollout.

    Scalar fields become columns as they are. Dict fields are flattened ONE level with a dot
    (``markers.hedging``, ``lineage.eval_run``, ``usage.input_tokens``); deeper dicts and every
    list (``steps``, ``messages``, ``faults``) stay as Python objects in their cell, since a
    table cannot hold a conversation. Derived columns: ``task`` (the task key: scenario_id,
    else task_id, else the prompt; first column), ``n_steps`` and ``n_tool_calls`` (steps with
    a ``tool``). A row field that is itself named ``task`` is kept as ``task (row field)``.
    Missing fields are pandas' NaN, as usual in a DataFrame.
    """
    import pandas as pd

    from toolkit._coerce import as_row_list

    row_list = as_row_list(rows)
    frame = pd.json_normalize(row_list, max_level=1) if row_list else pd.DataFrame()
    if "task" in frame.columns:
        frame = frame.rename(columns={"task": "task (row field)"})
    steps = [row.get("steps") for row in row_list]
    frame.insert(0, "task", [task_key(row) for row in row_list])
    frame["n_steps"] = [len(s) if isinstance(s, list) else 0 for s in steps]
    frame["n_tool_calls"] = [
        sum(1 for step in s if isinstance(step, Mapping) and "tool" in step) if isinstance(s, list) else 0
        for s in steps
    ]
    return frame

