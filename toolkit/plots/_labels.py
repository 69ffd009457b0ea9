"""Readable names for the items a figure labels: a task is named, not shown as its hash."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["is_hash", "shorten", "task_names"]

# 8 or more hex digits that mix letters and digits, alone or after a prefix ("sc-5bac5cc761c6"):
# the shape of the toolkit's scenario ids and of any digest. Digit-only runs are numbers.
_HASH = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{8,}(?![0-9A-Za-z])")

# A tick label of 40 characters at 8 pt takes about 2.5 in, half a 5 in figure: longer ones
# crowd out the bars they name.
LABEL_CHARS = 40

# A situation value longer than this is a sentence (a policy rule), not a name.
_NAME_CHARS = 24


def is_hash(text: str) -> bool:
    """Whether ``text`` carries a hex digest where a reader expects a name."""
    return bool(_HASH.search(text))


def shorten(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` on one line, cut at a word boundary to at most ``limit`` characters ("…" added)."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if " " in cut[limit // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:·-") + "…"


def _dimension_names(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Name each task by the short situation values that tell the tasks apart."""
    dimensions = {key: row.get("scenario_dimensions") for key, row in rows.items()}
    dimensions = {key: value for key, value in dimensions.items() if isinstance(value, Mapping) and value}
    if not dimensions:
        return {}
    fields: list[str] = []
    for value in dimensions.values():
        fields += [field for field in value if field not in fields]
    # values every task shares say nothing about which task a bar is; sentences are too long
    varying = [field for field in fields
               if len({str(d.get(field)) for d in dimensions.values()}) > 1
               and all(len(str(d.get(field, ""))) <= _NAME_CHARS for d in dimensions.values())]
    chosen = varying or [f for f in fields if all(len(str(d.get(f, ""))) <= _NAME_CHARS for d in dimensions.values())]
    names = {}
    for key, value in dimensions.items():
        words = [str(value[field]) for field in chosen if value.get(field) not in (None, "")]
        if words:
            names[key] = shorten(" · ".join(words))
    return names


def task_names(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """A readable, distinct label for each task key.

    Parameters
    ----------
    rows : mapping
        ``{task key: one row of that task}``.

    Returns
    -------
    dict
        ``{task key: label}``. The label is the first readable one of: the key itself (a task
        id or prompt someone wrote), the row's ``task_id``, the situation values that differ
        between the tasks (``scenario_dimensions``: "get_booking · exploratory · fresh"), the
        prompt; each cut to :data:`LABEL_CHARS` characters. Only a task that carries nothing
        but a hash keeps it. Labels that would repeat get " #2", " #3", ... so no two bars
        share a name.
    """
    by_dimensions = _dimension_names(rows)
    names = {}
    for key, row in rows.items():
        candidates = [key, row.get("task_id"), by_dimensions.get(key), row.get("prompt")]
        readable = [str(c) for c in candidates if c not in (None, "") and not is_hash(str(c))]
        names[key] = shorten(readable[0]) if readable else str(key)
    seen: dict[str, int] = {}
    for key, name in names.items():
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            names[key] = f"{name} #{seen[name]}"
    return names
