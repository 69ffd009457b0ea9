"""Id shapes read from tool descriptions, and fresh ids drawn in those shapes (private).

Shared by the template writer (ids a person names) and the world (ids a search lists), so
both speak the id dialect the tool documents ("codes look like QXR482", "e.g. SW-1042").
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any

from toolkit._util.hashing import canonical_json
from toolkit.world.tools import ToolSpec

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
    return _scan(texts)


def _scan(texts: list[str]) -> list[tuple[str, ...]]:
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


# ----------------------------------------------------------------------------------------
# Per-parameter shapes and the values people name (shared by the seeded agent and the
# simulated person, so the person answers a question about a flight number with something
# shaped like a flight number, and the agent puts it in the parameter it fits).
# ----------------------------------------------------------------------------------------


def shapes_in(texts: list[str]) -> list[tuple[str, ...]]:
    """Id shapes documented in ``texts`` (same tuples as :func:`id_shapes`)."""
    return _scan(list(texts))


@functools.lru_cache(maxsize=4096)  # called per argument per enumerated path: 4 ms -> 1 us
def parameter_shapes(tool: ToolSpec, parameter: str) -> tuple[tuple[str, ...], ...]:
    """Id shapes documented for one parameter: its own description and examples; for the
    tool's sole reference parameter, also the tool description (it then speaks of that id)."""
    schema = tool.properties.get(parameter)
    texts: list[str] = []
    if isinstance(schema, Mapping):
        texts.append(str(schema.get("description", "")))
        texts.extend(str(example) for example in schema.get("examples", ()) or ())
    shapes = shapes_in(texts)
    if not shapes and tuple(tool.reference_parameters) == (parameter,):
        shapes = shapes_in([tool.description])
    return tuple(shapes)  # cached: immutable


def fits_shape(value: str, shapes: list[tuple[str, ...]]) -> bool:
    """Whether ``value`` is written in one of ``shapes`` (an id "QXR482" fits ("letters-digits",
    "QXR", "", "3", "draw"); "SW-1042" fits ("letters-digits", "SW", "-", "4", "keep"))."""
    for shape in shapes:
        if shape[0] == "letters-digits":
            _, prefix, separator, n_digits, keep = shape
            head = re.escape(prefix) if keep == "keep" else f"[A-Z]{{{len(prefix)}}}"
            pattern = f"{head}{re.escape(separator)}\\d{{{n_digits}}}"
        else:
            _, n_digits, n_letters = shape
            pattern = f"\\d{{{n_digits}}}[A-Z]{{{n_letters}}}"
        if re.fullmatch(pattern, value):
            return True
    return False


def spoken(parameter: str) -> str:
    """A parameter name as a person says it: ``new_flight_number`` -> "new flight number"."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", parameter)
    return re.sub(r"[_\-\s]+", " ", words).strip().lower()


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ISO_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_WEEKDAY = re.compile(r"\b(" + "|".join(WEEKDAYS) + r")\b", re.IGNORECASE)
#: The simulated parties have no clock: a weekday name resolves to the next such day after
#: this fixed Monday, so every value stays a function of the conversation text alone.
TODAY = (2026, 1, 5)


def dates_in(text: str) -> list[str]:
    """ISO dates named in ``text``, in order: ``YYYY-MM-DD`` as written, and weekday names
    resolved to the next such day after :data:`TODAY` (1-7 days ahead)."""
    return list(_dates_in(text or ""))


# Cached: the policy and the user re-scan the same conversation texts every turn (2% of
# offline simulate CPU uncached); a tuple so no caller can change the cached value.
@functools.lru_cache(maxsize=4096)
def _dates_in(text: str) -> tuple[str, ...]:
    import datetime

    today = datetime.date(*TODAY)
    found: list[tuple[int, str]] = []
    for match in _ISO_DATE.finditer(text or ""):
        try:
            datetime.date.fromisoformat(match.group(1))
        except ValueError:
            continue
        found.append((match.start(), match.group(1)))
    for match in _WEEKDAY.finditer(text or ""):
        ahead = (WEEKDAYS.index(match.group(1).lower()) - today.weekday()) % 7 or 7
        found.append((match.start(), (today + datetime.timedelta(days=ahead)).isoformat()))
    out: list[str] = []
    for _, value in sorted(found):
        if value not in out:
            out.append(value)
    return tuple(out)


_FROM_TO = re.compile(r"\bfrom\s+([A-Za-z][A-Za-z]+(?:\s[A-Z][a-z]+)?)\s+to\s+([A-Za-z][A-Za-z]+(?:\s[A-Z][a-z]+)?)")


def places_in(text: str) -> list[tuple[str, str]]:
    """``(origin, destination)`` pairs a person names as "from X to Y" (title-cased)."""
    return [(a.title(), b.title()) for a, b in _FROM_TO.findall(text or "")]


def conform_place(place: str, schema: Mapping[str, Any]) -> str:
    """A place name in the form the parameter documents: a three-letter code when the
    description says IATA or gives a three-capital example ("e.g. LIS"), else the name."""
    description = str(schema.get("description", "")) if isinstance(schema, Mapping) else ""
    if "iata" in description.lower() or re.search(r"\be\.g\.,?\s+[A-Z]{3}\b", description):
        letters = re.sub(r"[^A-Za-z]", "", place)
        return letters[:3].upper() if letters else place
    return place


def uniform_stream(*prefix: Any) -> Callable[[Any], float]:
    """``label -> stable_uniform(*prefix, label)``, bit for bit, at a fraction of the cost.

    The writer, the world and the seeded policy draw dozens of uniforms that share a long
    prefix (seed, situation or prompt text, turn); ``stable_uniform`` serialises and hashes
    the whole list every time. The canonical JSON of a list is ``"[" + items joined by "," +
    "]"``, so the prefix's serialisation and its sha256 state are computed once and each
    draw only appends ``,<label>]`` (tested equal to ``stable_uniform`` in tests/situations/test_writer.py).
    Measured: 2.7 us -> 1.5 us per draw with a 110-character prompt in the prefix. It belongs beside
    ``stable_uniform`` in ``toolkit._util.hashing``; it lives here until that module's owner moves it.
    """
    head = canonical_json(list(prefix))
    start = hashlib.sha256((head[:-1] + ("," if prefix else "")).encode("utf-8"))

    def draw(label: Any) -> float:
        state = start.copy()
        state.update((canonical_json(label) + "]").encode("utf-8"))
        return (int.from_bytes(state.digest()[:8], "big") >> 11) / float(1 << 53)

    return draw
