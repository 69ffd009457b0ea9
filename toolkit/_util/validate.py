"""One set of argument checks for every layer (the scipy style: validate, then pure code).

Each ``check_*`` returns the value in its canonical type or raises the given error class
(:class:`~toolkit.errors.ConfigError` unless a module has its own) with a message that
names the field as the user typed it, the rule, and what was received. Booleans are never
numbers here: ``True`` passed for a share or a count is a mistake, not 1.
"""

from __future__ import annotations

import numbers
from typing import Any

from toolkit.errors import ConfigError

__all__ = ["is_number", "is_count", "check_share", "check_count", "check_level", "pick_alias"]


def is_number(value: Any) -> bool:
    """A real number (numpy scalars included), never a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_count(value: Any) -> bool:
    """An integer (numpy integers included), never a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_share(name: str, value: Any, *, error: type[Exception] = ConfigError) -> float:
    """``value`` as a float in [0, 1]; NaN and bools refused."""
    if not is_number(value) or not 0.0 <= float(value) <= 1.0:
        raise error(f"{name} must be a number in [0, 1]; got {value!r}")
    return float(value)


def check_count(name: str, value: Any, minimum: int = 1, *, error: type[Exception] = ConfigError) -> int:
    """``value`` as an int >= ``minimum``."""
    if not is_count(value) or value < minimum:
        raise error(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_level(name: str, value: Any, *, error: type[Exception] = ConfigError) -> float:
    """A confidence level or probability strictly between 0 and 1."""
    if not is_number(value) or not 0.0 < float(value) < 1.0:
        raise error(f"{name} must be a number strictly between 0 and 1; got {value!r}")
    return float(value)


def pick_alias(named: list[tuple[str, Any]]) -> tuple[str | None, Any]:
    """The one value given among aliases of one parameter, with the name it was given as.

    ``named`` is ``[(spelling, value), ...]``; ``None`` means not given. Two spellings given
    different values is an error naming both; none given is ``(None, None)``.
    """
    given = [(n, v) for n, v in named if v is not None]
    if len({repr(v) for _, v in given}) > 1:
        shown = ", ".join(f"{n}={v!r}" for n, v in given)
        raise ConfigError(f"aliases disagree: {shown}; pass one of them")
    return given[0] if given else (None, None)
