"""Exact KL between two seeded policies, per turn or over whole rollouts (which need :mod:`toolkit.sim.rollout`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkit._util.results import Result
from toolkit.agents import SeededAgent
from toolkit.agents.seeded import _read_context
from toolkit.errors import ConfigError
from toolkit.sim.rollout import LostRollout, run_rollout

__all__ = ["ExactKL", "exact_kl"]

@dataclass(frozen=True)
class ExactKL(Result):
    """Exact KL(a || b) in nats, per turn (or per rollout), and per expected token.

    ``kl_per_token = kl / expected_tokens`` is the limit of the sampled estimator
    ``sum(logprob - ref_logprob) / sum(n_tokens)`` over turns (rollouts) drawn from ``a``.
    """

    kl: float | None
    expected_tokens: float
    kl_per_token: float | None
    n_outcomes: int
    scope: str = "turn"
    note: str | None = None

    def __str__(self) -> str:
        if self.kl is None:
            return f"exact KL undefined: {self.note}"
        return (
            f"exact KL(a||b) = {self.kl:.6g} nats per {self.scope}, {self.kl_per_token:.6g} per token "
            f"(E[n_tokens] = {self.expected_tokens:.4g}, {self.n_outcomes} outcomes)"
        )


def _kl_of(outcomes_a: dict[str, dict], outcomes_b: dict[str, dict]) -> tuple[float, list[tuple[str, float, float]]]:
    terms = []
    rows = []
    for key, entry in outcomes_a.items():
        p = entry["probability"]
        if key not in outcomes_b:
            return float("inf"), rows
        terms.append(p * (entry["logprob"] - outcomes_b[key]["logprob"]))
        rows.append((key, p, outcomes_b[key]["probability"]))
    return math.fsum(terms), rows


def exact_kl(
    policy_a: SeededAgent,
    policy_b: SeededAgent,
    messages: Sequence[Mapping[str, Any]] | None = None,
    *,
    prompt: str | None = None,
    tools: Any = None,
    world_factory: Callable[[], Any] | None = None,
    privileged: Mapping[str, Any] | None = None,
    max_turns: int = 15,
    max_paths: int = 50_000,
) -> ExactKL:
    """Exact KL(policy_a || policy_b) between two seeded policies, by enumerating choice trees.

    * ``exact_kl(a, b, messages)``: one turn at the context ``messages`` (OpenAI-style list):
      KL = Σ_o p_a(o) log(p_a(o) / p_b(o)) over the turn's outputs o.
    * ``exact_kl(a, b, prompt=..., world_factory=lambda: tk.World(tools, seed=0))``: a whole
      rollout without a simulated user (``run_rollout(..., user=False)``), the world rebuilt and
      replayed for every branch. The world and the prompt are the same for both policies, so the
      KL of the trajectory distributions is E_a[Σ_t log p_a(o_t|h_t) - log p_b(o_t|h_t)]: the
      environment's factors cancel (the chain rule of KL).

    ``kl_per_token`` = kl / E_a[n_tokens] is what ``sum(logprob - ref_logprob) / sum(n_tokens)``
    over many rollouts of ``a`` scored by ``b`` converges to. When ``a`` can produce an output
    ``b`` cannot, the KL is infinite: ``kl`` and ``kl_per_token`` are None and ``note`` says why.

    Parameters
    ----------
    policy_a, policy_b : SeededAgent
        The two policies (``tk.seeded_agent(...)``); the KL is of ``policy_a`` from
        ``policy_b``, over outputs drawn from ``policy_a``.
    messages : Sequence[Mapping[str, Any]] or None, default None
        The context of one turn (an OpenAI-style message list). Given: the one-turn KL, and
        ``prompt``, ``tools``, ``world_factory``, ``max_turns`` and ``max_paths`` are not read.
        None: the whole-rollout KL from ``prompt``.
    prompt : str or None, default None
        Keyword-only, like everything after ``messages``. The opening message of the
        rollout; required when ``messages`` is None.
    tools : Any, default None
        The tool list of the rollout (any shape :func:`toolkit.world.normalize_tools` accepts);
        None uses ``policy_a.tools``.
    world_factory : callable or None, default None
        ``world_factory() -> World``, called for a fresh world on every branch replayed;
        required when ``messages`` is None.
    privileged : Mapping[str, Any] or None, default None
        The teacher-only block both policies condition on (as in a rollout's context), in
        either scope.
    max_turns : int, default 15
        Cap on agent completions per rollout path (as in :func:`toolkit.run_rollout`).
    max_paths : int, default 50000
        The most complete rollout paths enumerated before giving up with a ConfigError.

    Returns
    -------
    ExactKL
        ``kl`` (nats per turn or per rollout), ``expected_tokens``, ``kl_per_token``,
        ``n_outcomes`` (outputs of the turn, or rollout paths enumerated), ``scope``
        (``"turn"`` or ``"rollout"``) and ``note``.

    Raises
    ------
    TypeError
        A policy that is not a seeded policy.
    ConfigError
        Neither ``messages`` nor ``prompt``, ``prompt`` without ``world_factory``, or more
        than ``max_paths`` paths.
    """
    for name, policy in (("policy_a", policy_a), ("policy_b", policy_b)):
        if not isinstance(policy, SeededAgent):
            raise TypeError(f"{name} must be a tk.seeded_agent(...) policy; got {type(policy).__name__}")
    if messages is not None:
        ctx = _read_context(messages, privileged)
        outcomes_a = policy_a._outcomes(ctx)
        outcomes_b = policy_b._outcomes(ctx)
        kl, _ = _kl_of(outcomes_a, outcomes_b)
        expected = math.fsum(
            entry["probability"] * len(policy_a._render(entry["output"], ctx, 0)[1]) for entry in outcomes_a.values()
        )
        return _make_kl(kl, expected, len(outcomes_a), "turn")
    if prompt is None:
        raise ConfigError("exact_kl needs either messages (one turn) or prompt= (a whole rollout)")
    if world_factory is None:
        raise ConfigError("exact_kl(prompt=...) needs world_factory=, a callable returning a fresh World per branch")
    return _rollout_kl(policy_a, policy_b, prompt, tools if tools is not None else policy_a.tools, world_factory, privileged, max_turns, max_paths)


def _make_kl(kl: float, expected_tokens: float, n_outcomes: int, scope: str) -> ExactKL:
    if math.isinf(kl):
        return ExactKL(None, expected_tokens, None, n_outcomes, scope, "policy_a produces an output policy_b gives probability 0 (KL is infinite)")
    per_token = kl / expected_tokens if expected_tokens > 0 else None
    return ExactKL(kl, expected_tokens, per_token, n_outcomes, scope, None)


class _BranchPoint(Exception):
    def __init__(self, messages: list[dict]) -> None:
        super().__init__("branch point")
        self.messages = messages


class _ForcedAgent:
    """Replays a fixed list of outputs, then stops the rollout at the next turn to branch."""

    agent_shape = "chat"

    def __init__(self, forced: list[dict]) -> None:
        self.forced = forced
        self.turn = 0

    def __call__(self, messages: list[dict], tools: Any) -> dict:
        if self.turn < len(self.forced):
            message = copy.deepcopy(self.forced[self.turn])
            self.turn += 1
            return message
        raise _BranchPoint([dict(m) for m in messages])


def _rollout_kl(a: SeededAgent, b: SeededAgent, prompt: str, tools: Any, world_factory: Callable[[], Any], privileged: Any, max_turns: int, max_paths: int) -> ExactKL:
    kl_terms: list[float] = []
    token_terms: list[float] = []
    leaves = 0
    # Depth-first over (forced outputs, probability of reaching them under a).
    stack: list[tuple[list[dict], float]] = [([], 1.0)]
    while stack:
        forced, reach = stack.pop()
        agent = _ForcedAgent(forced)
        try:
            run_rollout(agent, prompt, tools=tools, world=world_factory(), user=False, max_turns=max_turns, privileged=privileged, on_lost="raise", timeout=None)
            leaves += 1
            if leaves > max_paths:
                raise ConfigError(f"exact_kl: more than max_paths={max_paths} rollout paths; raise max_paths or shorten max_turns")
            continue
        except LostRollout as lost:
            branch = lost.exception
            if not isinstance(branch, _BranchPoint):
                raise
        ctx = _read_context(branch.messages, privileged)
        outcomes_a = a._outcomes(ctx)
        outcomes_b = b._outcomes(ctx)
        for key, entry in outcomes_a.items():
            p = entry["probability"]
            if key not in outcomes_b:
                return _make_kl(float("inf"), 0.0, leaves, "rollout")
            message, tokens, _ = a._render(entry["output"], ctx, 0)
            kl_terms.append(reach * p * (entry["logprob"] - outcomes_b[key]["logprob"]))
            token_terms.append(reach * p * len(tokens))
            stack.append((forced + [message], reach * p))
    return _make_kl(math.fsum(kl_terms), math.fsum(token_terms), leaves, "rollout")
