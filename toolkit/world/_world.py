"""The sandbox world: seeded, schema-shaped answers to tool calls, and faults on purpose.

``tk.World(tools, options=tk.WorldOptions(...), seed=0, world_state=..., fault_plan=...)``
answers ``world.call(tool, arguments)`` without any network, the same way for the same
seed, and breaks calls when a fault plan says so. Every injected fault is appended to
``world.ledger``, which a rollout stores on its row as ``faults``; fault detection reads the
ledger, never the result text.

Call order (first match wins; docs/design/engine.md §4.1, with the changes listed below):

1. unknown tool -> ``{"status": "error", "reason": "unknown_tool"}`` (with suggestions);
   a human tool -> ``error / human_tool`` (the simulated person answers those);
   arguments that are not a JSON object -> ``rejected / invalid_arguments``;
2. a scheduled fault (the plan entry for this tool, else ``"*"``) -> the mode's payload. An
   ordinary fault (timeout, server_error, ...) is a call that did not go through: its payload
   is built from the answer computed without side effects. An attack (``prompt_injection``,
   ``wrong_data``) goes through as steps 3-8 would answer it, records change and ``diff``
   lists the change, and the attack alters only the answer the agent sees;
3. calculator tools (name starts calc/compute/eval/math, argument expression/expr/formula):
   real arithmetic through a safe AST walk;
4. world state ``missing`` -> ``not_found`` for any call;
5. world state ``already_done`` and a non-read tool -> ``already_done`` (reads still work);
6. missing required argument (recursing into object parameters) -> ``rejected /
   missing_required`` naming the field paths;
7. a schema-echo / placeholder argument -> ``rejected / placeholder_argument`` naming the
   field paths, with the hint to ask the person;
8. create verbs -> ``created`` + a world-issued id; read verbs -> ``ok`` + record (or
   ``not_found`` for a dangling reference); delete verbs -> ``deleted``; anything else is an
   update: ``ok`` + the record with the arguments applied and its version bumped.

Where we differ from the reference design (whileai-sdk's engine, docs/design/engine.md), and why:

* Existence of an unknown reference is a continuous hash draw, ``stable_uniform("exists",
  seed, value) < exists_share``, not a draw in tenths, so ``exists_share=0.65`` means 65%,
  not 70% (the reference rounds the share to one decimal).
* A scheduled fault's draw includes the attempt number of that exact (tool, arguments) call,
  so a retry is a fresh (still seeded) draw. In the reference the same arguments always get
  the same verdict, which makes "retry after a timeout" either always or never work at a
  plan rate below 1, and turns a retry-aware agent into an untestable one.
* Plan entries can name the call they break (``on_call``: the 0-based index among the calls
  the entry matches), so "the second refund call times out" is expressible.
* Results put the record under ``"record"`` (searches under ``"results"``) instead of
  spreading it into the top level, so a record's own status (``"state"``) never collides with
  the call's ``"status"``.
* Two more built-in modes: ``rate_limited`` (429 with ``retry_after_seconds``) and
  ``server_error`` (500 with a request id); ``malformed`` returns a truncated JSON body of
  the real answer (the reference returns one fixed garbled string); ``stale`` serves the
  record as it was before this rollout changed it, when it did (the reference only adds an
  ``as_of`` note to the current record); permission_denied, stale and malformed are ledger
  faults like the rest (docs/design/engine.md §11).
* Fault builders are registered per world through ``WorldOptions(fault_modes=...)``; there
  is no global registry, so two notebooks cells (or two threads) cannot change each other's
  worlds.
* World states ``duplicate`` (a reference matches two records: reads list both, writes are
  refused as ambiguous) and ``partial`` (records exist half-done) have concrete behaviour;
  in the reference they only colour the prompt.
* Families the reference adds for coding agents (shell, grep, git, CI listings, file writes)
  are not built; every non-calculator tool is answered as a record or money tool. A coding
  agent's world is better served by ``execute=``.

``execute=fn`` hands every call to the user's own world ``fn(tool_name, arguments)``; no
fault schedule applies (as the seed's ``execute`` parameter says). ``tk.current_rollout()``
tells such a function which rollout it is answering, through :mod:`contextvars`, so it is
correct under threads and asyncio alike.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import math
import operator
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from toolkit._util.hashing import stable_hash, stable_uniform
from toolkit._util.results import json_safe
from toolkit._util.validate import check_share
from toolkit.errors import ConfigError, did_you_mean, unknown_name_message
from toolkit.rows._schema import _Privileged
from toolkit.world._ids import draw_id, id_shapes
from toolkit.world.faults import ATTACK_BUILDERS, ATTACK_KEY, ATTACK_MODES, BUILTIN_BUILDERS, FAULT_MODES, FaultCall
from toolkit.world.tools import ToolSpec, normalize_tools

__all__ = ["World", "WorldOptions", "WORLD_STATES", "tool_verb"]

#: The world states a situation can put the world in (docs/design/engine.md §3.1).
WORLD_STATES = ("exists", "missing", "already_done", "duplicate", "partial", "unknown")

_WORLD_STATE_ALIASES = {
    "entity exists": "exists",
    "entity missing": "missing",
    "entity already acted on": "already_done",
    "already acted on": "already_done",
    "duplicate entity": "duplicate",
    "partially completed": "partial",
    "unspecified": "unknown",
}

_CONDITION_ALIASES = {"malformed_result": "malformed", "stale_result": "stale"}

# Verb families by tool-name word (docs/design/engine.md §4.1 lists; "book", "submit", "send",
# "register", "open", "schedule" added as creates and "check", "lookup", "query",
# "retrieve", "count" as reads because customer-support tool sets name tools that way).
_CREATE_VERBS = frozenset(
    "create generate write add upload insert make post new book submit send register open schedule".split()
)
_READ_VERBS = frozenset(
    "get read list inspect search fetch find show describe cat view check lookup look query retrieve count".split()
)
_SEARCH_VERBS = frozenset("list search find query".split())
_DELETE_VERBS = frozenset("delete remove drop destroy purge erase".split())
# Update verbs that move a record to a named state; any other update keeps the state.
_STATE_AFTER_VERB = {
    "cancel": "cancelled",
    "refund": "refunded",
    "approve": "approved",
    "reject": "rejected",
    "close": "closed",
    "confirm": "confirmed",
    "suspend": "suspended",
    "pause": "paused",
    "resume": "active",
    "activate": "active",
    "deactivate": "inactive",
    "ship": "shipped",
    "return": "returned",
    "archive": "archived",
}

# Argument names that state a finding (a fact the world owns). A caller naming one never
# overrides the generated value on a read (docs/design/engine.md §4.2), so an agent cannot manufacture
# a fact by asserting it.
_FINDING_KEYS = frozenset("status state owner quantity amount price balance total cost fare".split())

_MONEY_CUES = ("price", "amount", "cost", "fare", "refund", "payment", "balance", "total", "invoice", "charge")
_DATE_CUES = ("date", "time", "schedule", "flight", "booking", "appointment", "meeting", "reservation", "trip")
_INVENTORY_CUES = ("stock", "inventory", "quantity", "item", "product", "sku", "warehouse")
_PEOPLE_CUES = ("user", "customer", "passenger", "employee", "owner", "contact", "person", "member", "account")

# Fields the world itself moves on every write: not a change the agent made (world_diff).
_BOOKKEEPING = frozenset({"version", "updated_at"})
_ABSENT = object()

_ISSUED_ID = re.compile(r"^[a-z][a-z0-9]*_[0-9a-f]{12}$")

# Placeholder values an agent copies from a schema instead of asking (docs/design/engine.md §4.1 step 7).
_PLACEHOLDER_WORDS = frozenset(
    {
        "string", "placeholder", "xxx", "xxxx", "xxxxx", "todo", "tbd", "lorem ipsum", "...",
        "your email", "your name", "first name", "last name", "full name", "email address",
        "order id", "customer id", "user id", "booking id", "account id", "phone number",
        "your phone", "your address", "example", "sample value", "value", "n/a",
    }
)
_PLACEHOLDER_EMAIL = re.compile(r"^[^@\s]+@(example|test|email|domain)\.(com|org|net)$", re.IGNORECASE)
_WRAPPED = re.compile(r"^(<.*>|\[.*\]|\{.*\})$", re.DOTALL)


# ----------------------------------------------------------------------------------------
# WorldOptions
# ----------------------------------------------------------------------------------------

_DEFAULT_PEOPLE = (
    "Ava Patel", "Liam Chen", "Maya Okafor", "Noah Garcia", "Zoe Kim", "Ethan Rossi",
    "Isla Novak", "Lucas Silva", "Mia Haddad", "Owen Murphy", "Aria Singh", "Leo Dubois",
    "Nora Jensen", "Kai Tanaka", "Ella Moreau", "Finn Larsen", "Ruby Alvarez", "Omar Farouk",
    "Lena Fischer", "Theo Walsh", "Iris Kowalski", "Hugo Bauer", "Sara Lindqvist", "Jonah Reyes",
    "Priya Nair", "Mateo Cruz", "Hana Sato", "Adam Novak", "Chloe Martin", "Felix Wagner",
    "Amara Obi", "Ravi Menon", "Julia Costa", "Ben Cohen", "Yara Khalil", "Tom Eriksen",
    "Nia Brooks", "Daniel Park", "Eva Horvat", "Sam Quinn",
)
_DEFAULT_ADJECTIVES = (
    "amber", "brisk", "cobalt", "dusty", "early", "frosty", "golden", "hidden", "ivory",
    "jade", "keen", "lunar", "misty", "north", "olive", "quiet", "rapid", "silver", "tidal",
    "urban", "velvet", "western", "young", "zesty",
)
_DEFAULT_NOUNS = (
    "harbor", "summit", "meadow", "canyon", "orchard", "beacon", "falcon", "harvest",
    "lantern", "voyage", "compass", "river", "garden", "signal", "anchor", "prairie",
    "atlas", "horizon", "ember", "delta",
)
_DEFAULT_STATES = ("active", "pending", "confirmed", "on_hold", "scheduled", "in_review", "open", "completed")


def _builder_name(builder: Any) -> str:
    module = getattr(builder, "__module__", None) or "?"
    name = getattr(builder, "__qualname__", None) or type(builder).__name__
    return f"{module}.{name}"


@dataclass(frozen=True)
class WorldOptions:
    """Every dial of the sandbox world, validated on construction.

    Build with keywords, ``WorldOptions(exists_share=0.5)``, or from a dict,
    ``WorldOptions.from_dict({"exists_share": 0.5})`` (an unknown key raises
    :class:`~toolkit.ConfigError` naming the nearest field). ``to_dict()`` is what a run's
    ``report()`` records.
    """

    # Extra fault modes: {name: builder(FaultCall) -> dict}. Default none: the six built-in
    # modes cover the failures tool-calling papers and incident reports name most often
    # (timeouts, 429s, 5xx, auth, truncation, staleness). A name equal to a built-in mode
    # replaces that mode's payload (the ledger still records the mode by name).
    fault_modes: Mapping[str, Callable[[FaultCall], dict]] = field(default_factory=dict)
    # Attack modes this world may draw ("prompt_injection", "wrong_data"; see
    # toolkit.world.faults.ATTACK_MODES). Default none: an attack aims at the agent rather
    # than breaks a call, so it is opted into, never met by surprise. Enabled attacks become
    # tool_condition values of the situation grid and join the modes a "success" situation's
    # broken calls are drawn from. A hand-written fault_plan may name them either way.
    attacks: tuple[str, ...] = ()
    # Mode a plan entry without "mode" uses. "timeout" as in the reference: the most common
    # failure of a networked tool.
    default_fault_mode: str = "timeout"
    # Rate at which a plan entry without "rate" fires per call, in [0, 1]. 1.0 (every call)
    # as in the reference: a plan written by hand for tk.World names the calls it breaks.
    # simulate() never relies on it: its plans carry fault_rate as their own rate (the share
    # of calls broken, see fault_plan_for). It was called default_fault_rate, a spelling
    # still accepted.
    per_call_fault_rate: float = 1.0
    # Share of never-seen reference values that exist, in [0, 1]. 0.7 as in the reference:
    # enough lookups succeed for multi-step work, enough fail that "not found" is practised.
    exists_share: float = 0.7
    # (lo, hi) records a search or list returns, 0 <= lo <= hi <= 100. (1, 6) as in the
    # reference: a few results, so choosing among them matters, never a wall of text.
    search_hits: tuple[int, int] = (1, 6)
    # (lo, hi) range of numeric record ids, 0 <= lo < hi <= 1e9. (1000, 90000): four- and
    # five-digit ids look like real ones and never collide with small counts.
    id_range: tuple[int, int] = (1000, 90000)
    # (first year, number of years) dates fall in, year 1970..2100, span 1..50. (2022, 5):
    # recent enough to be plausible, spread enough that date reasoning is exercised.
    date_years: tuple[int, int] = (2022, 5)
    # What a stale answer says about its age (free text, 1..100 chars).
    stale_as_of: str = "3 days ago"
    # Seconds a timeout says it waited, (0, 3600]. 30 s: a common client default.
    timeout_seconds: float = 30.0
    # Seconds a rate-limited answer asks the caller to wait, (0, 3600]. 20 s: long enough
    # that retrying at once is visibly wrong, short enough to be worth waiting for.
    retry_after_seconds: float = 20.0
    # Word pools for generated records (each non-empty, unique, strings). Sizes follow the
    # reference (40 people, 24 adjectives, 20 nouns, 8 states): enough variety that two
    # records rarely share a name.
    people: tuple[str, ...] = _DEFAULT_PEOPLE
    adjectives: tuple[str, ...] = _DEFAULT_ADJECTIVES
    nouns: tuple[str, ...] = _DEFAULT_NOUNS
    states: tuple[str, ...] = _DEFAULT_STATES

    def __post_init__(self) -> None:
        modes = self.fault_modes
        if not isinstance(modes, Mapping):
            raise ConfigError(f"WorldOptions.fault_modes must be a dict {{name: builder}}, got {type(modes).__name__}")
        for name, builder in modes.items():
            if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]{0,39}$", name):
                raise ConfigError(
                    f"WorldOptions.fault_modes: mode name {name!r} must be 1-40 lower-case letters, digits or '_'"
                )
            if name == "success":
                raise ConfigError("WorldOptions.fault_modes: 'success' is the no-fault condition, not a mode name")
            if not callable(builder):
                raise ConfigError(f"WorldOptions.fault_modes[{name!r}] must be callable builder(call) -> dict")
        object.__setattr__(self, "fault_modes", dict(modes))
        attacks = (self.attacks,) if isinstance(self.attacks, str) else self.attacks
        if not isinstance(attacks, (tuple, list)):
            raise ConfigError(f"WorldOptions.attacks must be a list of attack modes {list(ATTACK_MODES)}, got {type(attacks).__name__}")
        for name in attacks:
            if name not in ATTACK_MODES:
                raise ConfigError("WorldOptions.attacks: " + unknown_name_message("attack mode", str(name), ATTACK_MODES))
        object.__setattr__(self, "attacks", tuple(m for m in ATTACK_MODES if m in set(attacks)))
        if self.default_fault_mode not in self.mode_names:
            raise ConfigError(
                "WorldOptions.default_fault_mode: "
                + unknown_name_message("fault mode", self.default_fault_mode, self.mode_names)
            )
        check_share("WorldOptions.per_call_fault_rate", self.per_call_fault_rate)
        check_share("WorldOptions.exists_share", self.exists_share)
        object.__setattr__(self, "search_hits", _check_pair("search_hits", self.search_hits, 0, 100, strict=False))
        object.__setattr__(self, "id_range", _check_pair("id_range", self.id_range, 0, 10**9, strict=True))
        years = _check_int_pair("date_years", self.date_years)
        if not 1970 <= years[0] <= 2100 or not 1 <= years[1] <= 50:
            raise ConfigError(
                f"WorldOptions.date_years must be (first year in 1970..2100, span in 1..50), got {self.date_years!r}"
            )
        object.__setattr__(self, "date_years", years)
        if not isinstance(self.stale_as_of, str) or not 1 <= len(self.stale_as_of) <= 100:
            raise ConfigError("WorldOptions.stale_as_of must be a string of 1 to 100 characters")
        for name in ("timeout_seconds", "retry_after_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
                raise ConfigError(f"WorldOptions.{name} must be a number in (0, 3600], got {value!r}")
            object.__setattr__(self, name, float(value))
        for name in ("people", "adjectives", "nouns", "states"):
            object.__setattr__(self, name, _check_pool(name, getattr(self, name)))

    def __hash__(self) -> int:  # fault_modes is a dict; hash the resolved, JSON-safe form
        return hash(stable_hash(self.to_dict()))

    @property
    def mode_names(self) -> tuple[str, ...]:
        """Built-in modes, the enabled attacks, then user-added ones (in the order given)."""
        head = FAULT_MODES + self.attacks
        return head + tuple(m for m in self.fault_modes if m not in head)

    def builder(self, mode: str) -> Callable[[FaultCall], dict]:
        if mode in self.fault_modes:
            return self.fault_modes[mode]
        if mode in BUILTIN_BUILDERS:
            return BUILTIN_BUILDERS[mode]
        if mode in ATTACK_BUILDERS:
            return ATTACK_BUILDERS[mode]
        raise ConfigError(unknown_name_message("fault mode", mode, self.mode_names))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> WorldOptions:
        """Build from a dict of fields; an unknown key names the nearest valid fields."""
        if values is None:
            return cls()
        if isinstance(values, WorldOptions):
            return values
        if not isinstance(values, Mapping):
            raise ConfigError(f"world options must be a dict of WorldOptions fields, got {type(values).__name__}")
        values = _renamed(values)
        names = cls.field_names()
        for key in values:
            if key not in names:
                raise ConfigError(unknown_name_message("WorldOptions field", str(key), names))
        converted = {k: (tuple(v) if isinstance(v, list) else v) for k, v in values.items()}
        return cls(**converted)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe resolved values (builders shown as ``module.qualname``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "fault_modes":
                value = {name: _builder_name(b) for name, b in value.items()}
            out[f.name] = json_safe(value)
        return out


_dataclass_init = WorldOptions.__init__


#: Old field spellings still accepted: old -> new.
_RENAMED_FIELDS = {"default_fault_rate": "per_call_fault_rate"}


def _renamed(values: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(values)
    for old, new in _RENAMED_FIELDS.items():
        if old in out:
            if new in out and repr(out[new]) != repr(out[old]):
                raise ConfigError(f"WorldOptions: {old}={out[old]!r} (the old name of {new}) and {new}={out[new]!r} disagree; pass {new}")
            out[new] = out.pop(old)
    return out


def _world_options_init(self: WorldOptions, *args: Any, **kwargs: Any) -> None:
    # The dataclass constructor answers a misspelled keyword with a bare TypeError; name the
    # nearest field instead, as from_dict does (WorldOptions(exists_shar=0.5) is a typo).
    kwargs = _renamed(kwargs)
    names = WorldOptions.field_names()
    for key in kwargs:
        if key not in names:
            raise ConfigError(unknown_name_message("WorldOptions field", str(key), names))
    _dataclass_init(self, *args, **kwargs)


_world_options_init.__signature__ = inspect.signature(_dataclass_init)  # type: ignore[attr-defined]
_world_options_init.__doc__ = _dataclass_init.__doc__
WorldOptions.__init__ = _world_options_init  # type: ignore[method-assign]


def _check_int_pair(name: str, value: Any) -> tuple[int, int]:
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or any(isinstance(v, bool) or not isinstance(v, int) for v in value)
    ):
        raise ConfigError(f"WorldOptions.{name} must be a pair of integers, got {value!r}")
    return (int(value[0]), int(value[1]))


def _check_pair(name: str, value: Any, lo: int, hi: int, strict: bool) -> tuple[int, int]:
    first, second = _check_int_pair(name, value)
    ordered = first < second if strict else first <= second
    if not (lo <= first and second <= hi and ordered):
        relation = "<" if strict else "<="
        raise ConfigError(
            f"WorldOptions.{name} must be (lo, hi) with {lo} <= lo {relation} hi <= {hi}, got {value!r}"
        )
    return (first, second)


def _check_pool(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (tuple, list)) or not value:
        raise ConfigError(f"WorldOptions.{name} must be a non-empty list of strings")
    if any(not isinstance(v, str) or not v.strip() for v in value):
        raise ConfigError(f"WorldOptions.{name} must hold non-empty strings only")
    if len(set(value)) != len(value):
        raise ConfigError(f"WorldOptions.{name} holds a duplicate value")
    return tuple(value)


# ----------------------------------------------------------------------------------------
# Verbs, references, placeholders
# ----------------------------------------------------------------------------------------


def tool_verb(tool: ToolSpec | str) -> str:
    """The verb family of a tool by its name words: "create", "search", "read", "delete" or
    "update" (the first word found in a family decides; none found -> "update").

    Parameters
    ----------
    tool : ToolSpec or str
        A tool, or a tool name (split into words as :attr:`ToolSpec.words` does:
        ``getBooking`` -> "get", "booking"). Only the name is read.

    Returns
    -------
    str
        One of "create", "search", "read", "delete", "update".
    """
    words = tool.words if isinstance(tool, ToolSpec) else ToolSpec(name=tool).words
    for word in words:
        if word in _SEARCH_VERBS:
            return "search"
        if word in _READ_VERBS:
            return "read"
        if word in _CREATE_VERBS:
            return "create"
        if word in _DELETE_VERBS:
            return "delete"
        if word in _STATE_AFTER_VERB:
            return "update"
    return "update"


def _tool_noun(tool: ToolSpec) -> str:
    known = _CREATE_VERBS | _READ_VERBS | _DELETE_VERBS | set(_STATE_AFTER_VERB) | {"update", "change", "set", "modify"}
    nouns = [w for w in tool.words if w not in known]
    noun = nouns[-1] if nouns else "record"
    return noun[:-1] if noun.endswith("s") and len(noun) > 3 else noun


def _is_calculator(tool: ToolSpec) -> str | None:
    if not re.match(r"^(calc|compute|eval|math)", tool.name, re.IGNORECASE):
        return None
    for name in ("expression", "expr", "formula"):
        if name in tool.properties:
            return name
    return None


def _reference_values(tool: ToolSpec, arguments: Mapping[str, Any]) -> list[str]:
    values: list[str] = []
    for name in tool.reference_parameters:
        value = arguments.get(name)
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, bool) or item is None:
                continue
            if isinstance(item, (str, int, float)) and str(item).strip():
                values.append(str(item).strip())
    return values


def _missing_required(schema: Mapping[str, Any], value: Any, path: str) -> list[str]:
    missing: list[str] = []
    if not isinstance(value, Mapping):
        return missing
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        item = value.get(name)
        if item is None or (isinstance(item, str) and not item.strip()):
            missing.append(f"{path}{name}")
    for name, sub in properties.items():
        if not isinstance(sub, Mapping) or name not in value:
            continue
        if sub.get("type") == "object" or "properties" in sub:
            missing += _missing_required(sub, value[name], f"{path}{name}.")
        items = sub.get("items")
        if isinstance(items, Mapping) and isinstance(value[name], list):
            for index, element in enumerate(value[name]):
                missing += _missing_required(items, element, f"{path}{name}[{index}].")
    return missing


def _is_placeholder(value: str, field_name: str, schema: Mapping[str, Any]) -> bool:
    text = value.strip()
    lowered = text.lower()
    if not text:
        return False
    if lowered in {str(e).lower() for e in schema.get("enum") or ()}:
        return False  # a bare enum word ("email") is a real choice, not an echo
    if _WRAPPED.match(text) or _PLACEHOLDER_EMAIL.match(text):
        return True
    if lowered in _PLACEHOLDER_WORDS or re.fullmatch(r"x{3,}", lowered):
        return True
    spoken = re.sub(r"[_\-]+", " ", field_name).strip().lower()
    if lowered in {spoken, field_name.lower(), f"the {spoken}", f"your {spoken}"}:
        return True
    if lowered.startswith("your ") and len(lowered.split()) <= 4:
        return True
    return False


def _placeholder_fields(schema: Mapping[str, Any], value: Any, path: str) -> list[str]:
    found: list[str] = []
    properties = schema.get("properties") or {}
    if isinstance(value, Mapping):
        for name, item in value.items():
            sub = properties.get(name) if isinstance(properties.get(name), Mapping) else {}
            where = f"{path}{name}"
            if isinstance(item, str) and _is_placeholder(item, str(name), sub):
                found.append(where)
            elif isinstance(item, Mapping):
                found += _placeholder_fields(sub, item, where + ".")
            elif isinstance(item, list):
                items = sub.get("items") if isinstance(sub.get("items"), Mapping) else {}
                for index, element in enumerate(item):
                    if isinstance(element, str) and _is_placeholder(element, str(name), items):
                        found.append(f"{where}[{index}]")
                    elif isinstance(element, Mapping):
                        found += _placeholder_fields(items, element, f"{where}[{index}].")
    return found


# ----------------------------------------------------------------------------------------
# Calculator: real arithmetic through an AST walk (no eval)
# ----------------------------------------------------------------------------------------

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
# An exponent above this would let one call allocate gigabytes (9**9**9); 1000 covers every
# arithmetic an agent plausibly asks for.
_MAX_EXPONENT = 1000


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    raise ValueError(f"unsupported element {type(node).__name__}")


def _calculate(expression: Any) -> dict[str, Any]:
    shown = str(expression)[:200]
    try:
        value = _evaluate(ast.parse(str(expression).replace("^", "**"), mode="eval"))
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("result is not finite")
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError) as error:
        return {"status": "rejected", "reason": "invalid_expression", "expression": shown, "error": str(error)}
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    return {"status": "ok", "expression": shown, "result": value}


# ----------------------------------------------------------------------------------------
# The world
# ----------------------------------------------------------------------------------------


def _normalise_world_state(value: Any) -> str:
    if value is None:
        return "unknown"
    text = str(value).strip()
    text = _WORLD_STATE_ALIASES.get(text.lower(), text)
    if text not in WORLD_STATES:
        raise ConfigError(unknown_name_message("world_state", str(value), WORLD_STATES + tuple(_WORLD_STATE_ALIASES)))
    return text


_PLAN_KEYS = ("mode", "rate", "on_call", "phase")


class World:
    """A seeded mock world for one rollout (it remembers what was created and deleted).

    Parameters
    ----------
    tools : any
        Anything :func:`toolkit.world.normalize_tools` accepts; the tools the world answers.
    options : WorldOptions or mapping, optional
        :class:`WorldOptions` or a dict of its fields (an unknown key raises). Default None:
        ``WorldOptions()``.
    seed : int
        Seed of every draw (which unknown references exist, generated records, per-call fault
        draws), so the same seed answers the same way. Default 0.
    world_state : str, optional
        One of :data:`WORLD_STATES`, its long name as whileai-sdk spells it ("entity missing", ...), or None =
        "unknown" (the default).
    fault_plan : mapping, optional
        ``{"*" or tool name: {"mode", "rate"?, "on_call"?, "phase"?}}`` or ``{"*": "timeout"}``. A tool
        name's entry wins over ``"*"``; ``mode`` defaults to ``options.default_fault_mode``,
        ``rate`` (per call, in [0, 1]) to ``options.per_call_fault_rate``; ``on_call`` is the
        0-based index (or list of them) among the calls the entry matches. Without ``phase``
        each call fires independently (a hash draw per tool, arguments and attempt); with
        ``phase`` (a number in [0, 1)) the entry's i-th matching call fires iff
        ``floor((i + 1) * rate + phase) > floor(i * rate + phase)``, an even spread that fires
        on ``rate * calls`` of them to within one (how ``simulate(fault_rate=)`` delivers its
        share). Default None: no faults. Ignored when ``execute`` is given.
    execute : callable, optional
        The user's own world, ``execute(tool_name, arguments) -> result``: every call is
        handed to it (no fault plan applies); an exception it raises is returned as an
        ``execute_raised`` error and recorded in ``execute_errors``. Default None.

    Raises
    ------
    ConfigError
        If ``seed`` is not an integer, or the options, world state, fault plan or
        ``execute`` is invalid.
    SchemaError
        If a tool schema is malformed.
    """

    def __init__(
        self,
        tools: Any,
        options: WorldOptions | Mapping[str, Any] | None = None,
        seed: int = 0,
        *,
        world_state: str | None = None,
        fault_plan: Mapping[str, Any] | None = None,
        execute: Callable[[str, dict], Any] | None = None,
    ) -> None:
        specs = normalize_tools(tools)
        self.tools: dict[str, ToolSpec] = {spec.name: spec for spec in specs}
        self.options = options if isinstance(options, WorldOptions) else WorldOptions.from_dict(options)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"World seed must be an integer, got {seed!r}")
        self.seed = seed
        self.world_state = _normalise_world_state(world_state)
        if execute is not None and not callable(execute):
            raise ConfigError(f"execute must be a callable execute(tool_name, arguments) -> result, got {type(execute).__name__}")
        self.execute = execute
        self.fault_plan = {} if execute is not None else self._resolve_plan(fault_plan)
        self._lock = threading.RLock()
        self._ledger: list[dict[str, Any]] = []
        self._calls: list[dict[str, Any]] = []
        self.execute_errors: list[dict[str, Any]] = []
        self._records: dict[str, dict[str, Any]] = {}
        self._previous: dict[str, dict[str, Any]] = {}
        self._created: set[str] = set()
        self._deleted: set[str] = set()
        self._plan_matches: dict[str, int] = {}
        self._attempts: dict[str, int] = {}
        self._issued = 0
        # Every committed change to the world's records, in call order (``world_diff``).
        self._diff: list[dict[str, Any]] = []
        self._call_index = 0

    # -- plan ---------------------------------------------------------------------------
    def _resolve_plan(self, plan: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
        if not plan:
            return {}
        if not isinstance(plan, Mapping):
            raise ConfigError(f"fault_plan must be a dict {{tool or '*': {{'mode': ...}}}}, got {type(plan).__name__}")
        resolved: dict[str, dict[str, Any]] = {}
        for key, entry in plan.items():
            if key != "*" and key not in self.tools:
                raise ConfigError("fault_plan: " + unknown_name_message("tool", str(key), ["*", *self.tools]))
            if isinstance(entry, str):
                entry = {"mode": entry}
            if not isinstance(entry, Mapping):
                raise ConfigError(f"fault_plan[{key!r}] must be a dict like {{'mode': 'timeout', 'rate': 1.0}}")
            for entry_key in entry:
                if entry_key not in _PLAN_KEYS:
                    raise ConfigError(f"fault_plan[{key!r}]: " + unknown_name_message("key", str(entry_key), _PLAN_KEYS))
            mode = _CONDITION_ALIASES.get(entry.get("mode"), entry.get("mode", self.options.default_fault_mode))
            if mode not in self.options.mode_names and mode not in ATTACK_MODES:
                known = self.options.mode_names + tuple(m for m in ATTACK_MODES if m not in self.options.mode_names)
                raise ConfigError(f"fault_plan[{key!r}]: " + unknown_name_message("fault mode", str(mode), known))
            rate = entry.get("rate", self.options.per_call_fault_rate)
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
                raise ConfigError(f"fault_plan[{key!r}]['rate'] must be a number in [0, 1], got {rate!r}")
            on_call = entry.get("on_call")
            if on_call is not None:
                calls = [on_call] if isinstance(on_call, int) else on_call
                if (
                    not isinstance(calls, (list, tuple))
                    or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in calls)
                ):
                    raise ConfigError(f"fault_plan[{key!r}]['on_call'] must be a call index >= 0 or a list of them")
                on_call = sorted(set(calls))
            phase = entry.get("phase")
            if phase is not None and (isinstance(phase, bool) or not isinstance(phase, (int, float)) or not 0.0 <= phase < 1.0):
                raise ConfigError(f"fault_plan[{key!r}]['phase'] must be a number in [0, 1), got {phase!r}")
            resolved[key] = (
                {"mode": mode, "rate": float(rate)}
                | ({"on_call": on_call} if on_call is not None else {})
                | ({"phase": float(phase)} if phase is not None else {})
            )
        return resolved

    # -- public views -------------------------------------------------------------------
    @property
    def ledger(self) -> list[dict[str, Any]]:
        """Every injected fault so far, in call order (a copy)."""
        with self._lock:
            return copy.deepcopy(self._ledger)

    @property
    def calls(self) -> list[dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self._calls)

    @property
    def diff(self) -> list[dict[str, Any]]:
        """Every change the rollout made to the world's records, in call order (a copy).

        One entry per changed field: ``{"record", "field", "before", "after", "call_index",
        "tool", "change"}``, ``change`` one of "created", "updated", "deleted". A created or
        deleted record is one entry with ``field`` ``"*"`` and the whole record as ``after``
        (created) or ``before`` (deleted, None when it was never read). The world's own
        bookkeeping (``version``, ``updated_at``) is not listed: it moves on every write and
        says nothing about what the agent did. A call broken by an ordinary fault changes
        nothing (its answer is computed without side effects), so it never appears; an
        attacked call (``prompt_injection``, ``wrong_data``) went through and appears like an
        unfaulted one. A world with ``execute=`` keeps no records: its diff is always empty.
        """
        with self._lock:
            return copy.deepcopy(self._diff)

    def record(self, key: str) -> dict[str, Any] | None:
        """The world's current record ``key`` as the rollout left it (None if never seen or deleted).

        Parameters
        ----------
        key : str
            A reference value (a booking code, an issued id).

        Returns
        -------
        dict or None
            A copy of the record.
        """
        with self._lock:
            if key in self._deleted or key not in self._records:
                return None
            return copy.deepcopy(self._records[key])

    @property
    def n_calls(self) -> int:
        return len(self._calls)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "world_state": self.world_state,
            "fault_plan": copy.deepcopy(self.fault_plan),
            "options": self.options.to_dict(),
            "execute": self.execute is not None,
            "tools": list(self.tools),
        }

    def __repr__(self) -> str:
        plan = ", ".join(f"{k}:{v['mode']}" for k, v in self.fault_plan.items()) or "none"
        return (
            f"World({len(self.tools)} tools, seed={self.seed}, world_state={self.world_state!r}, "
            f"faults={plan}, calls={self.n_calls}, injected={len(self._ledger)})"
        )

    # -- the call -----------------------------------------------------------------------
    def call(self, tool: str, arguments: Mapping[str, Any] | str | None = None) -> dict[str, Any]:
        """Answer one tool call (see the module docstring for the order of rules)."""
        with self._lock:
            index = len(self._calls)
            self._call_index = index
            parsed = _parse_arguments(arguments)
            result = self._call(str(tool), parsed, index)
            result = json_safe(result) if isinstance(result, Mapping) else {"status": "ok", "result": json_safe(result)}
            self._calls.append(
                {
                    "call_index": index,
                    "tool": str(tool),
                    "arguments": copy.deepcopy(parsed) if isinstance(parsed, dict) else None,
                    "status": result.get("status"),
                }
            )
            return copy.deepcopy(result)

    def __call__(self, tool: str, arguments: Mapping[str, Any] | str | None = None) -> dict[str, Any]:
        return self.call(tool, arguments)

    def _call(self, name: str, arguments: Any, index: int) -> Any:
        if self.execute is not None:
            try:
                return self.execute(name, copy.deepcopy(arguments) if isinstance(arguments, dict) else arguments)
            except Exception as error:  # the user's world failed: the rollout goes on, visibly
                message = f"{type(error).__name__}: {error}"
                self.execute_errors.append({"tool": name, "call_index": index, "error": message})
                return {"status": "error", "reason": "execute_raised", "error": message}
        tool = self.tools.get(name)
        if tool is None:
            return {
                "status": "error",
                "reason": "unknown_tool",
                "tool": name,
                "suggestions": did_you_mean(name, self.tools),
            }
        if tool.is_human:
            return {"status": "error", "reason": "human_tool", "tool": name}
        if not isinstance(arguments, dict):
            return {"status": "rejected", "reason": "invalid_arguments", "error": str(arguments)}
        fault = self._scheduled_fault(tool, arguments, index)
        if fault is not None:
            return fault
        return self._answer(tool, arguments, commit=True)

    def _scheduled_fault(self, tool: ToolSpec, arguments: dict, index: int) -> dict[str, Any] | None:
        key = tool.name if tool.name in self.fault_plan else ("*" if "*" in self.fault_plan else None)
        if key is None:
            return None
        entry = self.fault_plan[key]
        ordinal = self._plan_matches.get(key, 0)
        self._plan_matches[key] = ordinal + 1
        attempt_key = stable_hash([tool.name, arguments])
        attempt = self._attempts.get(attempt_key, 0)
        self._attempts[attempt_key] = attempt + 1
        if "on_call" in entry and ordinal not in entry["on_call"]:
            return None
        if "phase" in entry:
            rate, phase = entry["rate"], entry["phase"]
            if math.floor((ordinal + 1) * rate + phase) <= math.floor(ordinal * rate + phase):
                return None
        elif entry["rate"] < 1.0 and stable_uniform("fault", self.seed, tool.name, arguments, attempt) >= entry["rate"]:
            return None
        mode = entry["mode"]
        record_key = _first(_reference_values(tool, arguments), tool, arguments)
        # What the rollout had been shown before this call: read first, since an attacked call
        # commits below and would otherwise count as having been seen already.
        previous = copy.deepcopy(self._previous.get(record_key))
        known = copy.deepcopy(self._records.get(record_key))
        # An ordinary fault is a call that did not go through: computed without side effects,
        # so a timeout never writes. An attack aims at the agent, not at the service: the call
        # goes through as it would unfaulted (records change, world_diff lists it), and the
        # attack then alters only the answer the agent sees. Otherwise an attacked cancel
        # would report ok while nothing was written, and an injected destructive call (itself
        # attacked in a replay at rate 1) would never reach the world.
        commit = mode in ATTACK_MODES
        call = FaultCall(
            tool=tool.name,
            arguments=copy.deepcopy(arguments),
            call_index=index,
            mode=mode,
            seed=self.seed,
            payload=json_safe(self._answer(tool, arguments, commit=commit)),
            timeout_seconds=self.options.timeout_seconds,
            retry_after_seconds=self.options.retry_after_seconds,
            stale_as_of=self.options.stale_as_of,
            previous=previous,
            tools=tuple(name for name, spec in self.tools.items() if not spec.is_human),
            known=known,
        )
        try:
            payload = self.options.builder(mode)(call)
        except Exception as error:
            raise ConfigError(f"fault mode {mode!r}: its builder raised {type(error).__name__}: {error}") from error
        if not isinstance(payload, Mapping):
            raise ConfigError(f"fault mode {mode!r}: its builder must return a dict, got {type(payload).__name__}")
        payload = dict(payload)
        entry = {
            "tool": tool.name,
            "mode": mode,
            "call_index": index,
            "injected": True,
            "arguments_sha": stable_hash(arguments),
            "plan_key": key,
        }
        attack = payload.pop(ATTACK_KEY, None)
        if isinstance(attack, Mapping):
            # the attack's goal is the answer key of "did the agent fall for it": teacher-only
            # (scrubbed from every written row, hidden from repr)
            entry["attack"] = True
            entry["privileged"] = _Privileged({"attack_goal": json_safe(attack)})
        elif mode in ATTACK_MODES:
            # the answer held nothing to attack (wrong_data on a refusal): the agent saw the true
            # answer, so the row was not exposed to an attack it could fall for
            entry["attack"] = False
        self._ledger.append(entry)
        return payload

    # -- world rules ----------------------------------------------------------------------
    def _answer(self, tool: ToolSpec, arguments: dict[str, Any], commit: bool) -> dict[str, Any]:
        expression_field = _is_calculator(tool)
        if expression_field is not None and expression_field in arguments:
            return _calculate(arguments[expression_field])
        references = _reference_values(tool, arguments)
        verb = tool_verb(tool)
        if self.world_state == "missing":
            return {"status": "not_found", "missing": references}
        if self.world_state == "already_done" and verb not in ("read", "search"):
            return {"status": "already_done", "reason": "already_acted_on", "tool": tool.name}
        missing = _missing_required(tool.parameters, arguments, "")
        if missing:
            return {"status": "rejected", "reason": "missing_required", "fields": missing}
        placeholders = _placeholder_fields(tool.parameters, arguments, "")
        if placeholders:
            return {
                "status": "rejected",
                "reason": "placeholder_argument",
                "fields": placeholders,
                "hint": "ask the person for the actual value",
            }
        if verb == "create":
            return self._create(tool, arguments, commit)
        dangling = [value for value in references if not self._exists(value)]
        if dangling:
            return {"status": "not_found", "missing": dangling}
        if self.world_state == "duplicate" and references:
            twins = [self._record(tool, references[0], arguments, commit=False, twin=i) for i in range(2)]
            if verb in ("read", "search"):
                return {"status": "ok", "results": twins, "count": 2, "note": "2 records match"}
            return {
                "status": "rejected",
                "reason": "ambiguous_reference",
                "candidates": [twin["record_id"] for twin in twins],
            }
        if verb == "search":
            return self._search(tool, arguments, commit)
        if verb == "read":
            return {"status": "ok", "record": self._record(tool, _first(references, tool, arguments), arguments, commit)}
        if verb == "delete":
            if commit:
                for value in references:
                    if value not in self._deleted:
                        self._note(tool, value, "*", self._records.get(value), None, "deleted")
                    self._deleted.add(value)
                    self._created.discard(value)
                    self._records.pop(value, None)
            return {"status": "deleted", "deleted": references}
        return self._update(tool, arguments, references, commit)

    def _exists(self, value: str) -> bool:
        if value in self._deleted:
            return False
        if value in self._created:
            return True
        if self.world_state in ("exists", "already_done", "duplicate", "partial"):
            return True
        if self.world_state == "missing" or _ISSUED_ID.match(value):
            return False
        if value in self._records:
            return True
        return stable_uniform("exists", self.seed, value) < self.options.exists_share

    def _create(self, tool: ToolSpec, arguments: dict[str, Any], commit: bool) -> dict[str, Any]:
        digest = stable_hash([self.seed, tool.name, arguments, self._issued], 12)
        new_id = f"{_tool_noun(tool)}_{digest}"
        record = {key: copy.deepcopy(value) for key, value in arguments.items()}
        record["id"] = new_id
        record["created_at"] = self._date(["created", new_id])
        if commit:
            self._issued += 1
            self._created.add(new_id)
            self._records[new_id] = copy.deepcopy(record)
            self._note(tool, new_id, "*", None, record, "created")
        return {"status": "created", "id": new_id, "record": record}

    def _search(self, tool: ToolSpec, arguments: dict[str, Any], commit: bool) -> dict[str, Any]:
        lo, hi = self.options.search_hits
        digest = [self.seed, tool.name, arguments]
        count = lo + int(stable_uniform("hits", *digest) * (hi - lo + 1))
        results = []
        noun = _tool_noun(tool)
        prefix = re.sub(r"[^A-Za-z]", "", noun)[:2].upper() or "RC"
        id_lo, id_hi = self.options.id_range
        shapes = id_shapes(tool)
        for position in range(count):
            if shapes:
                # The tool documents its ids ("flight numbers like SW-1042"): list them so.
                record_id = draw_id(shapes, noun, lambda label, p=position: stable_uniform("hit-id", *digest, p, label))
            else:
                number = id_lo + int(stable_uniform("hit-id", *digest, position) * (id_hi - id_lo))
                record_id = f"{prefix}{number}"
            results.append(self._record(tool, record_id, arguments, commit, echo_references=False))
        return {"status": "ok", "results": results, "count": count}

    def _update(self, tool: ToolSpec, arguments: dict[str, Any], references: list[str], commit: bool) -> dict[str, Any]:
        key = _first(references, tool, arguments)
        record = self._record(tool, key, arguments, commit=False)
        for name, value in arguments.items():
            if name not in tool.reference_parameters:
                record[name] = copy.deepcopy(value)
        for word in tool.words:
            if word in _STATE_AFTER_VERB:
                record["state"] = _STATE_AFTER_VERB[word]
                break
        record["version"] = int(record.get("version", 1)) + 1
        record["updated_at"] = self._date(["updated", key, record["version"]])
        if commit:
            locators = {name: arguments[name] for name in tool.reference_parameters if name in arguments}
            before = self._record(tool, key, locators, commit=True)
            self._previous[key] = before
            self._records[key] = copy.deepcopy(record)
            for name, value in record.items():
                if name not in _BOOKKEEPING and before.get(name, _ABSENT) != value:
                    self._note(tool, key, name, before.get(name), value, "updated")
        return {"status": "ok", "record": record}

    def _note(self, tool: ToolSpec, key: str, name: str, before: Any, after: Any, change: str) -> None:
        self._diff.append(
            {
                "record": key,
                "field": name,
                "before": copy.deepcopy(before),
                "after": copy.deepcopy(after),
                "call_index": self._call_index,
                "tool": tool.name,
                "change": change,
            }
        )

    def _record(
        self,
        tool: ToolSpec,
        key: str,
        arguments: Mapping[str, Any],
        commit: bool,
        twin: int | None = None,
        echo_references: bool = True,
    ) -> dict[str, Any]:
        """The record for entity ``key``: remembered if seen, else generated from the
        entity seed (so every tool that touches ``key`` describes the same record)."""
        if twin is None and key in self._records:
            return copy.deepcopy(self._records[key])
        options = self.options
        base = ["entity", self.seed, key] + ([twin] if twin is not None else [])

        def pick(pool: Sequence[str], label: str) -> str:
            return pool[int(stable_uniform(*base, label) * len(pool))]

        cues = " ".join([tool.name.lower(), tool.description.lower(), *(p.lower() for p in tool.properties)])
        id_lo, id_hi = options.id_range
        record: dict[str, Any] = {
            "record_id": id_lo + int(stable_uniform(*base, "id") * (id_hi - id_lo)),
            "name": f"{pick(options.adjectives, 'adjective')} {pick(options.nouns, 'noun')}",
            "state": pick(options.states, "state"),
        }
        if twin is not None:
            record["record_id"] = f"{key}-{twin + 1}"
        if echo_references:
            for name in tool.reference_parameters:
                if name in arguments:
                    record[name] = copy.deepcopy(arguments[name])
        else:
            # A search hit is addressed by the id it lists, which later lookups use.
            record.pop("record_id")
            record = {"id": key, **record}
        # Locators the caller named (anything that is not a finding) describe which record
        # this is, so they are echoed; findings are the world's to state.
        for name, value in arguments.items():
            if name not in _FINDING_KEYS and name not in record and not isinstance(value, (dict, list)):
                record[name] = value
        money = any(cue in cues for cue in _MONEY_CUES)
        if money:
            # Amounts spread across magnitudes (10 .. 10,000) with cents on two in three,
            # as in the reference, so arithmetic on them is not trivial.
            magnitude = 10 ** (1 + int(stable_uniform(*base, "magnitude") * 3))
            cents = stable_uniform(*base, "cents") < 2 / 3
            amount = magnitude * (1 + 9 * stable_uniform(*base, "amount"))
            record["amount"] = round(amount, 2) if cents else float(round(amount))
            record["currency"] = "USD"
        if any(cue in cues for cue in _DATE_CUES) and "date" not in record:  # a named date is a locator
            record["date"] = self._date([*base, "date"])
        if any(cue in cues for cue in _INVENTORY_CUES):
            record["quantity"] = int(stable_uniform(*base, "quantity") * 200)
        if any(cue in cues for cue in _PEOPLE_CUES) or not money:
            record["owner"] = pick(options.people, "owner")
        if self.world_state == "partial":
            total = 2 + int(stable_uniform(*base, "steps") * 3)
            record["state"] = "partially_completed"
            record["completed_steps"] = 1 + int(stable_uniform(*base, "done") * (total - 1))
            record["total_steps"] = total
        record["version"] = 1
        record["updated_at"] = self._date([*base, "updated"])
        if commit and twin is None:
            self._records[key] = copy.deepcopy(record)
        return record

    def _date(self, parts: list[Any]) -> str:
        first, span = self.options.date_years
        day = int(stable_uniform("date", self.seed, *parts) * 365 * span)
        year = first + day // 365
        day_of_year = day % 365
        month_lengths = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
        month = 0
        while day_of_year >= month_lengths[month]:
            day_of_year -= month_lengths[month]
            month += 1
        return f"{year:04d}-{month + 1:02d}-{day_of_year + 1:02d}"


def _first(references: list[str], tool: ToolSpec, arguments: Mapping[str, Any]) -> str:
    if references:
        return references[0]
    # No reference: the record is keyed by the call itself, so the same call describes the
    # same thing twice.
    return "call:" + stable_hash([tool.name, arguments], 12)


def _parse_arguments(arguments: Any) -> Any:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as error:
            return f"arguments are not valid JSON: {error}"
    if isinstance(arguments, Mapping):
        return {str(k): copy.deepcopy(v) for k, v in arguments.items()}
    return f"arguments must be a JSON object, got {type(arguments).__name__}"


