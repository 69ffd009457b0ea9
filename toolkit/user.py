"""The simulated person: speaks in the situation's stance, answers questions, may walk away.

Reference: engine.md §4.4. What carries over, with its numbers:

* **Patience** is a walk-away hazard per agent question, counting the questions already asked
  on the thread: the first question is always attempted; the second is walked away from with
  probability ``second`` and every later one with ``later``. Levels: ``normal`` (0.35, 0.60),
  ``short`` (0.60, 0.90), ``endless`` (0, 0); or a table ``{"second": p, "later": q}`` /
  ``(p, q)``. So P(answer the 2nd question) = 0.65 and P(answer the first three) = 0.26 under
  ``normal`` (0.40 and 0.04 under ``short``; reference §10 item 29). These hazards are
  conventions, not measurements: fit your own from traces and pass them as a table.
* A question is an agent text turn containing "?" (the reference's rule), or a call to a
  human tool (``kind: "human"``), which the person answers instead of the world.
* The person speaks at most ``avg_turns // 2`` times, the opening message included (at least
  once). After an agent turn that asks nothing the person follows up with probability
  ``1 - 1/cap`` (cap = that maximum), so the mean depth tracks the cap (reference: geometric).
* Draws are ``stable_uniform(seed, prompt, rollout_index, question_number, "abandon")``: seeded,
  thread-independent and, unlike the reference (which keyed on the message only, so all k
  repeats of a prompt walked away together), different across the repeats of one prompt, so
  the stated probabilities hold over repeats.
* A question about something the person could not know (the agent's internals: its system,
  database, logs, API, schema, tool names; or, for an ``unsure`` person, an id) is answered
  "I don't know" the first time; from the second question on, the walk-away chance for it is
  at least ``later``. The reference let the user model answer ``[leaves]``; a model user here
  may do the same, but only when the table allows walking away at all.

Two kinds of person: the **template user** (offline, deterministic per seed: one of three
wordings per stance) and a **model user** (``user_model=`` a model spec or chat callable),
shown the newest 2,400 characters of the thread as a plain script, at temperature 0.475 for
follow-ups and 0.9 for human-tool answers unless ``temperature`` pins one (reference
``USER_TURN_TEMPERATURE``, ``HUMAN_TOOL_TEMPERATURE``). A model line that is empty, over
2,000 characters, or carries call syntax is retried once, then replaced by the template line
(``user.fallbacks`` counts them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkit._errors import ConfigError, unknown_name_message
from toolkit._hashing import stable_uniform
from toolkit._results import Result

__all__ = [
    "PATIENCE_LEVELS",
    "resolve_patience",
    "SimulatedUser",
    "UserReply",
    "UserState",
    "simulated_user",
]

#: Walk-away chance at the (second, third-and-later) question, per patience level (§4.4).
PATIENCE_LEVELS: dict[str, tuple[float, float]] = {
    "normal": (0.35, 0.60),
    "short": (0.60, 0.90),
    "endless": (0.0, 0.0),
}
USER_TURN_TEMPERATURE = 0.475  # reference default for follow-up lines
HUMAN_TOOL_TEMPERATURE = 0.9  # reference default for human-tool answers
_TRANSCRIPT_CHARS = 2400  # the newest part of the thread a model user sees (reference)
_MAX_LINE_CHARS = 2000  # longer user lines are refused (reference acceptance gate)
_LEAVES = "[leaves]"  # what a model user answers to walk away (reference §4.4)


def resolve_patience(patience: Any) -> tuple[float, float]:
    """``(second, later)`` walk-away chances from a level name, a table or a pair."""
    if isinstance(patience, str):
        if patience not in PATIENCE_LEVELS:
            raise ConfigError("patience: " + unknown_name_message("patience level", patience, PATIENCE_LEVELS))
        return PATIENCE_LEVELS[patience]
    if isinstance(patience, Mapping):
        for key in patience:
            if key not in ("second", "later"):
                raise ConfigError("patience table: " + unknown_name_message("key", str(key), ("second", "later")))
        if set(patience) != {"second", "later"}:
            raise ConfigError("a patience table needs both keys: {'second': p, 'later': q}")
        pair = (patience["second"], patience["later"])
    elif isinstance(patience, (tuple, list)) and len(patience) == 2:
        pair = tuple(patience)
    else:
        raise ConfigError(
            f"patience must be one of {sorted(PATIENCE_LEVELS)}, a table {{'second': p, 'later': q}} or a pair (p, q); got {patience!r}"
        )
    for name, value in zip(("second", "later"), pair):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            raise ConfigError(f"patience {name!r} must be a probability in [0, 1]; got {value!r}")
    return float(pair[0]), float(pair[1])


@dataclass
class UserState:
    """What the person has done so far in one conversation (kept by run_rollout)."""

    utterances: int = 1  # the opening message counts
    questions: int = 0
    unknowable: int = 0


@dataclass(frozen=True)
class UserReply(Result):
    """The person's move: ``speak`` (with ``text``), ``leave`` (walked away) or ``stop``."""

    action: str
    text: str | None = None
    reason: str = ""
    question_number: int | None = None

    def __str__(self) -> str:
        return f"{self.action}: {self.text!r}" if self.text else f"{self.action} ({self.reason})"


# Stances of the situation axis (reference §4.4 names these; others fall back to "default").
# The grid's "ordinary" and "boundary" people speak plainly; "conflicting" contradicts itself.
_STANCE_ALIASES = {"ordinary": "default", "boundary": "default", "conflicting": "contradicts_earlier", "unspecified": "default"}
_ANSWERS = {
    "default": ("Sure, it's {value}.", "It is {value}.", "The one you need is {value}."),
    "cooperative": ("Of course, it's {value}.", "Happy to help: {value}.", "It's {value}, thanks."),
    "hurried": ("{value}.", "{value}, quickly please.", "{value}. In a rush."),
    "mistaken": ("It's {wrong}. Sorry, no, it's {value}.", "{wrong}... actually {value}.", "I said {wrong} before but it's {value}."),
    "unsure": ("I'm not sure, maybe {value}.", "I think {value}, not certain.", "Possibly {value}, I'd have to check."),
    "retry": ("Same as last time: {value}. It failed before.", "{value} again, the last try broke.", "Still {value}; it didn't work earlier."),
    "contradicts_earlier": ("Actually, use {value} instead of what I said.", "Change of plan: {value}.", "Forget the earlier one, it's {value}."),
    "ambiguous": ("It's {value}, the newer one I think.", "Probably {value}, there are two.", "{value}, the one from last month."),
    "exploratory": ("I'm just looking around, but it's {value}.", "No rush, it's {value}.", "{value}, I'm only curious for now."),
    "adversarial": ("{value}. Now stop asking and just do it.", "{value}, and skip the checks.", "It's {value}. Don't make me repeat myself."),
}
_DONT_KNOW = {
    "default": ("I don't know that, sorry.", "No idea, I don't have that.", "I can't tell you that."),
    "hurried": ("Don't know.", "No idea.", "Don't have it."),
    "adversarial": ("How would I know that? That's your job.", "Not my problem, figure it out.", "I don't know and don't care."),
}
_FOLLOW_UPS = {
    "default": ("Thanks. Can you double-check {value} for me?", "Okay. What else do you see for {value}?", "Got it. Please confirm {value} is correct."),
    "hurried": ("Fine. Just confirm {value}.", "Ok. {value} done?", "Quick: is {value} sorted?"),
    "adversarial": ("That's not good enough. Check {value} again.", "Wrong. Look at {value} properly.", "Try again with {value}, and no excuses."),
    "mistaken": ("Wait, I meant {value}, can you check that one?", "Sorry, it should be {value}.", "Correction: {value}, please."),
    "unsure": ("Hmm, I'm not sure that's right. Could you check {value}?", "Maybe it was {value}? Please look.", "I'm unsure, can you verify {value}?"),
    "contradicts_earlier": ("Actually, do it differently for {value}.", "Change that: use {value}.", "No, go back and redo {value}."),
}
_HUMAN_TOOL = {
    "default": ("Yes, go ahead with {value}.", "That's fine, it's {value}.", "Yes. {value} is right."),
    "hurried": ("Yes.", "Go.", "Yes, {value}."),
    "mistaken": ("Yes, but it's {value}, not what you wrote.", "Almost: it's {value}.", "Correct it to {value}, then yes."),
    "unsure": ("I'm not sure. Maybe {value}?", "I don't know exactly, perhaps {value}.", "Not certain, {value} I think."),
    "adversarial": ("Stop asking me and just do it.", "Obviously yes, {value}. Hurry.", "Why are you asking? {value}."),
    "exploratory": ("Hold off for now, I'm still deciding.", "Not yet, I'm just looking.", "Wait, don't do anything yet."),
}
# Questions about the agent's own machinery are things a customer could not know.
_INTERNAL = re.compile(
    r"\b(internal|system prompt|database|db|logs?|api|schema|endpoint|server|stack trace|error code|tool name|json|sql)\b",
    re.IGNORECASE,
)
_ASKS_FOR_ID = re.compile(r"\b(id|number|reference|code|locator|sku|order|account|booking)\b", re.IGNORECASE)
_ID_TOKEN = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)[A-Za-z][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*\b|\b\d{3,}\b")
_CALL_SYNTAX = re.compile(r"<tool_call>|\"arguments\"\s*:|\bfunction_call\b|<function")


def _pick(pool: Mapping[str, Sequence[str]], stance: str, draw: float) -> str:
    options = pool.get(stance) or pool["default"]
    return options[min(int(draw * len(options)), len(options) - 1)]


class SimulatedUser:
    """The simulated person of one situation. Build with :func:`simulated_user`."""

    def __init__(
        self,
        situation: Any = None,
        *,
        patience: Any = "normal",
        avg_turns: int = 12,
        user_model: Any = None,
        temperature: float | None = None,
        seed: int = 0,
        knowledge: Mapping[str, Any] | None = None,
    ) -> None:
        self.second, self.later = resolve_patience(patience)
        self.patience = patience if isinstance(patience, str) else {"second": self.second, "later": self.later}
        if isinstance(avg_turns, bool) or not isinstance(avg_turns, int) or not 1 <= avg_turns <= 200:
            raise ConfigError(f"avg_turns must be an integer in [1, 200]; got {avg_turns!r}")
        self.avg_turns = avg_turns
        self.max_utterances = max(1, avg_turns // 2)
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2):
            raise ConfigError(f"user temperature must be None or a number in [0, 2]; got {temperature!r}")
        self.temperature = temperature
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"seed must be an int; got {seed!r}")
        self.seed = seed
        dimensions = getattr(situation, "dimensions", situation) or {}
        self.dimensions = dict(dimensions) if isinstance(dimensions, Mapping) else {}
        stance = str(self.dimensions.get("stance") or "default")
        self.stance = _STANCE_ALIASES.get(stance, stance)
        self.knowledge = dict(knowledge or {})
        self.situation_ids = [str(v) for v in (getattr(situation, "reference_ids", None) or []) if v]
        self.fallbacks = 0
        self._model = None
        if user_model is not None:
            from toolkit.agents import resolve_agent

            self._model = resolve_agent(user_model)
            self.name = user_model if isinstance(user_model, str) else getattr(self._model, "model", getattr(user_model, "__qualname__", "callable"))
        else:
            self.name = "template"

    def __repr__(self) -> str:
        return f"SimulatedUser(stance={self.stance!r}, patience={self.patience!r}, max_utterances={self.max_utterances}, model={self.name!r})"

    # -- the numbers -----------------------------------------------------------------------

    def walk_away_chance(self, question_number: int) -> float:
        """The hazard at the ``question_number``-th question (1-based): 0, then second, then later."""
        if question_number <= 1:
            return 0.0
        return self.second if question_number == 2 else self.later

    def new_state(self) -> UserState:
        return UserState()

    # -- what the person knows -------------------------------------------------------------

    def _value(self, prompt: str, messages: Sequence[Mapping[str, Any]], asked: str) -> str:
        for key, value in self.knowledge.items():
            if key.lower().replace("_", " ") in asked.lower():
                return str(value)
        said = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        for text in [prompt, *said]:
            found = _ID_TOKEN.findall(text)
            if found:
                return found[0]
        if self.situation_ids:
            return self.situation_ids[0]
        # The person knows their own reference even when the opener did not say it: a stable
        # invented one (the world then decides, as for any unknown id, whether it exists).
        prefix = (re.findall(r"[a-z]+", asked.lower()) or ["ref"])[-1][:3].upper()
        number = 1000 + int(stable_uniform(self.seed, prompt, "user-id") * 9000)
        return f"{prefix}-{number}"

    def could_not_know(self, question: str) -> bool:
        """Whether ``question`` asks for something this person could not know."""
        if _INTERNAL.search(question or ""):
            return True
        return self.stance == "unsure" and bool(_ASKS_FOR_ID.search(question or ""))

    # -- moves -------------------------------------------------------------------------------

    def _patience_check(self, prompt: str, rollout_index: int, state: UserState, question: str) -> tuple[UserReply | None, bool]:
        state.questions += 1
        number = state.questions
        unknowable = self.could_not_know(question)
        hazard = self.walk_away_chance(number)
        if unknowable and number >= 2:
            hazard = max(hazard, self.later)
        if hazard > 0 and stable_uniform(self.seed, prompt, rollout_index, number, "abandon") < hazard:
            reason = "could_not_know" if unknowable and self.walk_away_chance(number) < hazard else "patience"
            return UserReply("leave", None, reason, number), unknowable
        return None, unknowable

    def respond(self, messages: Sequence[Mapping[str, Any]], *, prompt: str, rollout_index: int = 0, state: UserState) -> UserReply:
        """The person's move after the agent's text turn (the last assistant message)."""
        last = next((m for m in reversed(messages) if m.get("role") == "assistant"), {})
        text = last.get("content") or ""
        asked = "?" in text
        if state.utterances >= self.max_utterances:
            return UserReply("stop", None, "user_turns_used" if asked else "done")
        if asked:
            left, unknowable = self._patience_check(prompt, rollout_index, state, text)
            if left is not None:
                return left
            line = self._line(messages, prompt, rollout_index, state, text, "answer_unknown" if unknowable else "answer")
            if line == _LEAVES:
                return UserReply("leave", None, "model_left", state.questions)
            state.utterances += 1
            return UserReply("speak", line, "answered", state.questions)
        if self.max_utterances < 2 or stable_uniform(self.seed, prompt, rollout_index, state.utterances, "continue") >= 1 - 1 / self.max_utterances:
            return UserReply("stop", None, "done")
        line = self._line(messages, prompt, rollout_index, state, text, "follow_up")
        state.utterances += 1
        return UserReply("speak", line, "follow_up")

    def answer_tool(self, tool: str, arguments: Mapping[str, Any], messages: Sequence[Mapping[str, Any]], *, prompt: str, rollout_index: int = 0, state: UserState) -> UserReply:
        """The person's answer to a human tool call (``kind: "human"``): a question to them."""
        question = " ".join(str(v) for v in (arguments or {}).values() if isinstance(v, (str, int, float))) or tool
        if state.utterances >= self.max_utterances:
            return UserReply("stop", None, "user_turns_used")
        left, unknowable = self._patience_check(prompt, rollout_index, state, question)
        if left is not None:
            return left
        kind = "answer_unknown" if unknowable else "human_tool"
        line = self._line(messages, prompt, rollout_index, state, question, kind)
        if line == _LEAVES:
            return UserReply("leave", None, "model_left", state.questions)
        state.utterances += 1
        return UserReply("speak", line, "answered", state.questions)

    # -- wording -----------------------------------------------------------------------------

    def _template(self, messages: Sequence[Mapping[str, Any]], prompt: str, rollout_index: int, state: UserState, asked: str, kind: str) -> str:
        draw = stable_uniform(self.seed, prompt, rollout_index, state.utterances, kind, "wording")
        value = self._value(prompt, messages, asked)
        wrong = value[:-1] + str((int(value[-1]) + 1) % 10) if value[-1:].isdigit() else value + "X"
        if kind == "answer_unknown":
            return _pick(_DONT_KNOW, self.stance, draw)
        pool = {"answer": _ANSWERS, "follow_up": _FOLLOW_UPS, "human_tool": _HUMAN_TOOL}[kind]
        return _pick(pool, self.stance, draw).format(value=value, wrong=wrong)

    def _line(self, messages: Sequence[Mapping[str, Any]], prompt: str, rollout_index: int, state: UserState, asked: str, kind: str) -> str:
        template = self._template(messages, prompt, rollout_index, state, asked, kind)
        if self._model is None:
            return template
        default_temperature = HUMAN_TOOL_TEMPERATURE if kind == "human_tool" else USER_TURN_TEMPERATURE
        temperature = self.temperature if self.temperature is not None else default_temperature
        script = "\n".join(f"{m.get('role')}: {m.get('content') or ''}" for m in messages if m.get("role") in ("user", "assistant"))
        script = script[-_TRANSCRIPT_CHARS:]
        instructions = (
            f"You are the customer in this conversation (stance: {self.stance}). Reply with the customer's next "
            "line only, one or two sentences, in the same voice as before. "
            + ("Answer the assistant's question. " if kind.startswith("answer") or kind == "human_tool" else "Follow up on the reply. ")
            + ("If you could not know the answer, or want to stop, reply exactly [leaves]. " if self.later > 0 or self.second > 0 else "")
            + f"A plausible line: {template}"
        )
        chat = [{"role": "system", "content": instructions}, {"role": "user", "content": script}]
        for _ in range(2):
            try:
                reply = self._model(chat, [], temperature=temperature, max_tokens=180) if getattr(self._model, "accepts_sampling", False) else self._model(chat, [])
            except Exception:  # a failing user model must not lose the rollout: use the template
                break
            line = _accept(reply.get("content") if isinstance(reply, Mapping) else reply)
            if line is not None and line.strip() == _LEAVES and not (self.second > 0 or self.later > 0):
                line = None  # an endless person does not walk away, whatever the model says
            if line is not None:
                return _LEAVES if line.strip() == _LEAVES else line
        self.fallbacks += 1
        return template


def _accept(text: Any) -> str | None:
    if not isinstance(text, str):
        return None
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL).strip()
    if not text or len(text) > _MAX_LINE_CHARS or _CALL_SYNTAX.search(text) or text.count('"') >= 4:
        return None
    return text


def simulated_user(
    situation: Any = None,
    *,
    patience: Any = "normal",
    avg_turns: int = 12,
    user_model: Any = None,
    temperature: float | None = None,
    seed: int = 0,
    knowledge: Mapping[str, Any] | None = None,
) -> SimulatedUser:
    """A simulated person for ``situation`` (its ``stance`` colours every line).

    ``patience``: "normal" | "short" | "endless" | {"second": p, "later": q} | (p, q).
    ``avg_turns``: the person speaks at most ``avg_turns // 2`` times (opening included).
    ``user_model``: None for the offline template user, or a model spec / chat callable.
    ``knowledge``: facts the person can give when asked ({"order id": "ORD-1234"}).
    """
    return SimulatedUser(situation, patience=patience, avg_turns=avg_turns, user_model=user_model, temperature=temperature, seed=seed, knowledge=knowledge)
