"""A situation's world: its fault plan (``fault_rate`` of its tool calls broken) and a fresh :class:`~toolkit.world.World` for one rollout.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolkit._util.hashing import stable_uniform
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.rows._read import as_row_list
from toolkit.situations.grid import Situation
from toolkit.world._world import _CONDITION_ALIASES, _STATE_AFTER_VERB, World, WorldOptions, tool_verb
from toolkit.world.faults import ATTACK_MODES, FAULT_MODES
from toolkit.world.tools import DESTRUCTIVE_NAME, normalize_tools

__all__ = ["fault_plan_for", "kept_fault_plan", "world_for", "goal_for", "attacked_tasks"]

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


def fault_plan_for(
    situation: Any, *, fault_rate: float, seed: int = 0, key: str = "", modes: Sequence[str] = FAULT_MODES
) -> dict[str, Any]:
    """The fault plan one prompt of a situation runs under: ``fault_rate`` of its tool calls break.

    ``fault_rate`` is the share of tool calls broken, in every situation: 0 gives ``{}``;
    otherwise ``{"*": {"mode": m, "rate": fault_rate, "phase": u}}``, under which the world
    breaks the i-th tool call iff ``floor((i + 1) * rate + u) > floor(i * rate + u)``
    (:class:`~toolkit.world.World`). That even spread breaks ``rate x calls`` of a rollout's
    calls to within one, so over a run the realised share is the rate up to about one call
    per rollout, where independent draws per call would add binomial noise (sd 0.022 over
    500 calls at 0.5). The phase ``u = stable_uniform("fault-phase", seed, situation id, key)``
    is a hash draw, so thread timing cannot change it and every rollout of one prompt (same
    ``key``) meets the same schedule. The mode ``m`` is the situation's ``tool_condition``;
    a ``"success"`` situation (or one with no condition) breaks with a mode drawn from
    ``modes`` by the same hash, so that at rate 1 every call breaks.

    Parameters
    ----------
    situation : Situation, mapping, str or None
        A Situation, its dimensions dict (its ``tool_condition`` is read; the id is the one a
        Situation with these dimensions has), or a tool-condition name (the name is then the
        identity). The aliases ``malformed_result`` / ``stale_result`` are accepted.
    fault_rate : float
        Share in [0, 1] of the prompt's tool calls that break: 0 none, 1 every one. Required
        (keyword only).
    seed : int
        Seed of the phase and mode draws. Default 0.
    key : str
        Extra identity of the draws: the prompt text, so every rollout of one prompt agrees.
        Default ``""``.
    modes : sequence of str
        The modes a ``"success"`` situation's broken calls are drawn from. Default
        :data:`toolkit.world.FAULT_MODES` (the engine passes the world's own
        ``WorldOptions.mode_names``, registered modes included).

    Returns
    -------
    dict
        ``{}`` (no fault) or ``{"*": {"mode": m, "rate": fault_rate, "phase": u}}``.

    Raises
    ------
    ConfigError
        If ``fault_rate`` is not a number in [0, 1], ``modes`` is empty, or ``situation`` is
        of another type.
    """
    if isinstance(fault_rate, bool) or not isinstance(fault_rate, (int, float)) or not 0.0 <= fault_rate <= 1.0:
        raise ConfigError(f"fault_rate must be a number in [0, 1], got {fault_rate!r}")
    if not modes:
        raise ConfigError("modes must name at least one fault mode")
    return kept_fault_plan(situation, fault_rate=float(fault_rate), seed=seed, key=key, modes=modes)


def kept_fault_plan(
    situation: Any, *, fault_rate: float, seed: int = 0, key: str = "", modes: Sequence[str] = FAULT_MODES
) -> dict[str, Any]:
    """:func:`fault_plan_for` without re-checking ``fault_rate`` (the engine's path: the run's
    rate was checked once, when :class:`toolkit.sim.SimulateConfig` was built).

    Parameters
    ----------
    situation : Situation, mapping, str or None
        As in :func:`fault_plan_for`.
    fault_rate : float
        Share of tool calls that break, assumed already checked to be in [0, 1]; at or below
        0 no call breaks. Required (keyword only).
    seed : int
        Seed of the phase and mode draws. Default 0.
    key : str
        Extra identity of the draws (the prompt text). Default ``""``.
    modes : sequence of str
        The modes of a ``"success"`` situation's broken calls. Default
        :data:`toolkit.world.FAULT_MODES`.

    Returns
    -------
    dict
        ``{}`` (no fault) or ``{"*": {"mode": m, "rate": fault_rate, "phase": u}}``.
    """
    if fault_rate <= 0.0:
        return {}
    condition, identity = _condition_of(situation)
    condition = _CONDITION_ALIASES.get(condition, condition)
    if condition in (None, "success", "None", "unspecified"):
        modes = tuple(modes)
        condition = modes[min(len(modes) - 1, int(stable_uniform("fault-mode", seed, identity, key) * len(modes)))]
    phase = stable_uniform("fault-phase", seed, identity, key)
    return {"*": {"mode": condition, "rate": float(fault_rate), "phase": min(phase, math.nextafter(1.0, 0.0))}}


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
    fault plan at ``fault_rate`` as :func:`fault_plan_for` builds it).

    Parameters
    ----------
    situation : Situation, mapping, str or None
        A Situation or its dimensions dict (its ``world_state`` and ``tool_condition`` are
        used), or a tool-condition name (no world state). As in :func:`fault_plan_for`.
    tools : any
        The agent's tools, anything :func:`toolkit.world.normalize_tools` accepts.
    fault_rate : float
        Share in [0, 1] of the rollout's tool calls that break (:func:`fault_plan_for`).
        Default 0.5. Not used (nor checked) when ``execute`` is given.
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
    world_options = options if isinstance(options, WorldOptions) else WorldOptions.from_dict(options)
    plan = {} if execute is not None else fault_plan_for(situation, fault_rate=fault_rate, seed=seed, key=key, modes=world_options.mode_names)
    return World(tools, options=world_options, seed=seed, world_state=state, fault_plan=plan, execute=execute)




# ----------------------------------------------------------------------------------------
# Situation -> goal (the end state the ask requires; teacher-only)
# ----------------------------------------------------------------------------------------

# World states in which the ask cannot be granted: the right end state is the world untouched
# (a missing record cannot be cancelled, a done one not done twice, an ambiguous one not
# guessed at), so the goal requires no write and every write is collateral.
_NO_CHANGE_STATES = frozenset({"missing", "already_done", "duplicate"})
_CONFIRM = ("confirm", "confirmation")


def goal_for(situation: Any, tools: Any, reference: str | None = None) -> dict[str, Any] | None:
    """The end state a situation's ask requires, as a goal for :func:`toolkit.state_grader`.

    Derived from the ask's tool (its verb, as the world answers it), the named record, the
    world state and the rule in play:

    * a read or search asks for no change: ``writes`` is empty;
    * an update asks that the record's ``state`` move to the verb's state (cancel ->
      cancelled, refund -> refunded, ...) and that each required non-reference argument be
      written (``after`` left open: the template ask does not pin its value); the tool's
      optional arguments are ``allowed`` on that record;
    * a create asks for one new record (``field`` ``"*"``); a delete for the record gone;
    * in a ``missing``, ``already_done`` or ``duplicate`` world the ask cannot be granted, so
      the goal is no change at all; an ``unrelated`` ask likewise;
    * when the rule in play asks for confirmation and the tool destroys something, the
      milestones are the human tool, then the tool (partial credit; not part of the reward),
      and every destructive tool called before the human tool was answered is a minefield
      (``before``; part of the reward, as the rule is).

    A ``multi_tool`` ask (two tools, order unknown) gets no goal (None).

    Parameters
    ----------
    situation : Situation or mapping
        A Situation or its dimensions (``tool``, ``world_state``, ``rule`` are read).
    tools : any
        The agent's tools, anything :func:`toolkit.world.normalize_tools` accepts.
    reference : str, optional
        The record id the ask names (the writer's ``Prompt.reference``). Default None: any
        record.

    Returns
    -------
    dict or None
        ``{"writes": [...], "allowed": [...], "milestones": [...], "minefields": [...]}``, or
        None when no goal can be derived.
    """
    dimensions = getattr(situation, "dimensions", situation) or {}
    if not isinstance(dimensions, Mapping):
        return None
    specs = {spec.name: spec for spec in normalize_tools(tools)}
    name = dimensions.get("tool")
    state = str(dimensions.get("world_state") or "")
    if name == "unrelated" or state in _NO_CHANGE_STATES:
        return {"writes": [], "allowed": [], "milestones": [], "minefields": []}
    spec = specs.get(name)
    if spec is None or spec.is_human:
        return None
    verb = tool_verb(spec)
    record = None if reference is None else str(reference)
    writes: list[dict[str, Any]] = []
    allowed: list[dict[str, Any]] = []
    if verb == "create":
        writes.append({"record": None, "field": "*"})
    elif verb == "delete":
        writes.append({"record": record, "field": "*", "after": None})
    elif verb == "update":
        after = next((_STATE_AFTER_VERB[w] for w in spec.words if w in _STATE_AFTER_VERB), None)
        if after is not None:
            writes.append({"record": record, "field": "state", "after": after})
        for parameter in spec.properties:
            if parameter in spec.reference_parameters:
                continue
            entry = {"record": record, "field": parameter}
            (writes if parameter in spec.required else allowed).append(entry)
    milestones: list[dict[str, Any]] = []
    minefields: list[dict[str, Any]] = []
    rule = str(dimensions.get("rule") or "").lower()
    humans = [s.name for s in specs.values() if s.is_human]
    if humans and any(w in rule for w in _CONFIRM) and DESTRUCTIVE_NAME.search(spec.name):
        milestones = [{"tool": humans[0]}, {"tool": spec.name}]
        # The rule forbids what the milestones' in-order match forgives: a destructive call
        # made before the person answered (a later ask and a second call still "complete" the
        # milestones). Every destructive tool, as the conduct grader's check reads the rule.
        minefields = [{"tool": name, "before": humans[0]} for name, other in specs.items()
                      if not other.is_human and DESTRUCTIVE_NAME.search(name)]
    return {"writes": writes, "allowed": allowed, "milestones": milestones, "minefields": minefields}


# ----------------------------------------------------------------------------------------
# A run's tasks again, under attack (the paired design of tk.attack_report)
# ----------------------------------------------------------------------------------------


def attacked_tasks(rows: Any, modes: Sequence[str] = ATTACK_MODES) -> list[dict[str, Any]]:
    """A run's tasks, each set to replay under one attack mode: ``simulate(tasks=...)`` input.

    ``simulate(tasks=rows)`` replays each prompt with the fault mode its rows' ledger names
    (every call of the replay breaks that way). This sets that ledger to an attack: the
    prompts, in order of first appearance, take the ``modes`` in turn, so each mode is met
    by an equal share of the tasks and every task is seen clean (the input run) and attacked
    (the replay). ``tk.attack_report(attacked, clean=rows)`` then pairs them by task.

    Parameters
    ----------
    rows : rows, SimulationData or path
        A run's rows (anything :func:`toolkit.rows.as_row_list` accepts), usually a clean
        run (``fault_rate=0``). A SimulationData gives its ``trajectories`` (the rows with
        their privileged block, so each replayed row keeps its goal and the record the ask
        named); written rows have no goal, and the replay derives one with no named record
        (``simulate`` warns). Only rows with a string ``prompt`` are replayable.
    modes : sequence of str
        Attack modes to assign, from :data:`toolkit.world.ATTACK_MODES`. Default both,
        ``("prompt_injection", "wrong_data")``.

    Returns
    -------
    list of dict
        Copies of the rows with ``faults`` replaced by one attack entry; every other field
        (the prompt, the situation, a goal) is kept.

    Raises
    ------
    ConfigError
        If ``modes`` is empty or names a mode that is not an attack, or a row has no string
        ``prompt`` (its index is named).
    """
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    if not modes:
        raise ConfigError(f"attacked_tasks: modes is empty; pass some of {list(ATTACK_MODES)}")
    for mode in modes:
        if mode not in ATTACK_MODES:
            raise ConfigError("attacked_tasks: " + unknown_name_message("attack mode", str(mode), ATTACK_MODES))
    trajectories = getattr(rows, "trajectories", None)
    if trajectories is not None and not isinstance(rows, (Mapping, list, tuple, str)):
        # a run in memory (SimulationData): its trajectories keep the teacher-only privileged
        # block, so the replay keeps each row's goal with the record its ask named; its written
        # rows would not, and the replay would derive goals any record meets
        rows = trajectories
    assigned: dict[str, str] = {}
    out = []
    for index, row in enumerate(as_row_list(rows, "rows")):
        prompt = row.get("prompt")
        if not isinstance(prompt, str):
            raise ConfigError(f"attacked_tasks: rows[{index}] has no string 'prompt', so simulate(tasks=) cannot replay it")
        mode = assigned.setdefault(prompt, modes[len(assigned) % len(modes)])
        # the shape simulate(tasks=) reads: the mode of the first ledger entry, every call
        out.append({**row, "faults": [{"mode": mode, "tool": "*", "call_index": 0, "injected": True}]})
    return out
