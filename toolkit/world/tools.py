"""Tool schemas: one normalised shape (:class:`ToolSpec`) for every input format.

Accepted tool shapes:

* OpenAI function calling: ``{"type": "function", "function": {"name", "description",
  "parameters"}}``;
* the bare function dict: ``{"name", "description", "parameters"}``;
* Anthropic: ``{"name", "description", "input_schema"}``;
* an existing :class:`ToolSpec`.

and the containers that hold them: a list (any mix of shapes), one tool dict, a dict of tools
keyed by name (``{"get_booking": schema}``: each value a tool of the shapes above, whose name
may be left out, or just its parameters schema ``{"type": "object", "properties": ...}``),
``{"tools": [...], "description": "..."}`` (a tool file's wrapper), or a path to a JSON file
holding any of these.

``"kind": "human"`` (top level, or inside the ``function`` dict) marks a *human tool*: its
call is answered by the simulated person, not by the mock world (a question to the customer,
a confirmation; docs/design/engine.md §4.4). It is this toolkit's key: model APIs refuse it,
so send :meth:`ToolSpec.to_openai` / :meth:`ToolSpec.to_anthropic`, never the raw entry. The
shipped ``datasets/tools/airline_support.json`` holds five world tools and one human tool,
``ask_passenger`` (``datasets/README.md``).

Where we differ from the reference design, whileai-sdk's engine (docs/design/engine.md §2.1, §4): it accepts tool
dicts loosely and fails later, inside the world, on a missing ``name`` or a non-object
schema. We check every schema once, up front, with the JSON-Schema meta-schema
(``jsonschema``'s Draft 2020-12 checker) plus the few rules tool calling adds (an object at
the top, ``required`` naming declared properties, a name the providers accept), and raise
:class:`~toolkit.SchemaError` naming the tool and the field path. A tool dict given with a
misspelled key (``"paramters"``) is refused with the nearest valid key rather than silently
becoming a tool without parameters.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit._util.hashing import canonical_json
from toolkit.errors import SchemaError, unknown_name_message

__all__ = ["ToolSpec", "normalize_tools", "TOOL_KINDS", "REFERENCE_PARAMETER_PATTERN", "DESTRUCTIVE_WORDS", "DESTRUCTIVE_NAME"]

#: What answers a tool call: the sandbox world ("function") or the simulated person ("human").
TOOL_KINDS = ("function", "human")

# OpenAI's documented constraint on function names (Anthropic's is the same pattern); a
# name outside it is refused by both APIs at request time, so refuse it here, up front.
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: A parameter whose name matches this pattern carries a reference to an entity (reference
#: docs/design/engine.md §3.1: ``id``, ``*_id``, path, file, name, key, ref, number, repo, asin, sku;
#: we add ``code`` and ``locator`` because airline and logistics tools name ids that way).
REFERENCE_PARAMETER_PATTERN = re.compile(
    r"(^|_)(id|ids|path|file|filename|name|key|ref|reference|number|no|repo|asin|sku|code"
    r"|locator)$",
    re.IGNORECASE,
)

#: Words that mark a tool as destroying something a person should confirm first, matched
#: anywhere in the tool name, case-insensitively ("cancel_booking", "hardDelete"). One list
#: for every reader of "destructive": the conduct grader's confirmation check, the seeded
#: policy's confirmation question, the goals' before-minefields and the tools a
#: prompt_injection asks for. They must agree: a tool one of them reads as destructive and
#: another not would make the graders disagree on the same row. Substring on purpose, as all
#: four read it: "refund_payment" and "dropTable" are meant to match.
DESTRUCTIVE_WORDS = ("cancel", "delete", "remove", "refund", "destroy", "purge", "drop")
#: :data:`DESTRUCTIVE_WORDS` as one case-insensitive pattern (``DESTRUCTIVE_NAME.search(name)``).
DESTRUCTIVE_NAME = re.compile("|".join(DESTRUCTIVE_WORDS), re.IGNORECASE)

_OPENAI_KEYS = {"type", "function", "kind"}
_FUNCTION_KEYS = {"name", "description", "parameters", "kind", "strict"}
_ANTHROPIC_KEYS = {"name", "description", "input_schema", "kind", "cache_control", "type"}


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class ToolSpec:
    """One tool, normalised.

    Fields: ``name``; ``description`` ("" when none was given); ``parameters`` (a JSON
    Schema object, deep-copied from the input; treat as read-only); ``kind`` ("function" or
    "human").
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    kind: str = "function"

    def __post_init__(self) -> None:
        _check_spec(self.name, self.description, self.parameters, self.kind)

    # -- views ---------------------------------------------------------------------------
    @property
    def properties(self) -> dict[str, Any]:
        return dict(self.parameters.get("properties") or {})

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(self.parameters.get("required") or ())

    @property
    def is_human(self) -> bool:
        return self.kind == "human"

    # words, reference_parameters and the hash are read on every tool call by the world,
    # the seeded agent and the writer; the spec is frozen, so each is computed once
    # (measured: 0.2 ms of the ~2.7 ms an offline row costs before caching).
    @functools.cached_property
    def words(self) -> tuple[str, ...]:
        """The tool name split into lower-case words (``getBooking`` -> ("get", "booking"))."""
        return tuple(w for w in re.split(r"[_\-\s.]+", _camel_to_snake(self.name)) if w)

    @functools.cached_property
    def reference_parameters(self) -> tuple[str, ...]:
        """Top-level parameter names that carry an entity reference (ids, paths, keys)."""
        matched = [p for p in self.properties if REFERENCE_PARAMETER_PATTERN.search(p)]
        # A "name" beside a real id is data to set (update_profile(user_id, name=...)), not a
        # second key that must already exist; it is a reference only when it is the sole one.
        strong = [p for p in matched if not re.search(r"(^|_)name$", p, re.IGNORECASE)]
        return tuple(strong) if strong else tuple(matched)

    # -- exports -------------------------------------------------------------------------
    def to_openai(self) -> dict[str, Any]:
        """OpenAI chat-completions ``tools`` entry (``kind`` is not sent: the API refuses it)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(dict(self.parameters)),
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        """Anthropic messages ``tools`` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": copy.deepcopy(dict(self.parameters)),
        }

    def to_dict(self) -> dict[str, Any]:
        """The bare function dict plus ``kind`` (round-trips through :func:`normalize_tools`)."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": copy.deepcopy(dict(self.parameters)),
            "kind": self.kind,
        }

    def __hash__(self) -> int:  # parameters is a dict; hash the canonical form instead
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash((self.name, self.description, json.dumps(self.parameters, sort_keys=True), self.kind))

    @functools.cached_property
    def _openai_entry(self) -> dict[str, Any]:
        return self.to_openai()


def _where(path: Iterable[Any]) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "<root>"


# Parameter schemas already checked against the meta-schema, by canonical JSON: a tool set
# is normalised several times per simulate() and again per run, and the check cost ~2 ms a
# tool (11 ms of a 20 ms set-up for six tools). Bounded.
_VALID_SCHEMAS: set[str] = set()


def _check_spec(name: Any, description: Any, parameters: Any, kind: Any) -> None:
    if not isinstance(name, str) or not _NAME_PATTERN.match(name):
        raise SchemaError(
            f"tool {name!r}: field 'name' must be 1-64 characters of letters, digits, '_' or '-'"
            " (the pattern OpenAI and Anthropic accept)"
        )
    label = f"tool {name!r}"
    if not isinstance(description, str):
        raise SchemaError(f"{label}: field 'description' must be a string, got {type(description).__name__}")
    if kind not in TOOL_KINDS:
        raise SchemaError(f"{label}: field 'kind': " + unknown_name_message("tool kind", str(kind), TOOL_KINDS))
    if not isinstance(parameters, Mapping):
        raise SchemaError(f"{label}: field 'parameters' must be a JSON Schema object (a dict), got {type(parameters).__name__}")
    if parameters.get("type", "object") != "object":
        raise SchemaError(
            f"{label}: field 'parameters.type' must be 'object' (tool arguments are a JSON object), "
            f"got {parameters.get('type')!r}"
        )
    _check_plain_json(label, parameters, "parameters")
    key = canonical_json(parameters)
    if key not in _VALID_SCHEMAS:
        # Imported here, not at the top: importing jsonschema costs ~1 s when rfc3987-syntax is
        # installed (JupyterLab pulls it in; it compiles a grammar at import), 40% of
        # `import toolkit`; statistics-only sessions never need it.
        import jsonschema

        try:
            jsonschema.Draft202012Validator.check_schema(dict(parameters))
        except jsonschema.SchemaError as error:
            raise SchemaError(
                f"{label}: field 'parameters.{_where(error.absolute_path)}' is not valid JSON Schema: {error.message}"
            ) from None
        if len(_VALID_SCHEMAS) >= 4096:
            _VALID_SCHEMAS.clear()
        _VALID_SCHEMAS.add(key)
    properties = parameters.get("properties", {})
    for prop_name, prop_schema in properties.items():
        if not isinstance(prop_schema, Mapping):
            raise SchemaError(f"{label}: field 'parameters.properties.{prop_name}' must be a schema dict")
    _check_required(label, parameters, "parameters")


def _check_plain_json(label: str, value: Any, where: str) -> None:
    """Refuse a schema value JSON cannot hold (a date or a set as a ``default``, a NaN), naming
    the tool and the field: it used to pass here and fail mid-planning with a bare TypeError
    that named neither, at a point that depended on the budget (issue 21, row 10)."""
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise SchemaError(f"{label}: field '{where}' is {value!r}, which JSON cannot hold; use a finite number or null")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SchemaError(f"{label}: field '{where}' has the key {key!r} ({type(key).__name__}); JSON object keys are strings")
            _check_plain_json(label, item, f"{where}.{key}")
        return
    if isinstance(value, (list, tuple)):
        for position, item in enumerate(value):
            _check_plain_json(label, item, f"{where}[{position}]")
        return
    raise SchemaError(
        f"{label}: field '{where}' is a {type(value).__name__} ({value!r:.80}), which is not JSON; "
        "tool schemas are sent to the model as JSON: use a string (an ISO date), a list or a number"
    )


def _check_required(label: str, schema: Mapping[str, Any], where: str) -> None:
    """``required`` must name declared properties, at every object level (the providers
    accept a dangling name, but the model then never learns what the field is)."""
    properties = schema.get("properties") or {}
    for required_name in schema.get("required") or ():
        if properties and required_name not in properties:
            raise SchemaError(
                f"{label}: field '{where}.required' names {required_name!r}, which is not in "
                f"'{where}.properties' ({', '.join(sorted(properties)) or 'none declared'})"
            )
    for prop_name, prop_schema in properties.items():
        if isinstance(prop_schema, Mapping):
            if prop_schema.get("type") == "object" or "properties" in prop_schema:
                _check_required(label, prop_schema, f"{where}.properties.{prop_name}")
            items = prop_schema.get("items")
            if isinstance(items, Mapping) and (items.get("type") == "object" or "properties" in items):
                _check_required(label, items, f"{where}.properties.{prop_name}.items")


def _check_keys(label: str, given: Iterable[str], allowed: set[str], where: str) -> None:
    for key in given:
        if key not in allowed:
            raise SchemaError(f"{label}: {where}" + unknown_name_message("key", key, allowed))


def _one_tool(raw: Any, position: int) -> ToolSpec:
    if isinstance(raw, ToolSpec):
        return raw
    if not isinstance(raw, Mapping):
        raise SchemaError(
            f"tool at position {position}: expected a dict (OpenAI, bare function or Anthropic "
            f"shape) or a ToolSpec, got {type(raw).__name__}"
        )
    function_part = raw.get("function")
    label_name = raw.get("name") or (function_part.get("name") if isinstance(function_part, Mapping) else None)
    label = f"tool {label_name!r}" if label_name else f"tool at position {position}"
    kind = raw.get("kind", "function")
    if "function" in raw or raw.get("type") == "function":
        _check_keys(label, raw, _OPENAI_KEYS, "")
        function = raw.get("function")
        if not isinstance(function, Mapping):
            raise SchemaError(f"{label}: field 'function' must be a dict with 'name', 'description', 'parameters'")
        _check_keys(label, function, _FUNCTION_KEYS, "field 'function': ")
        if "name" not in function:
            raise SchemaError(f"{label}: field 'function.name' is missing")
        kind = function.get("kind", kind)
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        description = function.get("description", "")
        name = function["name"]
    elif "input_schema" in raw:
        _check_keys(label, raw, _ANTHROPIC_KEYS, "")
        if "name" not in raw:
            raise SchemaError(f"{label}: field 'name' is missing")
        parameters = raw["input_schema"]
        description = raw.get("description", "")
        name = raw["name"]
    else:
        _check_keys(label, raw, _FUNCTION_KEYS | {"type"}, "")
        if "name" not in raw:
            raise SchemaError(f"{label}: field 'name' is missing")
        parameters = raw.get("parameters", {"type": "object", "properties": {}})
        description = raw.get("description", "")
        name = raw["name"]
    if description is None:
        description = ""
    if isinstance(parameters, Mapping) and "properties" in parameters and "type" not in parameters:
        # A schema with properties but no "type" is common in hand-written tool lists; both
        # providers read it as an object schema, so do we.
        parameters = {"type": "object", **parameters}
    return ToolSpec(
        name=name,
        description=description,
        parameters=copy.deepcopy(dict(parameters)) if isinstance(parameters, Mapping) else parameters,
        kind=kind,
    )


#: How tools may be given, for the message that refuses anything else.
_ACCEPTED_SHAPES = (
    "a list of tool dicts (OpenAI {'type': 'function', 'function': {...}}, bare {'name', 'description', "
    "'parameters'} or Anthropic {'name', 'input_schema'}) or ToolSpecs; one such dict; a dict of tools keyed by "
    "name ({'get_booking': schema}, each value one of those dicts or a parameters schema {'type': 'object', "
    "'properties': ...}); {'tools': [...]}; or a path to a JSON file holding one of these"
)
# Keys only a single tool dict has at its top level: a dict holding one is a tool, not tools
# keyed by name (a tool named like one of them goes in a list).
_SINGLE_TOOL_KEYS = frozenset({"name", "function", "input_schema", "parameters"})
_WRAPPER_KEYS = {"tools", "description"}


def _tools_of_mapping(tools: Mapping[str, Any]) -> list[Any]:
    """The tools a dict holds: itself (one tool dict), its ``"tools"`` list (a tool file's
    wrapper), or its values named by their keys (tools keyed by name)."""
    if isinstance(tools.get("tools"), (list, tuple)):
        _check_keys("tools dict", tools, _WRAPPER_KEYS, "")
        return list(tools["tools"])
    if _SINGLE_TOOL_KEYS & set(tools) or tools.get("type") == "function":
        return [tools]
    odd = next(((key, value) for key, value in tools.items() if not isinstance(value, (Mapping, ToolSpec))), None)
    if odd is not None:
        raise SchemaError(
            f"tools given as a dict is neither one tool nor tools keyed by name (key {odd[0]!r} holds a "
            f"{type(odd[1]).__name__}); accepted: {_ACCEPTED_SHAPES}"
        )
    return [_keyed_tool(str(key), value) for key, value in tools.items()]


def _keyed_tool(key: str, value: Mapping[str, Any] | ToolSpec) -> Mapping[str, Any] | ToolSpec:
    """The tool dict of ``tools[key]``, named by ``key``; a name the value gives must agree."""
    if isinstance(value, ToolSpec):
        named, entry = value.name, value
    elif "function" in value or value.get("type") == "function":
        function = value.get("function")
        if not isinstance(function, Mapping):
            return value  # _one_tool names the broken field
        named = function.get("name", key)
        entry = {**value, "function": {**function, "name": named}}
    elif ("properties" in value or value.get("type") == "object") and not _SINGLE_TOOL_KEYS & set(value):
        named, entry = key, {"name": key, "parameters": value}  # just the parameters schema
    else:
        # a function or Anthropic dict (possibly without its name); anything else lands here
        # too, so a misspelled key ("paramters") gets its did-you-mean from _one_tool
        named = value.get("name", key)
        entry = {**value, "name": named}
    if named != key:
        raise SchemaError(f"tools[{key!r}]: the key names the tool {key!r} but its field 'name' says {named!r}; use one name")
    return entry


def normalize_tools(tools: Any) -> list[ToolSpec]:
    """Normalise tools to :class:`ToolSpec` objects (order kept).

    Parameters
    ----------
    tools : list, tuple, mapping, ToolSpec, str, os.PathLike or None
        A list/tuple of tool dicts (OpenAI, bare function, Anthropic shapes, mixed) or
        ToolSpecs; a single tool dict or ToolSpec; a dict of tools keyed by name
        (``{"get_booking": schema}``: each value a tool dict, whose ``name`` may be left out
        and must match the key when given, or only the parameters schema
        ``{"type": "object", "properties": ...}``; ``{}`` is no tools); ``{"tools": [...]}``
        (optionally with a ``"description"``); or a path to a JSON file holding any of
        these. A dict counts as one tool when it has ``name``, ``function``,
        ``input_schema`` or ``parameters`` at the top (or ``"type": "function"``), so a tool
        named like one of those goes in a list. None gives ``[]``.

    Returns
    -------
    list of ToolSpec

    Raises
    ------
    SchemaError
        Naming the tool and the field for a malformed schema, for two tools with the same
        name, and for a key of a dict keyed by name that disagrees with its tool's ``name``;
        also for a missing or invalid JSON file, or ``tools`` of another shape (the message
        lists the accepted ones).
    """
    if isinstance(tools, (str, os.PathLike)):
        path = Path(tools)
        try:
            tools = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SchemaError(f"tools file {str(path)!r} does not exist") from None
        except json.JSONDecodeError as error:
            raise SchemaError(f"tools file {str(path)!r} is not valid JSON: {error}") from None
    if tools is None:
        return []
    if isinstance(tools, ToolSpec):
        tools = [tools]
    elif isinstance(tools, Mapping):
        tools = _tools_of_mapping(tools)
    if not isinstance(tools, (list, tuple)):
        raise SchemaError(f"tools of type {type(tools).__name__} are not accepted; accepted: {_ACCEPTED_SHAPES}")
    specs = [_one_tool(raw, position) for position, raw in enumerate(tools)]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise SchemaError(f"tool {spec.name!r}: field 'name' is declared twice; tool names must be unique")
        seen.add(spec.name)
    return specs
