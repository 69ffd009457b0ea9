"""Situations and the layered covering grid of them (a base block and one block per policy clause).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.hashing import canonical_json, stable_hash
from toolkit._util.results import Result, json_safe
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.situations.axes import AXES, RULE_CAP, TIERS, situation_axes, tier_of
from toolkit.situations.covering import _build as _build_covering_array
from toolkit.situations.covering import coverage as _coverage

__all__ = ["Situation", "SituationGrid", "situation_grid"]

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
        Whether one prompt runs under it is decided by :func:`toolkit.situations.fault_plan_for`."""
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
    # its pairs are real. Any other one-value axis says nothing and is excluded (docs/design/engine.md §11 gap).
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

# The progress bar appears only once a grid has taken this long, so the everyday grid (a few
# tools: ~10-50 ms) prints nothing, while a 2,000-tool grid (~5 s) shows its bar.
_PROGRESS_DELAY = 1.0
# Bar units per block (each block reports the share of its construction done).
_UNITS_PER_BLOCK = 100


class _Progress:
    """A tqdm bar (terminal or notebook, via tqdm.auto) over the grid's blocks; a no-op when
    ``enabled`` is False or tqdm cannot be imported."""

    def __init__(self, enabled: bool, n_blocks: int):
        self.bar = None
        self.block = 0
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # pragma: no cover - tqdm is a core dependency
                return
            self.bar = tqdm(
                total=n_blocks * _UNITS_PER_BLOCK, desc="situation grid", delay=_PROGRESS_DELAY,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| [{elapsed}{postfix}]", leave=True,
            )

    def start(self, index: int, label: str) -> None:
        self.block = index
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self._to(index * _UNITS_PER_BLOCK)

    def advance(self, fraction: float) -> None:
        if self.bar is not None:
            self._to(self.block * _UNITS_PER_BLOCK + int(fraction * _UNITS_PER_BLOCK))

    def _to(self, position: int) -> None:
        # Several greedy runs of one block report from 0 again: the bar never goes back.
        if position > self.bar.n:
            self.bar.update(position - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self._to(self.bar.total)
            self.bar.close()


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
    progress: bool = True,
) -> SituationGrid:
    """The layered covering grid of situations for one agent.

    A base block (rule "unspecified", strength t) and one block per kept policy clause
    (strength t-1, the rule fixed). A cap on policy clauses drops the rest with a warning
    (also in ``.warnings``) saying how many were dropped.

    Parameters
    ----------
    tools : any
        The agent's tools, anything :func:`toolkit.world.normalize_tools` accepts; they give
        the ``tool`` axis (see :func:`situation_axes`).
    system_prompt : str, optional
        The system prompt whose policy clauses are the ``rule`` axis. Default None: no rule
        blocks, only the base block.
    strength : int
        t of the covering array (2 = every pair of axis values co-occurs); default 2. A t
        above the number of varying axes is lowered to it, with a note in ``.warnings``.
    constraints : mapping, callable or list of them, optional
        Forbidden combinations ``{axis: value, ...}`` and/or predicates
        ``f(partial_dimensions) -> bool`` (True = allowed), as :func:`toolkit.covering_array`
        takes them; axes and values are checked against the grid's axes. Default None.
    seed : int
        Fixes every block (each block's seed is a hash of it and the block). Default 0.
    fault_modes : sequence of str, mapping or WorldOptions, optional
        Extra fault modes (names, a builder dict, or WorldOptions), added to the
        ``tool_condition`` axis. Default None.
    rule_cap : int
        Most policy clauses on the rule axis (default :data:`RULE_CAP`, 16), in document
        order.
    effort : str
        Passed to the covering array of every block: ``"fast"``, ``"default"`` (default) or
        ``"best"``.
    progress : bool
        Show a progress bar (tqdm: a line in a terminal, a widget in a notebook) over the
        blocks, once the grid has taken more than a second (a grid of a few tools never
        shows it; 2,000 tools take ~5 s). False: never. Default True.

    Returns
    -------
    SituationGrid

    Raises
    ------
    ConfigError
        If ``seed`` is not an integer, ``strength`` is not an integer >= 1, ``rule_cap`` is
        invalid, ``progress`` is not a bool, or a constraint names an unknown axis or value
        (or forbids a rule entirely).
    """
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    if isinstance(strength, bool) or not isinstance(strength, int) or strength < 1:
        raise ConfigError(f"strength must be an integer >= 1, got {strength!r}")
    if not isinstance(progress, bool):
        raise ConfigError(f"progress must be True or False, got {progress!r}")
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
                array = _build_covering_array(
                    varying, t, block_constraints or None, None, block_seed, effort, None, bar.advance
                )
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

    bar = _Progress(progress, 1 + len(described.rules))
    try:
        bar.start(0, "base block")
        add_block("unspecified", "base", strength, _block_seed(seed, "base"))
        n_base = len(situations)
        for index, rule in enumerate(described.rules, start=1):
            bar.start(index, f"rule {index}/{len(described.rules)}")
            add_block(rule, "rule", strength - 1, _block_seed(seed, "rule-block", rule))
    finally:
        bar.close()

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


