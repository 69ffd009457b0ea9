"""Id shapes read from tool descriptions, and fresh ids drawn in those shapes (private).

Shared by the template writer (ids a person names) and the world (ids a search lists), so
both speak the id dialect the tool documents ("codes look like QXR482", "e.g. SW-1042").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from toolkit.tools import ToolSpec

# 1-4 capitals, an optional separator, 3-6 digits ("ABC123", "FL-2041", "ORD_5521"), and
# digits-then-capitals ("12345AB"), the two families the reference reads from descriptions.
_ID_PATTERNS = (
    re.compile(r"\b([A-Z]{1,4})([-_]?)(\d{3,6})\b"),
    re.compile(r"\b(\d{3,6})([A-Z]{1,4})\b"),
)
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # no I or O: real id alphabets avoid them (vs 1 and 0)


def id_shapes(tool: ToolSpec) -> list[tuple[str, ...]]:
    """Id shapes a tool's descriptions document: ("letters-digits", prefix, separator,
    n_digits, "keep"|"draw") or ("digits-letters", n_digits, n_letters)."""
    texts = [tool.description]
    for schema in tool.properties.values():
        if isinstance(schema, Mapping):
            texts.append(str(schema.get("description", "")))
            texts.extend(str(example) for example in schema.get("examples", ()) or ())
    shapes: list[tuple[str, ...]] = []
    for text in texts:
        for match in _ID_PATTERNS[0].finditer(text):
            letters, separator, digits = match.groups()
            # A prefix before a separator ("FL-2041") usually means something (flight); a
            # bare run ("ABC123") is arbitrary letters, so fresh ids draw new ones.
            shape = ("letters-digits", letters, separator, str(len(digits)), "keep" if separator else "draw")
            if shape not in shapes:
                shapes.append(shape)
        for match in _ID_PATTERNS[1].finditer(text):
            digits, letters = match.groups()
            shape = ("digits-letters", str(len(digits)), str(len(letters)))
            if shape not in shapes:
                shapes.append(shape)
    return shapes


def draw_id(shapes: list[tuple[str, ...]], noun: str, draw: Callable[[str], float]) -> str:
    """A fresh id in one of ``shapes`` (``draw(label) -> u in [0, 1)`` supplies every
    choice); without shapes, ``<NOUN PREFIX>-<1000..9999>``."""
    if not shapes:
        prefix = re.sub(r"[^A-Za-z]", "", noun)[:3].upper() or "REF"
        return f"{prefix}-{1000 + int(draw('ref-number') * 9000)}"
    shape = shapes[int(draw("ref-shape") * len(shapes))]

    def digits(count: int) -> str:
        low = 10 ** (count - 1)
        return str(low + int(draw("ref-digits") * 9 * low))

    def letters(count: int) -> str:
        return "".join(_LETTERS[int(draw(f"ref-letter-{i}") * len(_LETTERS))] for i in range(count))

    if shape[0] == "letters-digits":
        _, prefix, separator, n_digits, keep = shape
        head = prefix if keep == "keep" else letters(len(prefix))
        return f"{head}{separator}{digits(int(n_digits))}"
    _, n_digits, n_letters = shape
    return f"{digits(int(n_digits))}{letters(int(n_letters))}"
