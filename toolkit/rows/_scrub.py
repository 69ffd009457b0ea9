"""Scrubbing: what never leaves memory (``privileged`` and the other teacher-only keys, engine scratch).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from toolkit.errors import RowError
from toolkit.rows._schema import _EMPTY_WORLD_STATES, SCRUBBED_KEYS, _python_type_word
from toolkit.rows._views import messages_from_steps

__all__ = ["scrub"]

# --------------------------------------------------------------------------------------
# Scrub and messages
# --------------------------------------------------------------------------------------


# Immutable leaves are returned as they are: deepcopy's dispatch on each of a row's ~200
# strings and numbers was a third of scrub's cost (scrub runs once per landed row).
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _strip_scrubbed(value: Any) -> Any:
    """A copy of ``value`` without SCRUBBED_KEYS in any dict at any depth."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {
            key: item if type(item) in _ATOMS else _strip_scrubbed(item)
            for key, item in value.items()
            if key not in SCRUBBED_KEYS
        }
    if kind is list or isinstance(value, (list, tuple)):
        return [item if type(item) in _ATOMS else _strip_scrubbed(item) for item in value]
    return copy.deepcopy(value)


def _is_scratch(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_")


def scrub(row: Mapping[str, Any]) -> dict[str, Any]:
    """A new row that is safe to write; ``row`` itself is never changed.

    - ``privileged``, ``principle``, ``hidden_state``, ``reference``, ``rubric`` and ``vector``
      are removed from every dict at any depth: inside tool arguments and results, nested
      lists, prefix and messages. Text that merely *contains* JSON (a tool result stored as a
      JSON-encoded string) is not parsed, so a privileged key inside such a string survives;
      store results decoded (as the schema expects) to have them scrubbed.
    - keys starting with ``_`` (engine scratch) are dropped at the row's top level and in each
      step, not inside tool arguments or results (where ``_id`` is real data).
    - ``world_state`` of ``"unspecified"`` / ``"unknown"`` is omitted; ``faults`` keeps only its
      dict entries (fault plans and ledger events).
    - ``messages`` is rebuilt from the scrubbed ``prompt`` / ``prefix`` / ``steps`` with
      :func:`messages_from_steps` when the row has a string prompt and a list of dict steps
      (a leading system message of the old ``messages`` is kept); otherwise (a version-0
      training row that has only ``messages``) the scrubbed messages stay as they are.

    Parameters
    ----------
    row : mapping
        The row to scrub; it is read, never changed.

    Returns
    -------
    dict
        The scrubbed copy.

    Raises
    ------
    RowError
        When ``row`` is not a mapping.
    """
    if not isinstance(row, Mapping):
        raise RowError(f"scrub: expected a row (dict), got {_python_type_word(row)}")
    out: dict[str, Any] = {}
    for key, value in row.items():
        if (isinstance(key, str) and key in SCRUBBED_KEYS) or _is_scratch(key):
            continue
        out[key] = _strip_scrubbed(value)
    steps = out.get("steps")
    if isinstance(steps, list):
        out["steps"] = [
            {k: v for k, v in step.items() if not _is_scratch(k)} if isinstance(step, dict) else step
            for step in steps
        ]
    if isinstance(out.get("world_state"), str) and out["world_state"] in _EMPTY_WORLD_STATES:
        del out["world_state"]
    if isinstance(out.get("faults"), list):
        out["faults"] = [fault for fault in out["faults"] if isinstance(fault, dict)]
    if isinstance(out.get("world_diff"), list):
        # A change to a field named like a teacher-only key (an argument called "reference")
        # holds what its name says: dropped like the key itself.
        out["world_diff"] = [
            change for change in out["world_diff"] if not (isinstance(change, dict) and change.get("field") in SCRUBBED_KEYS)
        ]
    prompt, steps = out.get("prompt"), out.get("steps")
    if isinstance(prompt, str) and isinstance(steps, list) and all(_is_step(s) for s in steps):
        old = out.get("messages")
        system_prompt = None
        if isinstance(old, list) and old and isinstance(old[0], dict) and old[0].get("role") == "system":
            system_prompt = old[0].get("content")
        prefix = out.get("prefix") if isinstance(out.get("prefix"), list) else ()
        out["messages"] = messages_from_steps(prompt, steps, system_prompt, prefix=prefix)
    return out


def _is_step(step: Any) -> bool:
    return isinstance(step, Mapping) and any(k in step for k in ("user", "tool", "text"))


