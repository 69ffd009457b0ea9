"""``tk.simulate()``: an agent definition in, graded-ready rows out (docs/design/engine.md §1-docs/design/engine.md §3).

One call: axes and the covering grid of situations (:mod:`toolkit.situations`) -> the search
decides, round by round, which situations and phrasings run next (five arms,
:mod:`toolkit.sim.search`) -> the template writer words them (:mod:`toolkit.situations.writer`) -> each
rollout runs on an executor (:func:`toolkit.run_rollout`: agent, simulated person, sandbox
world) -> rows are scrubbed and streamed (:class:`toolkit.RowWriter`), graded beside the loop
when a grader is given, and fed back into the search (signatures, cells, failures).

Scheduling. Work is planned in rounds of ``per_round`` rows (independent of ``concurrency``).
``reproducible=True`` (and always at ``concurrency=1``) is round-synchronous: a round is
submitted, every rollout of it lands, the results are processed in plan order, then the next
round is planned -- so the same seed gives the same rows at any concurrency and in any
process. Otherwise the loop streams: it keeps ``concurrency`` rollouts running, processes
rows as they land and plans the next round when the queue runs low (pool_low_* knobs). Once
a row has landed it submits up to ``2 x concurrency`` rollouts, so a worker that finishes
starts the next one from the pool's queue without waiting for the loop (which may be
planning); finished rollouts report to one completion queue, so collecting costs O(1) per
row however many are in flight (``cf.wait`` over every in-flight future was O(in flight)).
Measured with an agent sleeping 50 ms per call at concurrency 32: 44% of the C/L bound
before, >= 90% after (``benchmarks/bench_engine.py``).

Memory. Rows are kept compactly (:class:`toolkit.sim.data.RowStore`: one compressed
pickle per row; the trajectory is kept as its difference from the written row) and decoded
when ``data.rows`` / ``data.trajectories`` are first read; groups that reached k are dropped
once nothing can add to them (single eval run); novelty compares against a fixed window of
recent prompts (:class:`toolkit.sim.NoveltyIndex`). A streamed run's memory grows by ~1.5 KB
per row instead of ~15 KB (two dict copies per row plus every group).

Output durability. ``output=`` / ``checkpoint=`` rows go through :class:`toolkit.RowWriter`
with ``fsync="interval"`` (1 s): each row is written to the kernel before it counts as landed
(``on_row``, ``data.rows``), so a killed process loses none; an OS crash or power loss can
lose at most the last second of rows. ``report()["output_durability"]`` says so. The per-row
fsync of the writer's default cost ~4 ms per row here, more than the rest of the row.

Defaults that differ from the reference (whileai-sdk's engine, docs/design/engine.md; "the reference" below), and why:

* Offline by default. Where the reference's default is a hosted model (agent, writer, user),
  ours is the embedded offline path: the seeded agent on the shipped airline tool set, the
  template writer and the template user; ``report()["offline_defaults"]`` says so.
* ``mode="sft"`` uses ``repeat_policy="fixed"``: every prompt gets k rollouts (the reference's
  sft gave extra rollouts only to failure-worthy prompts, so k=4 was not guaranteed, docs/design/engine.md §11).
* Zero arm yield is a fixed point of the arm update (:func:`toolkit.sim.update_arm_weights`);
  every batch's yields are recorded in ``search["arm_history"]``.
* ``fault_rate`` is the share of tool calls broken, over every call of the run, in every
  situation (a ``"success"`` one breaks with a seeded mode), spread evenly within a rollout
  (:func:`toolkit.situations.kept_fault_plan`). The reference keyed a fault to the situation,
  so a rate of 1.0 delivered 0.91 on the shipped tools (the success cells never broke).
  Delivered share = injected faults (the world's ledger) / non-human tool calls; a named rate
  it misses by more than 0.05 over 100+ calls is warned about.
* ``hard_share`` is steered: each new group takes the tier class that brings the planned
  share of rollouts closest to the asked one, in every arm (the reference mixed tiers in the
  grid arm only, with minimum picks, so 0 and 1 both gave about 0.25 under sft).
* A changed knob the run gives nothing to act on (no mechanism here, or a part of the run it
  lacks: :attr:`toolkit.sim.KnobSpec.needs`) is named in one warning.
* A named ``avg_turns`` warns when conversations average under half of it (thread length =
  2 x user turns); the reference compared user turns with half of avg_turns, which is the most
  the person may speak, so it fired on nearly every run.
* ``until="saturation"`` stops when every planned grid cell has ``copies_needed`` rows (one
  row under unique situations, which never give a cell a second), after
  ``saturation_flat_batches`` flat batches (fresh share under ``saturation_fresh_share``), or
  when pairwise coverage of the planned grid gains no pair for ``saturation_flat_batches``
  batches in a row. The reference's flat-batch rule alone never fired offline: behaviour
  signatures stay fresh (30-50% of an sft batch after 3,000 rows) and a unique-situation run
  gives no cell the 5 copies its copy rule asks for.
* The default writer is the offline template writer (the reference's default is a hosted
  model; ``report()["offline_defaults"]`` says so). ``simulator="<spec>"`` phrases each card
  with that model (:mod:`toolkit.situations.model_writer`: one card per call, ``writer_concurrency``
  calls at a time while a round is planned, where the reference runs background writer
  waves; the template fills and counts whatever the model does not deliver); a callable
  ``simulator(situation, n, seed) -> list[str]`` is accepted too.
"""

from __future__ import annotations

import concurrent.futures as cf
import gc
import math
import queue
import statistics
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolkit._util.hashing import sha256_hex, stable_hash, stable_uniform
from toolkit._util.lockfile import HeldLock, release_lock, take_lock
from toolkit._util.results import json_safe
from toolkit._util.validate import is_number
from toolkit._version import __version__
from toolkit.agents import parse_model_spec
from toolkit.errors import AgentReplyError, ConfigError
from toolkit.grading import check_goal
from toolkit.grading import grade as judge_grade
from toolkit.rows import RowWriter, read_rows, scrub
from toolkit.sim.config import SimulateConfig, _load_rows
from toolkit.sim.data import RowStore, SimulationData, write_json_atomic
from toolkit.sim.knobs import KNOB_NEEDS
from toolkit.sim.planner import gap_guided_situations, open_ended_candidates
from toolkit.sim.rollout import _RUN_CANCEL, MAX_REPLY_CHARS, _AgentTimeout, _call_until, run_rollout
from toolkit.sim.search import (
    ARM_CAPS,
    ARM_FLOORS,
    ARMS,
    START_ARM_WEIGHTS,
    NoveltyIndex,
    SuccessiveAllocator,
    arm_yields,
    behavior_signature,
    failure_aim,
    mutate_prompt,
    region_weight,
    update_arm_weights,
)
from toolkit.sim.user import simulated_user
from toolkit.situations import AXES, HARD_TIERS, Situation, goal_for, kept_fault_plan, situation_grid, tier_of, write_prompts
from toolkit.situations.model_writer import ModelWriter
from toolkit.stats.sequential import SequenceState
from toolkit.world import World

__all__ = ["simulate", "RolloutJob"]

#: output=/checkpoint= rows are fsynced at least this often (RowWriter fsync="interval"); an OS
#: crash or power loss can cost at most the last second of rows, a killed process none.
_OUTPUT_FSYNC_INTERVAL_S = 1.0
_OUTPUT_DURABILITY = (
    "every landed row is written to the kernel before it counts (a killed process loses none); "
    f"fsync at least every {_OUTPUT_FSYNC_INTERVAL_S:g} s and at the end, so an OS crash or power loss "
    f"can lose at most the rows of the last {_OUTPUT_FSYNC_INTERVAL_S:g} s"
)
# Enough for several rounds of candidates (per_round x select_oversample x phrasings is ~300)
# while bounded: 4096 x 256 float32 = 4 MB.
_VECTOR_CACHE_SIZE = 4096
# A named fault_rate is warned about when the realised share of broken calls misses it by more
# than this, over at least this many calls: the even per-rollout spread keeps a 400-row run
# (~1,000 calls) within 0.013 of the rate (benchmarks/bench_engine.py, "delivered vs asked"),
# so 0.05 is a real miss.
_FAULT_SHARE_TOLERANCE = 0.05
_FAULT_SHARE_MIN_CALLS = 100
# Semantic duplicates over a quarter of the rows mean the writer repeats itself (a choice: the
# template writer's default 400-row runs have none, benchmarks/bench_engine.py "delivered vs asked").
_SEMANTIC_DUPLICATE_WARN_SHARE = 0.25
# Writes of a never-opened card after which saturation counts it unreachable: each write draws a
# new variant set, so three in a row with nothing new means the writer has nothing left for it.
_UNREACHABLE_WRITES = 3
_RISKY_STANCES = frozenset({"boundary", "adversarial", "conflicting"})


# ----------------------------------------------------------------------------------------
# Work items and the rollout task
# ----------------------------------------------------------------------------------------


@dataclass
class _Group:
    key: str
    situation: Any
    prompt: str
    reference: str | None
    persona: Mapping[str, Any]
    arm: str
    reason: str
    parent_id: str | None
    k: int
    eval_run: int = 0
    world_state: str | None = None
    fault_plan: Mapping[str, Any] | None = None
    replay: Mapping[str, Any] | None = None
    next_index: int = 0
    landed: int = 0
    lost_attempts: dict = field(default_factory=dict)
    labels: list = field(default_factory=list)
    novelty: float = 1.0


@dataclass
class _Item:
    order: int
    group: _Group
    rollout_index: int
    attempt: int = 0


@dataclass(frozen=True)
class RolloutJob:
    """Everything one rollout needs, resolved by the engine (what an executor runs).

    The world is built from these fields alone: ``fault_plan`` is already decided (the
    engine applied ``fault_rate`` once, per prompt, with :func:`toolkit.situations.kept_fault_plan`),
    so nothing on the worker reads a fault rate.
    """

    agent: Any
    prompt: str
    tools: list
    situation: Any
    system_prompt: str | None
    rollout_index: int
    seed: int
    logprobs: bool | str
    max_turns: int
    avg_turns: int
    patience: Any
    timeout: float | None
    sampling: Mapping[str, Any] | None
    privileged: Mapping[str, Any]
    user: Any
    world_options: Any
    execute: Callable | None
    world_state: str | None
    fault_plan: Mapping[str, Any] | None
    grader: Callable | None
    grader_name: str | None
    grader_meta: Mapping[str, Any] | None = None
    #: seconds a grader call may take (advanced["grader_timeout"]; None: no limit)
    grader_timeout: float | None = None
    #: wall-clock (time.time()) end of the run's time_budget, or None
    grader_deadline: float | None = None
    #: the run's stop event; only for in-process pools (an Event does not pickle)
    grader_stop: Any = None
    #: set on Ctrl-C and at the end of the run; only on the engine's own thread pool
    cancel: Any = None


#: Lost reasons that say the endpoint, not one reply, failed: a run of them calls the agent off.
_ENDPOINT_FAILURES = frozenset({"agent_error", "timeout", "server_unreachable", "auth_failed"})


def _task_goal(row: Mapping[str, Any]) -> Any:
    """A tasks= row's goal (top level, or in its privileged block when the rows are in memory),
    checked so a malformed one fails the run at once, naming its field."""
    privileged = row.get("privileged") if isinstance(row.get("privileged"), Mapping) else {}
    goal = row.get("goal", privileged.get("goal"))
    return None if goal is None else check_goal(goal)


def _goal_needs_record(situation: Any, tools: Any) -> bool:
    """Whether the goal derived for ``situation`` depends on the record its ask named: a
    replayed row that lost the name (a written row has no privileged block) gets a goal any
    record meets. A create's "some new record" and a no-change goal do not depend on it."""
    unnamed = goal_for(situation, tools, None)
    return unnamed is not None and unnamed != goal_for(situation, tools, "\x00named")


def _rollout_task(job: RolloutJob) -> dict:
    """Run one rollout (and the grader) -- module level so any executor can run it."""
    world = World(job.tools, options=job.world_options, seed=job.seed, world_state=job.world_state,
                  fault_plan=job.fault_plan, execute=job.execute)  # fmt: skip
    # the engine's cancel event reaches the agent-call wait (_call_with_timeout) through a
    # ContextVar: the pool thread's own context, set for this rollout only
    token = _RUN_CANCEL.set(job.cancel) if job.cancel is not None else None
    try:
        row = run_rollout(
            job.agent, job.prompt, tools=job.tools, world=world, user=job.user, situation=job.situation,
            system_prompt=job.system_prompt, rollout_index=job.rollout_index, seed=job.seed,
            logprobs=job.logprobs or False, max_turns=job.max_turns, avg_turns=job.avg_turns,
            patience=job.patience, timeout=job.timeout, sampling=job.sampling, privileged=job.privileged,
        )  # fmt: skip
    finally:
        if token is not None:
            _RUN_CANCEL.reset(token)
    if job.grader is not None and row.get("ended_by") != "lost":
        limit = job.grader_timeout
        cut_by_clock = False
        if job.grader_deadline is not None:
            left = max(0.0, job.grader_deadline - time.time())
            cut_by_clock = limit is None or left < limit
            limit = left if cut_by_clock else limit
        _apply_verdict(row, job.grader, job.grader_name or "grader", job.grader_meta,
                       timeout=limit, stop=job.grader_stop, by_clock=cut_by_clock)
    return row


def _apply_verdict(row: dict, grader: Callable, name: str, meta: Mapping[str, Any] | None = None, *,
                   timeout: float | None = None, stop: Any = None, by_clock: bool = False) -> None:
    # who graded the row, as tk.grade stamps it (name, model, prompt/rubric hashes, version)
    row_meta = dict(meta) if meta else {"name": name}
    try:
        # on a daemon worker when limited: a hung grader is cut off (and left running), never
        # waited for, so inline runs (the seeded agent) cannot hang on it
        verdict = grader(row) if timeout is None and stop is None else _call_until(grader, (row,), timeout, stop)
    except _AgentTimeout as error:
        why = "the run's time_budget ran out" if by_clock and "within" in str(error) else str(error)
        detail = f"grader timed out: {why}; advanced['grader_timeout'] sets the limit"
        row.update(reward=None, judge_status="timeout", judge_name=name, reason=detail, judge_meta={**row_meta, "error": detail[:500]})
        return
    except Exception as error:  # noqa: BLE001 -- a grader bug must not lose the row
        detail = f"{type(error).__name__}: {error}"
        row.update(reward=None, judge_status="error", judge_name=name, reason=detail, judge_meta={**row_meta, "error": detail[:500]})
        return
    if is_number(verdict):
        verdict = {"reward": float(verdict)}
    reward = verdict.get("reward") if isinstance(verdict, Mapping) else None
    if not is_number(reward) or not math.isfinite(reward):  # numpy scalars are numbers too
        detail = f"grader returned {verdict!r:.200}"
        row.update(reward=None, judge_status="invalid_result", judge_name=name, reason=detail, judge_meta={**row_meta, "error": detail})
        return
    row["reward"] = float(reward)
    row["judge_status"] = "ok"
    row["judge_name"] = name
    row["judge_meta"] = row_meta
    for key in ("reason", "failure_class", "label_source"):
        if verdict.get(key) is not None:
            row[key] = verdict[key]
    if isinstance(verdict.get("markers"), Mapping):
        row["markers"] = {**(row.get("markers") or {}), **verdict["markers"]}


# ----------------------------------------------------------------------------------------
# simulate()
# ----------------------------------------------------------------------------------------


def simulate(
    agent: Any = None,
    *,
    spec: Any = None,
    tools: Any = None,
    system_prompt: str | None = None,
    policy: str | None = None,
    situations: int | None = None,
    traces: Any = None,
    tasks: Any = None,
    runs: int = 1,
    grader: Callable | None = None,
    execute: Callable | None = None,
    requests_per_situation: int | None = None,
    phrasings: int | None = None,
    n: int | None = None,
    rollouts_per_request: int | None = None,
    repeats: int | None = None,
    rollouts_per_prompt: int | None = None,
    repeat_policy: str | None = None,
    unique_situations: bool | None = None,
    unique: bool | None = None,
    mode: str = "explore",
    fault_rate: float | None = None,
    risk: float | None = None,
    hard_share: float | None = None,
    reproducible: bool | None = False,
    budget: int | None = 1000,
    time_budget: float | None = None,
    until: str = "compute",
    logprobs: bool | str | None = None,
    sampling: Mapping[str, Any] | None = None,
    simulator: Any = None,
    user_model: Any = None,
    timeout: float | None = 300,
    grade: bool | str = False,
    llm_grade: Any = False,
    output: Any = None,
    overwrite: bool = False,
    advanced: Mapping[str, Any] | None = None,
    seed: int | None = None,
    concurrency: int | None = None,
    patience: Any = None,
    avg_turns: int | None = None,
    max_turns: int | None = None,
    executor: cf.Executor | None = None,
    checkpoint: Any = None,
    on_row: Callable[[dict], Any] | None = None,
    on_progress: Callable[[dict], Any] | None = None,
    progress: bool = True,
    stop: Any = None,
    **unknown: Any,
) -> SimulationData:
    """Simulate conversations with an agent and return its rows.

    Every parameter and alias of the user's spec is accepted; each is documented below.

    Every keyword is resolved and checked once, before anything runs, by
    :meth:`toolkit.sim.SimulateConfig.build` (aliases, the mode's presets, defaults). Everything
    else the engine uses is an ``advanced={...}`` knob: defined, bounded and explained once in
    :class:`toolkit.RunKnobs` (``tk.RunKnobs.describe()``), tabled in ``docs/knobs.md`` and the
    README; ``data.report()["knobs"]`` records every resolved value. Aliases name one parameter:
    give one spelling, or several with the same value (different values are a ConfigError).

    Parameters
    ----------
    agent : callable, SeededAgent, str or None, default None
        The agent under test: a chat-shaped ``agent(messages, tools) -> message`` or a
        message-shaped callable (:func:`toolkit.agents.agent_shape`; a message-shaped agent is
        called once per rollout and gets no simulated person), a seeded policy
        (``tk.seeded_agent``), or a model spec string (``"openai:gpt-4o-mini"``, built with
        ``timeout``). None: the offline seeded agent on ``tools``, seeded with ``seed``
        (``report()["offline_defaults"]`` says so). The README's "Bring your own agent, tools
        and world" shows both callable shapes, ``execute=`` and a grader on a real row.
    spec : str, os.PathLike, Mapping or None, default None
        Keyword-only, like every parameter after ``agent``. A folder holding ``tools.json``
        and the policy (the first of ``system_prompt.md``, ``policy.md``,
        ``system_prompt.txt``), or a dict with ``"tools"`` and ``"system_prompt"`` (or
        ``"policy"``). ``tools=`` and ``system_prompt=`` given explicitly win over it.
    tools : Any, default None
        The agent's tools, any shape :func:`toolkit.world.normalize_tools` accepts (a list of
        OpenAI / Anthropic / bare function schemas or ToolSpecs, a dict of them keyed by tool
        name, or a path to a JSON file of either); ``"kind": "human"`` marks a tool the
        simulated person answers instead of the world. They define
        the situation grid's tool axis and the mock world. None: a seeded agent's own tools;
        with no agent either, the shipped ``tools/airline_support.json`` example and its policy;
        otherwise no tools.
    system_prompt, policy : str or None, default None
        ``policy`` = ``system_prompt``. The agent's policy text: the system message of every
        chat rollout, the source of the situation grid's rule axis, the policy of
        ``grade=True``'s conduct grader, and recorded per row (``lineage``, ``policy_version``).
        None: no system message (the shipped policy with the shipped example tools).
    situations : int or None, default None
        The most distinct situations (grid cells and other situation cards) the run opens, an
        integer >= 1 (bools are refused). Once reached and nothing is owed, the run stops with
        ``stopped_because="situations_exhausted"``. None: no cap.
    traces : Any, default None
        Earlier rows (a list, a JSONL path, SimulationData or a DataFrame) to learn from.
        Their failing rows (a reward under ``advanced["pass_threshold"]``, an injected fault or
        a failing tool status) pull grid weight toward their tool and tool condition
        (``allocation_*`` knobs), and without ``tasks=`` up to ``advanced["failing_seeds_cap"]``
        of their prompts run first as seed groups before the search continues. None: no traces.
    tasks : SimulationData, Any or None, default None
        Rows to replay instead of searching: one group per distinct prompt, with its
        situation dimensions, world state and first fault mode. The run ends with
        ``stopped_because="tasks_done"``. Unless k is given (``rollouts_per_request``), k becomes
        the most rows any of its prompts has, and a ``"none"`` / ``"adaptive"`` policy becomes
        ``"fixed"`` when k > 1. Read when the run starts (a bad value is a TypeError then).
    runs : int, default 1
        Eval runs, an integer >= 1. Runs after the first replay the first run's prompts
        (repeat policy ``"fixed"``), each with its own ``budget``; ``lineage["eval_run"]`` says
        which run a row belongs to. A run that ends stopped, interrupted, out of time or with a
        failing agent ends the whole call. ``runs > 1`` with ``checkpoint=`` is a ConfigError.
    grader : callable or None, default None
        ``grader(row) -> {"reward": float, ...}`` (or a bare number), run right after each
        rollout on the worker that ran it. ``reason``, ``failure_class``, ``label_source`` and
        ``markers`` of the verdict are copied onto the row; a grader that raises or returns
        something else leaves ``reward=None`` with ``judge_status`` ``"error"`` /
        ``"invalid_result"`` and never loses the row. With a grader the search also mutates
        graded failures (``advanced["mutate_graded_failures"]``) and the progress events carry a
        pass rate. Not together with ``grade=True``. None: rows are not graded.
    execute : callable or None, default None
        ``execute(tool, arguments) -> result``: your own world, which answers every tool call
        instead of the mock world. Its fault schedule is its own, so ``fault_rate`` has no
        effect (a warning says so when ``fault_rate`` is named). None: the mock world.
    requests_per_situation, phrasings, n : int or None, default None
        ``phrasings`` = ``n`` = ``requests_per_situation``: how many phrasings (prompts) each
        situation card gets, an integer >= 1 (the built-in writers draft a few more and the most
        novel are kept). None: the mode's preset (explore 1, sft 3, rl 1, adaptive 3).
    rollouts_per_request, repeats, rollouts_per_prompt : int or None, default None
        ``repeats`` = ``rollouts_per_prompt`` = ``rollouts_per_request``: k, the rollouts per
        phrasing, an integer >= 1. How many a phrasing actually gets is the repeat policy's
        call: ``"fixed"`` runs k, ``"successive"`` and ``"adaptive"`` run up to k, and ``"none"``
        runs one. A k > 1 named under a mode whose preset policy is ``"none"`` (explore) switches
        the policy to ``"fixed"`` (k rollouts per prompt; ``report()["repeat_policy"]`` says so);
        with ``repeat_policy="none"`` named too it is a ConfigError. None: the mode's preset
        (explore 1, sft 4, rl 8; adaptive 3, or 2 when ``time_budget`` is under 90 s and
        ``until`` is not saturation), and 1 under ``repeat_policy="none"``.
    repeat_policy : str or None, default None
        One of ``REPEAT_POLICIES``: ``"none"`` (one rollout per phrasing), ``"fixed"`` (k
        each), ``"successive"`` (``advanced["probe"]`` rollouts, then groups whose outcomes split
        are filled to k and unanimous ones stop, by the hazard rule of :mod:`toolkit.sim.search`),
        ``"adaptive"`` (one rollout; a failure-worthy one is verified to k) or ``"unique"``
        (``"none"`` with unique situations). None: the mode's preset (explore none, sft fixed,
        rl successive, adaptive adaptive). An unknown name is a ConfigError.
    unique_situations, unique : bool or None, default None
        ``unique`` = ``unique_situations``. True: a grid cell is run at most once (the search
        leaves cells already run); the mode's n and k are kept. None: the
        mode's preset (True under explore, unless a repeat policy other than ``"none"`` /
        ``"unique"`` is given).
    mode : str, default "explore"
        A preset of ``MODES`` (n phrasings, k repeats, repeat policy, fault rate, unique
        situations): ``"explore"`` (1, 1, none, 0.5, unique), ``"sft"`` (3, 4, fixed, 0.5),
        ``"rl"`` (1, 8, successive, 0.8; region weights led by the behaviour gap) and
        ``"adaptive"`` (3, 2 or 3, adaptive, 0.5). Explicit parameters override its values. An
        unknown mode is a ConfigError.
    fault_rate, risk : float or None, default None
        ``risk`` = ``fault_rate``: the share, in [0, 1], of tool calls the mock world breaks,
        over every call of the run (0 none, 1 every one). A call is broken with the situation's
        ``tool_condition`` as its fault mode, or, in a ``"success"`` situation, a mode drawn per
        prompt from the world's modes. Calls are spread evenly within a rollout (a
        low-discrepancy schedule with a per-rollout phase, :func:`toolkit.situations.kept_fault_plan`),
        so the realised share over a run is the rate to within about one call per rollout.
        None: the mode's preset (0.8 under rl, else 0.5). ``report()["delivered"]["fault_share"]``
        is the realised share; a named rate it misses by more than 0.05 (over 100 or more calls)
        is warned about. No effect with ``execute=``.
    hard_share : float or None, default None
        Share, in [0, 1], of the run's rollouts whose situation comes from the hard tiers
        (adversarial, boundary, ambiguous ...), honoured by every arm: each new group is drawn
        from the tier class that brings the planned share closest to the asked one (a deficit
        rule over every rollout planned so far, re-rolls and fills included), so 0 gives no
        hard situation and 1 no ordinary one. When a class runs out (unique situations on a
        small grid) the other fills in. ``search["tier_mix"]`` records the drawn share (and
        ``per_run`` under ``runs=N``); a drawn share more than
        ``advanced["tier_mix_tolerance"]`` from the asked one, after
        ``advanced["tier_mix_min_rows"]`` rows, is warned about. None: 0.40.
    reproducible : bool or None, default False
        True: round-synchronous scheduling (each round, ``advanced["per_round"]`` rows after a
        smaller first one, is planned, run to the last rollout and processed in plan order), so one seed gives the
        same rows at any concurrency and in any process; always on at ``concurrency=1``. False:
        the loop streams. Combined with a ``time_budget`` it warns (which rows land before the
        clock depends on speed).
    budget : int or None, default 1000
        Rows per eval run, an integer >= 1 (``stopped_because="budget"`` when reached). None:
        ``advanced["hard_row_cap"]`` (50,000) for runs bounded by saturation or the clock.
    time_budget : float or None, default None
        Seconds of wall clock for the run: rollouts stop being opened when the time left is
        under ``advanced["closing_margin"]`` median rollouts and the run ends with
        ``stopped_because="time_budget"``. None or <= 0: no clock. Bools are refused.
    until : str, default "compute"
        ``"compute"`` (also spelled ``"budget"``, ``"budget_only"``, ``"time"``): run until the
        budget, the clock, the situations or the tasks run out. ``"saturation"`` (or
        ``"first"``): also stop when the search saturates, as the module docstring says
        (``advanced["copies_needed"]``, ``advanced["saturation_flat_batches"]``).
        ``"decided"``: also stop, with ``stopped_because="decided"``, once the anytime-valid
        bounds on pass@1 (:func:`toolkit.stats.confidence_sequence` over each prompt's mean
        reward, as its k graded rollouts complete) exclude ``advanced["decide"]["threshold"]``;
        with ``advanced["decide"]["baseline"]`` (a rows file, e.g. the run replayed with
        ``tasks=``), the bounds are on the paired delta per prompt against it, and the run
        stops once they exclude 0 (or the given threshold). Needs a grader;
        ``report()["decided"]`` says where and which side. The bounds
        hold however often they are read, so stopping on them keeps the error rate at
        ``1 - level`` when the prompts are drawn alike; the search modes steer towards
        failures, and then the bounds are about the prompts the search chose (pin them with
        ``tasks=`` for a fixed population). An unknown name is a ConfigError.
    logprobs : bool, "tokens" or None, default None
        True records each agent turn's summed ``logprob`` and ``n_tokens`` (and the row's);
        ``"tokens"`` also keeps the per-token list. Needed for KL (:func:`toolkit.mean_kl`,
        the dashboard). None / False: not recorded.
    sampling : Mapping[str, Any] or None, default None
        How your own callable samples (``{"temperature": 0.7}``), recorded on every row
        (``row["sampling"]``) unless the agent reports its own. It is not sent to the agent.
    simulator : Any, default None
        The situation writer: None / False (the offline template writer; None is noted in
        ``report()["offline_defaults"]``), a model spec string or ``tk.model_agent(spec, ...)``
        (a model writer: each situation card is phrased by that model, ``writer_concurrency``
        calls at a time; ``report()["writer"]`` counts what it wrote and what the template had
        to fill), or a callable ``simulator(situation, n, seed) -> list[str]``. Anything else
        is a ConfigError.
    user_model : str, callable or None, default None
        The simulated person of chat-shaped agents: a model spec string or a chat callable
        that phrases the person's lines (the template line replaces a line it gets wrong).
        None: the offline template user. Message-shaped agents get no person, so it has no
        effect there.
    timeout : float or None, default 300
        Seconds per agent completion, > 0; a completion that takes longer loses the rollout
        (``lost_reason="timeout"``; re-rolled while re-rolls are left). Also the backend
        timeout of an ``agent`` given as a spec string. None: no limit on the wait (a spec
        string's backend keeps 300 s). Not applied to a seeded agent (in-process, it cannot
        hang).
    grade : bool, "conduct" or None, default False
        True or ``"conduct"``: grade every row with the deterministic conduct grader of the
        policy (:func:`toolkit.conduct_grader`), as ``grader=`` would. Not together with
        ``grader=`` (ConfigError). False / None: no conduct grading.
    llm_grade : str, callable or False, default False
        A judge (a model spec such as ``"openai:<model>"``, or a judge callable) that grades
        every row with :func:`toolkit.grade` once the run ends: ``llm_reward``, ``llm_reason``
        and ``llm_judge_status`` (ok, error, timeout, invalid_result) on the returned rows,
        and the judge's warnings (rows it gave no verdict, a judge grading its own model) in
        the run's (``output=`` / ``checkpoint=`` files were written as rows landed and do not
        carry them). ``True`` is a ConfigError (it names no judge).
        False / None: no judge.
    output : str, os.PathLike or None, default None
        A JSONL path the scrubbed rows are streamed to as they land (the file is rewritten;
        a path that already exists is a ConfigError unless ``overwrite=True`` or a
        ``checkpoint=`` is resumed), with ``<name>.progress.json`` refreshed during the run and
        ``<name>.meta.json`` (the report, read back by :func:`toolkit.load`) written at the end.
        Rows reach the file (the kernel) before they count as landed, so a killed process loses
        none; they are fsynced at least once a second and at the end (an OS crash can cost the
        last second: ``report()["output_durability"]``). None: rows are kept in memory only.
    overwrite : bool, default False
        True: an ``output=`` file that already exists is replaced (with its sidecars). False:
        it is refused before anything runs (a ConfigError naming ``output`` and
        ``overwrite=True``), so rerunning a cell never silently replaces the rows of the run
        before it -- except when the call resumes an existing ``checkpoint=``: an ``output=``
        that is the checkpoint's path is appended to, and a separate one is rebuilt from the
        checkpoint's rows plus the new ones. Anything but a bool is a ConfigError.
    advanced : Mapping[str, Any] or None, default None
        Knob values by name, every key of :class:`toolkit.RunKnobs` (``docs/knobs.md``): an
        unknown key or a value out of bounds is a :class:`toolkit.KnobError` naming the nearest
        key or the bound. Anything but a dict is a ConfigError. None: every default.
    seed, concurrency, patience, avg_turns : Any, default None
        Shortcuts for the ``advanced`` knobs of the same names; naming one here and in
        ``advanced`` with different values is a ConfigError. ``seed`` (int, default 0): every
        draw of the run derives from it. ``concurrency`` (int, default 32): rollouts in flight
        (the thread pool's size, or tasks handed to ``executor``; a seeded agent runs on the
        engine's thread), 1 forces ``reproducible``. ``patience`` (default ``"normal"``): how
        long the simulated person keeps answering questions (``"normal"``, ``"short"``,
        ``"endless"``, ``{"second": p, "later": q}`` or ``(p, q)``). ``avg_turns`` (int, default
        12): target conversation length; the person speaks at most ``avg_turns // 2`` times, and
        a named value the conversations fall far short of is warned about. ``patience`` and
        ``avg_turns`` only matter for chat-shaped agents.
    max_turns : int or None, default None
        Cap on agent completions per rollout, an integer >= 1 (``ended_by="turn_cap"`` when
        hit). None: ``clamp((4096 - 2048 - min(1536, 64 x number of tools)) // 128, 8, 40)``.
    executor : concurrent.futures.Executor or None, default None
        Any ``concurrent.futures.Executor`` (e.g. dask's ``client.get_executor()``) instead of
        the built-in thread pool; it runs one :class:`toolkit.sim.RolloutJob` per rollout.
        Anything else is a TypeError. None: ``concurrency`` threads (the seeded agent runs
        inline on the engine's thread instead; ``report()["execution"]`` says which).
    checkpoint : str, os.PathLike or None, default None
        A JSONL path appended as rows land; calling again with the same path resumes without
        duplicates (a row already there is reused instead of re-run when the run plans it
        again; rows it does not re-plan are kept, with a warning). Reused rows are written to a
        separate ``output=`` too, so it holds the whole resumed run. Durable like ``output=``,
        and its sidecars are written when no ``output=`` is given. Not with ``runs > 1``.
        A run holds ``<checkpoint stem>.lock`` beside it (``fcntl.flock``): a second run on
        the same checkpoint, in this process or another, raises ConfigError naming the
        holder's pid and host; a lock left by a process that died is taken over.
    on_row : callable or None, default None
        ``on_row(row)``, called on the engine's thread with each landed row (scrubbed, as
        written). An exception is counted (``report()["callback_errors"]``) and warned about
        once; the row is kept. Not callable: TypeError.
    on_progress : callable or None, default None
        ``on_progress(event)``, called with a progress dict (rows, budget, in flight, losses,
        rows/s, ETA, arm weights, pass rate ...) every ``advanced["progress_every_rows"]`` rows
        or ``advanced["progress_every_s"]`` seconds, and once at the end (``final=True``).
        Exceptions are counted and warned about; the run goes on. Not callable: TypeError.
    progress : bool, default True
        Show a tqdm progress bar (when tqdm is installed).
    stop : threading.Event or None, default None
        A ``threading.Event`` (anything with ``is_set()``, else a TypeError); setting it from
        another thread ends the run within one tick, keeping every row so far
        (``stopped_because = "stopped"``; running rollouts get ``advanced["stop_grace"]``
        seconds to land).
    **unknown
        Any other keyword is a TypeError naming the nearest valid keyword.

    Returns
    -------
    SimulationData
        The rows (``data.rows``; ``data.trajectories`` with the privileged blocks), the run
        record ``data.report()``, the search record, ``warnings`` and ``degraded`` flags,
        ``stopped_because`` (``"budget"``, ``"time_budget"``, ``"stopped"``, ``"interrupted"``,
        ``"situations_exhausted"``, ``"tasks_done"``, ``"saturation"``, ``"decided"``, ``"writer_exhausted"``,
        ``"agent_failed"`` or ``"write_failed"``: a row file could not be written, the first
        warning names the file, the error and how many rows landed in it; every row is still in
        ``data.rows``), ``metadata`` and ``knobs``.

    Raises
    ------
    ConfigError
        A value out of range, an unknown name (mode, repeat policy, until ... with the nearest
        valid one), aliases given different values, an impossible combination (``grade``
        with ``grader``, ``runs > 1`` with ``checkpoint``, ``llm_grade=True``), or an
        ``output=`` file that exists without ``overwrite=True``.
    TypeError
        An unknown keyword (with the nearest valid one), a callback (``grader``, ``on_row``,
        ``on_progress``, ``execute``) that is not callable, an executor that is not an
        Executor, a ``stop`` without ``is_set()``, or an agent of the wrong kind.
    KnobError
        An ``advanced`` key that is unknown, or a knob value (``seed``, ``concurrency``,
        ``patience``, ``avg_turns`` included) of the wrong type or out of bounds (a ValueError).
    SchemaError
        A malformed tool schema in ``tools`` or ``spec``.
    """
    arguments = dict(locals())
    given = arguments.pop("unknown")
    engine = _Engine(SimulateConfig.build(**arguments, **given))
    # The cyclic collector rescans every long-lived object (grid, tools, knobs, row store) on
    # each generation-2 pass: 0.3 ms of the ~2.7 ms an offline row costs. Freezing what exists
    # at the start exempts it for the run; unfreezing afterwards hands it back.
    gc.freeze()
    try:
        return engine.run()
    finally:
        gc.unfreeze()


class _Stop(Exception):
    pass


class _Engine:
    # ----------------------------------------------------------------- configuration
    def __init__(self, config: SimulateConfig) -> None:
        self.cfg = config
        self.warnings: list[str] = list(config.warnings)
        self.degraded: list[str] = []
        self.offline_defaults: dict[str, str] = dict(config.offline_defaults)
        # k and the repeat policy are the run's own: a tasks= replay fixes them to the replayed rows'
        self.k = config.k
        self.repeat_policy = config.repeat_policy
        self.tools = list(config.tools)
        self.human_tools = frozenset(t.name for t in self.tools if t.is_human)
        self.embedder = config.make_embedder()

    # ----------------------------------------------------------------- run
    def run(self) -> SimulationData:
        k = self.cfg.knobs
        self.started = time.perf_counter()
        self.deadline = self.started + self.cfg.time_budget if self.cfg.time_budget else None
        # the same end on the wall clock, for graders that may run in another process
        self.wall_deadline = time.time() + self.cfg.time_budget if self.cfg.time_budget else None
        self.grid = situation_grid(self.tools, self.cfg.system_prompt, seed=self.cfg.seed, fault_modes=self.cfg.world_options,
                                   progress=self.cfg.progress)
        self.axes = {axis: tuple(values) for axis, values in self.grid.axes.items()}
        self.grid_ids = {s.id for s in self.grid}
        self.trace_boost = self._trace_boost()
        # rows as written + their trajectories, compact (RowStore: 100k rows as dicts, twice,
        # needed ~1.5 GB)
        self.rows = RowStore()
        self.stopped_because: str | None = None
        self.lost_by: Counter = Counter()
        self.rerolled = 0
        self.rerolled_by: Counter = Counter()
        self.abandoned = 0
        self.callback_errors = 0
        self.dead_count = 0
        self.unreachable = False  # a rollout was lost to a model server that never answered
        self.cancel = threading.Event()  # RolloutJob.cancel: set when the run ends, Ctrl-C included
        self.own_threads = False  # rollouts run on the engine's own thread pool
        self.auth_failure: str | None = None  # the detail of a rollout lost to HTTP 401 / 403
        # lost rollouts since the last row landed (an endpoint that died mid-run)
        self.consecutive_failures = 0
        # until="decided": each prompt group's mean reward is one unit once its k rollouts
        # are graded, fed to the anytime-valid sequence in the order groups complete
        self.decision: dict | None = None
        self.decide_rewards: dict[tuple, list[float]] = {}
        self.decide_sequence = None
        self.decide_baseline: dict[tuple, float] | None = None
        self.decide_unpaired = 0  # complete groups whose prompt the baseline run lacks
        question = self.cfg.knobs.decide
        if self.cfg.until == "decided" and question:
            paired = "baseline" in question
            self.decide_sequence = SequenceState(level=question["level"], bounds=(-1.0, 1.0) if paired else (0.0, 1.0))
            if paired:
                self.decide_baseline = _baseline_means(question["baseline"])
        self.bad_arguments = [0, 0]  # tool calls refused for breaking their schema, rows with one
        self.truncated_rows = 0  # rows with a reply cut at rollout.MAX_REPLY_CHARS
        # agent turns that stopped at the reply budget, and turns the server let run past it:
        # [turns, rows, the budget the rows' sampling names]
        self.at_budget: list = [0, 0, None]
        self.over_budget: list = [0, 0, None]
        self.logprob_gaps: Counter = Counter()  # rows whose logprob is None, by each reason a turn gave
        self.logprob_gap_rows = 0
        # (path, error, rows this run wrote to it) of the first row write that failed: the run
        # stops as "write_failed" and returns what it has instead of raising it away
        self.write_failure: tuple[Path, OSError, int] | None = None
        self.sidecar_errors: set[str] = set()
        self.reply_error: AgentReplyError | None = None  # the first reply of an impossible type
        self.last_lost_detail = None
        self.durations: deque = deque(maxlen=k.closing_window_rollouts)
        self.signatures: set[str] = set()
        self.cells: Counter = Counter()
        self.cell_signatures: dict[str, set] = {}
        self.cell_fails: Counter = Counter()
        self.cell_novelty: dict[str, float] = {}
        self.value_counts: dict[str, Counter] = {axis: Counter() for axis in self.axes}
        self.tool_calls: Counter = Counter({t.name: 0 for t in self.tools})
        self.tool_ok: Counter = Counter()
        self.parents: deque = deque(maxlen=max(1, k.writer_context_parents))
        self.mutation_aims: Counter = Counter()
        self.prompts_seen: set[str] = set()
        self.situations_opened: list[str] = []
        self.situations_opened_set: set[str] = set()  # membership; the list keeps the order
        self.situation_groups: Counter = Counter()  # groups (phrasings) opened per situation
        self.situation_planned: Counter = Counter()  # rollouts planned per situation (the family cap)
        self.write_attempts: Counter = Counter()  # times each situation card was written
        self.situation_objects: dict[str, Situation] = {}  # under situations=N: the open ones, for owed phrasings
        self.tier_planned: Counter = Counter()  # rollouts planned per tier class (hard_share's deficit rule)
        self.tier_groups: Counter = Counter()  # groups opened per tier class
        self.mutations_opened = 0  # situation cards the failure-mutation arm opened from a real parent
        self.seen = NoveltyIndex(self.embedder_dim())
        self.vector_cache: dict[str, np.ndarray] = {}
        self.arm_weights = dict(k.arm_weights) if k.arm_weights else dict(START_ARM_WEIGHTS)
        self.arm_history: list[dict] = []
        self.batch: list[dict] = []
        self.flat_batches = 0
        # until="saturation": distinct situation dimensions seen and the pairwise coverage after
        # each batch (coverage_of over ~2,300 distinct cells costs ~3 ms, so once per batch is cheap)
        self.saturation_dims: dict[str, dict] = {}
        self.coverage_flat_batches = 0
        self.saturation_rule: str | None = None  # which until="saturation" rule stopped the run
        self.last_pairs_covered = -1
        self.round = 0
        self.order = 0
        self.writer_seed = self.cfg.seed
        self.writer_restarts = 0
        self.writer_pool: cf.ThreadPoolExecutor | None = None  # a model writer's card calls
        self.empty_rounds = 0
        self.allocator = SuccessiveAllocator(k=self.k, probe=min(k.probe, self.k), alpha=k.smoothing_alpha)
        self.groups: dict[str, _Group] = {}
        self.retired_groups = 0  # groups that reached k and were dropped from memory (runs == 1)
        self.owed: deque = deque()
        self.queue: deque = deque()
        self.in_flight: dict[cf.Future, _Item] = {}
        # futures report themselves here when done: the loop blocks on one queue instead of
        # re-arming a waiter on every in-flight future per landed row (cf.wait is O(in flight))
        self.completed: queue.SimpleQueue = queue.SimpleQueue()
        self.graded = _ExactSum()  # running pass rate for progress events, exact like math.fsum
        self.eval_run = 0
        self.semantic_duplicates = 0
        self.judge_failures: Counter = Counter()
        self.first_judge_failure: str | None = None
        # one run per checkpoint at a time: two writing one file doubled every row (issue 21, row 14)
        self.checkpoint_lock = _CheckpointLock(self.cfg.checkpoint) if self.cfg.checkpoint is not None else None
        try:
            self.resume_rows, self.resume_keys_consumed = self._read_checkpoint()
            self.writers = self._open_writers()
        except BaseException:
            if self.checkpoint_lock is not None:
                self.checkpoint_lock.release()
            raise
        self.last_progress = (time.perf_counter(), 0)
        self.last_flush = (time.perf_counter(), 0)
        self.bar = self._make_bar()
        own_pool = None
        try:
            if self.cfg.executor is None and self.cfg.agent_is_seeded:
                # The seeded policy is pure Python that never waits, so under the GIL threads
                # cannot run two of its rollouts at once; they only contend for the lock
                # (measured offline at C = 32: 2.03 ms CPU/row on 32 threads vs 1.69 at C = 1).
                # Its rollouts run on this thread instead; `concurrency` still sets how many
                # are planned and in flight per pass. executor=ThreadPoolExecutor(n) forces threads.
                self.pool = _InlineExecutor()
            elif self.cfg.executor is None:
                own_pool = cf.ThreadPoolExecutor(max_workers=self.cfg.concurrency, thread_name_prefix="toolkit-rollout")
                self.pool = own_pool
                self.own_threads = True
            else:
                self.pool = self.cfg.executor
            self.replay_groups = self._replay_groups()
            for run_index in range(self.cfg.runs):
                self.eval_run = run_index
                self.run_budget_start = len(self.rows)
                if run_index > 0:
                    self.replay_groups = self._replay_from_run0()
                self._loop()
                if self.stopped_because in ("stopped", "interrupted", "agent_failed", "time_budget", "write_failed"):
                    break
        except KeyboardInterrupt:
            self.stopped_because = "interrupted"
            try:
                self._drain(cancel=True)
            except KeyboardInterrupt:  # a second Ctrl-C: stop waiting for running rollouts
                self.abandoned += len(self.in_flight)
                self.in_flight.clear()
        finally:
            # whatever is still running stops waiting for its agent: the pool's threads are not
            # daemons, and the interpreter joins them at exit (Ctrl-C used to wait out `timeout`)
            self.cancel.set()
            if self.checkpoint_lock is not None and sys.exc_info()[0] is not None:
                self.checkpoint_lock.release()  # an error leaves the run: the next one may resume
            if own_pool is not None:
                own_pool.shutdown(wait=False, cancel_futures=True)
            if self.writer_pool is not None:
                self.writer_pool.shutdown(wait=False, cancel_futures=True)
            if self.bar is not None:
                self.bar.close()
        self._finish_resume()
        if self.cfg.llm_grade:
            self._run_llm_grade()
        return self._result()

    def _execution(self) -> str:
        """Where rollouts ran: "inline" (the seeded agent, on the engine's thread), "threads"
        (a pool of `concurrency` threads) or the caller's executor class."""
        if self.cfg.executor is not None:
            return type(self.cfg.executor).__name__
        return "inline" if self.cfg.agent_is_seeded else "threads"

    def embedder_dim(self) -> int:
        return getattr(self.embedder, "dim", 384)

    # ----------------------------------------------------------------- checkpoint / output
    def _key(self, eval_run: int, prompt: str, rollout_index: int) -> str:
        return stable_hash([eval_run, prompt, rollout_index], 24)

    def _read_checkpoint(self) -> tuple[dict, set]:
        if self.cfg.checkpoint is None or not self.cfg.checkpoint.exists():
            return {}, set()
        stored = {}
        for row in read_rows(self.cfg.checkpoint, strict=False):
            if row.get("ended_by") == "lost":
                continue
            eval_run = (row.get("lineage") or {}).get("eval_run", 0) or 0
            stored[self._key(eval_run, row.get("prompt", ""), row.get("rollout_index", 0))] = row
        return stored, set()

    def _open_writers(self) -> list:
        # fsync="interval": each row reaches the kernel before it counts as landed (a killed
        # process loses no landed row), the disk flush runs once a second. A per-row fsync cost
        # 4 ms per row on this machine (1,000-row profile: 3.9 s of 13.5 s), more than the row.
        durability = {"fsync": "interval", "fsync_interval": _OUTPUT_FSYNC_INTERVAL_S}
        writers = []
        if self.cfg.checkpoint is not None:
            writers.append(RowWriter(self.cfg.checkpoint, mode="a", **durability))
        # output= beside a separate checkpoint= is rewritten, so rows reused from the checkpoint
        # are written to it too (else a resumed run's output held only the rows run this time)
        self.output_writer = None
        if self.cfg.output is not None and (self.cfg.checkpoint is None or self.cfg.output.resolve() != self.cfg.checkpoint.resolve()):
            self.output_writer = RowWriter(self.cfg.output, mode="w", **durability)
            writers.append(self.output_writer)
        return writers

    def _make_bar(self):
        if not self.cfg.progress:
            return None
        try:
            from tqdm.auto import tqdm
        except ImportError:  # pragma: no cover
            return None
        return tqdm(total=self.cfg.cap * self.cfg.runs if self.cfg.budget is not None else None, desc="simulate", unit="row", leave=True)

    # ----------------------------------------------------------------- the loop
    def _landed_this_run(self) -> int:
        return len(self.rows) - self.run_budget_start

    def _pending_resume(self) -> int:
        """Checkpoint rows not reused yet, under a non-reproducible run: it plans new prompts,
        so its checkpoint rows land at the end as they were and count toward the budget from
        the start (else it ran its whole budget on top of them: 383 rows at budget 300 after
        four kills, issue 21 row 2). A reproducible run replans the same rollouts and reuses
        its checkpoint rows as it reaches them, which keeps a resumed checkpoint byte-identical
        to an uninterrupted run; holding capacity back there would reorder that plan."""
        if self.cfg.reproducible or self.eval_run != 0:
            return 0
        return len(self.resume_rows) - len(self.resume_keys_consumed)

    def _capacity(self) -> int:
        return self.cfg.cap - self._landed_this_run() - len(self.in_flight) - len(self.queue) - self._pending_resume()

    def _stop_requested(self) -> bool:
        return self.cfg.stop_event is not None and self.cfg.stop_event.is_set()

    def _loop(self) -> None:
        k = self.cfg.knobs
        self.stopped_because = None
        while True:
            if self._stop_requested():
                self.stopped_because = "stopped"
                self._drain(cancel=True)
                return
            reason = self._check_stop()
            if reason:
                self.stopped_because = reason
                self._drain(cancel=reason not in ("budget", "situations_exhausted", "tasks_done", "saturation", "decided"))
                return
            if self.cfg.reproducible:
                planned = self._plan_round()
                if not planned:
                    if self._exhausted():
                        return
                    continue
                futures = [self._submit(item) for item in planned]
                self._wait_all(futures)
                if self.stopped_because:
                    return
                results = []
                for future, item in zip(futures, planned):
                    results.append((item, future))
                    self.in_flight.pop(future, None)
                for item, future in results:
                    self._land(item, future)
            else:
                threshold = max(k.pool_low_floor, min(k.pool_low_cap, self.cfg.concurrency // k.pool_low_flight_divisor))
                # Submit past `concurrency` (up to twice it) once a row has landed: the pool's
                # own queue then hands a free worker its next rollout at once, instead of after
                # the main thread has landed the last one and planned (C/L bound, issue 5).
                # Before the first row lands the cap is `concurrency`, so a dead agent is not
                # called more than the dead-agent rule allows.
                ahead = self.cfg.concurrency * 2 if self.rows else self.cfg.concurrency
                # Plan until the queue is above the low-water mark AND can fill every slot:
                # one small round per pass (the first wave is 8 prompts) left most of 32
                # workers idle for the whole first wave.
                first = True
                while (len(self.queue) < threshold or len(self.queue) + len(self.in_flight) < ahead) and self._capacity() > 0:
                    planned = self._plan_round()
                    self.queue.extend(planned)
                    if not planned:
                        break
                    first = False
                    # each planned round starts at once: planning the whole first wave before
                    # submitting any of it kept every worker idle ~11 ms at C = 32
                    while self.queue and len(self.in_flight) < ahead and not self._closing():
                        self._submit(self.queue.popleft())
                if first and not self.queue and not self.in_flight:
                    if self._exhausted():
                        return
                    continue
                closing = self._closing()
                while self.queue and len(self.in_flight) < ahead and not closing:
                    self._submit(self.queue.popleft())
                if closing:
                    self._cancel_unstarted()
                if not self.in_flight:
                    if closing:
                        self.stopped_because = "time_budget"
                        return
                    continue
                # While the submitted rollouts run and none has finished, plan ahead up to
                # 2 x concurrency (planning calls no agent, so the dead-agent cap on calls
                # before the first row still holds): the first wave's replies then find their
                # successors planned. Planning them after the replies left the workers idle
                # 14 ms between waves 1 and 2 at C = 32, L = 50 ms.
                while not closing and self.completed.empty() and len(self.queue) + len(self.in_flight) < 2 * self.cfg.concurrency and self._capacity() > 0:
                    planned = self._plan_round()
                    if not planned:
                        break
                    self.queue.extend(planned)
                done = self._collect(self._tick())
                for future in sorted(done, key=lambda f: self.in_flight[f].order):
                    item = self.in_flight.pop(future)
                    self._land(item, future)

    def _collect(self, timeout: float) -> list:
        """Futures that finished: block up to ``timeout`` for the first, then take every
        other one already reported (stale reports of futures no longer in flight are skipped)."""
        done = []
        try:
            future = self.completed.get(timeout=timeout)
            while True:
                if future in self.in_flight and future not in done:
                    done.append(future)
                future = self.completed.get_nowait()
        except queue.Empty:
            return done

    def _cancel_unstarted(self) -> None:
        """Closing on the clock: rollouts submitted ahead that no worker has started are dropped."""
        for future in list(self.in_flight):
            if future.cancel():
                self.in_flight.pop(future)

    def _tick(self) -> float:
        k = self.cfg.knobs
        if self.deadline is None:
            return k.collect_wait_s
        left = self.deadline - time.perf_counter()
        return max(k.collect_wait_floor_s, min(k.collect_wait_s, left))

    def _wait_all(self, futures: list) -> None:
        pending = set(futures)
        while pending:
            done, pending = cf.wait(pending, timeout=self._tick())
            if self._stop_requested():
                self.stopped_because = "stopped"
                self._drain(cancel=True)
                return
            if self.deadline is not None and time.perf_counter() >= self.deadline:
                self.stopped_because = "time_budget"
                self._drain(cancel=True)
                return

    def _closing(self) -> bool:
        if self.deadline is None:
            return False
        left = self.deadline - time.perf_counter()
        if left <= 0:
            return True
        if self.durations:
            return left < self.cfg.knobs.closing_margin * statistics.median(self.durations)
        return False

    def _exhausted(self) -> bool:
        """Nothing was planned and nothing is in flight: decide whether the run is over."""
        k = self.cfg.knobs
        if self.replay_groups is not None:
            if not self.owed:
                self.stopped_because = "tasks_done"
                return True
        if self.cfg.n_situations is not None and len(self.situations_opened) >= self.cfg.n_situations and not self.owed:
            self.stopped_because = "situations_exhausted"
            return True
        if self._capacity() <= 0:
            self.stopped_because = "budget"
            return True
        self.empty_rounds += 1
        if self.empty_rounds % k.writer_idle_rounds_to_restart == 0:
            # reference: at most max(24, budget // rows_per_extra_restart) restarts
            if self.writer_restarts >= max(24, self.cfg.cap // k.rows_per_extra_restart):
                self.stopped_because = "writer_exhausted"
                return True
            self.writer_restarts += 1
            self.writer_seed = self.cfg.seed + k.restart_seed_stride * self.writer_restarts
        if self.empty_rounds >= k.empty_rounds_to_stop:
            self.stopped_because = "writer_exhausted"
            return True
        return False

    def _check_stop(self) -> str | None:
        k = self.cfg.knobs
        if self.write_failure is not None:
            return "write_failed"
        if self.auth_failure is not None or self.consecutive_failures >= k.dead_agent_consecutive:
            return "agent_failed"
        landed = self._landed_this_run()
        if landed + self._pending_resume() >= self.cfg.cap:
            return "budget"
        if not self.rows and (self.unreachable or self.dead_count >= max(k.dead_agent_errors, k.dead_agent_budget_multiple * (self.cfg.budget or 0))):
            return "agent_failed"
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return "time_budget"
        if self.deadline is not None and self._closing() and not self.in_flight:
            return "time_budget"
        if self.decision is not None:
            return "decided"
        if self.cfg.until == "saturation" and self.rows and self.replay_groups is None:
            planned = [s.id for s in self.grid]
            # unique situations give a cell one row by design, so one row per planned cell is full
            needed = 1 if self.cfg.unique else k.copies_needed
            if all(self.cells[sid] >= needed or self._unreachable(sid) for sid in planned):
                self.saturation_rule = "copies"
                return "saturation"
            # a planned cell with no row yet is unexplored, whatever the batches look like: the
            # plateau rules wait until every reachable cell has been run once
            if any(self.cells[sid] == 0 and not self._unreachable(sid) for sid in planned):
                return None
            if self.flat_batches >= k.saturation_flat_batches:
                self.saturation_rule = "flat_batches"
                return "saturation"
            if self.coverage_flat_batches >= k.saturation_flat_batches:
                self.saturation_rule = "coverage_plateau"
                return "saturation"
        return None

    def _unreachable(self, sid: str) -> bool:
        """A grid cell the writer cannot open: written _UNREACHABLE_WRITES times, every phrasing a
        duplicate of one already run (the template writer has few wordings for some cards, such
        as the 'unrelated' tool's), so the saturation rules stop waiting for it."""
        return self.cells[sid] == 0 and self.write_attempts[sid] >= _UNREACHABLE_WRITES

    def _drain(self, cancel: bool) -> None:
        """Stop: cancel queued work, give running rollouts ``stop_grace`` seconds, keep what lands."""
        self.queue.clear()
        if not self.in_flight:
            return
        for future in list(self.in_flight):
            if future.cancel():
                self.in_flight.pop(future)
        if self.in_flight:
            # rollouts waiting on a server that never answered wait on nothing: no grace for them
            grace = 0.0 if self.unreachable else self.cfg.knobs.stop_grace
            done, pending = cf.wait(list(self.in_flight), timeout=grace if cancel else None)
            for future in sorted(done, key=lambda f: self.in_flight[f].order):
                item = self.in_flight.pop(future)
                self._land(item, future, allow_more=False)
            self.abandoned += len(pending)
            self.in_flight.clear()

    # ----------------------------------------------------------------- planning
    def _plan_round(self) -> list[_Item]:
        k = self.cfg.knobs
        capacity = self._capacity()
        if capacity <= 0 or self._closing():
            return []
        size = k.first_wave_writers * k.first_wave_cards if self.round == 0 else k.per_round
        size = max(min(k.min_cards_per_wave, capacity), min(size, capacity))
        items: list[_Item] = []
        # owed work first: re-rolls, fills of split groups, fixed-k remainders
        while self.owed and len(items) < size:
            group, attempt, index = self.owed.popleft()
            items.append(self._item(group, index, attempt))
        free = size - len(items)
        if free > 0:
            if self.replay_groups is not None:
                items += self._open_replay(free)
            else:
                items += self._open_fresh(free)
        if self.repeat_policy == "successive" and free > 0 and not items:
            items += self._resume_stopped(size)
        self.round += 1
        if items:
            self.empty_rounds = 0
        return items

    def _item(self, group: _Group, rollout_index: int, attempt: int = 0) -> _Item:
        self.order += 1
        if group.situation is not None and attempt == 0:  # a re-roll replaces a lost rollout; count it once
            self.situation_planned[group.situation.id] += 1
            self.tier_planned[self._tier_class(group.situation)] += 1
            self.tier_groups[self._tier_class(group.situation)] += rollout_index == 0
        return _Item(order=self.order, group=group, rollout_index=rollout_index, attempt=attempt)

    def _initial_rollouts(self) -> int:
        return {"none": 1, "fixed": self.k, "successive": min(self.cfg.knobs.probe, self.k), "adaptive": 1}[self.repeat_policy]

    def _open_group(self, group: _Group, free: int) -> list[_Item]:
        self.groups[group.key] = group
        first = min(self._initial_rollouts(), max(1, free))
        items = []
        for _ in range(self._initial_rollouts()):
            index = group.next_index
            group.next_index += 1
            if len(items) < first:
                items.append(self._item(group, index))
            else:
                self.owed.append((group, 0, index))
        return items

    def _open_replay(self, free: int) -> list[_Item]:
        items: list[_Item] = []
        while self.replay_groups and len(items) < free:
            group = self.replay_groups.popleft()
            items += self._open_group(group, free - len(items))
        return items

    def _resume_stopped(self, size: int) -> list[_Item]:
        items = []
        for group in self.groups.values():
            if len(items) >= size or self._capacity() - len(items) <= 0:
                break
            if group.key in self.allocator.stopped and group.next_index < self.k:
                self.allocator.resume(group.key)
                index = group.next_index
                group.next_index += 1
                items.append(self._item(group, index))
        return items

    def _arm_counts(self, slots: int) -> dict[str, int]:
        """Systematic sampling over the arm weights: proportional, deterministic per round."""
        weights = [max(0.0, self.arm_weights.get(arm, 0.0)) for arm in ARMS]
        total = math.fsum(weights)
        cumulative = []
        running = []
        for w in weights:
            running.append(w / total)
            cumulative.append(math.fsum(running))
        offset = stable_uniform(self.cfg.seed, "arm-slots", self.eval_run, self.round)
        counts = Counter()
        for j in range(slots):
            point = (offset + j) / slots
            index = next((i for i, c in enumerate(cumulative) if point < c), len(ARMS) - 1)
            counts[ARMS[index]] += 1
        return {arm: counts[arm] for arm in ARMS}

    def _tier_classes(self, groups: int, rows_per_group: int) -> list[str]:
        """The tier class ("hard" / "ordinary") of each of ``groups`` new groups: each takes the
        class that brings the projected hard share of rollouts closest to ``hard_share``."""
        share = self.cfg.hard_share
        # a class's groups end up with more rollouts than their first ones when repeat policies
        # fill them (rl fills split groups, and hard ones split more): project each class at its
        # mean rollouts per group so far, so fills still to come are counted (planned counts alone
        # drifted to 0.46 for 0.40 over 1,000 rl rows)
        size = {c: (self.tier_planned[c] / self.tier_groups[c]) if self.tier_groups[c] else rows_per_group for c in ("hard", "ordinary")}
        hard = self.tier_groups["hard"] * size["hard"]
        ordinary = self.tier_groups["ordinary"] * size["ordinary"]
        out = []
        for _ in range(groups):
            with_hard = abs((hard + size["hard"]) / (hard + ordinary + size["hard"]) - share)
            with_ordinary = abs(hard / (hard + ordinary + size["ordinary"]) - share)
            cls = "hard" if with_hard <= with_ordinary else "ordinary"
            out.append(cls)
            if cls == "hard":
                hard += size["hard"]
            else:
                ordinary += size["ordinary"]
        return out

    def _owed_phrasings(self) -> list:
        """Under ``situations=N``, once N situations are open: more phrasings for the open ones
        that have fewer than n (a round's free slots or the writer's novelty cut can leave a
        card short), so the run ends at N x n prompts."""
        short = [self.situation_objects[sid] for sid in self.situations_opened if self.situation_groups[sid] < self.cfg.n]
        return self._write_and_pick([(s, f"phrasing {self.situation_groups[s.id] + 1} of {self.cfg.n} owed to an open situation") for s in short],
                                    len(short), "", "structured")  # fmt: skip

    def _open_fresh(self, free: int) -> list[_Item]:
        if self.cfg.n_situations is not None and len(self.situations_opened) >= self.cfg.n_situations:
            return self._open_candidates(self._owed_phrasings(), free)
        per_group = self._initial_rollouts()
        rows_per_group = max(1, per_group * self.cfg.n)
        n_groups = max(1, math.ceil(free / rows_per_group))
        counts = self._arm_counts(n_groups)
        classes = iter(self._tier_classes(n_groups, rows_per_group))
        items: list[_Item] = []
        for arm in ARMS:
            if counts[arm] == 0:
                continue
            wanted = Counter(next(classes) for _ in range(counts[arm]))
            candidates = []
            for cls, other in (("hard", "ordinary"), ("ordinary", "hard")):
                if wanted[cls]:
                    got = self._candidates(arm, wanted[cls], cls)
                    if len(got) < wanted[cls] and arm != "structured":  # the grid in this class first
                        got += self._candidates("structured", wanted[cls] - len(got), cls)
                    if len(got) < wanted[cls] and arm != "llm_guided":  # then gap-guided cards, whose stance sets the class
                        got += self._candidates("llm_guided", wanted[cls] - len(got), cls)
                    if len(got) < wanted[cls]:  # this class ran out (unique situations, small grid): the other fills in
                        got += self._candidates(arm, wanted[cls] - len(got), other)
                    candidates += got
            items += self._open_candidates(candidates, free - len(items))
        return items

    def _open_candidates(self, candidates: list, free: int) -> list[_Item]:
        items: list[_Item] = []
        for situation, texts, reason, parent, used_arm in candidates:
            if len(items) >= free:
                break
            if not self._situation_open_ok(situation) or not self._family_ok(situation):
                continue
            opened = False
            for text, reference, persona, nov in texts:
                if len(items) >= free or not self._situation_open_ok(situation):
                    break
                if text in self.prompts_seen:  # two candidate draws of one round may word a card alike
                    continue
                group = _Group(
                    key=stable_hash([self.eval_run, situation.id, text], 16), situation=situation, prompt=text,
                    reference=reference, persona=persona, arm=used_arm, reason=reason, parent_id=parent, k=self.k,
                    eval_run=self.eval_run, novelty=nov,
                )  # fmt: skip
                self.prompts_seen.add(text)
                if situation.id not in self.situations_opened_set:
                    self.situations_opened.append(situation.id)
                    self.situations_opened_set.add(situation.id)
                    if self.cfg.n_situations is not None:
                        self.situation_objects[situation.id] = situation
                self.situation_groups[situation.id] += 1
                opened = True
                items += self._open_group(group, free - len(items))
            if opened and parent is not None:
                self.mutations_opened += 1
        return items

    def _situation_open_ok(self, situation) -> bool:
        """Under ``situations=N`` a situation takes n phrasings and no more, and no situation
        past the N-th is opened: the run is N situations x n x k rollouts. Under unique
        situations a situation gets its n phrasings and is never revisited, whichever arm
        proposes it."""
        if self.cfg.unique and situation.id in self.situations_opened_set:
            return self.situation_groups[situation.id] < self.cfg.n  # its n phrasings, never a revisit
        if self.cfg.n_situations is None:
            return True
        if situation.id in self.situations_opened_set:
            return self.situation_groups[situation.id] < self.cfg.n
        return len(self.situations_opened) < self.cfg.n_situations

    @staticmethod
    def _tier_class(situation) -> str:
        return "hard" if situation.tier in HARD_TIERS else "ordinary"

    # candidates: list of (situation, [(text, reference, persona, novelty)], reason, parent_id, arm);
    # ``arm`` is the arm that really produced the candidate (an arm with nothing to offer falls
    # back to another, and its rows carry the other's name, so arm yields credit the right arm)
    def _candidates(self, arm: str, count: int, tier: str | None = None) -> list:
        k = self.cfg.knobs

        def fits(situation) -> bool:
            return tier is None or self._tier_class(situation) == tier

        salt = [self.eval_run, self.round, arm]
        if arm == "failure_mutation":
            # a mutation re-opens its parent's situation: never under unique situations
            parents = [p for p in self.parents if p["situation"] is not None and fits(p["situation"]) and self._situation_open_ok(p["situation"])]
            out = []
            for j in range(count if parents else 0):
                parent = parents[(self.round + j) % len(parents)]
                text = mutate_prompt(parent["prompt"], self.writer_seed, [self.round, j])
                if text in self.prompts_seen or text == parent["prompt"]:
                    continue
                out.append((parent["situation"], [(text, parent.get("reference"), parent.get("persona") or {}, self._novelty([text])[0])],
                            f"mutation of a {parent['aim']} row", parent["id"], arm))  # fmt: skip
            return out or self._candidates("structured", count, tier)
        if arm == "open_ended":
            pool = open_ended_candidates(count * k.select_oversample, self.writer_seed, salt, self.axes)
            pool = [(s, t, f) for s, t, f in pool if t not in self.prompts_seen and fits(s)]
            return self._pick_novel([(s, t, None, {}, f"open-ended probe: {f}") for s, t, f in pool], count, arm)
        if arm == "llm_guided":
            axes = self.axes
            if tier is not None:
                # the stance decides the tier: draw among the asked class's stances only (filtering
                # afterwards left few candidates, since the least-seen stances are the other class's)
                stances = tuple(v for v in self.axes.get("stance", ()) if (tier_of(v) in HARD_TIERS) == (tier == "hard"))
                axes = {**self.axes, "stance": stances} if stances else self.axes
            situations = gap_guided_situations(count * k.select_oversample, axes, self.value_counts, self.writer_seed, salt, k.writer_context_items)
            return self._write_and_pick([(s, r) for s, r in situations if self._family_ok(s) and fits(s) and self._situation_open_ok(s)], count, "gap-guided: ", arm)
        if arm == "behavior_targeted":
            least = sorted(self.tool_calls, key=lambda t: (self.tool_calls[t], list(self.tool_calls).index(t)))[: max(1, k.writer_context_items)]
            chosen = [s for s in self.grid if s.dimensions.get("tool") in least and self._family_ok(s) and fits(s)
                      and (not self.cfg.unique or self.cells[s.id] == 0)]  # fmt: skip
            if not chosen:
                return self._candidates("llm_guided", count, tier)
            chosen.sort(key=lambda s: (least.index(s.dimensions["tool"]), stable_uniform(self.writer_seed, "bt", salt, s.id)))
            return self._write_and_pick([(s, f"least-called tool {s.dimensions['tool']} ({self.tool_calls[s.dimensions['tool']]} calls)") for s in chosen[: count * k.select_oversample]], count, "", arm)
        # structured: the grid ranked by region weight (weighted reservoir keys u^(1/W)), in the asked tier class
        ranked = []
        for s in self.grid:
            if self.cfg.unique and (self.cells[s.id] > 0 or s.id in self.situations_opened_set):
                continue
            if not self._family_ok(s) or not fits(s):
                continue
            weight = self._region_weight(s)
            u = stable_uniform(self.writer_seed, "reservoir", self.eval_run, self.round, s.id)
            ranked.append((u ** (1.0 / weight) if weight > 0 else 0.0, s))
        if not ranked:
            return self._candidates("llm_guided", count, tier) if self.cfg.unique else []
        if self.cfg.until == "saturation" and self.replay_groups is None:
            # the copies stop needs every planned cell at copies_needed rows: cells short of it go first
            # (ranked by weight alone, 56 of 160 cells had no row after 3,000 sft rows, so it never fired)
            needed = 1 if self.cfg.unique else k.copies_needed
            short = [pair for pair in ranked if self.cells[pair[1].id] < needed and not self._unreachable(pair[1].id)]
            if short:  # level by level: the least-run cells first
                least = min(self.cells[pair[1].id] for pair in short)
                ranked = [pair for pair in short if self.cells[pair[1].id] == least]
        ranked.sort(key=lambda pair: -pair[0])
        pool = [s for _, s in ranked[: max(count * k.select_oversample, count)]]
        return self._write_and_pick([(s, f"grid cell (region weight {self._region_weight(s):.3f})") for s in pool], count, "", arm)

    def _family_ok(self, situation) -> bool:
        k = self.cfg.knobs
        cap = max(k.family_cap_floor, self.cfg.n * k.family_cap_per_phrasing * self.k)
        # rows planned, not only landed: a round that drew one cell twice (a tier-class
        # fallback) passed the cap by the rows still in flight
        return max(self.cells[situation.id], self.situation_planned[situation.id]) < cap

    def _variant_seed(self, situation) -> int:
        """A new variant set per write of this card (on the engine's thread, so a model writer's
        pool threads cannot race on the count): texts every card of one tool words alike (the
        'unrelated' tool's) were all seen already, and a seed fixed by the row count rewrote them forever."""
        seed = self.writer_seed + self.write_attempts[situation.id] * 7919
        self.write_attempts[situation.id] += 1
        return seed

    def _write(self, situation, variant_seed: int) -> list[tuple[str, str | None, dict]]:
        count = self.cfg.n + self.cfg.knobs.writer_typical_completions - 1  # the engine keeps the n most novel
        if isinstance(self.cfg.writer, ModelWriter):
            drafts = write_prompts(situation, count, seed=variant_seed, tools=self.tools)
            return self.cfg.writer(situation, count, variant_seed, tools=self.tools, drafts=drafts)
        if self.cfg.writer is not None:
            texts = list(self.cfg.writer(situation, self.cfg.n, variant_seed))
            return [(str(t), None, {}) for t in texts[: self.cfg.n]]
        prompts = write_prompts(situation, count, seed=variant_seed, tools=self.tools)
        return [(p.text, p.reference, dict(p.persona)) for p in prompts]

    def _written(self, situations: list[tuple[Any, str]], count: int):
        """``(situation, reason, phrasings)`` in order. A model writer's cards are written
        ``count`` at a time on ``writer_concurrency`` threads (in order of the list, so the
        first ``count`` usable cards win as before): one card at a time, a 1 s writer model
        held a 32-row round for ~11 s."""
        if not isinstance(self.cfg.writer, ModelWriter) or len(situations) <= 1:
            for situation, reason in situations:
                yield situation, reason, self._write(situation, self._variant_seed(situation))
            return
        if self.writer_pool is None:
            self.writer_pool = cf.ThreadPoolExecutor(max_workers=self.cfg.knobs.writer_concurrency, thread_name_prefix="toolkit-writer")
        for start in range(0, len(situations), max(1, count)):
            chunk = situations[start : start + max(1, count)]
            futures = [self.writer_pool.submit(self._write, situation, self._variant_seed(situation)) for situation, _ in chunk]
            for (situation, reason), future in zip(chunk, futures):
                yield situation, reason, future.result()

    def _write_and_pick(self, situations: list[tuple[Any, str]], count: int, prefix: str, arm: str) -> list:
        out = []
        for situation, reason, phrasings in self._written(situations, count):
            written = [w for w in phrasings if w[0] not in self.prompts_seen]
            if not written:
                continue
            scores = self._novelty([w[0] for w in written])
            if len(written) > self.cfg.n:  # keep the n most novel phrasings of this card
                order = sorted(sorted(range(len(written)), key=lambda i: (-round(float(scores[i]), 9), i))[: self.cfg.n])
                written = [written[i] for i in order]
                scores = [scores[i] for i in order]
            out.append((situation, [(t, r, p, float(s)) for (t, r, p), s in zip(written, scores)], prefix + reason, None, arm))
            if len(out) >= count:
                break
        return out

    def _pick_novel(self, pool: list, count: int, arm: str) -> list:
        if not pool:
            return []
        scores = self._novelty([t for _, t, _, _, _ in pool])
        order = sorted(range(len(pool)), key=lambda i: (-round(float(scores[i]), 9), i))
        out = []
        for i in order[:count]:
            s, t, ref, persona, reason = pool[i]
            out.append((s, [(t, ref, persona, float(scores[i]))], reason, None, arm))
        return out

    def _novelty(self, texts: list[str]) -> np.ndarray:
        return self.seen.score(self._embed(texts))

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings with a bounded text -> vector cache: a phrasing is embedded when it is
        scored as a candidate and again when its row lands; the second costs a lookup."""
        if not texts:
            return self.embedder.embed([])
        cache = self.vector_cache
        vectors = {t: cache[t] for t in texts if t in cache}
        missing = [t for t in dict.fromkeys(texts) if t not in vectors]
        if missing:
            if len(cache) + len(missing) > _VECTOR_CACHE_SIZE:
                cache.clear()
            for text, vector in zip(missing, self.embedder.embed(missing)):
                vectors[text] = cache[text] = vector.copy()
        return np.stack([vectors[t] for t in texts])

    def _region_weight(self, situation) -> float:
        k = self.cfg.knobs
        d = situation.dimensions
        count = self.cells[situation.id]
        tool = d.get("tool")
        destructive = isinstance(tool, str) and any(w in tool for w in ("cancel", "delete", "remove", "refund", "change", "update"))
        if d.get("tool_condition") not in (None, "success", "unspecified") or (destructive and d.get("stance") in _RISKY_STANCES):
            risk = 1.0
        elif destructive:
            risk = 0.3
        elif isinstance(tool, str) and any(w in tool for w in ("get", "search", "list", "find", "read")):
            risk = 0.1
        else:
            risk = 0.2
        sigs = self.cell_signatures.get(situation.id, set())
        if count >= k.gap_min_rows and len(sigs) <= 1:
            gap_score = k.gap_value_stuck
        elif len(sigs) >= k.gap_rich_signatures:
            gap_score = k.gap_value_rich
        else:
            gap_score = k.gap_value_unknown
        gap = k.gap_weight * gap_score + (1 - k.gap_weight) * self.cell_fails[situation.id] / (count + 1)
        weight = region_weight(count, risk, self.cell_novelty.get(situation.id, k.gap_value_unknown), gap, self.cfg.region_coefficients)
        return weight * self.trace_boost.get(situation.id, 1.0)

    # ----------------------------------------------------------------- traces and tasks
    def _trace_boost(self) -> dict[str, float]:
        """Hot regions from failing traces pull grid weight: x(1 + gain x share x match)."""
        k = self.cfg.knobs
        self.failing_seeds: list[str] = []
        self.failing_seed_rows: dict[str, dict] = {}
        if not self.cfg.traces:
            return {}
        hot: Counter = Counter()
        for row in self.cfg.traces:
            aim = failure_aim(row, pass_threshold=k.pass_threshold, graded="reward" in row)
            if aim is None:
                continue
            dims = row.get("scenario_dimensions") or {}
            tools_called = [s.get("tool") for s in row.get("steps") or () if isinstance(s, Mapping) and "tool" in s]
            condition = dims.get("tool_condition") or next((f.get("mode") for f in row.get("faults") or () if isinstance(f, Mapping)), None)
            hot[(dims.get("tool") or (tools_called[0] if tools_called else None), condition)] += 1
            if isinstance(row.get("prompt"), str) and len(self.failing_seeds) < k.failing_seeds_cap and row["prompt"] not in self.failing_seed_rows:
                self.failing_seeds.append(row["prompt"])
                self.failing_seed_rows[row["prompt"]] = row
        total = sum(hot.values()) or 1
        boost = {}
        for s in self.grid:
            factor = 1.0
            for (tool, condition), count in hot.items():
                match = k.allocation_tool_weight * (s.dimensions.get("tool") == tool) + k.allocation_condition_weight * (s.dimensions.get("tool_condition") == condition)
                factor += k.allocation_gain * (count / total) * match
            boost[s.id] = factor
        return boost

    def _replay_groups(self):
        """tasks= -> a fixed queue of groups; traces= failing asks -> seed groups (then search)."""
        if self.cfg.tasks is None and not getattr(self, "failing_seeds", None):
            return None
        if self.cfg.tasks is None:
            # failing asks from traces run first as seed groups, then the search continues
            for text in self.failing_seeds:
                trace = self.failing_seed_rows[text]
                # the trace's own situation when its dimensions name one, so its rows carry a tier,
                # a cell and the run's fault_rate like any other; else no situation (and no fault)
                situation = _situation_from_dims(trace.get("scenario_dimensions"))
                group = _Group(key=stable_hash([0, "seed", text], 16), situation=situation, prompt=text, reference=None, persona={},
                               arm="trace_seed", reason="failing ask mined from traces=", parent_id=None, k=self.k,
                               world_state=trace.get("world_state") if situation is None else None)  # fmt: skip
                self.owed.extend((group, 0, i) for i in range(self._initial_rollouts()))
                group.next_index = self._initial_rollouts()
                self.groups[group.key] = group
                self.prompts_seen.add(text)
            return None
        # a run's trajectories keep the teacher-only privileged block, and with it each row's goal
        base = self.cfg.tasks.trajectories if isinstance(self.cfg.tasks, SimulationData) else _load_rows(self.cfg.tasks, "tasks")
        by_prompt: dict[str, list[dict]] = {}
        for row in base:
            if isinstance(row.get("prompt"), str):
                by_prompt.setdefault(row["prompt"], []).append(row)
        k_inherited = max(len(v) for v in by_prompt.values()) if by_prompt else 1
        if not self.cfg.k_given:
            self.k = k_inherited
            self.allocator.k = self.k
        groups = deque()
        unnamed = 0
        for prompt, rows in by_prompt.items():
            first = rows[0]
            situation = _situation_from_dims(first.get("scenario_dimensions"))
            faults = [f for r in rows for f in r.get("faults") or () if isinstance(f, Mapping)]
            plan = {"*": {"mode": faults[0]["mode"], "rate": 1.0}} if faults else {}
            goal = _task_goal(first)
            # only the state grader (named "state") reads goals; other runs need no warning
            if goal is None and self.cfg.grader_name == "state" and situation is not None and _goal_needs_record(situation, self.tools):
                unnamed += len(rows)
            groups.append(_Group(
                key=stable_hash([self.eval_run, "task", prompt], 16), situation=situation, prompt=prompt, reference=None,
                persona={}, arm="replay", reason="tasks= replay", parent_id=None, k=self.k, world_state=first.get("world_state"),
                fault_plan=plan, replay={"scenario_id": first.get("scenario_id"), "writer_model": first.get("writer_model"),
                                         "task_id": first.get("task_id"), "goal": goal},
            ))  # fmt: skip
        if unnamed:
            self.warnings.append(
                f"{unnamed} tasks= rows carry no goal (written rows drop the teacher-only privileged block that holds it), so "
                "the replay derived their goals again without the record the ask named: any record meets them and a change "
                "to another record is not collateral. Replay the run's in-memory rows (data.trajectories, which "
                "tk.attacked_tasks(data) uses) or give each row its own 'goal'."
            )
        if self.repeat_policy in ("none", "adaptive") and self.k > 1:
            self.repeat_policy = "fixed"
        self.pinned = list(groups)
        return groups

    def _replay_from_run0(self):
        if getattr(self, "pinned", None) is not None:
            base = self.pinned
        else:
            base = [g for g in self.groups.values() if g.eval_run == 0]
            if self.repeat_policy in ("none", "adaptive", "successive"):
                self.repeat_policy = "fixed"
            self.k = max([g.next_index for g in base] + [1])
        groups = deque()
        for g in base:
            groups.append(_Group(
                key=stable_hash([self.eval_run, g.key], 16), situation=g.situation, prompt=g.prompt, reference=g.reference,
                persona=g.persona, arm=g.arm, reason=g.reason, parent_id=g.parent_id, k=self.k, eval_run=self.eval_run,
                world_state=g.world_state, fault_plan=g.fault_plan, replay={**(g.replay or {}), "replayed_from_run": 0},
            ))  # fmt: skip
        self.owed.clear()
        return groups

    # ----------------------------------------------------------------- submitting and landing
    def _job(self, item: _Item) -> RolloutJob:
        g = item.group
        situation = g.situation
        seed = self.cfg.seed if item.attempt == 0 else int(stable_hash([self.cfg.seed, "reroll", g.prompt, item.rollout_index, item.attempt], 12), 16)
        dims = dict(situation.dimensions) if situation is not None else {}
        privileged = {
            "reference": f"expected conduct: {dims.get('world_state', 'unknown')} record under a {dims.get('tool_condition', 'success')} tool; "
                         f"rule in play: {dims.get('rule', 'unspecified')}",
            "hidden_state": {"world_state": dims.get("world_state"), "tool_condition": dims.get("tool_condition"), "situation_id": getattr(situation, "id", None)},
        }  # fmt: skip
        if g.reference:
            privileged["named_reference"] = g.reference
        # the end state the ask requires (issue 17): a tasks= row's own goal, else derived
        goal = (g.replay or {}).get("goal") or (goal_for(situation, self.tools, g.reference) if situation is not None else None)
        if goal is not None:
            privileged["goal"] = goal
        user = self._user(situation)
        if g.fault_plan is not None or self.cfg.execute is not None:
            world_state, fault_plan = g.world_state, g.fault_plan
        elif situation is not None:
            # the one place the run's fault_rate is read: keep this prompt's fault or not
            world_state = dims.get("world_state")
            fault_plan = kept_fault_plan(situation, fault_rate=self.cfg.fault_rate, seed=self.cfg.seed, key=g.prompt,
                                         modes=self.cfg.world_options.mode_names)  # fmt: skip
        else:
            world_state, fault_plan = None, None
        return RolloutJob(
            agent=self.cfg.agent, prompt=g.prompt, tools=self.tools, situation=situation, system_prompt=self.cfg.system_prompt,
            rollout_index=item.rollout_index, seed=seed, logprobs=self.cfg.logprobs, max_turns=self.cfg.max_turns,
            avg_turns=self.cfg.avg_turns, patience=self.cfg.patience, timeout=self.cfg.rollout_timeout,
            sampling=self.cfg.sampling, privileged=privileged, user=user, world_options=self.cfg.world_options,
            execute=self.cfg.execute, world_state=world_state, fault_plan=fault_plan,
            grader=self.cfg.grader, grader_name=self.cfg.grader_name, grader_meta=self.cfg.grader_meta,
            grader_timeout=self.cfg.knobs.grader_timeout,
            grader_deadline=self.wall_deadline, grader_stop=self.cfg.stop_event if self.cfg.executor is None else None,
            cancel=self.cancel if self.own_threads else None,
        )  # fmt: skip

    def _user(self, situation):
        if self.cfg.agent_shape != "chat":
            return None
        if self.cfg.user_model is None and self.cfg.knobs.user_temperature is None:
            return None  # run_rollout builds the template user from the situation
        return simulated_user(situation, patience=self.cfg.patience, avg_turns=self.cfg.avg_turns, user_model=self.cfg.user_model,
                              temperature=self.cfg.knobs.user_temperature, seed=self.cfg.seed)  # fmt: skip

    def _watch_reply(self, future: cf.Future) -> None:
        """Done-callback (any thread): remember the first AgentReplyError, so no more work is submitted."""
        if not future.cancelled() and isinstance(future.exception(), AgentReplyError) and self.reply_error is None:
            self.reply_error = future.exception()

    def _submit(self, item: _Item) -> cf.Future:
        if self.reply_error is not None:
            raise self.reply_error  # an earlier rollout's agent replied with an impossible type
        key = self._key(self.eval_run, item.group.prompt, item.rollout_index)
        stored = self.resume_rows.get(key)
        if stored is not None and key not in self.resume_keys_consumed:
            self.resume_keys_consumed.add(key)
            future: cf.Future = cf.Future()
            future.set_result({"__resumed__": True, **stored})
        else:
            future = self.pool.submit(_rollout_task, self._job(item))
            future.add_done_callback(self._watch_reply)
            if self.reply_error is not None:
                raise self.reply_error  # an inline rollout (or a thread already done): stop before the next one
        self.in_flight[future] = item
        future.add_done_callback(self.completed.put)
        return future

    def _land(self, item: _Item, future: cf.Future, allow_more: bool = True) -> None:
        g = item.group
        try:
            row = future.result()
        except AgentReplyError:
            raise  # the agent's reply has an impossible type: a programming error, every rollout would fail alike
        except Exception as error:  # noqa: BLE001 -- the task itself failed (executor, pickling, world)
            row = {"ended_by": "lost", "lost_reason": "agent_error", "lost_detail": f"{type(error).__name__}: {error}"}
        resumed = bool(row.pop("__resumed__", False))
        if row.get("ended_by") == "lost":
            reason = row.get("lost_reason") or "agent_error"
            self.last_lost_detail = row.get("lost_detail")
            if reason == "server_unreachable" and not self.rows:
                # the model server never answered this run: every other rollout would wait out its
                # timeout the same way, so the run is called off now (_check_stop)
                self.unreachable = True
            if reason == "auth_failed" and self.auth_failure is None:
                self.auth_failure = row.get("lost_detail") or "HTTP 401/403"
            if reason in _ENDPOINT_FAILURES:
                self.consecutive_failures += 1
            if allow_more and item.attempt < max(1, g.k) and self._capacity() > 0 and not self.unreachable and self.auth_failure is None:
                self.rerolled += 1
                self.rerolled_by[reason] += 1
                self.owed.appendleft((g, item.attempt + 1, item.rollout_index))
            else:
                self.lost_by[reason] += 1
            # every failure counts toward the dead-agent rule, re-rolled or not
            self.dead_count += 1
            return
        self.consecutive_failures = 0
        if not resumed:
            self._stamp(row, item)
        else:
            row.setdefault("lineage", {})["resumed"] = True
        self._record(row, item)
        if not resumed:
            written = None
            for writer in self.writers:
                out = self._write_row(writer, row)
                written = written or out
            public = written if written is not None else _scrub(row)
        else:
            if self.output_writer is not None:
                self._write_row(self.output_writer, row)
            public = _scrub(row)
        self._store(public, row)
        if public.get("bad_tool_arguments"):
            self.bad_arguments[0] += public["bad_tool_arguments"]
            self.bad_arguments[1] += 1
        if public.get("replies_truncated"):
            self.truncated_rows += 1
        for count_field, tally in (("turns_at_budget", self.at_budget), ("turns_over_budget", self.over_budget)):
            if public.get(count_field):
                tally[0] += public[count_field]
                tally[1] += 1
                tally[2] = (public.get("sampling") or {}).get("max_tokens", tally[2])
        gaps = public.get("logprob_turns")
        if isinstance(gaps, Mapping):
            self.logprob_gap_rows += 1
            for reason in gaps.get("reasons") or {}:
                self.logprob_gaps[reason] += 1  # rows that lack a turn's logprob for this reason
        self.durations.append(float((row.get("timing") or {}).get("seconds") or 0.0))
        reward = public.get("reward")
        if isinstance(reward, (int, float)) and not isinstance(reward, bool):
            self.graded.add(float(reward))
            if self.decide_sequence is not None:
                self._decide(g, float(reward), public)
        elif public.get("judge_status") in ("error", "invalid_result", "timeout"):
            self.judge_failures[public["judge_status"]] += 1
            if self.first_judge_failure is None:
                self.first_judge_failure = public.get("reason")
        if self.cfg.on_row is not None:
            try:
                self.cfg.on_row(public)
            except Exception as error:  # noqa: BLE001 -- a callback bug never loses rows
                self.callback_errors += 1
                if self.callback_errors == 1:
                    self.warnings.append(f"on_row raised {type(error).__name__}: {error}; rows were kept, fix the callback (further errors counted in report()['callback_errors']).")
        if self.bar is not None:
            self.bar.update(1)
        if allow_more:
            self._after_landing(row, item)
        self._retire(g)
        self._maybe_progress()

    def _decide(self, group: Any, reward: float, row: Mapping[str, Any]) -> None:
        """Feed a graded reward to until='decided''s sequence; record the first exclusion."""
        # keyed by the group's key and eval run, not id(): an abandoned group's object can be
        # freed and its id reused by a new one
        slot = (group.key, group.eval_run)
        rewards = self.decide_rewards.setdefault(slot, [])
        rewards.append(min(1.0, max(0.0, reward)))
        if len(rewards) != max(1, group.k) or self.decision is not None:
            return
        sequence = self.decide_sequence
        value = math.fsum(rewards) / len(rewards)
        if self.decide_baseline is not None:
            # paired per prompt: the same prompt's mean reward in the baseline run
            before = self.decide_baseline.get((row.get("scenario_id"), row.get("prompt")))
            if before is None:
                self.decide_unpaired += 1
                return
            value -= before
        sequence.update(value)
        threshold = self.cfg.knobs.decide["threshold"]
        side = "above" if sequence.low > threshold else "below" if sequence.high < threshold else None
        if side is not None:
            self.decision = {"side": side, "metric": self.cfg.knobs.decide["metric"], "threshold": threshold,
                             "level": sequence.level, "at_rows": len(self.rows), "groups_complete": sequence.n,
                             "low": round(sequence.low, 4), "high": round(sequence.high, 4)}

    def _write_row(self, writer: RowWriter, row: dict) -> dict | None:
        """``writer.write(row)``, or None once a row write has failed (disk full, a read-only
        or vanished folder): the first failure is kept (:attr:`write_failure`) and stops the
        run, and no later row is written anywhere, so each file ends at a row boundary and the
        run's result, already in memory, is returned instead of lost to the exception."""
        if self.write_failure is not None:
            return None
        try:
            return writer.write(row)
        except OSError as error:
            self.write_failure = (writer.path, error, writer.count)
            return None

    def _sidecar_write(self, path: Path, payload: dict) -> None:
        """A sidecar (``.meta.json``, ``.progress.json``) written, or a warning saying which
        could not be: the rows are what the run is for, and they are already on disk."""
        try:
            write_json_atomic(path, payload)
        except OSError as error:
            if str(path) not in self.sidecar_errors:
                self.sidecar_errors.add(str(path))
                self.warnings.append(f"the sidecar {path} could not be written ({type(error).__name__}: {error}); "
                                     "the rows are in their file, but tk.load will not find this run's report beside them.")

    def _retire(self, g: _Group) -> None:
        """Forget a group that reached k with nothing outstanding: nothing can add to it any
        more, and keeping every group (its situation, persona and prompt, ~1.5 KB) grew memory
        with every row. Runs with runs > 1 keep them: later eval runs replay run 0's groups."""
        if self.cfg.runs == 1 and g.landed >= g.k and g.next_index <= g.landed and self.groups.get(g.key) is g:
            del self.groups[g.key]
            self.retired_groups += 1

    def _stamp(self, row: dict, item: _Item) -> None:
        g = item.group
        lineage = row.setdefault("lineage", {})
        lineage["eval_run"] = g.eval_run
        if item.attempt:
            lineage["reroll"] = item.attempt
        if g.replay is not None:
            lineage["replayed"] = True
            if "replayed_from_run" in g.replay:
                lineage["replayed_from_run"] = g.replay["replayed_from_run"]
            if g.replay.get("scenario_id"):
                row["scenario_id"] = g.replay["scenario_id"]
            if g.replay.get("task_id") is not None:
                row["task_id"] = g.replay["task_id"]
        row["writer_model"] = (g.replay or {}).get("writer_model") or ("seed" if g.arm in ("trace_seed",) else self.cfg.writer_model)
        row["group_id"] = g.key
        row["rollout_id"] = f"{g.key}-{item.rollout_index}"
        row["arm"] = g.arm
        row["selection_reason"] = g.reason
        row["semantic_novelty"] = round(float(g.novelty), 6)
        if g.parent_id:
            row["parent_failure_id"] = g.parent_id
        if g.situation is not None:
            row["tier"] = g.situation.tier
            row["stance"] = g.situation.dimensions.get("stance")
            row["history"] = g.situation.dimensions.get("history")
        for key in ("length", "texture"):
            if g.persona.get(key):
                row[key] = g.persona[key]
        row["behavior_signature"] = behavior_signature(row)
        row["fault_detected"] = bool(row.get("faults"))

    def _record(self, row: dict, item: _Item) -> None:
        g = item.group
        k = self.cfg.knobs
        signature = row.get("behavior_signature") or behavior_signature(row)
        new_signature = signature not in self.signatures
        self.signatures.add(signature)
        sid = getattr(g.situation, "id", None) or row.get("scenario_id")
        new_cell = bool(sid) and self.cells[sid] == 0
        if sid:
            self.cells[sid] += 1
            self.cell_signatures.setdefault(sid, set()).add(signature)
            old = self.cell_novelty.get(sid, k.gap_value_unknown)
            self.cell_novelty[sid] = (1 - k.region_novelty_smoothing) * old + k.region_novelty_smoothing * g.novelty
        dims = row.get("scenario_dimensions") or {}
        for axis in self.value_counts:
            if axis in dims:
                self.value_counts[axis][dims[axis]] += 1
        for step in row.get("steps") or ():
            if isinstance(step, Mapping) and "tool" in step:
                self.tool_calls[step["tool"]] += 1
                result = step.get("result")
                if isinstance(result, Mapping) and result.get("status") in ("ok", "created", "deleted", "answered"):
                    self.tool_ok[step["tool"]] += 1
        if self.cfg.until == "saturation" and dims:
            self.saturation_dims.setdefault(repr(sorted(dims.items(), key=lambda kv: str(kv[0]))), {"scenario_dimensions": dims})
        if g.landed == 0:
            self.seen.remember(self._embed([g.prompt]))
        self.semantic_duplicates += g.novelty < k.semantic_duplicate_novelty
        g.landed += 1
        aim = failure_aim(row, pass_threshold=k.pass_threshold, graded=self.cfg.mutate_graded, faults=k.mutate_failures)
        if aim is not None:
            if sid:
                self.cell_fails[sid] += 1
            self.mutation_aims[aim] += 1
            self.parents.append({"id": row.get("rollout_id"), "prompt": g.prompt, "situation": g.situation, "aim": aim, "reference": g.reference, "persona": g.persona})
        self.batch.append({"arm": g.arm if g.arm in ARMS else "structured", "new_signature": new_signature, "new_cell": new_cell})
        if len(self.batch) >= k.per_round:
            self._close_batch()

    def _close_batch(self) -> None:
        yields = arm_yields(self.batch)
        fresh = sum(int(b["new_signature"]) + int(b["new_cell"]) for b in self.batch) / len(self.batch)
        self.flat_batches = self.flat_batches + 1 if fresh < self.cfg.knobs.saturation_fresh_share else 0
        if self.cfg.knobs.arm_weights:
            update = None
            entry = {"batch": len(self.arm_history), "rows": len(self.batch), "yields": yields, "weights": dict(self.arm_weights), "moved_because": "arm_weights pinned by advanced; no update"}
        else:
            update = update_arm_weights(self.arm_weights, yields, floors=ARM_FLOORS, caps=ARM_CAPS)
            self.arm_weights = dict(update.weights)
            entry = {"batch": len(self.arm_history), "rows": len(self.batch), "yields": yields, "weights": dict(update.weights), "moved_because": update.moved_because}
        entry["fresh_share"] = round(fresh, 6)
        if self.cfg.until == "saturation":
            # the seed: "saturation" also stops when coverage plateaus -- no new planned pair in
            # saturation_flat_batches batches in a row (behaviour signatures alone never go flat
            # offline: 30-50% of an sft batch's rows still carry a new one after 3,000 rows)
            pairs = self.grid.coverage_of(list(self.saturation_dims.values())).get("pairs_covered") or 0
            self.coverage_flat_batches = self.coverage_flat_batches + 1 if pairs == self.last_pairs_covered else 0
            self.last_pairs_covered = pairs
            entry["pairs_covered"] = pairs
        self.arm_history.append(entry)
        self.batch = []

    def _label(self, row: dict) -> Any:
        reward = row.get("reward")
        if isinstance(reward, (int, float)) and not isinstance(reward, bool):
            return int(reward >= self.cfg.knobs.pass_threshold)
        return row.get("behavior_signature")

    def _after_landing(self, row: dict, item: _Item) -> None:
        g = item.group
        g.labels.append(self._label(row))
        if self.repeat_policy == "successive":
            self.allocator.observe(g.key, g.labels[-1])
            outstanding = g.next_index - g.landed
            if outstanding > 0:
                return
            want = self.allocator.wanted(g.key)
            for _ in range(min(want, self.k - g.next_index)):
                self.owed.append((g, 0, g.next_index))
                g.next_index += 1
        elif self.repeat_policy == "adaptive" and g.landed == 1 and g.next_index < self.k:
            explore_share = self._explore_share()
            aim = failure_aim(row, pass_threshold=self.cfg.knobs.pass_threshold, graded=self.cfg.grader is not None)
            if aim is not None:
                extra = self.k - g.next_index  # verify a failure-worthy prompt to k
            elif explore_share < self.cfg.knobs.adaptive_verify_explore_floor:
                extra = 1  # peek for a different outcome
            else:
                extra = 0
            for _ in range(extra):
                self.owed.append((g, 0, g.next_index))
                g.next_index += 1

    def _explore_share(self) -> float:
        clock = self.cfg.time_budget or 600.0
        # reference: explore share 0.30 at a 15 s clock rising to 0.80 at 180 s
        return 0.30 + 0.50 * min(1.0, max(0.0, (clock - 15.0) / (180.0 - 15.0)))

    def _maybe_progress(self, final: bool = False) -> None:
        k = self.cfg.knobs
        now = time.perf_counter()
        t0, r0 = self.last_progress
        rows = len(self.rows)
        if final or rows - r0 >= k.progress_every_rows or now - t0 >= k.progress_every_s:
            self.last_progress = (now, rows)
            payload = self._progress_payload(final)
            if self.cfg.on_progress is not None:
                try:
                    self.cfg.on_progress(payload)
                except Exception as error:  # noqa: BLE001
                    self.callback_errors += 1
                    if not any("on_progress raised" in w for w in self.warnings):
                        self.warnings.append(f"on_progress raised {type(error).__name__}: {error}; the run went on; fix the callback.")
        f0, fr = self.last_flush
        if self.cfg.output is not None or self.cfg.checkpoint is not None:
            if final or rows - fr >= k.flush_report_rows or now - f0 >= k.flush_report_s:
                self.last_flush = (now, rows)
                target = self.cfg.output or self.cfg.checkpoint
                self._sidecar_write(_sidecar(target, ".progress.json"), self._progress_payload(final))

    def _progress_payload(self, final: bool) -> dict:
        elapsed = time.perf_counter() - self.started
        rows = len(self.rows)
        rate = rows / elapsed if elapsed > 0 and rows else None
        eta = (self.cfg.cap * self.cfg.runs - rows) / rate if rate and self.cfg.budget is not None and rows >= 5 else None
        # coverage walks every row: computed for the final payload only (per-event it made
        # a 5,000-row run quadratic)
        coverage = self.grid.coverage_of(list(self._facts()["with_dims"].values())) if final else None
        return json_safe({
            "rows": rows, "budget": self.cfg.budget, "in_flight": len(self.in_flight), "queued": len(self.queue) + len(self.owed),
            "lost": sum(self.lost_by.values()), "lost_by": {k: v for k, v in self.lost_by.items() if v},
            "rerolled": self.rerolled, "elapsed_s": round(elapsed, 3), "eta_s": round(eta, 1) if eta is not None else None,
            "rows_per_s": round(rate, 3) if rate else None, "round": self.round, "arm_weights": dict(self.arm_weights),
            "pass_rate": self.graded.mean(), "graded": self.graded.count,
            "unique_signatures": len(self.signatures), "unique_cells": len(self.cells),
            "pairwise_fraction": coverage.get("fraction") if coverage else None,
            "stopped_because": self.stopped_because, "final": final,
        })  # fmt: skip

    # ----------------------------------------------------------------- the end
    def _finish_resume(self) -> None:
        leftover = [row for key, row in self.resume_rows.items() if key not in self.resume_keys_consumed]
        for row in leftover:
            if self.output_writer is not None:
                self._write_row(self.output_writer, row)
            self._store(_scrub(row), row)
            reward = row.get("reward")
            if isinstance(reward, (int, float)) and not isinstance(reward, bool):
                self.graded.add(float(reward))
        if leftover:
            counted = "" if self.cfg.reproducible else " and counted toward the budget"
            self.warnings.append(f"{len(leftover)} rows from checkpoint= were not replanned by this run (a streaming run plans differently); they are kept as they were{counted}.")

    def _run_llm_grade(self) -> None:
        report = judge_grade(list(self.rows.trajectories()), self.cfg.llm_grade)
        for index, graded in enumerate(report.rows):
            row, public = self.rows.trajectory(index), self.rows.row(index)
            for target in (row, public):
                target["llm_reward"] = graded.get("reward")
                target["llm_reason"] = graded.get("reason")
                # a judge that failed on a row (a server error, an unreadable verdict) must
                # show on the row, not pass for a judge that was never asked
                target["llm_judge_status"] = graded.get("judge_status")
            self.rows.replace(index, public, row)
        # the judge's own warnings (rows with no verdict, a self-judging model) are the run's
        self.warnings.extend(f"llm_grade: {warning}" for warning in report.warnings)

    def _result(self) -> SimulationData:
        for writer in self.writers:
            try:
                writer.close()  # the last fsync can hit a full disk too
            except OSError as error:
                if self.write_failure is None:
                    self.write_failure = (writer.path, error, writer.count)
        if self.checkpoint_lock is not None:
            self.checkpoint_lock.release()
        if self.write_failure is not None:
            path, error, landed = self.write_failure
            self.stopped_because = "write_failed"
            # first, so the printed summary line shows it
            self.warnings.insert(0, f"writing rows to {path} failed ({type(error).__name__}: {error}) after {landed} rows of this run "
                                    f"landed in it; the run stopped there (stopped_because='write_failed'). All {len(self.rows)} rows are in "
                                    "data.rows: free space and data.save(path) them, or rerun with checkpoint= to resume.")
        if self.stopped_because is None:
            self.stopped_because = "budget"
        self._maybe_progress(final=True)
        report = self._report()
        warnings = self.warnings
        if (self.cfg.output is not None or self.cfg.checkpoint is not None) and self.rows:
            from datetime import datetime, timezone

            target = self.cfg.output or self.cfg.checkpoint
            sidecar = {
                "schema_version": "1", "n_rows": len(self.rows),
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "toolkit_version": __version__,
                "system_prompt_shas": sorted(self._facts()["system_prompt_shas"] - {None}),
            }  # fmt: skip
            data = SimulationData([], report=report, search=self.search_record, warnings=warnings, degraded=self.degraded,
                                  stopped_because=self.stopped_because, metadata=self.metadata, system_prompts=self.system_prompts)  # fmt: skip
            sidecar.update(data._meta())
            if self.write_failure is not None:
                # a sidecar counting the rows in memory would hide the ones the file misses
                sidecar["n_rows"] = self.write_failure[2] if self.write_failure[0] == target else None
            self._sidecar_write(_sidecar(target, ".meta.json"), sidecar)
        return SimulationData(
            self.rows, report=report, search=self.search_record, warnings=warnings, degraded=self.degraded,
            stopped_because=self.stopped_because, metadata=self.metadata, system_prompts=self.system_prompts, knobs=self.cfg.knobs, seed=self.cfg.seed,
        )  # fmt: skip

    def _facts(self) -> dict:
        """Everything the report and the sidecar read off the rows, folded in as each row is
        stored (:meth:`_store`). It was one decoding pass over the compact store at the end
        and at every final progress write: ~40 us a row to unpack (1.5% of offline CPU)."""
        facts = getattr(self, "_facts_state", None)
        if facts is None:
            facts = self._facts_state = {
                "with_dims": {}, "tool_calls": 0, "faulted_calls": 0, "tiers": Counter(), "tiers_by_run": {}, "plain_text_replies": 0, "user_turns": 0,
                "prompts": set(), "scenario_ids": set(), "agent_model": None, "ended_on_question": 0, "any_tool": False,
                "system_prompt_shas": set(),
            }  # fmt: skip
        return facts

    def _store(self, public: dict, row: dict) -> None:
        """Keep a landed row (``public``: as written; ``row``: the trajectory) and fold it into
        the report's facts."""
        facts = self._facts()
        if not self.rows:
            facts["agent_model"] = public.get("model_version")
        self.rows.append(public, row)
        r = public
        dims = r.get("scenario_dimensions")
        steps = r.get("steps") or ()
        has_tool = any("tool" in s for s in steps)
        if dims:
            # coverage counts distinct t-tuples, so each distinct dimension set is kept once
            facts["with_dims"].setdefault(repr(sorted(dims.items(), key=lambda kv: str(kv[0]))), {"scenario_dimensions": dims})
        # a human tool is the simulated person answering, not the world: it never breaks
        facts["tool_calls"] += sum(1 for s in steps if "tool" in s and s["tool"] not in self.human_tools)
        facts["faulted_calls"] += sum(1 for f in r.get("faults") or () if isinstance(f, Mapping) and f.get("injected", True))
        if r.get("tier"):
            facts["tiers"][r.get("tier")] += 1
            facts["tiers_by_run"].setdefault((r.get("lineage") or {}).get("eval_run", 0) or 0, Counter())[r.get("tier")] += 1
        facts["user_turns"] += sum(1 for s in steps if "user" in s) + 1
        facts["prompts"].add(r.get("prompt"))
        if r.get("scenario_id"):
            facts["scenario_ids"].add(r.get("scenario_id"))
        facts["ended_on_question"] += r.get("ended_by") == "user_left"
        facts["any_tool"] = facts["any_tool"] or has_tool
        facts["plain_text_replies"] += any(s.get("plain_text_reply") for s in steps)
        facts["system_prompt_shas"].add((r.get("lineage") or {}).get("system_prompt_sha"))

    def _same_model_roles(self) -> list[str]:
        """The jobs besides answering that the agent's own model does (writing, playing the user)."""
        agent = _model_identity(self.cfg.agent)
        if agent is None:
            return []
        roles = []
        if isinstance(self.cfg.writer, ModelWriter) and _model_identity(self.cfg.writer.chat) == agent:
            roles.append("wrote the situations")
        if self.cfg.agent_shape == "chat" and self.cfg.user_model is not None and _model_identity(self.cfg.user_model) == agent:
            roles.append("played the user")
        return roles

    def _inert_knobs(self) -> list[str]:
        """Changed knobs this run gives nothing to act on: no mechanism here, or a part of the run it lacks."""
        active = {
            "model_writer": isinstance(self.cfg.writer, ModelWriter),
            "model_user": self.cfg.user_model is not None and self.cfg.agent_shape == "chat",
            "repeated_cells": not self.cfg.unique, "saturation": self.cfg.until == "saturation",
            "decided": self.cfg.until == "decided",
            "successive": self.repeat_policy == "successive", "adaptive": self.repeat_policy == "adaptive",
            "traces": bool(self.cfg.traces),
        }  # fmt: skip
        out = []
        for name in self.cfg.knobs.changed():
            spec = self.cfg.knobs.spec(name)
            if not spec.used:
                out.append(f"{name} (no such mechanism in this engine)")
            elif spec.needs and not active[spec.needs]:
                out.append(f"{name} (acts only with {KNOB_NEEDS[spec.needs]})")
        return out

    def _report(self) -> dict:
        k = self.cfg.knobs
        rows = self.rows
        facts = self._facts()
        coverage = self.grid.coverage_of(list(facts["with_dims"].values()))
        pairwise = {"pairs_planned": coverage.get("pairs_planned"), "pairs_covered": coverage.get("pairs_covered"), "fraction": coverage.get("fraction")}
        n_calls = facts["tool_calls"]
        fault_share = (facts["faulted_calls"] / n_calls) if n_calls else None
        tiers = facts["tiers"]
        hard = sum(v for t, v in tiers.items() if t != "ordinary")
        tier_share = hard / sum(tiers.values()) if tiers else None
        user_turns = facts["user_turns"]
        lost_total = sum(self.lost_by.values())
        self.system_prompts = [{"sha": sha256_hex(self.cfg.system_prompt or "")[:16], "text": self.cfg.system_prompt or ""}]
        agent_model = facts["agent_model"]
        self.metadata = {
            "agent_model": agent_model, "writer_model": self.cfg.writer_model,
            "user_model": (self.cfg.user_model if isinstance(self.cfg.user_model, str) else ("template" if self.cfg.agent_shape == "chat" else None)),
            "judge": self.cfg.grader_name, "seed": self.cfg.seed, "mode": self.cfg.mode, "toolkit_engine": "offline",
        }  # fmt: skip
        ended_on_question = facts["ended_on_question"]
        self.search_record = json_safe({
            "arm_weights": self.arm_weights, "arm_start": dict(k.arm_weights) if k.arm_weights else dict(START_ARM_WEIGHTS),
            "arm_history": self.arm_history, "unique_signatures": len(self.signatures), "unique_cells": len(self.cells),
            "mutation_aims": dict(self.mutation_aims),
            "failure_criteria": {"pass_threshold": k.pass_threshold, "graded_failures_steer": self.cfg.mutate_graded, "tool_faults_steer": k.mutate_failures},
            "groups": {**self.allocator.summary(), "reached_k": self.retired_groups + sum(1 for g in self.groups.values() if g.landed >= g.k),
                       "below_k": sum(1 for g in self.groups.values() if 0 < g.landed < g.k)},
            "tier_mix": {"counts": dict(tiers), "hard_share_drawn": tier_share, "hard_share_requested": self.cfg.hard_share,
                         "per_run": [{"eval_run": run, "counts": dict(c), "hard_share_drawn": _hard_share_of(c)}
                                     for run, c in sorted(facts["tiers_by_run"].items())]},
            "ended_on_question": {"n": ended_on_question, "share": ended_on_question / len(rows) if rows else None},
            "rollouts": {"landed": len(rows), "rerolled": self.rerolled, "rerolled_by": dict(self.rerolled_by), "lost": lost_total,
                         "lost_by": {a: b for a, b in self.lost_by.items() if b}, "abandoned": self.abandoned},
            "writer_restarts": self.writer_restarts, "writer_restarts_allowed": max(24, self.cfg.cap // k.rows_per_extra_restart),
            "eval_runs": self.cfg.runs, "mutations_opened": self.mutations_opened,
            "semantic_duplicates": {"n": self.semantic_duplicates, "threshold": k.semantic_duplicate_novelty},
            "pinned_tasks": len(getattr(self, "pinned", []) or []), "trace_seeds": len(getattr(self, "failing_seeds", [])),
        })  # fmt: skip
        delivered = {
            "rows": len(rows), "fault_share": fault_share, "tier_mix": tier_share,
            "mean_user_turns": (user_turns / len(rows)) if len(rows) else None,
        }
        # delivery warnings: only for knobs the caller named (#476)
        if self.cfg.fault_rate_named and self.cfg.execute is not None:
            self.warnings.append(f"fault_rate={self.cfg.fault_rate} has no effect with execute=: your world answers every tool call, so difficulty is its job; drop fault_rate or execute.")
        elif self.cfg.fault_rate_named and fault_share is not None and n_calls >= _FAULT_SHARE_MIN_CALLS and abs(fault_share - self.cfg.fault_rate) > _FAULT_SHARE_TOLERANCE:
            # replayed tasks= and trace seeds without a situation keep their own plans, so they can pull the share away
            self.warnings.append(
                f"fault_rate={self.cfg.fault_rate} delivered {fault_share:.3f} of {n_calls} tool calls broken; "
                "replayed tasks and trace seeds keep their own fault plans, and calls the world refuses before any plan (unknown tools, bad arguments) never fault."
            )
        mean_user_turns = delivered["mean_user_turns"]
        # A named avg_turns the conversations fall far short of (#299: depth stuck at ~1.5
        # whatever avg_turns said). The reference compares mean user turns with 0.5 x avg_turns,
        # i.e. with the most the person may speak, so it fires unless every thread runs to the
        # cap; we compare the thread length (each user turn gets a reply: 2 x user turns) with
        # avg_turns and warn under half. Only when a person was simulated (chat agents), over
        # at least followup_starved_min rows so a handful of rows does not decide it.
        if ("avg_turns" in self.cfg.advanced_named and self.cfg.agent_shape == "chat" and mean_user_turns is not None
                and len(rows) >= k.followup_starved_min and 2 * mean_user_turns < 0.5 * self.cfg.avg_turns):
            self.warnings.append(
                f"avg_turns={self.cfg.avg_turns} asked for {self.cfg.avg_turns}-turn conversations; they averaged {2 * mean_user_turns:.1f} turns "
                f"({mean_user_turns:.1f} user turns): the agent ends them early or the person walks away; set advanced['patience']='endless' "
                "or check that the agent asks follow-up questions."
            )
        if tier_share is not None and sum(tiers.values()) >= k.tier_mix_min_rows and abs(tier_share - self.cfg.hard_share) > k.tier_mix_tolerance:
            self.warnings.append(
                f"hard_share={self.cfg.hard_share} delivered {tier_share:.2f} hard-tier rows of {sum(tiers.values())}: the "
                f"{'hard' if tier_share < self.cfg.hard_share else 'ordinary'} situations ran out (unique situations on a grid of "
                f"{len(self.grid)}: {self.grid.tier_counts()}); allow repeats (unique=False) or add tools and policy rules."
            )
        if lost_total:
            self.degraded.append("rollouts_lost")
            by = ", ".join(f"{a} {b}" for a, b in self.lost_by.items() if b)
            self.warnings.append(f"{lost_total} rollouts were lost after re-rolls ({by}); the surviving rows are not missing at random -- fix the agent's failures before reading rates off them.")
        if self.stopped_because == "agent_failed":
            self.degraded.append("agent_errors")
            if self.auth_failure is not None:
                self.warnings.insert(0, f"agent_failed: the model server refused the credentials ({self.auth_failure}); the run was "
                                        "stopped at once, since every call would be refused alike. Check the API key and its permissions.")
            elif self.rows and self.consecutive_failures >= k.dead_agent_consecutive:
                self.warnings.insert(0, f"agent_failed: {self.consecutive_failures} rollouts in a row were lost after {len(self.rows)} rows had landed "
                                        f"(last: {self.last_lost_detail}); the endpoint looks dead, so the run was called off "
                                        "(advanced['dead_agent_consecutive'] sets how many).")
            elif self.unreachable:
                self.warnings.insert(0, f"agent_failed: the model server never answered ({self.last_lost_detail}); the run was called off at once. Check the URL and that the server is up.")
            else:
                self.warnings.insert(0, f"agent_failed: no rollout produced a row after {self.dead_count} attempts (last: {self.last_lost_detail}); fix the agent or its timeout and run again.")
        if self.bad_arguments[0]:
            bad_calls, bad_rows = self.bad_arguments
            self.warnings.append(f"{bad_calls} tool calls in {bad_rows} rows broke their tool's schema (a wrong type, an undeclared or missing key): "
                                 "the agent got a bad_tool_arguments error instead of an answer; each row counts them in 'bad_tool_arguments'.")
        if self.at_budget[0]:
            turns, n_rows, budget = self.at_budget
            self.warnings.append(f"{turns} agent turns in {n_rows} rows stopped at the reply budget (max_tokens={budget}, finish_reason "
                                 "'length'): their replies are cut short; raise max_tokens (sampling={'max_tokens': ...} or "
                                 "tk.model_agent(..., max_tokens=)). Each row counts them in 'turns_at_budget'.")
        if self.over_budget[0]:
            turns, n_rows, budget = self.over_budget
            self.warnings.append(f"{turns} agent turns in {n_rows} rows ran past the reply budget (max_tokens={budget}): the server did not "
                                 "apply it (llama-cpp-python's function-calling chat format, for one, generates tool arguments and the text "
                                 "after a tool choice with no limit). Each row counts them in 'turns_over_budget'.")
        if self.logprob_gaps:
            gaps = "; ".join(f"{n} rows: {why}" for why, n in self.logprob_gaps.most_common(3))
            self.warnings.append(f"logprobs were asked for but {self.logprob_gap_rows} rows have logprob None, because some of "
                                 f"their turns came back without them ({gaps}). Each row says how many in 'logprob_turns'.")
        if self.truncated_rows:
            self.warnings.append(f"{self.truncated_rows} rows had an agent reply longer than {MAX_REPLY_CHARS:,} characters: "
                                 "it was cut there with a marker (each row counts its cut replies in 'replies_truncated').")
        if self.abandoned:
            self.degraded.append("rollouts_abandoned")
            self.warnings.append(f"{self.abandoned} rollouts were still running {k.stop_grace} s after the stop ({self.stopped_because}) and were abandoned; raise advanced['stop_grace'] to wait longer.")
        if isinstance(self.cfg.writer, ModelWriter):
            written = self.cfg.writer.summary()
            if written["model_share"] is not None and written["model_share"] < 0.9:
                reasons = ", ".join(f"{why} {n}" for why, n in sorted(written["fallbacks_by_reason"].items()))
                self.warnings.append(
                    f"the writer model {self.cfg.writer_model} phrased only {written['model_share']:.0%} of the prompts; the template writer "
                    f"filled {written['phrasings_from_template']} ({reasons}); check the model spec, its key and report()['writer']."
                )
        if rows and not facts["any_tool"]:
            self.degraded.append("no_tool_calls")
            self.warnings.append("no row contains a tool call; check that the agent receives tools= and can call them.")
        dead = [t for t, c in self.tool_calls.items() if c == 0]
        if rows and len(rows) >= 50 and dead:
            self.degraded.append("dead_tools")
            self.warnings.append(f"tools never called in {len(rows)} rows: {', '.join(dead)}; check their descriptions or raise budget.")
        starved = ended_on_question >= max(k.followup_starved_min, len(rows) / k.followup_starved_divisor) if rows else False
        if starved:
            self.degraded.append("followups_starved")
            self.warnings.append(f"{ended_on_question} rows ended with the person walking away from a question; set advanced['patience']='endless' to see full conversations.")
        if self.cfg.grader is not None and self.judge_failures:
            failed = sum(self.judge_failures.values())
            by = ", ".join(f"{status} {n}" for status, n in sorted(self.judge_failures.items()))
            self.degraded.append("grader_failed")
            self.warnings.insert(0,
                f"the grader {self.cfg.grader_name!r} gave no usable reward on {failed} of {len(rows)} rows ({by}; first: {self.first_judge_failure}); "
                "those rows have reward None and pass rates count only the rest: fix the grader (it must return a number or {'reward': number})."
            )  # fmt: skip
        same = self._same_model_roles()
        if same:
            self.degraded.append("same_model")
            self.warnings.append(
                f"the agent's model also {' and '.join(same)}: a model judges its own writing kindly and plays a person like itself; "
                "pass simulator= for the writer and user_model= for the user to put those jobs on a different model."
            )
        inert = self._inert_knobs()
        if inert:
            self.warnings.append("advanced knobs with no effect in this run: " + "; ".join(inert) + ".")
        if rows and self.semantic_duplicates > len(rows) * _SEMANTIC_DUPLICATE_WARN_SHARE:
            self.warnings.append(
                f"{self.semantic_duplicates} of {len(rows)} rows are semantic duplicates (novelty under "
                f"{k.semantic_duplicate_novelty}): the writer is repeating itself; add variety (simulator=, more tools or policy rules) rather than budget."
            )
        if self.cfg.n_situations is not None and len(self.situations_opened) < self.cfg.n_situations and self.stopped_because == "budget":
            self.warnings.append(f"budget={self.cfg.budget} stopped the run after {len(self.situations_opened)} of situations={self.cfg.n_situations}; raise budget.")
        decided = {}
        if self.decide_sequence is not None:
            sequence = self.decide_sequence
            decided = {"decided": {**(self.decision or {
                "side": None, "metric": k.decide["metric"], "threshold": k.decide["threshold"], "level": sequence.level,
                "at_rows": None, "groups_complete": sequence.n, "low": round(sequence.low, 4),
                "high": round(sequence.high, 4)}), "groups_unpaired": self.decide_unpaired}}
            what = "the paired delta pass@1" if self.decide_baseline is not None else "pass@1"
            if self.decision is None and not any(w.startswith("until='decided'") for w in self.warnings):
                self.warnings.append(
                    f"until='decided': {what} against {k.decide['threshold']:g} was not decided by the end "
                    f"({self.stopped_because}); the anytime-valid bounds over {sequence.n} complete prompt groups are "
                    f"[{sequence.low:.3f}, {sequence.high:.3f}]: raise the budget, or the truth is near the threshold")
            if self.decide_unpaired and not any(w.startswith("until='decided': ") and "baseline" in w for w in self.warnings):
                self.warnings.append(
                    f"until='decided': {self.decide_unpaired} complete prompt groups have no match in the baseline "
                    "run and were left out of the paired bounds; replay its prompts with tasks=<baseline rows>")
        return json_safe({
            **decided,
            "rows": len(rows), "unique_prompts": len(facts["prompts"]),
            "unique_scenario_ids": len(facts["scenario_ids"]),
            "unique_signatures": len(self.signatures), "unique_cells": len(self.cells),
            "budget": self.cfg.budget, "budget_per_run": self.cfg.cap, "stopped_because": self.stopped_because,
            "pairwise": pairwise, "coverage": {**coverage, "grid_situations": len(self.grid), "cells_run": len(self.cells)},
            "copies_needed": k.copies_needed, "min_cell_copies": min((self.cells[s.id] for s in self.grid), default=0),
            "saturation_rule": self.saturation_rule,
            "mode": self.cfg.mode, "repeat_policy": self.repeat_policy, "requests_per_situation": self.cfg.n, "rollouts_per_request": self.k,
            "unique_situations": self.cfg.unique, "n_situations": len(self.situations_opened), "situations_requested": self.cfg.n_situations,
            "fault_rate": self.cfg.fault_rate, "hard_share": self.cfg.hard_share, "seed": self.cfg.seed, "runs": self.cfg.runs,
            "concurrency": self.cfg.concurrency, "execution": self._execution(), "reproducible": self.cfg.reproducible, "time_budget": self.cfg.time_budget, "until": self.cfg.until,
            "knobs": self.cfg.knobs.to_dict(), "knobs_changed": list(self.cfg.knobs.changed()),
            "patience": self.cfg.patience, "user_temperature": k.user_temperature, "world": self.cfg.world_options.to_dict(),
            "world_note": "fault_rate is the share of tool calls the mock world breaks, spread evenly within each rollout; world.per_call_fault_rate is the rate a fault plan with no rate of its own fires at (plans built for tk.World)",
            "max_turns": self.cfg.max_turns, "avg_turns": self.cfg.avg_turns, "timeout": self.cfg.timeout, "logprobs": self.cfg.logprobs,
            "sampling": self.cfg.sampling, "grader": self.cfg.grader_name, "grade": self.cfg.grade, "llm_grade": bool(self.cfg.llm_grade),
            "simulator": self.cfg.writer_model, "writer_model": self.cfg.writer_model, "agent_model": agent_model,
            "writer": self.cfg.writer.summary() if isinstance(self.cfg.writer, ModelWriter) else {"model": self.cfg.writer_model},
            "user_model": self.metadata["user_model"], "arm_weights": self.search_record["arm_start"],
            "tasks": len(getattr(self, "pinned", []) or []), "traces": len(self.cfg.traces), "seeds": len(getattr(self, "failing_seeds", [])),
            # the reference's strategy: "trace" when traces aim the grid, else "broad" (no targeted mode here)
            "strategy": "trace" if self.cfg.traces else "broad", "dimensions": {axis: list(values) for axis, values in self.axes.items()},
            "semantic_duplicates": self.semantic_duplicates, "knobs_inert": inert, "grader_failures": dict(self.judge_failures),
            # rows whose message-shaped agent returned a plain str, taken as its final text (the step says plain_text_reply)
            "plain_text_replies": facts["plain_text_replies"],
            "requested": {"fault_rate": self.cfg.fault_rate, "avg_turns": self.cfg.avg_turns, "hard_share": self.cfg.hard_share},
            "delivered": delivered,
            "rollouts_requested": len(rows) + lost_total, "rollouts_completed": len(rows), "rollouts_lost": lost_total,
            "rollouts_lost_by": {a: b for a, b in self.lost_by.items() if b}, "rollouts_rerolled": self.rerolled,
            "rollouts_abandoned": self.abandoned, "callback_errors": self.callback_errors,
            "tools": {t: {"calls": self.tool_calls[t], "successes": self.tool_ok[t]} for t in self.tool_calls}, "dead_tools": dead,
            "output_durability": _OUTPUT_DURABILITY if self.writers else None,
            "offline_defaults": self.offline_defaults, "elapsed_s": round(time.perf_counter() - self.started, 3),
            "warnings": list(self.warnings), "degraded": list(self.degraded),
        })  # fmt: skip


def _baseline_means(path: str) -> dict[tuple, float]:
    """Mean graded reward per (scenario_id, prompt) of the baseline run at ``path``."""
    try:
        rows = read_rows(path)
    except (OSError, ValueError) as error:
        raise ConfigError(f"advanced['decide']['baseline']: cannot read {path!r}: {error}") from None
    sums: dict[tuple, list[float]] = {}
    for row in rows:
        reward = row.get("reward")
        if isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward):
            sums.setdefault((row.get("scenario_id"), row.get("prompt")), []).append(min(1.0, max(0.0, float(reward))))
    if not sums:
        raise ConfigError(f"advanced['decide']['baseline']: {path!r} holds no graded rows to pair with")
    return {key: math.fsum(values) / len(values) for key, values in sums.items()}


def _model_identity(model: Any) -> tuple | None:
    """(provider, model, base URL) of a model spec string or a model backend, else None."""
    spec = getattr(model, "spec", None) if not isinstance(model, str) else model
    if isinstance(spec, str):
        try:
            spec = parse_model_spec(spec)
        except Exception:  # noqa: BLE001 -- not a spec we can compare: not the same model
            return None
    if spec is None or not hasattr(spec, "provider"):
        return None
    return (spec.provider, getattr(spec, "model", None), getattr(spec, "base_url", None))


def _situation_from_dims(dims: Any) -> Situation | None:
    """A Situation rebuilt from a row's ``scenario_dimensions``, or None when they name none."""
    if not isinstance(dims, Mapping) or not dims or not set(dims) <= set(AXES):
        return None
    try:
        return Situation(dict(dims))
    except (ConfigError, TypeError, KeyError):
        return None


def _hard_share_of(counts: Mapping[str, int]) -> float | None:
    total = sum(counts.values())
    return sum(v for t, v in counts.items() if t != "ordinary") / total if total else None


class _ExactSum:
    """A running float sum with math.fsum's exactness (Shewchuk's partials, the algorithm
    behind ``math.fsum``), O(number of partials) per add instead of a pass over every value."""

    def __init__(self) -> None:
        self.partials: list[float] = []
        self.count = 0

    def add(self, x: float) -> None:
        i = 0
        for y in self.partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                self.partials[i] = lo
                i += 1
            x = hi
        self.partials[i:] = [x]
        self.count += 1

    def mean(self) -> float | None:
        return math.fsum(self.partials) / self.count if self.count else None


class _InlineExecutor(cf.Executor):
    """Runs each task in the thread that submits it; the future is done when submit returns.
    An exception of the task is kept on its future (like a pool's); KeyboardInterrupt and
    SystemExit propagate, so Ctrl-C stops the run as it does with threads."""

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        future: cf.Future = cf.Future()
        future.set_running_or_notify_cancel()
        try:
            result = fn(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 -- kept on the future, as a pool would
            future.set_exception(error)
        else:
            future.set_result(result)
        return future


def _scrub(row: dict) -> dict:
    return scrub(row)


def _sidecar(path: Path, suffix: str) -> Path:
    name = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(name + suffix)


class _CheckpointLock:
    """``<checkpoint>.lock`` held with ``fcntl.flock`` (exclusive, non-blocking) for the run.

    The file records the holder (pid, host, start time) so the refusal can name it. A lock
    left by a process that died (SIGKILL, a crash) is free again (the kernel drops a dead
    process's flock), so it is taken over without any pid guessing. The file is emptied, not
    deleted, on release: deleting it would let a waiting opener lock an unlinked inode while a
    third process locks a new file of the same name.
    """

    def __init__(self, checkpoint: Path) -> None:
        self.path = _sidecar(checkpoint, ".lock")
        try:
            self._handle = take_lock(self.path)
        except HeldLock as held:
            who = ", ".join(f"{key} {held.holder[key]}" for key in ("pid", "host", "started") if key in held.holder)
            raise ConfigError(f"checkpoint={str(checkpoint)!r} is in use by another run ({who or 'holder unknown'}; lock file "
                              f"{str(self.path)!r}): two runs on one checkpoint write every row twice. Wait for it to "
                              "finish, stop it, or give this run its own checkpoint= path.") from None
        except OSError as error:
            raise ConfigError(f"checkpoint={str(checkpoint)!r}: cannot create its lock file {str(self.path)!r} "
                              f"({type(error).__name__}: {error})") from None

    def release(self) -> None:
        handle, self._handle = self._handle, None
        release_lock(handle)
