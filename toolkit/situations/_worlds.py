"""A situation's world: its fault plan (kept at ``fault_rate`` per prompt) and a fresh :class:`~toolkit.world.World` for one rollout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolkit._util.hashing import stable_uniform
from toolkit.errors import ConfigError
from toolkit.situations.grid import Situation
from toolkit.world._world import _CONDITION_ALIASES, World, WorldOptions

__all__ = ["fault_plan_for", "kept_fault_plan", "world_for"]

# ----------------------------------------------------------------------------------------
# Situation -> fault plan, world for a situation
# ----------------------------------------------------------------------------------------


def _condition_of(situation: Any) -> tuple[str | None, str]:
    if situation is None or isinstance(situation, str):
        return situation, str(situation)
    dimensions = getattr(situation, "dimensions", situation)
    if not isinstance(dimensions, Mapping):
        raise ConfigError(f"expected a Situation, a dimensions dict or a condition name, got {type(situation).__name__}")
    identity = getattr(situation, "id", None)
    if identity is None:
        # The same id a Situation with these dimensions has, so a dict and a Situation get
        # the same keep verdict.
        identity = Situation(dict(dimensions)).id
    return dimensions.get("tool_condition"), str(identity)


def fault_plan_for(situation: Any, *, fault_rate: float, seed: int = 0, key: str = "") -> dict[str, Any]:
    """The fault plan one prompt of a situation runs under.

    Condition "success" (or none) -> ``{}``; a fault mode m -> ``{"*": {"mode": m}}`` when
    kept. The plan is kept iff ``stable_uniform("fault-keep", seed, situation id, key) <
    fault_rate`` (a hash draw, so thread timing cannot change it).

    Parameters
    ----------
    situation : Situation, mapping, str or None
        A Situation, its dimensions dict (its ``tool_condition`` is read; the id is the one a
        Situation with these dimensions has), or a tool-condition name (the name is then the
        identity). The aliases ``malformed_result`` / ``stale_result`` are accepted.
    fault_rate : float
        Chance in [0, 1] that the plan is kept for this prompt: 0 never keeps a fault, 1
        always does. Required (keyword only).
    seed : int
        Seed of the keep draw. Default 0.
    key : str
        Extra identity of the draw: the prompt text, so every rollout of one prompt agrees.
        Default ``""``.

    Returns
    -------
    dict
        ``{}`` (no fault) or ``{"*": {"mode": m}}``.

    Raises
    ------
    ConfigError
        If ``fault_rate`` is not a number in [0, 1], or ``situation`` is of another type.
    """
    if isinstance(fault_rate, bool) or not isinstance(fault_rate, (int, float)) or not 0.0 <= fault_rate <= 1.0:
        raise ConfigError(f"fault_rate must be a number in [0, 1], got {fault_rate!r}")
    return kept_fault_plan(situation, fault_rate=float(fault_rate), seed=seed, key=key)


def kept_fault_plan(situation: Any, *, fault_rate: float, seed: int = 0, key: str = "") -> dict[str, Any]:
    """:func:`fault_plan_for` without re-checking ``fault_rate`` (the engine's path: the run's
    rate was checked once, when :class:`toolkit.sim.SimulateConfig` was built).

    Parameters
    ----------
    situation : Situation, mapping, str or None
        As in :func:`fault_plan_for`.
    fault_rate : float
        Chance that the plan is kept, assumed already checked to be in [0, 1]; at or below 0
        no fault is kept. Required (keyword only).
    seed : int
        Seed of the keep draw. Default 0.
    key : str
        Extra identity of the draw (the prompt text). Default ``""``.

    Returns
    -------
    dict
        ``{}`` (no fault) or ``{"*": {"mode": m}}``.
    """
    condition, identity = _condition_of(situation)
    condition = _CONDITION_ALIASES.get(condition, condition)
    if condition in (None, "success", "None", "unspecified"):
        return {}
    if fault_rate <= 0.0 or stable_uniform("fault-keep", seed, identity, key) >= fault_rate:
        return {}
    return {"*": {"mode": condition}}


def world_for(
    situation: Any,
    tools: Any,
    *,
    fault_rate: float = 0.5,
    seed: int = 0,
    key: str = "",
    options: WorldOptions | Mapping[str, Any] | None = None,
    execute: Callable[[str, dict], Any] | None = None,
) -> World:
    """A fresh :class:`World` for one rollout of ``situation`` (its world_state, and its
    fault plan kept at ``fault_rate`` as :func:`fault_plan_for` decides).

    Parameters
    ----------
    situation : Situation, mapping, str or None
        A Situation or its dimensions dict (its ``world_state`` and ``tool_condition`` are
        used), or a tool-condition name (no world state). As in :func:`fault_plan_for`.
    tools : any
        The agent's tools, anything :func:`toolkit.world.normalize_tools` accepts.
    fault_rate : float
        Chance in [0, 1] that the situation's fault plan is kept. Default 0.5. Not used (nor
        checked) when ``execute`` is given.
    seed : int
        Seed of both the keep draw and the :class:`World`. Default 0.
    key : str
        Extra identity of the keep draw (the prompt text). Default ``""``.
    options : WorldOptions or mapping, optional
        The world's dials, passed to :class:`World`. Default None: ``WorldOptions()``.
    execute : callable, optional
        The user's own world ``execute(tool_name, arguments) -> result``, passed to
        :class:`World`; with it no fault plan applies. Default None.

    Returns
    -------
    World

    Raises
    ------
    ConfigError
        If ``fault_rate`` is not a number in [0, 1] (without ``execute``), or :class:`World`
        refuses an option, the world state, the fault mode or ``execute``.
    SchemaError
        If a tool schema is malformed (from :func:`toolkit.world.normalize_tools`).
    """
    dimensions = getattr(situation, "dimensions", situation) or {}
    state = dimensions.get("world_state") if isinstance(dimensions, Mapping) else None
    plan = {} if execute is not None else fault_plan_for(situation, fault_rate=fault_rate, seed=seed, key=key)
    return World(tools, options=options, seed=seed, world_state=state, fault_plan=plan, execute=execute)


