"""Situations: the axes an agent definition varies on, difficulty tiers, and the grid.

An agent is its tools plus its system prompt. From them come six axes (reference engine.md
§3.1): ``tool`` (each tool, ``unrelated``, ``multi_tool``), ``rule`` (the policy clauses of
the prompt), ``stance`` (10 ways a person can come at the agent), ``world_state`` (6, when a
tool takes a reference), ``tool_condition`` (success and every fault mode, built-in and
user-added) and ``history`` (5). A situation is one point of that space, not a prompt; the
template writer (:mod:`toolkit.writer`) or a model turns it into words.

``tk.situation_grid(tools, system_prompt)`` covers the space with a t-wise covering array
built by :mod:`toolkit.covering` (no second algorithm here), in layers:

* a **base block**: the strength-t array over the five non-rule axes, with rule
  "unspecified" -- it does not depend on the prompt at all;
* one **rule block** per policy clause: a strength-(t-1) array over the other five axes with
  the rule fixed, seeded by a hash of the clause text. Every t-tuple that involves a rule is
  therefore covered inside that rule's own block.

So editing one clause removes that clause's rows and adds the new clause's rows, and every
other situation keeps its id -- results measured on them stay comparable across the edit.

``tk.mix_tiers(situations, n, hard_share)`` draws a difficulty mix (reference §3.2 and §10
item 27): first an ordinary item, then one hard item (adversarial, else boundary, else
ambiguous); from 8 picks on, one of every tier; then hard items to ``round(n * hard_share)``,
round-robin across the hard tiers; the rest ordinary.

Where we differ from the reference design, and why:

* The base block is the covering module's array (IPOG-F plus repair, with constraints and
  any strength) instead of the reference's AETG-like greedy, and rule blocks are
  strength-(t-1) arrays instead of a 1-wise "diagonal walk", so strength 3 also layers.
* Coverage excludes constant axes and the placeholder rule "unspecified" (reference §11:
  the constant pairs inflated "pairs planned").
* No "success flip": the reference turns ~90% of fault cells into success cells and then
  thins the remaining faults again with ``fault_rate``, so ``fault_rate=0.5`` gave 29% faulted
  rows (engine.md §9 item 10). Here every fault cell keeps its condition and ``fault_rate``
  alone decides, per prompt, whether it fires (:func:`toolkit.fault_plan_for`).
* ``multi_tool`` is on the tool axis only when the agent has two or more tools (with one
  tool there is no second tool to combine), and human tools (answered by the person) are
  not tool-axis values.
* Condition values are the fault-mode names (``malformed``, ``stale``, ...); the reference's
  ``malformed_result`` / ``stale_result`` are accepted as aliases by the world.
* Rounding half up in the tier mixer (``floor(x + 0.5)``), not Python's banker's rounding,
  so 10 x 0.25 gives 3 hard items, not 2.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._errors import ConfigError, unknown_name_message
from toolkit._hashing import canonical_json, stable_hash, stable_uniform
from toolkit._results import Result, json_safe
from toolkit.covering import coverage as _coverage
from toolkit.covering import covering_array as _covering_array
from toolkit.sandbox import WORLD_STATES, WorldOptions
from toolkit._faults import FAULT_MODES
from toolkit.tools import normalize_tools

__all__ = [
    "AXES",
    "STANCES",
    "HISTORIES",
    "TIERS",
    "HARD_TIERS",
    "RULE_CAP",
    "Situation",
    "SituationAxes",
    "SituationGrid",
    "TierMix",
    "split_policy",
    "situation_axes",
    "situation_grid",
    "tier_of",
    "mix_tiers",
]

#: Axis names, in the order every dimensions dict lists them.
AXES = ("tool", "rule", "stance", "world_state", "tool_condition", "history")
STANCES = (
    "ordinary", "ambiguous", "boundary", "adversarial", "hurried",
    "unsure", "retry", "mistaken", "exploratory", "conflicting",
)
HISTORIES = ("fresh", "prior_failure", "prior_partial_action", "contradicts_earlier", "repeat_visit")
TIERS = ("ordinary", "ambiguous", "boundary", "adversarial")
#: The hard tiers, in the order the mixer serves them (hardest first).
HARD_TIERS = ("adversarial", "boundary", "ambiguous")
#: Policy clauses kept on the rule axis (reference §3.1 and §9 item 11: 16). Each clause adds
#: a block of about max-axis-size rows, so 16 clauses already add ~160 situations.
RULE_CAP = 16

_TIER_OF_STANCE = {
    "ordinary": "ordinary", "hurried": "ordinary", "retry": "ordinary", "mistaken": "ordinary",
    "exploratory": "ordinary", "ambiguous": "ambiguous", "unsure": "ambiguous",
    "boundary": "boundary", "conflicting": "boundary", "adversarial": "adversarial",
}

# Clauses shorter than this are headings or fragments ("Refunds", "Note"), not rules; longer
# than _CLAUSE_MAX they are cut at a word boundary so a value stays readable in a table.
_CLAUSE_MIN = 8
_CLAUSE_MAX = 120
_BULLET = re.compile(r"^\s*(?:[-*\u2022+]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)](?=\s))\s+")
_HEADING = re.compile(r"^\s*(#{1,6}\s+.*|[A-Z][\w /&-]{0,40}:)\s*$")
_LABEL = re.compile(r"^\s*[A-Z][\w /&-]{0,30}:\s+(?=\S)")
_ROLE = re.compile(r"^\s*(you are|you're|your role is|as an? [\w -]+ (assistant|agent))\b", re.IGNORECASE)
_PRONOUN_START = re.compile(r"^(they|it|this|that|these|those|he|she|which|then)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def tier_of(stance: str) -> str:
    """The difficulty tier of a stance (ordinary / ambiguous / boundary / adversarial)."""
    if stance not in _TIER_OF_STANCE:
        raise ConfigError(unknown_name_message("stance", str(stance), STANCES))
    return _TIER_OF_STANCE[stance]


# ----------------------------------------------------------------------------------------
# Policy clauses
# ----------------------------------------------------------------------------------------


def _cut(text: str) -> str:
    if len(text) <= _CLAUSE_MAX:
        return text
    head = text[:_CLAUSE_MAX]
    return head[: head.rfind(" ")].rstrip(" ,;:") if " " in head else head


def split_policy(system_prompt: str | None) -> list[str]:
    """Every policy clause of a system prompt, in document order, deduplicated (no cap).

    Splits on blank lines, headings, numbered and bulleted lines, ``Label:`` lines (the
    label is kept in the clause), ``"; "`` (unless the next part opens with a pronoun:
    "...; they can only be cancelled" stays whole) and sentences (when every sentence is at
    least 8 characters); drops role paragraphs ("You are ..." and the sentences after it in
    the same paragraph), fragments under 8 characters, and cuts clauses over 120
    characters at a word boundary (reference engine.md §3.1).
    """
    if not system_prompt or not str(system_prompt).strip():
        return []
    blocks: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            blocks.append(" ".join(current))
            current.clear()

    for line in str(system_prompt).splitlines():
        if not line.strip() or _HEADING.match(line):
            flush()
            continue
        if _BULLET.match(line):
            flush()
            line = _BULLET.sub("", line, count=1)
        elif _LABEL.match(line):
            # "Refunds: only within 24 hours" starts a clause of its own; the label stays,
            # since the clause often means little without it.
            flush()
        current.append(line.strip())
    flush()
    clauses: list[str] = []
    for block in blocks:
        if _ROLE.match(block):
            # The role paragraph ("You are the agent of X. You help ...") describes the
            # job, not a rule; the reference dropped only its first sentence.
            continue
        parts: list[str] = []
        for piece in re.split(r";\s+", block):
            # "...cannot be changed; they can only be cancelled": a part that opens with a
            # pronoun means nothing alone, so it stays with the part before it.
            if parts and _PRONOUN_START.match(piece):
                parts[-1] = f"{parts[-1]}; {piece}"
            else:
                parts.append(piece)
        for part in parts:
            sentences = _SENTENCE.split(part)
            pieces = sentences if all(len(s.strip()) >= _CLAUSE_MIN for s in sentences) else [part]
            clauses.extend(p.strip() for p in pieces)
    seen: set[str] = set()
    kept: list[str] = []
    for clause in clauses:
        clause = _cut(re.sub(r"\s+", " ", clause).strip())
        if len(clause) < _CLAUSE_MIN or _ROLE.match(clause):
            continue
        if clause.lower() in seen:
            continue
        seen.add(clause.lower())
        kept.append(clause)
    return kept


# ----------------------------------------------------------------------------------------
# Axes
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SituationAxes(Result):
    """The axes of one agent: ``axes`` (axis -> tuple of values, in :data:`AXES` order),
    ``rules`` (clauses kept), ``dropped_rules`` (clauses over the cap), ``warnings``."""

    axes: Mapping[str, tuple]
    rules: tuple[str, ...] = ()
    dropped_rules: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __str__(self) -> str:
        sizes = " x ".join(f"{name} {len(values)}" for name, values in self.axes.items())
        return f"SituationAxes({sizes})"


def _fault_mode_names(fault_modes: Any) -> tuple[str, ...]:
    if fault_modes is None:
        return FAULT_MODES
    if isinstance(fault_modes, WorldOptions):
        return fault_modes.mode_names
    if isinstance(fault_modes, Mapping):
        return WorldOptions(fault_modes=fault_modes).mode_names
    if isinstance(fault_modes, str) or not isinstance(fault_modes, Sequence):
        raise ConfigError("fault_modes must be a list of mode names, a {name: builder} dict or a WorldOptions")
    extra = []
    for name in fault_modes:
        if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]{0,39}$", name) or name == "success":
            raise ConfigError(f"fault mode name {name!r} must be 1-40 lower-case letters, digits or '_' (not 'success')")
        if name not in FAULT_MODES and name not in extra:
            extra.append(name)
    return FAULT_MODES + tuple(extra)


def situation_axes(
    tools: Any,
    system_prompt: str | None = None,
    *,
    fault_modes: Any = None,
    rule_cap: int = RULE_CAP,
) -> SituationAxes:
    """The six axes of an agent (reference engine.md §3.1).

    ``fault_modes``: extra modes (names, a ``{name: builder}`` dict, or a
    :class:`~toolkit.WorldOptions`); every one becomes a ``tool_condition`` value.
    ``rule_cap``: clauses kept (document order); the rest are listed in ``dropped_rules``
    and a warning says how many were dropped.
    """
    if isinstance(rule_cap, bool) or not isinstance(rule_cap, int) or rule_cap < 1:
        raise ConfigError(f"rule_cap must be an integer >= 1, got {rule_cap!r}")
    specs = normalize_tools(tools)
    callable_tools = [spec for spec in specs if not spec.is_human]
    tool_values = [spec.name for spec in callable_tools] + ["unrelated"]
    if len(callable_tools) >= 2:
        tool_values.append("multi_tool")
    clauses = split_policy(system_prompt)
    notes: list[str] = []
    kept, dropped = clauses[:rule_cap], clauses[rule_cap:]
    if dropped:
        notes.append(
            f"{len(kept)} of {len(clauses)} policy clauses are on the rule axis; {len(dropped)} dropped "
            f"(first dropped: {dropped[0]!r}); raise rule_cap= to cover them"
        )
    if system_prompt and str(system_prompt).strip() and not clauses:
        notes.append("the system prompt has no policy clause of 8+ characters; the rule axis is 'unspecified'")
    has_reference = any(spec.reference_parameters for spec in callable_tools)
    axes = {
        "tool": tuple(tool_values),
        "rule": tuple(kept) if kept else ("unspecified",),
        "stance": STANCES,
        "world_state": WORLD_STATES if has_reference else ("unspecified",),
        "tool_condition": ("success",) + _fault_mode_names(fault_modes),
        "history": HISTORIES,
    }
    return SituationAxes(axes=axes, rules=tuple(kept), dropped_rules=tuple(dropped), warnings=tuple(notes))


# ----------------------------------------------------------------------------------------
# Situation
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Situation(Result):
    """One point of the situation space.

    ``dimensions``: axis -> value (every axis of :data:`AXES`); ``layer``: "base" or "rule"
    (which grid block it came from; not part of the identity). Derived: ``tier`` (from the
    stance) and ``id`` = ``"sc-"`` + the first 12 hex of sha256 of the canonical JSON of the
    dimensions, so the same dimensions have the same id in every run and process.
    """

    dimensions: Mapping[str, Any]
    layer: str = "base"
    tier: str = field(init=False)
    id: str = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.dimensions, Mapping):
            raise ConfigError(f"Situation dimensions must be a dict axis -> value, got {type(self.dimensions).__name__}")
        for axis in self.dimensions:
            if axis not in AXES:
                raise ConfigError(unknown_name_message("situation axis", str(axis), AXES))
        ordered = {axis: self.dimensions.get(axis, "unspecified") for axis in AXES}
        object.__setattr__(self, "dimensions", ordered)
        stance = ordered["stance"]
        object.__setattr__(self, "tier", tier_of(stance) if stance != "unspecified" else "ordinary")
        object.__setattr__(self, "id", "sc-" + stable_hash(json_safe(ordered), 12))

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Situation) and other.id == self.id

    @property
    def fault_plan(self) -> dict[str, Any]:
        """The plan this situation asks for: ``{}`` for success, else ``{"*": {"mode": m}}``.
        Whether one prompt runs under it is decided by :func:`toolkit.fault_plan_for`."""
        condition = self.dimensions.get("tool_condition")
        if condition in (None, "success", "unspecified"):
            return {}
        return {"*": {"mode": condition}}

    def __str__(self) -> str:
        shown = ", ".join(f"{axis}={value}" for axis, value in self.dimensions.items() if value != "unspecified")
        return f"{self.id} [{self.tier}] {shown}"


# ----------------------------------------------------------------------------------------
# The grid
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SituationGrid(Result):
    """The covering grid of situations. Iterate it for :class:`Situation` objects.

    Fields: ``situations``; ``axes`` (axis -> values); ``strength``; ``seed``;
    ``coverage`` (``{"strength", "pairs_planned", "pairs_covered", "fraction",
    "excluded_axes"}``; t-tuples over the non-constant axes, the rule "unspecified"
    excluded); ``warnings``; ``rules``; ``dropped_rules``; ``n_base`` (rows of the
    rule-free block).
    """

    situations: tuple[Situation, ...]
    axes: Mapping[str, tuple]
    strength: int
    seed: int
    coverage: Mapping[str, Any]
    warnings: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    dropped_rules: tuple[str, ...] = ()
    n_base: int = 0

    def __iter__(self) -> Iterator[Situation]:
        return iter(self.situations)

    def __len__(self) -> int:
        return len(self.situations)

    def __getitem__(self, index: int) -> Situation:
        return self.situations[index]

    def __str__(self) -> str:
        counts = self.tier_counts()
        tiers = ", ".join(f"{tier} {counts[tier]}" for tier in TIERS)
        return (
            f"SituationGrid({len(self)} situations, t={self.strength}, {len(self.rules)} rules, "
            f"coverage {self.coverage.get('pairs_covered')}/{self.coverage.get('pairs_planned')}; {tiers})"
        )

    def tier_counts(self) -> dict[str, int]:
        counts = {tier: 0 for tier in TIERS}
        for situation in self.situations:
            counts[situation.tier] += 1
        return counts

    def by_id(self, situation_id: str) -> Situation:
        for situation in self.situations:
            if situation.id == situation_id:
                return situation
        raise KeyError(situation_id)

    @property
    def coverage_factors(self) -> dict[str, tuple]:
        """The axes coverage is planned over (constant axes and the placeholder rule
        "unspecified" left out), ready for :func:`toolkit.coverage` or a coverage heatmap."""
        return _varying_factors(self.axes)

    def coverage_of(self, rows: Any) -> dict[str, Any]:
        """The same coverage numbers for other rows: situations, dimension dicts, or result
        rows carrying ``scenario_dimensions``."""
        dicts = []
        for row in rows:
            if isinstance(row, Situation):
                dicts.append(dict(row.dimensions))
            elif isinstance(row, Mapping):
                dicts.append(dict(row.get("scenario_dimensions") or row))
        return _grid_coverage(dicts, self.axes, self.strength)

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(
            [{"id": s.id, "tier": s.tier, "layer": s.layer, **s.dimensions} for s in self.situations],
            columns=["id", "tier", "layer", *AXES],
        )

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out["situations"] = [{"id": s.id, "tier": s.tier, "layer": s.layer, "dimensions": dict(s.dimensions)} for s in self]
        return out


def _varying_factors(axes: Mapping[str, tuple]) -> dict[str, tuple]:
    factors = {}
    for axis, values in axes.items():
        values = tuple(v for v in values if not (axis == "rule" and v == "unspecified"))
        if len(values) >= 2 or (axis == "rule" and values):
            factors[axis] = values
    # A single rule is not constant: the rule-free block holds "unspecified" beside it, so
    # its pairs are real. Any other one-value axis says nothing and is excluded (§11 gap).
    return factors


def _grid_coverage(dicts: list[dict], axes: Mapping[str, tuple], strength: int) -> dict[str, Any]:
    factors = _varying_factors(axes)
    excluded = [axis for axis in axes if axis not in factors]
    if len(factors) < strength:
        return {"strength": strength, "pairs_planned": 0, "pairs_covered": 0, "fraction": None, "excluded_axes": excluded}
    report = _coverage(dicts, factors, strength=strength) if dicts else None
    if report is None:
        planned = _coverage([{a: v[0] for a, v in factors.items()}], factors, strength=strength).planned
        return {"strength": strength, "pairs_planned": planned, "pairs_covered": 0, "fraction": 0.0, "excluded_axes": excluded}
    return {
        "strength": strength,
        "pairs_planned": report.planned,
        "pairs_covered": report.covered,
        "fraction": report.fraction,
        "excluded_axes": excluded,
    }


def _check_constraints(constraints: Any, axes: Mapping[str, tuple]) -> list[Any]:
    if constraints is None:
        return []
    if isinstance(constraints, Mapping) or callable(constraints):
        items = [constraints]
    elif isinstance(constraints, (list, tuple)):
        items = list(constraints)
    else:
        items = [constraints]  # refused below with the accepted forms
    for item in items:
        if isinstance(item, Mapping):
            for axis, value in item.items():
                if axis not in axes:
                    raise ConfigError("constraint: " + unknown_name_message("situation axis", str(axis), AXES))
                if value not in axes[axis]:
                    raise ConfigError(
                        f"constraint on {axis!r}: "
                        + unknown_name_message(f"{axis} value", str(value), [str(v) for v in axes[axis]])
                    )
        elif not callable(item):
            raise ConfigError(
                "constraints must be forbidden combinations {axis: value} or predicates f(partial_dimensions) -> bool"
            )
    return items


def _project(constraints: list[Any], rule: str) -> list[Any]:
    """The constraints as they read inside one block, where the rule is fixed."""
    projected: list[Any] = []
    for item in constraints:
        if isinstance(item, Mapping):
            if "rule" in item:
                if item["rule"] != rule:
                    continue
                item = {k: v for k, v in item.items() if k != "rule"}
                if not item:
                    raise ConfigError(f"constraint forbids the rule {rule!r} entirely; drop the clause from the prompt instead")
            projected.append(item)
        else:
            projected.append(lambda partial, predicate=item: bool(predicate({**partial, "rule": rule})))
    return projected


def _block_seed(seed: int, *parts: Any) -> int:
    return int(stable_hash([seed, *parts], 8), 16)


# Unconstrained blocks by (axes, t, seed, effort): the array is a pure function of these,
# and re-running a notebook cell or a benchmark rebuilds the same grid (the base block took
# ~10 ms of a 20 ms simulate() set-up). Constrained blocks are not cached: predicates have no
# stable identity. Bounded; rows are copied out.
_UNCONSTRAINED_BLOCKS: dict[tuple, list[dict]] = {}


def situation_grid(
    tools: Any,
    system_prompt: str | None = None,
    strength: int = 2,
    constraints: Any = None,
    seed: int = 0,
    fault_modes: Any = None,
    *,
    rule_cap: int = RULE_CAP,
    effort: str = "default",
) -> SituationGrid:
    """The layered covering grid of situations for one agent.

    ``strength``: t of the covering array (2 = every pair of axis values co-occurs).
    ``constraints``: forbidden combinations ``{axis: value, ...}`` and/or predicates
    ``f(partial_dimensions) -> bool`` (True = allowed), as :func:`toolkit.covering_array`
    takes them. ``seed``: fixes every block. ``fault_modes``: extra fault modes (names, a
    builder dict, or WorldOptions). ``effort``: passed to the covering array.

    A cap on policy clauses drops the rest with a warning (also in ``.warnings``) saying how
    many were dropped.
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    if isinstance(strength, bool) or not isinstance(strength, int) or strength < 1:
        raise ConfigError(f"strength must be an integer >= 1, got {strength!r}")
    described = situation_axes(tools, system_prompt, fault_modes=fault_modes, rule_cap=rule_cap)
    axes = dict(described.axes)
    user_constraints = _check_constraints(constraints, axes)
    others = {axis: values for axis, values in axes.items() if axis != "rule"}
    notes = list(described.warnings)
    for note in described.warnings:
        if "dropped" in note:
            warnings.warn(note, UserWarning, stacklevel=2)

    varying = {axis: values for axis, values in others.items() if len(values) >= 2}
    fixed = {axis: values[0] for axis, values in others.items() if len(values) < 2}
    n_varying = len(_varying_factors(axes))
    if strength > n_varying:
        # Every combination of all varying axes is already the full product; a higher t
        # means nothing more, so say so rather than report an empty coverage plan.
        notes.append(f"strength {strength} exceeds the {n_varying} varying axes; the grid is built at t={n_varying}")
        strength = max(1, n_varying)
    situations: list[Situation] = []
    seen: set[str] = set()

    def add_block(rule: str, layer: str, t: int, block_seed: int) -> None:
        block_constraints = _project(user_constraints, rule)
        if not varying:
            rows = [{}]
        else:
            t = max(1, min(t, len(varying)))
            rows = None
            cache_key = None
            if not block_constraints:
                cache_key = (canonical_json(varying), t, block_seed, effort)
                rows = _UNCONSTRAINED_BLOCKS.get(cache_key)
            if rows is None:
                array = _covering_array(varying, strength=t, constraints=block_constraints or None, seed=block_seed, effort=effort)
                rows = array.to_dicts()
                if array.infeasible:
                    notes.append(f"{len(array.infeasible)} {t}-tuples of block {rule!r} are forbidden by the constraints")
                if cache_key is not None:
                    if len(_UNCONSTRAINED_BLOCKS) >= 64:
                        _UNCONSTRAINED_BLOCKS.clear()
                    _UNCONSTRAINED_BLOCKS[cache_key] = rows
            rows = [dict(row) for row in rows]
        for row in rows:
            situation = Situation({**fixed, **row, "rule": rule}, layer=layer)
            if situation.id not in seen:
                seen.add(situation.id)
                situations.append(situation)

    add_block("unspecified", "base", strength, _block_seed(seed, "base"))
    n_base = len(situations)
    for rule in described.rules:
        add_block(rule, "rule", strength - 1, _block_seed(seed, "rule-block", rule))

    dicts = [dict(s.dimensions) for s in situations]
    return SituationGrid(
        situations=tuple(situations),
        axes=axes,
        strength=strength,
        seed=seed,
        coverage=_grid_coverage(dicts, axes, strength),
        warnings=tuple(notes),
        rules=described.rules,
        dropped_rules=described.dropped_rules,
        n_base=n_base,
    )


# ----------------------------------------------------------------------------------------
# Tier mixer
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierMix(Result):
    """A difficulty-mixed draw: ``items`` (in pick order), ``counts`` (tier -> n),
    ``hard_share_requested``, ``hard_share_drawn``, ``n_requested``, ``note``."""

    items: tuple
    counts: Mapping[str, int]
    hard_share_requested: float
    hard_share_drawn: float | None
    n_requested: int
    note: str | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __str__(self) -> str:
        counts = ", ".join(f"{tier} {self.counts.get(tier, 0)}" for tier in TIERS)
        drawn = "n/a" if self.hard_share_drawn is None else f"{self.hard_share_drawn:.2f}"
        return f"TierMix({len(self.items)} items: {counts}; hard share {drawn} for {self.hard_share_requested:.2f} asked)"


def _tier_of_item(item: Any) -> str:
    tier = getattr(item, "tier", None)
    if tier is None and isinstance(item, Mapping):
        tier = item.get("tier") or (tier_of(item["stance"]) if "stance" in item else None)
        if tier is None and isinstance(item.get("dimensions"), Mapping):
            tier = tier_of(item["dimensions"]["stance"])
    if tier not in TIERS:
        raise ConfigError(f"cannot tell the tier of {item!r}: give Situations, or dicts with 'tier' or 'stance'")
    return tier


def _item_key(item: Any) -> str:
    identity = getattr(item, "id", None)
    if identity is None and isinstance(item, Mapping):
        identity = item.get("id")
    return str(identity) if identity is not None else stable_hash(json_safe(item))


def mix_tiers(items: Sequence[Any], n: int, hard_share: float, seed: int = 0) -> TierMix:
    """Pick ``n`` items with the difficulty mix ``hard_share`` asks for.

    Rules (reference engine.md §3.2, checked against §10 item 27): the first pick is
    ordinary; the second is hard (adversarial, else boundary, else ambiguous); with 8 or more
    picks every tier appears once; hard picks then number ``max(those minimums,
    floor(n * hard_share + 0.5))``, served round-robin across the hard tiers, and the rest
    are ordinary. Hence ``hard_share`` 0 still yields a few hard items (breadth first: a
    suite with no hard case hides the failures that matter) and 1.0 keeps one ordinary item
    (the baseline every comparison needs). When a tier runs out, the others fill in and
    ``note`` says so. Within a tier the order is a seeded hash of each item's id.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"n must be an integer >= 0, got {n!r}")
    if isinstance(hard_share, bool) or not isinstance(hard_share, (int, float)) or not 0.0 <= hard_share <= 1.0:
        raise ConfigError(f"hard_share must be a number in [0, 1], got {hard_share!r}")
    pools: dict[str, list[Any]] = {tier: [] for tier in TIERS}
    for item in items:
        pools[_tier_of_item(item)].append(item)
    for tier in TIERS:
        pools[tier].sort(key=lambda item: stable_uniform("tier-mix", seed, _item_key(item)))
    hard_available = [tier for tier in HARD_TIERS if pools[tier]]
    minimum = 0
    if n >= 2 and hard_available:
        minimum = 1
    if n >= 8:
        minimum = len(hard_available)
    target = math.floor(n * hard_share + 0.5)
    n_hard = max(minimum, target)
    if n >= 1 and pools["ordinary"]:
        n_hard = min(n_hard, n - 1)
    n_hard = min(n_hard, n)

    cursor = {tier: 0 for tier in TIERS}

    def take(tier: str) -> Any | None:
        if cursor[tier] < len(pools[tier]):
            cursor[tier] += 1
            return pools[tier][cursor[tier] - 1]
        return None

    hard: list[Any] = []
    rotation = 0
    while len(hard) < n_hard:
        picked = None
        for step in range(len(HARD_TIERS)):
            tier = HARD_TIERS[(rotation + step) % len(HARD_TIERS)]
            picked = take(tier)
            if picked is not None:
                rotation = (rotation + step + 1) % len(HARD_TIERS)
                break
        if picked is None:
            break
        hard.append(picked)
    ordinary: list[Any] = []
    while len(ordinary) + len(hard) < n:
        picked = take("ordinary")
        if picked is None:
            break
        ordinary.append(picked)
    short_note = None
    if len(ordinary) + len(hard) < n:
        # Ordinary items ran out: hard ones fill in (and the other way round above).
        while len(ordinary) + len(hard) < n:
            picked = None
            for tier in HARD_TIERS:
                picked = take(tier)
                if picked is not None:
                    hard.append(picked)
                    break
            if picked is None:
                break
    if len(ordinary) + len(hard) < n:
        short_note = f"only {len(ordinary) + len(hard)} items for n={n}; every item was used"
    elif len(hard) != n_hard:
        short_note = f"{len(hard)} hard items drawn for {n_hard} planned: a tier ran out"
    # Pick order: one ordinary item, then the two lists interleaved in proportion (hard
    # first on a tie), so any prefix of the draw keeps roughly the planned mix.
    order: list[Any] = ordinary[:1]
    rest = ordinary[1:]
    used_hard = used_rest = 0
    while used_hard < len(hard) or used_rest < len(rest):
        if used_rest >= len(rest) or (used_hard < len(hard) and used_hard * len(rest) <= used_rest * len(hard)):
            order.append(hard[used_hard])
            used_hard += 1
        else:
            order.append(rest[used_rest])
            used_rest += 1
    counts = {tier: 0 for tier in TIERS}
    for item in order:
        counts[_tier_of_item(item)] += 1
    drawn = None if not order else (len(order) - counts["ordinary"]) / len(order)
    return TierMix(
        items=tuple(order),
        counts=counts,
        hard_share_requested=float(hard_share),
        hard_share_drawn=drawn,
        n_requested=n,
        note=short_note,
    )
