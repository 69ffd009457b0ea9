"""The simulated person: speaks in the situation's stance, answers questions, may walk away.

Reference: whileai-sdk's simulated user (docs/design/engine.md §4.4; "the reference" below). What
carries over, with its numbers:

* **Patience** is a walk-away hazard per agent question, counting the questions already asked
  on the thread: the first question is always attempted; the second is walked away from with
  probability ``second`` and every later one with ``later``. Levels: ``normal`` (0.35, 0.60),
  ``short`` (0.60, 0.90), ``endless`` (0, 0); or a table ``{"second": p, "later": q}`` /
  ``(p, q)``. So P(answer the 2nd question) = 0.65 and P(answer the first three) = 0.26 under
  ``normal`` (0.40 and 0.04 under ``short``; docs/design/engine.md §10 item 29). These hazards are
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

Two kinds of person: the **template user** (offline, deterministic per seed) and a **model user** (``user_model=`` a model spec or chat callable),
shown the newest 2,400 characters of the thread as a plain script, at temperature 0.475 for
follow-ups and 0.9 for human-tool answers unless ``temperature`` pins one (reference
``USER_TURN_TEMPERATURE``, ``HUMAN_TOOL_TEMPERATURE``). A model line that is empty, over
2,000 characters, or carries call syntax is retried once, then replaced by the template line
(``user.fallbacks`` counts them).

The template user reacts to what the agent said (the reference's template repeated one
"please double-check" line whatever the reply was):

* **Answers fit the question.** A yes/no question about going ahead gets a yes (a "not yet"
  from an exploratory person); a question naming a reference parameter of the agent's tools
  ("which flight number?") gets an id the person said in that parameter's documented shape,
  else one they know (``reference_ids``, a writer Prompt's ``reference``), else one made up
  once in that shape and kept for the whole conversation; a date question gets the day the
  person named ("Friday") or a date within four weeks of :data:`toolkit.world._ids.TODAY`; an
  origin / destination question gets the place from "from X to Y".
* **Follow-ups answer the reply.** After a claim of success: thanks / a closing question;
  after a failure: retry, alternatives or complaint by stance; after a refusal: give up or
  push; after a success claim that follows a fault the world injected since the person last
  spoke (the person would see that nothing changed): pushback with probability 0.8
  adversarial / retry, 0.7 mistaken / unsure, 0.6 contradicts_earlier, 0.3 hurried /
  cooperative / exploratory, 0.5 otherwise (conventions, not measurements).
* **No repeated lines.** Each bank holds four or more wordings, drawn per turn
  (``stable_uniform(seed, prompt, rollout_index, utterance, kind, "wording")``), and a line
  already said in the conversation is not drawn again while another wording is left.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.hashing import stable_uniform
from toolkit._util.results import Result
from toolkit.agents import resolve_agent
from toolkit.agents._protocol import TOOL_CALL_SYNTAX, complete_text
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.world import normalize_tools
from toolkit.world._ids import TODAY, WEEKDAYS, dates_in, draw_id, fits_shape, parameter_shapes, places_in, spoken

__all__ = [
    "PATIENCE_LEVELS",
    "resolve_patience",
    "SimulatedUser",
    "UserReply",
    "UserState",
    "simulated_user",
]

#: Walk-away chance at the (second, third-and-later) question, per patience level (docs/design/engine.md §4.4).
PATIENCE_LEVELS: dict[str, tuple[float, float]] = {
    "normal": (0.35, 0.60),
    "short": (0.60, 0.90),
    "endless": (0.0, 0.0),
}
USER_TURN_TEMPERATURE = 0.475  # reference default for follow-up lines
HUMAN_TOOL_TEMPERATURE = 0.9  # reference default for human-tool answers
_TRANSCRIPT_CHARS = 2400  # the newest part of the thread a model user sees (reference)
_MAX_LINE_CHARS = 2000  # longer user lines are refused (reference acceptance gate)
_LEAVES = "[leaves]"  # what a model user answers to walk away (docs/design/engine.md §4.4)


def resolve_patience(patience: Any) -> tuple[float, float]:
    """``(second, later)`` walk-away chances from a level name, a table or a pair.

    Parameters
    ----------
    patience : str, Mapping or tuple
        A level of :data:`PATIENCE_LEVELS` (``"normal"`` (0.35, 0.60), ``"short"``
        (0.60, 0.90), ``"endless"`` (0, 0)), a table ``{"second": p, "later": q}`` with
        exactly those two keys, or a pair ``(p, q)`` (tuple or list). ``p`` is the chance of
        walking away from the second question, ``q`` from every later one; each must be a
        number in [0, 1] (bools are refused).

    Returns
    -------
    tuple[float, float]
        ``(second, later)`` as floats.

    Raises
    ------
    ConfigError
        An unknown level or table key (with the nearest valid one), a table missing a key,
        any other type, or a chance outside [0, 1].
    """
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
    """What the person has done so far in one conversation (kept by run_rollout).

    ``tools``: the agent's tools (so an invented id or a date is in the documented form);
    ``reference_ids``: ids the person knows besides what they said (a writer prompt's
    ``reference``); ``said``: the person's lines so far (no line is repeated while another
    wording is left); ``invented``: values made up once and then kept for the conversation.
    """

    utterances: int = 1  # the opening message counts
    questions: int = 0
    unknowable: int = 0
    tools: tuple = ()
    reference_ids: tuple = ()
    said: list = field(default_factory=list)
    invented: dict = field(default_factory=dict)


@dataclass(frozen=True)
class UserReply(Result):
    """The person's move: ``speak`` (with ``text``), ``leave`` (walked away) or ``stop``."""

    action: str
    text: str | None = None
    reason: str = ""
    question_number: int | None = None

    def __str__(self) -> str:
        return f"{self.action}: {self.text!r}" if self.text else f"{self.action} ({self.reason})"


# Stances of the situation axis (docs/design/engine.md §4.4 names these; others fall back to "default").
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
# Follow-ups that answer what the agent just said (a person reacts to the reply, not to a
# script): a success claim, a failure, a refusal. Four or more wordings each, so that with the
# no-repeat rule a six-line conversation never says the same thing twice.
_AFTER_SUCCESS = {
    "default": ("Great, thanks. Is there anything else I need to do?", "Thanks. Can you confirm the details for {value}?",
                "Perfect. Will I get a confirmation for {value}?", "Okay, good. And nothing else changes on {value}?"),
    "hurried": ("Good. Anything else?", "Fine. Confirmation?", "Ok, done then?", "Right. Is {value} all set?"),
    "adversarial": ("Finally. Why did that take so long?", "About time. Is {value} actually done this time?",
                    "Fine. Don't make me come back about {value}.", "Good. And I expect no extra charge for this."),
    "unsure": ("Oh, okay. So {value} is sorted now?", "I think that's what I wanted. Is that everything?",
               "Hmm, okay. Should I expect an email about {value}?", "Thanks. I'm not sure I understood, is it done?"),
    "exploratory": ("Interesting. What would it cost if I did more?", "Okay, good to know. What are my other options?",
                    "Thanks. I'm just exploring, what else can I do with {value}?", "Noted. No rush on anything else."),
}
_AFTER_FAILURE = {
    "default": ("That's annoying. Can you try again, please?", "Okay. What can I do now, then?",
                "Is there another way to get {value} done?", "Hmm. When should I try again?"),
    "hurried": ("Just try again, quickly.", "No time for this. Again?", "Retry now please.", "Ugh. Any faster way?"),
    "adversarial": ("That's not acceptable. Try again.", "Fix it. I'm not doing this twice.",
                    "Useless. Get someone who can handle {value}.", "Again? Do it properly this time."),
    "unsure": ("Oh no. Did I do something wrong?", "I don't understand. Is {value} wrong?",
               "Hmm, should I try something else?", "Is that my fault or yours?"),
    "retry": ("It failed again? That's what happened last time too.", "Same problem as before. Please try once more.",
              "This keeps breaking. Can you try {value} again?", "Again the same error. What now?"),
}
_PUSHBACK = {
    "default": ("Are you sure? I still don't see any change on my side.", "Really? I didn't get any confirmation for {value}.",
                "That doesn't match what I see. Can you check {value} again?", "Hm, it still shows the old details for me."),
    "adversarial": ("That's not true, nothing changed. Check again.", "Don't tell me it's done when it isn't.",
                    "I can see it didn't go through. Do it properly.", "Stop saying it worked. It didn't."),
    "unsure": ("Are you sure? I don't see anything different.", "I'm not sure it worked, nothing changed for {value}.",
               "Hmm, it still looks the same to me.", "Did it really go through?"),
}
# A person checks a success claim after a fault more often when they came in doubting (these
# shares are conventions, not measurements; the reference had no pushback at all).
_PUSHBACK_SHARE = {"adversarial": 0.8, "mistaken": 0.7, "unsure": 0.7, "retry": 0.8, "contradicts_earlier": 0.6,
                   "hurried": 0.3, "cooperative": 0.3, "exploratory": 0.3}
_PUSHBACK_DEFAULT = 0.5
_AFTER_DECLINE = {
    "default": ("Okay, never mind then.", "Ah, fine. Who should I ask instead?", "Oh well. Thanks anyway.", "Right, I'll look elsewhere."),
    "adversarial": ("Useless. What are you even for?", "Then find someone who can.", "Seriously? That's it?", "Unbelievable."),
}
_CONFIRM = {
    "default": ("Yes, please go ahead with {value}.", "Yes, that's right, {value}.", "Yes. {value} is right, do it.", "Correct, go ahead."),
    "hurried": ("Yes.", "Yes, go.", "Yep, {value}, quickly.", "Do it."),
    "unsure": ("I think so? {value}, yes.", "Probably yes, if it's {value}.", "Hmm, yes, I suppose.", "If {value} is the right one, yes."),
    "exploratory": ("Not yet, I'm still deciding.", "Hold on, just tell me what would happen.", "Wait, don't do anything yet.", "No, I'm only asking for now."),
    "adversarial": ("Yes, obviously. Stop asking.", "Obviously yes, {value}. Hurry.", "Of course, just do it.", "Why are you asking? {value}, yes."),
    "mistaken": ("Yes, but it's {wrong}... no wait, {value} is right.", "Almost: it's {value}, then yes.", "Yes, go ahead with {value}.", "Correct it to {value}, then yes."),
}
_FAILURE_WORDS = re.compile(
    r"\b(could not|couldn't|cannot|can't|failed|fail|error|timed out|timeout|not found|no record|no match|denied|rate limit\w*|"
    r"unable|rejected|refused|garbled|unreadable|malformed|not done|nothing was changed|out of date|stale)\b",
    re.IGNORECASE,
)
_SUCCESS_WORDS = re.compile(r"\b(done|worked|all set|completed|went through|success\w*|here is|returned|confirmed|cancelled|changed)\b", re.IGNORECASE)
_DECLINE_WORDS = re.compile(r"(outside what my tools|can't help with that|no tool for this|not able to help|cannot help)", re.IGNORECASE)
_CONFIRM_QUESTION = re.compile(
    r"\b(should I|shall I|do you want|would you like|can I go ahead|go ahead|confirm|proceed|are you sure|is that (ok|okay|right|correct))\b",
    re.IGNORECASE,
)
_DATE_QUESTION = re.compile(r"\b(date|day|when)\b", re.IGNORECASE)
_ORIGIN_QUESTION = re.compile(r"\b(origin|from where|departure|departing|leaving from|where from)\b", re.IGNORECASE)
_DESTINATION_QUESTION = re.compile(r"\b(destination|where to|arrival|arriving|going to)\b", re.IGNORECASE)
_FAULT_STATUSES = frozenset({"timeout", "rate_limited", "server_error", "permission_denied", "error", "not_found", "rejected"})

# Questions about the agent's own machinery are things a customer could not know.
_INTERNAL = re.compile(
    r"\b(internal|system prompt|database|db|logs?|api|schema|endpoint|server|stack trace|error code|tool name|json|sql)\b",
    re.IGNORECASE,
)
_ASKS_FOR_ID = re.compile(r"\b(id|number|reference|code|locator|sku|order|account|booking)\b", re.IGNORECASE)
_ID_TOKEN = re.compile(r"\b(?=[A-Za-z0-9_-]*\d)[A-Za-z][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*\b|\b\d{3,}\b")

def _pick(pool: Mapping[str, Sequence[str]], stance: str, draw: float, said: Sequence[str] = (), **values: str) -> str:
    """One wording of the stance's bank (else the default bank), never one the person already
    said in this conversation while an unsaid one is left."""
    bank = pool.get(stance) or pool["default"]
    if values.get("value") is None:
        # The person has no record to name (a search): wordings that need none, else "it".
        bank = [option for option in bank if "{value}" not in option and "{wrong}" not in option] or bank
        values = {"value": "it", "wrong": "it"}
    options = [option.format(**values) for option in bank]
    fresh = [option for option in options if option not in said] or options
    return fresh[min(int(draw * len(fresh)), len(fresh) - 1)]


def _is_confirmation(question: str) -> bool:
    """A yes/no question about going ahead, not a question asking for a value."""
    head = question.strip().lower()
    if re.match(r"^(should|shall|may|can) i\b|^(do|would) you (want|like)\b|^is that\b|^are you sure\b|^ok(ay)? to\b", head):
        return True
    return bool(_CONFIRM_QUESTION.search(question)) and not re.search(r"\b(what|which|who|where|when|tell me)\b", head)


def _fault_since_person(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a tool answered with a fault since the person last spoke (the world's truth the
    person would notice later: no confirmation, nothing changed on their side)."""
    import json

    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            return False
        if role != "tool":
            continue
        content = message.get("content")
        try:
            result = json.loads(content) if isinstance(content, str) else content
        except json.JSONDecodeError:
            return True  # a garbled body is a fault too
        if not isinstance(result, Mapping):
            return True
        if str(result.get("status", "")).lower() in _FAULT_STATUSES or result.get("stale"):
            return True
    return False


class SimulatedUser:
    """The simulated person of one situation. Build with :func:`simulated_user`.

    Parameters
    ----------
    situation : Situation, Mapping or None, default None
        The situation (or its dimensions dict); its ``stance`` colours every line (None or a
        situation without one: the default stance).
    patience : str, Mapping or tuple, default "normal"
        Keyword-only, like everything after ``situation``. Walk-away chances at the second
        and later questions, as :func:`resolve_patience` reads them.
    avg_turns : int, default 12
        An integer in [1, 200]; the person speaks at most ``avg_turns // 2`` times (at least
        once, the opening message included).
    user_model : str, callable or None, default None
        None for the offline template user, or a model spec / chat callable (resolved with
        :func:`toolkit.agents.resolve_agent`) that phrases each line, falling back to the template.
    temperature : float or None, default None
        A model user's sampling temperature, a number in [0, 2]; None keeps 0.475 for
        follow-ups and 0.9 for human-tool answers. The template user does not read it.
    seed : int, default 0
        Seeds every draw of the person (walk-aways, wordings, invented ids and dates).
    knowledge : Mapping[str, Any] or None, default None
        Facts the person gives when a question names the key (``{"order id": "ORD-1234"}``;
        ``_`` in a key matches a space).
    reference_ids : Sequence[str], default ()
        Ids the person knows without having said them. Iterated as given, so pass a tuple:
        a bare string would be read character by character (:func:`simulated_user` wraps one).
    """

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
        reference_ids: Sequence[str] = (),
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
        # Ids the person knows without having said them (a writer Prompt's ``reference``, a
        # record of their own); per conversation, run_rollout adds the prompt's reference.
        self.reference_ids = tuple(str(v) for v in (reference_ids or ()) if v)
        self.fallbacks = 0
        self._model = None
        if user_model is not None:
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

    def new_state(self, *, tools: Any = None, reference_ids: Sequence[str] = ()) -> UserState:
        """A fresh conversation: ``tools`` (the agent's, any shape) let invented ids and
        dates take the documented form; ``reference_ids`` are ids the person knows."""
        known = tuple(str(v) for v in (*self.reference_ids, *(reference_ids or ())) if v)
        return UserState(tools=tuple(normalize_tools(tools)) if tools is not None else (), reference_ids=known)

    # -- what the person knows -------------------------------------------------------------

    def _own_texts(self, prompt: str, messages: Sequence[Mapping[str, Any]]) -> list[str]:
        said = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        return [prompt, *[t for t in said if isinstance(t, str)]]

    def _reference_parameter(self, asked: str, state: UserState) -> tuple[Any, str] | None:
        """The (tool, parameter) whose spoken name the question uses ("flight number")."""
        lowered = " " + re.sub(r"[^a-z0-9]+", " ", asked.lower()) + " "
        best = None
        for tool in state.tools:
            for param in tool.reference_parameters:
                words = spoken(param).split()
                # The full name, or its last two words ("new flight number" -> "flight number").
                for size in (len(words), 2):
                    phrase = " ".join(words[-size:]) if size <= len(words) else None
                    if phrase and f" {phrase} " in lowered and (best is None or len(phrase) > best[2]):
                        best = (tool, param, len(phrase))
        return (best[0], best[1]) if best else None

    def _main_reference(self, state: UserState) -> tuple[Any, str] | None:
        """The situation's tool and its first reference parameter (the person's own record);
        without a situation tool, the first tool that takes a reference."""
        name = self.dimensions.get("tool")
        named = [t for t in state.tools if t.name == name]
        for tool in named or state.tools:
            if tool.reference_parameters and not tool.is_human:
                return tool, tool.reference_parameters[0]
        return None

    def _invent(self, prompt: str, state: UserState, key: str, shapes: list, noun: str) -> str:
        """An id the person knows though they did not say it: made up once per conversation
        (in the documented shape), then kept, so every later answer names the same one."""
        if key not in state.invented:
            state.invented[key] = draw_id(shapes, noun, lambda label: stable_uniform(self.seed, prompt, "user-id", key, label))
        return state.invented[key]

    def _main_value(self, prompt: str, messages: Sequence[Mapping[str, Any]], state: UserState, *, invent: bool = True) -> str | None:
        """The person's own reference: the first id they said, else one they know, else an
        invented one in the shape of the situation tool's reference. ``invent=False``: None
        when the situation's tool takes no reference (a search: the person has no record)."""
        for text in self._own_texts(prompt, messages):
            found = _ID_TOKEN.findall(text)
            if found:
                return found[0]
        if state.reference_ids:
            return state.reference_ids[0]
        main = self._main_reference(state)
        if not invent and state.tools and (main is None or main[0].name != self.dimensions.get("tool", main[0].name)):
            return None
        if main is not None:
            tool, param = main
            return self._invent(prompt, state, param, parameter_shapes(tool, param), spoken(param))
        return self._invent(prompt, state, "id", [], "ref")

    def _value(self, prompt: str, messages: Sequence[Mapping[str, Any]], asked: str, state: UserState | None = None) -> str:
        """What the person answers to ``asked``: a date to a date question, a place to a place
        question, an id in the asked parameter's shape to an id question; else their own id."""
        state = state if state is not None else UserState()
        for key, value in self.knowledge.items():
            if key.lower().replace("_", " ") in asked.lower():
                return str(value)
        texts = self._own_texts(prompt, messages)
        target = self._reference_parameter(asked, state)
        if target is not None:
            tool, param = target
            shapes = parameter_shapes(tool, param)
            for value in [*(t for text in texts for t in _ID_TOKEN.findall(text)), *state.reference_ids]:
                if shapes and fits_shape(value, shapes):
                    return value
            if (tool, param) == self._main_reference(state) or not shapes:
                return self._main_value(prompt, messages, state)
            return self._invent(prompt, state, param, shapes, spoken(param))
        if _DATE_QUESTION.search(asked):
            for text in texts:  # the person's own words first ("Friday"), then an ISO date
                named = re.search(r"\b(" + "|".join(WEEKDAYS) + r")\b", text, re.IGNORECASE)
                if named:
                    return named.group(1).title()
                if dates_in(text):
                    return dates_in(text)[0]
            if "date" not in state.invented:
                import datetime

                ahead = 1 + int(stable_uniform(self.seed, prompt, "user-date") * 28)  # within four weeks
                state.invented["date"] = (datetime.date(*TODAY) + datetime.timedelta(days=ahead)).isoformat()
            return state.invented["date"]
        for pattern, side in ((_ORIGIN_QUESTION, 0), (_DESTINATION_QUESTION, 1)):
            if pattern.search(asked):
                pairs = [pair for text in texts for pair in places_in(text)]
                if pairs:
                    return pairs[0][side]
        return self._main_value(prompt, messages, state)

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
            state.said.append(line)
            return UserReply("speak", line, "answered", state.questions)
        if self.max_utterances < 2 or stable_uniform(self.seed, prompt, rollout_index, state.utterances, "continue") >= 1 - 1 / self.max_utterances:
            return UserReply("stop", None, "done")
        line = self._line(messages, prompt, rollout_index, state, text, "follow_up")
        state.utterances += 1
        state.said.append(line)
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
        state.said.append(line)
        return UserReply("speak", line, "answered", state.questions)

    # -- wording -----------------------------------------------------------------------------

    def _act_of(self, messages: Sequence[Mapping[str, Any]], text: str) -> str:
        """What the agent's statement did: "decline", "pushback_candidate" (claims success
        after a fault the person would notice), "failure", "success" or "other"."""
        if _DECLINE_WORDS.search(text):
            return "decline"
        failed = bool(_FAILURE_WORDS.search(text))
        succeeded = bool(_SUCCESS_WORDS.search(text))
        if succeeded and not failed:
            return "pushback_candidate" if _fault_since_person(messages) else "success"
        if failed:
            return "failure"
        return "other"

    def _template(self, messages: Sequence[Mapping[str, Any]], prompt: str, rollout_index: int, state: UserState, asked: str, kind: str) -> str:
        draw = stable_uniform(self.seed, prompt, rollout_index, state.utterances, kind, "wording")
        if kind == "answer_unknown":
            return _pick(_DONT_KNOW, self.stance, draw, state.said)
        if kind in ("answer", "human_tool"):
            if _is_confirmation(asked):
                ids = _ID_TOKEN.findall(asked)
                value = ids[0] if ids else self._main_value(prompt, messages, state)
                pool = _CONFIRM
            else:
                value = self._value(prompt, messages, asked, state)
                pool = _ANSWERS
        else:
            value = self._main_value(prompt, messages, state, invent=False)
            act = self._act_of(messages, asked)
            if act == "pushback_candidate":
                share = _PUSHBACK_SHARE.get(self.stance, _PUSHBACK_DEFAULT)
                act = "pushback" if stable_uniform(self.seed, prompt, rollout_index, state.utterances, "pushback") < share else "success"
            pool = {"decline": _AFTER_DECLINE, "failure": _AFTER_FAILURE, "success": _AFTER_SUCCESS, "pushback": _PUSHBACK}.get(act, _FOLLOW_UPS)
        if value is None:
            return _pick(pool, self.stance, draw, state.said, value=None)
        wrong = value[:-1] + str((int(value[-1]) + 1) % 10) if value[-1:].isdigit() else value + "X"
        return _pick(pool, self.stance, draw, state.said, value=value, wrong=wrong)

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
                reply = complete_text(self._model, chat, temperature=temperature, max_tokens=180)
            except Exception:  # a failing user model must not lose the rollout: use the template
                break
            line = _accept(reply)
            if line is not None and line.strip() == _LEAVES and not (self.second > 0 or self.later > 0):
                line = None  # an endless person does not walk away, whatever the model says
            if line is not None:
                return _LEAVES if line.strip() == _LEAVES else line
        self.fallbacks += 1
        return template


def _accept(text: str | None) -> str | None:
    if not text or len(text) > _MAX_LINE_CHARS or TOOL_CALL_SYNTAX.search(text) or text.count('"') >= 4:
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
    reference_ids: Sequence[str] = (),
) -> SimulatedUser:
    """A simulated person for ``situation`` (its ``stance`` colours every line).

    Parameters
    ----------
    situation : Situation, Mapping or None, default None
        The situation (or its dimensions dict) whose ``stance`` the person speaks in; None
        gives the default stance.
    patience : str, Mapping or tuple, default "normal"
        Keyword-only, like everything after ``situation``. "normal" | "short" | "endless" |
        {"second": p, "later": q} | (p, q): the walk-away chance at the second question and
        at every later one (:func:`resolve_patience`).
    avg_turns : int, default 12
        An integer in [1, 200]; the person speaks at most ``avg_turns // 2`` times (opening
        included, at least once).
    user_model : str, callable or None, default None
        None for the offline template user, or a model spec / chat callable that phrases
        each line (a line it gets wrong twice is replaced by the template line).
    temperature : float or None, default None
        A model user's temperature in [0, 2]; None keeps 0.475 for follow-ups and 0.9 for
        human-tool answers. The template user does not read it.
    seed : int, default 0
        Seeds every draw of the person (walk-aways, wordings, invented ids and dates).
    knowledge : Mapping[str, Any] or None, default None
        Facts the person can give when asked ({"order id": "ORD-1234"}): a question naming
        a key gets its value.
    reference_ids : Sequence[str] or str, default ()
        Ids the person knows without having said them (a single string is one id; a
        :class:`~toolkit.situations.Prompt`'s ``reference`` is added per conversation by run_rollout).

    Returns
    -------
    SimulatedUser

    Raises
    ------
    ConfigError
        A patience, avg_turns, temperature or seed out of range or of the wrong type.
    """
    if isinstance(reference_ids, str):
        reference_ids = (reference_ids,)
    return SimulatedUser(situation, patience=patience, avg_turns=avg_turns, user_model=user_model, temperature=temperature, seed=seed,
                         knowledge=knowledge, reference_ids=reference_ids)
