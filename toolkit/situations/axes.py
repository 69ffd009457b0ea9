"""The six axes an agent definition varies on (from its tools and policy clauses) and the difficulty tier of a stance.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkit._util.results import Result
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.world import FAULT_MODES, WORLD_STATES, WorldOptions, normalize_tools

__all__ = ["AXES", "STANCES", "HISTORIES", "TIERS", "HARD_TIERS", "RULE_CAP", "SituationAxes", "split_policy", "situation_axes", "tier_of"]

#: Axis names, in the order every dimensions dict lists them.
AXES = ("tool", "rule", "stance", "world_state", "tool_condition", "history")
STANCES = (
    "ordinary", "ambiguous", "boundary", "adversarial", "hurried",
    "unsure", "retry", "mistaken", "exploratory", "conflicting",
)
HISTORIES = ("fresh", "prior_failure", "prior_partial_action", "contradicts_earlier", "repeat_visit")
TIERS = ("ordinary", "ambiguous", "boundary", "adversarial")
#: The hard tiers, in the order the mixer serves them (hardest first).
HARD_TIERS = ("adversarial", "boundary", "ambiguous")
#: Policy clauses kept on the rule axis (docs/design/engine.md §3.1 and docs/design/engine.md §9 item 11: 16). Each clause adds
#: a block of about max-axis-size rows, so 16 clauses already add ~160 situations.
RULE_CAP = 16

_TIER_OF_STANCE = {
    "ordinary": "ordinary", "hurried": "ordinary", "retry": "ordinary", "mistaken": "ordinary",
    "exploratory": "ordinary", "ambiguous": "ambiguous", "unsure": "ambiguous",
    "boundary": "boundary", "conflicting": "boundary", "adversarial": "adversarial",
}

# Clauses shorter than this are headings or fragments ("Refunds", "Note"), not rules; longer
# than _CLAUSE_MAX they are cut at a word boundary so a value stays readable in a table.
_CLAUSE_MIN = 8
_CLAUSE_MAX = 120
_BULLET = re.compile(r"^\s*(?:[-*\u2022+]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)](?=\s))\s+")
_HEADING = re.compile(r"^\s*(#{1,6}\s+.*|[A-Z][\w /&-]{0,40}:)\s*$")
_LABEL = re.compile(r"^\s*[A-Z][\w /&-]{0,30}:\s+(?=\S)")
_ROLE = re.compile(r"^\s*(you are|you're|your role is|as an? [\w -]+ (assistant|agent))\b", re.IGNORECASE)
_PRONOUN_START = re.compile(r"^(they|it|this|that|these|those|he|she|which|then)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def tier_of(stance: str) -> str:
    """The difficulty tier of a stance (ordinary / ambiguous / boundary / adversarial).

    Parameters
    ----------
    stance : str
        One of :data:`STANCES`.

    Returns
    -------
    str
        One of :data:`TIERS`.

    Raises
    ------
    ConfigError
        If ``stance`` is not a known stance (the message names the nearest ones).
    """
    if stance not in _TIER_OF_STANCE:
        raise ConfigError(unknown_name_message("stance", str(stance), STANCES))
    return _TIER_OF_STANCE[stance]


# ----------------------------------------------------------------------------------------
# Policy clauses
# ----------------------------------------------------------------------------------------


def _cut(text: str) -> str:
    if len(text) <= _CLAUSE_MAX:
        return text
    head = text[:_CLAUSE_MAX]
    return head[: head.rfind(" ")].rstrip(" ,;:") if " " in head else head


def split_policy(system_prompt: str | None) -> list[str]:
    """Every policy clause of a system prompt, in document order, deduplicated (no cap).

    Splits on blank lines, headings, numbered and bulleted lines, ``Label:`` lines (the
    label is kept in the clause), ``"; "`` (unless the next part opens with a pronoun:
    "...; they can only be cancelled" stays whole) and sentences (when every sentence is at
    least 8 characters); drops role paragraphs ("You are ..." and the sentences after it in
    the same paragraph), fragments under 8 characters, and cuts clauses over 120
    characters at a word boundary (docs/design/engine.md §3.1).

    Parameters
    ----------
    system_prompt : str or None
        The agent's system prompt. None, empty or blank gives no clause.

    Returns
    -------
    list of str
        The clauses; duplicates (ignoring case) are kept once, at their first place.
    """
    if not system_prompt or not str(system_prompt).strip():
        return []
    blocks: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            blocks.append(" ".join(current))
            current.clear()

    for line in str(system_prompt).splitlines():
        if not line.strip() or _HEADING.match(line):
            flush()
            continue
        if _BULLET.match(line):
            flush()
            line = _BULLET.sub("", line, count=1)
        elif _LABEL.match(line):
            # "Refunds: only within 24 hours" starts a clause of its own; the label stays,
            # since the clause often means little without it.
            flush()
        current.append(line.strip())
    flush()
    clauses: list[str] = []
    for block in blocks:
        if _ROLE.match(block):
            # The role paragraph ("You are the agent of X. You help ...") describes the
            # job, not a rule; the reference dropped only its first sentence.
            continue
        parts: list[str] = []
        for piece in re.split(r";\s+", block):
            # "...cannot be changed; they can only be cancelled": a part that opens with a
            # pronoun means nothing alone, so it stays with the part before it.
            if parts and _PRONOUN_START.match(piece):
                parts[-1] = f"{parts[-1]}; {piece}"
            else:
                parts.append(piece)
        for part in parts:
            sentences = _SENTENCE.split(part)
            pieces = sentences if all(len(s.strip()) >= _CLAUSE_MIN for s in sentences) else [part]
            clauses.extend(p.strip() for p in pieces)
    seen: set[str] = set()
    kept: list[str] = []
    for clause in clauses:
        clause = _cut(re.sub(r"\s+", " ", clause).strip())
        if len(clause) < _CLAUSE_MIN or _ROLE.match(clause):
            continue
        if clause.lower() in seen:
            continue
        seen.add(clause.lower())
        kept.append(clause)
    return kept


# ----------------------------------------------------------------------------------------
# Axes
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SituationAxes(Result):
    """The axes of one agent: ``axes`` (axis -> tuple of values, in :data:`AXES` order),
    ``rules`` (clauses kept), ``dropped_rules`` (clauses over the cap), ``warnings``."""

    axes: Mapping[str, tuple]
    rules: tuple[str, ...] = ()
    dropped_rules: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __str__(self) -> str:
        sizes = " x ".join(f"{name} {len(values)}" for name, values in self.axes.items())
        return f"SituationAxes({sizes})"


def _fault_mode_names(fault_modes: Any) -> tuple[str, ...]:
    if fault_modes is None:
        return FAULT_MODES
    if isinstance(fault_modes, WorldOptions):
        return fault_modes.mode_names
    if isinstance(fault_modes, Mapping):
        return WorldOptions(fault_modes=fault_modes).mode_names
    if isinstance(fault_modes, str) or not isinstance(fault_modes, Sequence):
        raise ConfigError("fault_modes must be a list of mode names, a {name: builder} dict or a WorldOptions")
    extra = []
    for name in fault_modes:
        if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]{0,39}$", name) or name == "success":
            raise ConfigError(f"fault mode name {name!r} must be 1-40 lower-case letters, digits or '_' (not 'success')")
        if name not in FAULT_MODES and name not in extra:
            extra.append(name)
    return FAULT_MODES + tuple(extra)


def situation_axes(
    tools: Any,
    system_prompt: str | None = None,
    *,
    fault_modes: Any = None,
    rule_cap: int = RULE_CAP,
) -> SituationAxes:
    """The six axes of an agent (docs/design/engine.md §3.1).

    Parameters
    ----------
    tools : any
        The agent's tools, anything :func:`toolkit.world.normalize_tools` accepts. Each
        callable (non-human) tool is a ``tool`` value, plus ``unrelated``, plus ``multi_tool``
        with two or more callable tools; ``world_state`` varies only when a tool takes a
        reference parameter.
    system_prompt : str, optional
        The system prompt whose policy clauses (:func:`split_policy`) are the ``rule``
        values. Default None: the rule axis is ``("unspecified",)``.
    fault_modes : sequence of str, mapping or WorldOptions, optional
        Extra modes (names, a ``{name: builder}`` dict, or a :class:`~toolkit.WorldOptions`);
        every one becomes a ``tool_condition`` value after ``success`` and the built-in
        modes. Default None: the built-in modes only.
    rule_cap : int
        Clauses kept, in document order (default :data:`RULE_CAP`, 16); the rest are listed
        in ``dropped_rules`` and a warning says how many were dropped.

    Returns
    -------
    SituationAxes

    Raises
    ------
    ConfigError
        If ``rule_cap`` is not an integer >= 1, or ``fault_modes`` is malformed.
    """
    if isinstance(rule_cap, bool) or not isinstance(rule_cap, int) or rule_cap < 1:
        raise ConfigError(f"rule_cap must be an integer >= 1, got {rule_cap!r}")
    specs = normalize_tools(tools)
    callable_tools = [spec for spec in specs if not spec.is_human]
    tool_values = [spec.name for spec in callable_tools] + ["unrelated"]
    if len(callable_tools) >= 2:
        tool_values.append("multi_tool")
    clauses = split_policy(system_prompt)
    notes: list[str] = []
    kept, dropped = clauses[:rule_cap], clauses[rule_cap:]
    if dropped:
        notes.append(
            f"{len(kept)} of {len(clauses)} policy clauses are on the rule axis; {len(dropped)} dropped "
            f"(first dropped: {dropped[0]!r}); raise rule_cap= to cover them"
        )
    if system_prompt and str(system_prompt).strip() and not clauses:
        notes.append("the system prompt has no policy clause of 8+ characters; the rule axis is 'unspecified'")
    has_reference = any(spec.reference_parameters for spec in callable_tools)
    axes = {
        "tool": tuple(tool_values),
        "rule": tuple(kept) if kept else ("unspecified",),
        "stance": STANCES,
        "world_state": WORLD_STATES if has_reference else ("unspecified",),
        "tool_condition": ("success",) + _fault_mode_names(fault_modes),
        "history": HISTORIES,
    }
    return SituationAxes(axes=axes, rules=tuple(kept), dropped_rules=tuple(dropped), warnings=tuple(notes))


