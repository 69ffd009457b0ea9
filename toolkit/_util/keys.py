"""How a row names its task and its reward; shared by every statistic.

Task key: ``scenario_id``, else ``task_id``, else the prompt text, so phrasings of one
situation pool into one task and the bootstrap resamples tasks, not rollouts.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

__all__ = ["task_key", "binary_reward", "numeric_reward", "REWARD_FIELDS"]

# `qwen_reward` is the field older engine rows carried their judge's score in.
REWARD_FIELDS = ("reward", "qwen_reward")

# tau-bench treats a reward within 1e-6 of 1 as a pass; the same tolerance here makes
# float-summed rewards (0.9999999) count as the 1 they are meant to be.
_BINARY_TOLERANCE = 1e-6


def task_key(row: Mapping[str, Any]) -> str:
    for field in ("scenario_id", "task_id"):
        value = row.get(field)
        if value is not None and value != "":
            return str(value)
    return str(row.get("prompt", ""))


def numeric_reward(row: Mapping[str, Any], field: str | None = None) -> float | None:
    """The row's reward as a float, or ``None`` when absent, bool, non-numeric or NaN."""
    fields = (field,) if field else REWARD_FIELDS
    for name in fields:
        value = row.get(name)
        if value is None:
            continue
        # Plain int/float first (bool's type is bool, not int, so it never lands here): the
        # numbers.Real ABC check below costs ~5 us a row, a third of pass_at on 10^6 rows.
        kind = type(value)
        if kind is float:
            return value if math.isfinite(value) else None
        if kind is int:
            return float(value)
        # numbers.Real admits numpy integer and float scalars (rows built with numpy);
        # bools are refused, numpy's included, because True is not a score.
        if isinstance(value, bool) or type(value).__name__ == "bool_" or not isinstance(value, numbers.Real):
            return None
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def binary_reward(row: Mapping[str, Any], field: str | None = None) -> int | None:
    """1 or 0 when the reward is (within 1e-6 of) exactly 1 or 0, else ``None``."""
    number = numeric_reward(row, field)
    if number is None:
        return None
    if abs(number - 1.0) <= _BINARY_TOLERANCE:
        return 1
    if abs(number) <= _BINARY_TOLERANCE:
        return 0
    return None
