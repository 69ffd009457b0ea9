"""Which rollout a tool call belongs to: :func:`rollout_context` / :func:`current_rollout` (a ContextVar, right under threads and asyncio).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolkit.errors import ConfigError

__all__ = ["RolloutContext", "rollout_context", "current_rollout"]

# ----------------------------------------------------------------------------------------
# The rollout being answered (contextvars: right under threads and asyncio)
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutContext:
    """Which rollout a tool call belongs to (see :func:`current_rollout`)."""

    prompt: str
    rollout_index: int = 0
    situation_id: str | None = None
    task_id: str | None = None
    seed: int | None = None
    world_state: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


_CURRENT: contextvars.ContextVar[RolloutContext | None] = contextvars.ContextVar("toolkit_rollout", default=None)


@contextlib.contextmanager
def rollout_context(
    prompt: str,
    rollout_index: int = 0,
    *,
    situation_id: str | None = None,
    task_id: str | None = None,
    seed: int | None = None,
    world_state: str | None = None,
    **extra: Any,
) -> Iterator[RolloutContext]:
    """Mark the code inside the ``with`` block as answering one rollout.

    A ContextVar, not a thread-local: each thread and each asyncio task sees its own value
    (asyncio copies the context into every task), so concurrent rollouts never read each
    other's prompt. Nested blocks restore the outer value on exit. The values are stored as
    given (only ``rollout_index`` is checked); they are what :func:`current_rollout` returns
    inside the block.

    Parameters
    ----------
    prompt : str
        The rollout's prompt (stored as ``str(prompt)``).
    rollout_index : int
        Index of this rollout among those of the prompt, an integer >= 0. Default 0.
    situation_id, task_id : str, optional
        Ids of the rollout's situation and task. Default None.
    seed : int, optional
        The rollout's seed. Default None.
    world_state : str, optional
        The world state the rollout runs under. Default None.
    **extra
        Any further facts, kept as the ``extra`` dict of the context.

    Yields
    ------
    RolloutContext
        The context now current.

    Raises
    ------
    ConfigError
        If ``rollout_index`` is not an integer >= 0.
    """
    if isinstance(rollout_index, bool) or not isinstance(rollout_index, int) or rollout_index < 0:
        raise ConfigError(f"rollout_index must be an integer >= 0, got {rollout_index!r}")
    context = RolloutContext(
        prompt=str(prompt),
        rollout_index=rollout_index,
        situation_id=situation_id,
        task_id=task_id,
        seed=seed,
        world_state=world_state,
        extra=dict(extra),
    )
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)


def current_rollout() -> RolloutContext | None:
    """The rollout being answered (prompt, rollout_index, situation_id, ...), or None
    outside any :func:`rollout_context` block. Meant for ``execute=`` functions that keep
    per-rollout state: ``run_rollout`` / ``simulate`` set it around each world call only,
    never around the agent's calls, so the agent under test reads None here (the world
    state is the hidden state it is tested against)."""
    return _CURRENT.get()
