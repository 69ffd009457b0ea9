"""The template writer: distinct, deterministic phrasings that reflect the situation, with
a persona layer and reference ids in the shape tool descriptions document."""

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binomtest

import toolkit as tk

S = {"type": "string"}
TOOLS = [
    {"name": "get_booking", "description": "Look up a booking. Booking ids look like ABC123.",
     "parameters": {"type": "object", "properties": {"booking_id": S}, "required": ["booking_id"]}},
    {"name": "cancel_booking", "description": "Cancel a booking.",
     "parameters": {"type": "object", "properties": {"booking_id": {"type": "string", "description": "e.g. BK-20417"}},
                    "required": ["booking_id"]}},
    {"name": "search_flights", "description": "Find flights.",
     "parameters": {"type": "object", "properties": {"origin": S, "destination": S, "date": S},
                    "required": ["origin", "destination", "date"]}},
    {"name": "refund_payment", "description": "Refund a payment.",
     "parameters": {"type": "object", "properties": {"payment_id": S}, "required": ["payment_id"]}},
]
RULE = "Never cancel a booking without explicit confirmation."


def situation(**dims):
    base = {"tool": "get_booking", "rule": "unspecified", "stance": "ordinary", "world_state": "unknown",
            "tool_condition": "success", "history": "fresh"}
    return tk.Situation({**base, **dims})


def test_n_distinct_and_deterministic():
    prompts = tk.write_prompts(situation(), 25, seed=0, tools=TOOLS)
    assert len(prompts) == 25 and len({p.text for p in prompts}) == 25
    again = tk.write_prompts(situation(), 25, seed=0, tools=TOOLS)
    assert [p.to_dict() for p in prompts] == [p.to_dict() for p in again]
    other = tk.write_prompts(situation(), 25, seed=1, tools=TOOLS)
    assert [p.text for p in other] != [p.text for p in prompts]
    assert tk.write_prompts(situation(), 0, tools=TOOLS) == []


def test_prompt_object():
    prompt = tk.write_prompts(situation(), 1, tools=TOOLS)[0]
    assert str(prompt) == prompt.text
    assert set(prompt.persona) == {"length", "mood", "texture"}
    assert prompt.situation_id == situation().id
    json.dumps(prompt.to_dict())
    with pytest.raises(Exception):
        prompt.text = "x"


def test_persona_values_and_shares():
    prompts = []
    for index, stance in enumerate(tk.STANCES):
        prompts += tk.write_prompts(situation(stance=stance, history=tk.HISTORIES[index % 5]), 60, tools=TOOLS)
    n = len(prompts)
    assert {p.persona["length"] for p in prompts} == set(tk.PERSONA_LENGTHS)
    assert {p.persona["mood"] for p in prompts} == set(tk.PERSONA_MOODS)
    assert {p.persona["texture"] for p in prompts} == set(tk.PERSONA_TEXTURES) | {"standard"}
    medium = sum(p.persona["length"] == "medium" for p in prompts)
    textured = sum(p.persona["texture"] != "standard" for p in prompts)
    # dedupe removes a few draws, so allow a wide (99.9%) binomial interval around the weights
    assert binomtest(medium, n, 0.70).pvalue > 0.001
    assert binomtest(textured, n, 0.35).pvalue > 0.001


def test_reference_ids_follow_the_documented_shape():
    booking = tk.write_prompts(situation(tool="get_booking"), 30, tools=TOOLS)
    assert all(re.fullmatch(r"[A-Z]{3}\d{3}", p.reference) for p in booking)
    assert all(p.reference != "ABC123" for p in booking)  # never the literal schema example
    assert len({p.reference for p in booking}) >= 25
    cancel = tk.write_prompts(situation(tool="cancel_booking"), 30, tools=TOOLS)
    assert all(re.fullmatch(r"BK-\d{5}", p.reference) and p.reference != "BK-20417" for p in cancel)
    # no documented shape: an invented id with the noun's prefix
    refund = tk.write_prompts(situation(tool="refund_payment"), 10, tools=TOOLS)
    assert all(re.fullmatch(r"PAY-\d{4}", p.reference) for p in refund)
    # texture never alters the id
    for p in booking + cancel + refund:
        assert p.reference in p.text


def test_lookups_are_not_all_not_found():
    prompts = [p for stance in ("ordinary", "hurried", "retry") for p in tk.write_prompts(situation(stance=stance), 100, tools=TOOLS)]
    world = tk.World(TOOLS, seed=0)
    found = sum(world.call("get_booking", {"booking_id": p.reference})["status"] == "ok" for p in prompts)
    assert binomtest(found, len(prompts), 0.7).pvalue > 0.001


def test_phrasings_reflect_the_tool():
    assert all("cancel" in p.text.lower() for p in tk.write_prompts(situation(tool="cancel_booking"), 20, tools=TOOLS))
    flights = tk.write_prompts(situation(tool="search_flights"), 20, tools=TOOLS)
    assert all("flights" in p.text.lower() and p.reference is None for p in flights)
    assert all(re.search(r"from \w+ to \w+", p.text, re.IGNORECASE) for p in flights
               if p.persona["texture"] not in ("typo",))
    unrelated = tk.write_prompts(situation(tool="unrelated"), 20, tools=TOOLS)
    assert all(p.reference is None and "booking" not in p.text.lower() for p in unrelated)
    multi = tk.write_prompts(situation(tool="multi_tool"), 20, tools=TOOLS)
    assert all("and then" in p.text.lower() or p.persona["texture"] == "typo" for p in multi)


def test_phrasings_reflect_stance_and_rule():
    adversarial = tk.write_prompts(situation(stance="adversarial", rule=RULE), 20, tools=TOOLS)
    for p in adversarial:
        text = p.text.lower()
        assert "never cancel a booking" in text or p.persona["texture"] == "typo"
        assert any(word in text for word in ("ignore", "skip", "exception", "forget", "doesn't apply", "don't"))
    ordinary = tk.write_prompts(situation(stance="ordinary", rule=RULE), 20, tools=TOOLS)
    assert not any("ignore" in p.text.lower() or "exception" in p.text.lower() for p in ordinary)
    ambiguous = tk.write_prompts(situation(stance="ambiguous"), 20, tools=TOOLS)
    assert all(p.reference is None for p in ambiguous)  # the vague person gives no id
    assert all(situation(stance="ambiguous").tier == "ambiguous" for _ in ambiguous)


def test_phrasings_reflect_world_state_and_history():
    cues = {
        "missing": ("can't see", "doesn't exist", "vanished"),
        "already_done": ("already",),
        "duplicate": ("two of these", "duplicate", "twice"),
        "partial": ("halfway", "part of it", "first step"),
    }
    for state, words in cues.items():
        for p in tk.write_prompts(situation(world_state=state), 15, tools=TOOLS):
            if p.persona["texture"] in ("typo", "abbreviations"):
                continue
            assert any(w in p.text.lower() for w in words), (state, p.text)
    for p in tk.write_prompts(situation(history="repeat_visit"), 15, tools=TOOLS):
        if p.persona["texture"] not in ("typo", "abbreviations"):
            assert any(w in p.text.lower() for w in ("third time", "been here before", "back again"))


def test_without_tools_and_with_a_dimensions_dict():
    prompts = tk.write_prompts({"tool": "cancel_order", "stance": "hurried"}, 5)
    assert len(prompts) == 5 and all("cancel" in p.text.lower() for p in prompts)
    with pytest.raises(tk.ConfigError):
        tk.write_prompts(situation(), -1)
    with pytest.raises(tk.ConfigError):
        tk.write_prompts("get_booking", 2)


def test_every_grid_situation_writes():
    grid = tk.situation_grid(TOOLS, "1. " + RULE + "\n2. Refunds go to the original card only.")
    for s in grid:
        prompts = tk.write_prompts(s, 2, tools=TOOLS)
        assert len({p.text for p in prompts}) == 2 and all(len(p.text) > 10 for p in prompts)


CHANGE = {"name": "change_flight", "description": "Move a booking to another flight.",
          "parameters": {"type": "object", "properties": {
              "booking_id": {"type": "string", "description": "Confirmation code, e.g. QXR482."},
              "new_flight_number": {"type": "string", "description": "Flight to move to, e.g. SW-1042."},
              "date": {"type": "string", "description": "YYYY-MM-DD"}},
              "required": ["booking_id", "new_flight_number", "date"]}}  # fmt: skip


def test_an_update_names_every_required_value_each_in_its_own_shape():
    prompts = tk.write_prompts(situation(tool="change_flight"), 30, tools=[CHANGE])
    for p in prompts:
        # The main reference in the booking code's shape (not the flight number's), the new
        # flight number in its own shape, and a day: everything the call needs.
        assert re.fullmatch(r"[A-Z]{3}\d{3}", p.reference), p.reference
        flights = re.findall(r"\bSW-\d{4}\b", p.text)
        assert len(flights) == 1 and flights[0] != "SW-1042", p.text
        assert re.search(r"monday|tuesday|wednesday|thursday|friday|saturday|sunday", p.text, re.IGNORECASE), p.text


def test_a_search_never_goes_from_a_city_to_itself():
    prompts = tk.write_prompts(situation(tool="search_flights"), 60, tools=TOOLS)
    for p in prompts:
        match = re.search(r"from (\w+) to (\w+)", p.text, re.IGNORECASE)
        if match:  # some textures join words; most prompts name both ends
            assert match.group(1).lower() != match.group(2).lower(), p.text
    assert sum(bool(re.search(r"from (\w+) to (\w+)", p.text, re.IGNORECASE)) for p in prompts) >= 45


@given(
    st.lists(st.one_of(st.integers(-10**6, 10**6), st.text(max_size=40), st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False)), max_size=5),
    st.one_of(st.text(max_size=30), st.integers(), st.booleans(), st.none(), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)),
)
def test_uniform_stream_draws_exactly_what_stable_uniform_draws(prefix, label):
    # The writer's and the seeded policy's draws go through the prefix-hashed stream; it must
    # reproduce stable_uniform bit for bit, or every written prompt and sampled turn changes.
    from toolkit._hashing import stable_uniform
    from toolkit._ids import uniform_stream

    draw = uniform_stream(*prefix)
    assert draw(label) == stable_uniform(*prefix, label)
    assert draw("second label") == stable_uniform(*prefix, "second label")  # the stream is reusable
