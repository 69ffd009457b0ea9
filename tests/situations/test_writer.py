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
    return tk.situations.Situation({**base, **dims})


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
    for index, stance in enumerate(tk.situations.STANCES):
        prompts += tk.write_prompts(situation(stance=stance, history=tk.situations.HISTORIES[index % 5]), 60, tools=TOOLS)
    n = len(prompts)
    assert {p.persona["length"] for p in prompts} == set(tk.situations.PERSONA_LENGTHS)
    assert {p.persona["mood"] for p in prompts} == set(tk.situations.PERSONA_MOODS)
    assert {p.persona["texture"] for p in prompts} == set(tk.situations.PERSONA_TEXTURES) | {"standard"}
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
    from toolkit._util.hashing import stable_uniform
    from toolkit.world._ids import uniform_stream

    draw = uniform_stream(*prefix)
    assert draw(label) == stable_uniform(*prefix, label)
    assert draw("second label") == stable_uniform(*prefix, "second label")  # the stream is reusable


# ---------------------------------------------------------------------------------------
# simulate(simulator="<spec>"): a model writer, against the local protocol server
# ---------------------------------------------------------------------------------------


def _chat_server():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _chat_server import ChatServer

    return ChatServer()


def test_model_writer_phrases_the_cards_and_rows_say_so():
    with _chat_server() as server:
        spec = f"vllm:writer@{server.url}"
        data = tk.simulate(budget=24, simulator=spec, progress=False, seed=5, advanced={"writer_temperature": 0.7})
        cards = [body for path, body in server.requests if path.endswith("/chat/completions")]
    assert len(data) == 24
    # every prompt the writer phrased came from the model (the open-ended arm's fixed probe
    # families and failure mutations of earlier prompts do not go through the writer)
    arm = lambda row: row.get("arm") or (row.get("lineage") or {}).get("arm")  # noqa: E731
    written_rows = [r for r in data.rows if arm(r) not in ("open_ended", "failure_mutation")]
    assert len(written_rows) >= 16
    assert all(r["prompt"].startswith("Hi there, question") for r in written_rows)
    assert {r["writer_model"] for r in data.rows} == {spec}
    written = data.report()["writer"]
    assert written["model"] == spec and written["calls"] == len(cards) >= 8
    assert written["model_share"] == 1.0 and written["phrasings_from_template"] == 0
    # the card carries the situation and asks for n + writer_typical_completions - 1 = 3
    # phrasings; the pinned temperature and the reference's one-card reply budget are sent
    first = cards[0]
    assert first["temperature"] == pytest.approx(0.7) and first["max_tokens"] == 258
    card = first["messages"][-1]["content"]
    assert "Write 3 different first messages" in card and "stance:" in card and "An example of the facts" in card
    assert "simulator" not in data.report()["offline_defaults"]
    assert not any("writer model" in w for w in data.warnings)


def test_model_writer_shortfalls_are_filled_by_the_template_and_counted():
    with _chat_server() as server:
        data = tk.simulate(budget=12, simulator=f"vllm:half-writer@{server.url}", progress=False, seed=2)
    written = data.report()["writer"]
    # per card: 1 good phrasing of the 3 asked, 1 refused as tool-call syntax, 2 from the template
    assert written["refused_by_reason"] == {"call_syntax": written["calls"]}
    assert written["fallbacks_by_reason"] == {"too_few": 2 * written["calls"]}
    assert written["model_share"] == pytest.approx(1 / 3, abs=1e-3)
    assert any("phrased only 33%" in w and "too_few" in w for w in data.warnings)
    assert len(data) == 12


def test_model_writer_that_fails_falls_back_without_losing_the_run():
    with _chat_server() as server:
        writer = tk.model_agent(f"vllm:always-429@{server.url}", max_retries=0)  # the writer's own backend settings
        data = tk.simulate(budget=8, simulator=writer, progress=False, advanced={"writer_temperature": 0.5})
    written = data.report()["writer"]
    assert len(data) == 8 and written["model_share"] == 0.0
    assert sum(written["fallbacks_by_reason"].values()) == written["phrasings_from_template"] > 0
    # after three failed calls in a row the model is not asked again in this run (cards are
    # written writer_concurrency at a time, so at most that many more were already out)
    assert 3 <= written["calls"] <= 3 + data.report()["knobs"]["writer_concurrency"]
    assert "3 calls in a row failed" in written["gave_up"]
    assert written["fallbacks_by_reason"].get("writer_gave_up", 0) > 0
    assert any("phrased only 0%" in w for w in data.warnings)


def test_simulator_of_the_wrong_type_is_refused_with_the_choices():
    with pytest.raises(tk.ConfigError, match="simulator must be False .* model spec string, tk.model_agent"):
        tk.simulate(budget=2, simulator=3, progress=False)


def test_model_writer_cards_are_written_concurrently():
    with _chat_server() as server:
        server.slow_seconds = 0.3
        data = tk.simulate(budget=16, simulator=f"vllm:slow-writer@{server.url}", progress=False, advanced={"writer_concurrency": 4})
        calls = data.report()["writer"]["calls"]
        # overlapped, and never more than writer_concurrency at once (a round asks each tier class of
        # each arm for its own cards, so a 16-row run's batches are 2-4 cards)
        assert 2 <= server.max_in_flight <= 4
    assert len(data) == 16 and data.report()["writer"]["model_share"] == 1.0
    # the summed call time counts every card's own 0.3 s, overlapped or not
    assert data.report()["writer"]["seconds"] >= 0.9 * calls * 0.3
