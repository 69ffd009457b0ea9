"""The row-v1 JSON Schema and :func:`validate_row` (a compiled fast check, jsonschema for the messages).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from toolkit.errors import RowError, did_you_mean
from toolkit.rows._io import plain_json

__all__ = ["SCHEMA_VERSION", "SCRUBBED_KEYS", "row_schema", "validate_row"]

SCHEMA_VERSION = "1"

#: Keys removed at any depth on every write: the teacher's context (docs/design/engine.md §8) and the
#: in-memory embedding. A block list, not an allow list, so new fields are never lost silently.
SCRUBBED_KEYS = frozenset({"privileged", "principle", "hidden_state", "reference", "rubric", "vector"})

class _Privileged(dict):
    """A row's teacher-only block: a plain dict to read (``row["privileged"]["..."]``, JSON,
    copies), whose repr names its keys but never shows their values, so printing a row in a
    notebook (``rows[0]``) does not put the answer key on screen (issue 21, row 11)."""

    def __repr__(self) -> str:
        return f"<privileged: {sorted(map(str, self))} (values hidden; read row['privileged'][key])>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict) -> _Privileged:
        import copy

        return _Privileged(copy.deepcopy(dict(self), memo))


# world_state values that carry no information; the engine omits them on write (docs/design/engine.md §8).
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
    has the last word (tests/rows/test_rows.py checks both agree on valid and broken rows).
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

    Parameters
    ----------
    row : Any
        The value to check; anything that is not a mapping fails. It is not changed.

    Returns
    -------
    None
        A valid row returns quietly.

    Raises
    ------
    RowError
        When ``row`` is not a valid row.
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


