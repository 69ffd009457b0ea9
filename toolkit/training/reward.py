"""Reward-model sets: :func:`reward_model_set`, every graded row with its reward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.keys import numeric_reward
from toolkit._util.results import Result
from toolkit.errors import ExportError
from toolkit.rows._read import as_row_list
from toolkit.training._common import (
    _CONVERSATION_FIELDS,
    _PASS_THRESHOLD,
    _check_system_prompt,
    _check_tools,
    _clean,
    _deep_scrub,
    _row_messages,
    _row_quotes_privileged,
    _Saveable,
    _system_prompt_of,
    _wire_messages,
)

__all__ = ["RewardModelSet", "reward_model_set"]

# --------------------------------------------------------------------------------------
# reward model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RewardModelSet(Result, _Saveable):
    """Every graded row (passes and failures) with its reward, for a reward-model trainer."""

    rows: list = field(repr=False)  # never printed in full; scrubbed when the cut was made
    n_source: int
    n_ungraded: int
    n_pass: int
    n_fail: int
    warnings: list
    n_leaks: int = 0

    def __str__(self) -> str:
        return f"{len(self.rows)} reward-model rows ({self.n_pass} pass, {self.n_fail} fail; {self.n_ungraded} ungraded left out)"


def reward_model_set(
    rows: Any, *, system_prompt: str | Mapping[str, str] | None = None, tools: Sequence[Mapping[str, Any]] | None = None
) -> RewardModelSet:
    """All graded rows with a numeric reward and an ok judge status, as conversations
    (``messages`` in the OpenAI wire shape) plus ``reward``. Failures are the point of a
    reward model, so nothing is filtered on reward; a one-class set is warned about. A row
    whose reply quotes its own privileged block is left out (``n_leaks``): the answer key
    must not reach a training file in any cut. A row whose tool arguments do not decode to
    an object is left out and counted in ``n_ungraded``.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame, str or path
        Graded rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame, or a
        path to a JSONL file.
    system_prompt : str, mapping, list of dict or None, optional
        The system prompt to put first: a string for every row; ``{sha: text}`` or
        ``data.system_prompts`` (a list of ``{"sha", "text"}``), looked up by each row's
        ``lineage.system_prompt_sha``. Default None uses the row's ``system_prompt`` field,
        else the first system message of its ``messages``.
    tools : list of dict or None, optional
        Tool schemas (dicts such as ``{"type": "function", "function": {...}}``) attached to
        every record; default None attaches each row's own ``tools`` field when it has one.

    Returns
    -------
    RewardModelSet
        The records (``messages``, ``reward`` and the row's other fields, scrubbed) and the
        pass, fail, ungraded and leak counts.

    Raises
    ------
    ExportError
        For bad ``tools`` or ``system_prompt``, or when no row qualifies.
    """
    _check_tools(tools)
    _check_system_prompt(system_prompt)
    source = as_row_list(rows)
    out = []
    n_ungraded = n_leaks = 0
    for index, row in enumerate(source):
        reward = numeric_reward(row)
        status = row.get("judge_status")
        if reward is None or (status is not None and status != "ok"):
            n_ungraded += 1
            continue
        if _row_quotes_privileged(row):
            n_leaks += 1
            continue
        messages, problems = _wire_messages(
            _row_messages(row, _system_prompt_of(row, system_prompt)),
            arguments_as="string",
            strip_think=True,
            max_tool_output_chars=None,
            row_index=index,
        )
        if problems:
            n_ungraded += 1
            continue
        meta = _clean({k: v for k, v in row.items() if k not in _CONVERSATION_FIELDS})
        meta.update({"schema_version": "1", "messages": messages, "reward": reward})
        row_tools = tools if tools is not None else row.get("tools")
        if row_tools:
            meta["tools"] = list(row_tools)
        out.append(_deep_scrub(meta))
    if not out:
        raise ExportError(f"reward_model_set has no graded rows ({n_ungraded} ungraded or not ok)")
    n_pass = sum(1 for r in out if r["reward"] >= _PASS_THRESHOLD)
    warnings = []
    if n_leaks:
        warnings.append(f"{n_leaks} row(s) left out: a reply quotes the row's privileged block (answer key)")
    if n_pass in (0, len(out)):
        warnings.append("every row is on one side of 0.5; a reward model cannot learn a boundary from one class")
    return RewardModelSet(
        rows=out, n_source=len(source), n_ungraded=n_ungraded, n_pass=n_pass, n_fail=len(out) - n_pass,
        warnings=warnings, n_leaks=n_leaks,
    )


