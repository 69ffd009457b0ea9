"""The seeded policy: known probabilities, exact scoring, exact KL, planted mistakes."""

import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import toolkit as tk

TOOLS = [
    {"type": "function", "function": {"name": "get_order", "description": "Look up an order by id",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "refund_payment", "description": "Refund a payment",
     "parameters": {"type": "object", "properties": {"payment_id": {"type": "string"}}, "required": ["payment_id"]}}},
]  # fmt: skip
PROMPT = "Please check my order ORD-1234 and P-77"


def _world():
    return tk.World(TOOLS, seed=0)


def _after_fault(status="timeout"):
    return [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "ORD-1234"}'}}]},
        {"role": "tool", "tool_call_id": "c0", "content": '{"status": "%s", "error": "request timed out"}' % status},
    ]


def test_act_turn_probabilities_match_the_stated_weights():
    # Independent arithmetic from the documented weights: action call 8 vs answer 0.5 (a tool
    # matched), tool matched 8 vs other 1, value newest-first 6 / 2 (two ids), at T = 1.
    agent = tk.seeded_agent(TOOLS)
    outcomes = agent.distribution([{"role": "user", "content": PROMPT}])
    by_call = {o.message["tool_calls"][0]["function"]["arguments"] + o.message["tool_calls"][0]["function"]["name"]: o.probability
               for o in outcomes if o.message.get("tool_calls")}
    p_call = 8 / 8.5
    assert by_call['{"order_id": "ORD-1234"}get_order'] == pytest.approx(p_call * 8 / 9 * 6 / 8)
    assert by_call['{"order_id": "P-77"}get_order'] == pytest.approx(p_call * 8 / 9 * 2 / 8)
    assert by_call['{"payment_id": "ORD-1234"}refund_payment'] == pytest.approx(p_call * 1 / 9 * 6 / 8)
    answers = sorted(o.probability for o in outcomes if not o.message.get("tool_calls"))
    assert answers == pytest.approx(sorted(0.5 / 8.5 * w / 6 for w in (3, 2, 1)))
    assert math.fsum(o.probability for o in outcomes) == pytest.approx(1.0, abs=1e-12)


@given(st.floats(min_value=0.2, max_value=5.0))
def test_temperature_reshapes_every_choice_as_a_power_of_the_weights(temperature):
    agent = tk.seeded_agent(TOOLS, temperature=temperature)
    outcomes = agent.distribution([{"role": "user", "content": PROMPT}])
    probability = {o.text or o.message["tool_calls"][0]["function"]["name"] + o.message["tool_calls"][0]["function"]["arguments"]: o.probability for o in outcomes}

    def softmax(weights):
        powered = np.array(weights, dtype=float) ** (1 / temperature)
        return powered / powered.sum()

    p_call = softmax([8, 0.5])[0]
    p_tool = softmax([8, 1])[0]
    p_value = softmax([6, 2])[0]
    assert probability['get_order{"order_id": "ORD-1234"}'] == pytest.approx(p_call * p_tool * p_value, rel=1e-9)
    assert math.fsum(probability.values()) == pytest.approx(1.0)


def test_greedy_temperature_is_deterministic():
    agent = tk.seeded_agent(TOOLS, temperature=0, rate=0.2)
    outcomes = agent.distribution([{"role": "user", "content": PROMPT}])
    assert len(outcomes) == 1 and outcomes[0].probability == 1.0


def test_sampled_outputs_follow_the_distribution_chi_square():
    agent = tk.seeded_agent(TOOLS)
    context = _after_fault()
    outcomes = agent.distribution(context)
    n = 3000
    counts = Counter()
    for index in range(n):
        reply = _sample(agent, context, index)
        counts[tk.agents.seeded.SeededAgent._key(reply.get("content"), [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in reply.get("tool_calls", [])])] += 1
    keys = [tk.agents.seeded.SeededAgent._key(o.message.get("content"), [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in o.message.get("tool_calls", [])]) for o in outcomes]
    expected = np.array([o.probability for o in outcomes]) * n
    observed = np.array([counts[k] for k in keys])
    assert observed.sum() == n  # nothing sampled outside the enumerated support
    # Pool the rare outcomes so every expected count is >= 5 (chi-square validity).
    order = np.argsort(expected)
    small = order[np.cumsum(expected[order]) < 25]
    big = np.setdiff1d(np.arange(len(expected)), small)
    exp, obs = expected[big], observed[big]
    if len(small):
        exp, obs = np.append(exp, expected[small].sum()), np.append(obs, observed[small].sum())
    assert stats.chisquare(obs, exp).pvalue > 1e-4


def _sample(agent, messages, index):
    from toolkit.agents._protocol import TurnContext, _turn_context

    token = _turn_context.set(TurnContext(prompt=PROMPT, rollout_index=index))
    try:
        return agent(messages, TOOLS)
    finally:
        _turn_context.reset(token)


def test_recorded_logprob_equals_score_and_tokens_sum_to_it():
    agent = tk.seeded_agent(TOOLS)
    for index in range(40):
        row = tk.run_rollout(agent, PROMPT, rollout_index=index, logprobs="tokens", user=False, timeout=None)
        turns = [s for s in row["steps"] if "logprob" in s]
        assert agent.score(row) == pytest.approx([s["logprob"] for s in turns])
        assert row["logprob"] == pytest.approx(math.fsum(s["logprob"] for s in turns))
        for step in turns:
            assert len(step["tokens"]) == step["n_tokens"]
            assert math.fsum(t["logprob"] for t in step["tokens"]) == pytest.approx(step["logprob"])
        assert row["n_tokens"] == sum(s["n_tokens"] for s in turns)


def test_score_gives_minus_infinity_for_an_output_the_policy_cannot_make():
    agent = tk.seeded_agent(TOOLS)
    row = {"prompt": PROMPT, "steps": [{"text": "Something no template says."}], "final_text": "x"}
    assert agent.score(row) == [float("-inf")]


def test_exact_kl_one_turn_matches_scipy_entropy():
    a = tk.seeded_agent(TOOLS, rate=0.35)
    b = tk.seeded_agent(TOOLS, rate=0.1, temperature=1.7)
    context = _after_fault()
    pa = {o.text or str(o.message): o.probability for o in a.distribution(context)}
    pb = {o.text or str(o.message): o.probability for o in b.distribution(context)}
    keys = sorted(pa)
    reference = stats.entropy([pa[k] for k in keys], [pb[k] for k in keys])
    result = tk.exact_kl(a, b, context)
    assert result.kl == pytest.approx(reference, rel=1e-10)
    expected_tokens = sum(o.probability * o.n_tokens for o in a.distribution(context))
    assert result.kl_per_token == pytest.approx(reference / expected_tokens)
    assert tk.exact_kl(a, a, context).kl == pytest.approx(0.0, abs=1e-12)


def test_kl_is_infinite_with_a_note_when_support_differs():
    a = tk.seeded_agent(TOOLS, rate=0.3)
    b = tk.seeded_agent(TOOLS, rate=0.0)
    result = tk.exact_kl(a, b, _after_fault())
    assert result.kl is None and "infinite" in result.note


def test_sampled_kl_estimator_converges_to_exact_rollout_kl():
    a = tk.seeded_agent(TOOLS, rate=0.35)
    b = tk.seeded_agent(TOOLS, rate=0.15, temperature=1.5)
    exact = tk.exact_kl(a, b, prompt=PROMPT, world_factory=_world)
    rows = [tk.run_rollout(a, PROMPT, world=_world(), rollout_index=i, user=False, logprobs=True, timeout=None) for i in range(1200)]
    diffs = np.array([r["logprob"] - b.score_total(r) for r in rows])
    standard_error = diffs.std(ddof=1) / math.sqrt(len(diffs))
    assert abs(diffs.mean() - exact.kl) < 4 * standard_error
    per_token = diffs.sum() / sum(r["n_tokens"] for r in rows)
    assert per_token == pytest.approx(exact.kl_per_token, rel=0.35)
    assert exact.expected_tokens == pytest.approx(np.mean([r["n_tokens"] for r in rows]), rel=0.05)


def test_later_reports_keep_the_first_reports_conduct():
    agent = tk.seeded_agent(TOOLS, rate=0.5)
    first = _after_fault("timeout")
    for outcome in agent.distribution(first):
        if outcome.message.get("tool_calls"):
            continue  # a retry, not a report
        later = first + [{"role": "assistant", "content": outcome.text}, {"role": "user", "content": "Check ORD-1234 again"},
                         {"role": "assistant", "content": None, "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "get_order", "arguments": '{"order_id": "ORD-1234"}'}}]},
                         {"role": "tool", "tool_call_id": "c2", "content": '{"status": "permission_denied"}'}]
        # The wording conduct is kept; the fault reaction (ignore_fault) is drawn afresh per fault.
        def conduct(seeded):
            return tuple(kind for kind in seeded if kind != "ignore_fault")

        kinds = {conduct(o.seeded) for o in agent.distribution(later) if not o.message.get("tool_calls")}
        assert kinds == {conduct(outcome.seeded)}


def test_mistake_rate_per_rollout_is_binomial_at_rate():
    # Two independent draws on the first report after a fault: the wording conduct at `rate`,
    # and the fault reaction at FAULT_MISTAKE_RATES[mode] (0.2 for permission_denied).
    agent = tk.seeded_agent(TOOLS, rate=0.35)
    n = 800
    planted = ignored = 0
    for index in range(n):
        reply = _sample(agent, _after_fault("permission_denied"), index)
        planted += bool(set(reply["seeded"]) - {"ignore_fault"})
        ignored += "ignore_fault" in reply["seeded"]
    assert stats.binomtest(planted, n, 0.35).pvalue > 1e-3
    assert stats.binomtest(ignored, n, tk.agents.seeded.FAULT_MISTAKE_RATES["permission_denied"]).pvalue > 1e-3


def test_ignore_fault_only_after_a_fault_and_leak_only_with_privileged():
    agent = tk.seeded_agent(TOOLS, rate=1.0)
    success = _after_fault("ok")
    kinds_success = {s for o in agent.distribution(success) for s in o.seeded}
    assert "ignore_fault" not in kinds_success and "leak" not in kinds_success
    kinds_fault = {s for o in agent.distribution(_after_fault()) for s in o.seeded}
    assert "ignore_fault" in kinds_fault
    with_reference = agent.distribution(success, privileged={"reference": "the order shipped"})
    leaks = [o for o in with_reference if "leak" in o.seeded]
    assert leaks and all("the order shipped" in o.text for o in leaks)


def test_behaviors_filter_and_unknown_behavior_did_you_mean():
    agent = tk.seeded_agent(TOOLS, rate=1.0, behaviors=["apology"])
    assert {s for o in agent.distribution(_after_fault()) for s in o.seeded} == {"apology"}
    with pytest.raises(tk.ConfigError, match="sycophancy"):
        tk.seeded_agent(TOOLS, behaviors=["sycophansy"])
    with pytest.raises(tk.ConfigError, match="rate"):
        tk.seeded_agent(TOOLS, rate=1.5)


def test_planted_mistakes_reach_the_row_seeded_list():
    agent = tk.seeded_agent(TOOLS, rate=1.0, behaviors=["boilerplate"])
    row = tk.run_rollout(agent, PROMPT, user=False, timeout=None)
    assert row["seeded"] == ["boilerplate"]
    assert "Let me know if there is anything else" in row["final_text"]
    honest = tk.run_rollout(tk.seeded_agent(TOOLS, rate=0.0), PROMPT, user=False, timeout=None)
    assert honest["seeded"] == []


def test_a_string_call_names_the_way_to_run_a_whole_exchange():
    # The seeded policy is a chat agent; a whole exchange from one message is run_rollout's
    # job (agents sit below the rollout loop, so the policy does not run one itself).
    agent = tk.seeded_agent(TOOLS, seed=3)
    with pytest.raises(TypeError, match="run_rollout"):
        agent("Where is my order ORD-1234?")
    row = tk.run_rollout(agent, "Where is my order ORD-1234?", tools=TOOLS, world=tk.World(TOOLS, seed=3), user=False, seed=3)
    assert row["final_text"] and row["steps"][-1]["text"] == row["final_text"]
    again = tk.run_rollout(agent, "Where is my order ORD-1234?", tools=TOOLS, world=tk.World(TOOLS, seed=3), user=False, seed=3)
    assert again["steps"] == row["steps"]  # deterministic per seed


def test_asks_for_an_id_when_none_is_given_and_uses_the_answer():
    agent = tk.seeded_agent(TOOLS)
    outcomes = agent.distribution([{"role": "user", "content": "Please check my order"}])
    asks = [o for o in outcomes if o.text.endswith("?")]
    assert asks and math.fsum(o.probability for o in asks) > 0.3
    answered = [{"role": "user", "content": "Please check my order"}, {"role": "assistant", "content": asks[0].text},
                {"role": "user", "content": "It is ORD-5555."}]
    calls = [o for o in agent.distribution(answered) if o.message.get("tool_calls")]
    assert all("ORD-5555" in o.message["tool_calls"][0]["function"]["arguments"] for o in calls)


HUMAN = {"name": "ask_customer", "description": "Ask the customer a question", "kind": "human",
         "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}  # fmt: skip


def test_asks_through_a_human_tool_and_scores_that_rollout_exactly():
    agent = tk.seeded_agent(TOOLS + [HUMAN], rate=0.0)
    asks = [o for o in agent.distribution([{"role": "user", "content": "Please check my order"}])
            if o.message.get("tool_calls") and o.message["tool_calls"][0]["function"]["name"] == "ask_customer"]
    assert asks and all(o.probability > 0 for o in asks)
    for index in range(30):
        row = tk.run_rollout(agent, "Please check my order", rollout_index=index, patience="endless", avg_turns=6, logprobs=True)
        if row["steps"][0]["tool"] != "ask_customer":
            continue
        assert row["steps"][0]["result"]["status"] == "answered"
        assert row["steps"][1].get("tool") in ("get_order", "refund_payment", None) or "text" in row["steps"][1]
        assert agent.score_total(row) == pytest.approx(row["logprob"])
        break
    else:
        pytest.fail("no rollout asked through the human tool")


@given(
    prompt=st.sampled_from(["Please check my order ORD-1234", "refund P-77 now", "hello there", "order 12345 and 67890 and X9Y"]),
    rate=st.floats(min_value=0.0, max_value=1.0),
    temperature=st.floats(min_value=0.3, max_value=3.0),
    status=st.sampled_from(["ok", "timeout", "not_found", "rate_limited", "permission_denied"]),
)
def test_distribution_is_normalised_and_scores_agree(prompt, rate, temperature, status):
    agent = tk.seeded_agent(TOOLS, rate=rate, temperature=temperature)
    for context in ([{"role": "user", "content": prompt}], _after_fault(status)):
        outcomes = agent.distribution(context, privileged={"reference": "r"})
        assert math.fsum(o.probability for o in outcomes) == pytest.approx(1.0, abs=1e-9)
        for outcome in outcomes[:5]:
            scored = agent.score(context + [outcome.message], privileged={"reference": "r"})[-1]
            assert scored == pytest.approx(outcome.logprob)


# -------------------------------------------------------------------- schema-shaped arguments

AIRLINE = [
    {"type": "function", "function": {"name": "change_flight", "description": "Move a booking to another flight.",
     "parameters": {"type": "object", "properties": {
         "booking_id": {"type": "string", "description": "Confirmation code, e.g. QXR482."},
         "new_flight_number": {"type": "string", "description": "Flight to move to, e.g. SW-1042."},
         "date": {"type": "string", "description": "Date of the new flight, YYYY-MM-DD."}},
         "required": ["booking_id", "new_flight_number", "date"]}}},
    {"type": "function", "function": {"name": "cancel_booking", "description": "Cancel a booking.",
     "parameters": {"type": "object", "properties": {
         "booking_id": {"type": "string", "description": "Confirmation code, e.g. QXR482."},
         "reason": {"type": "string", "enum": ["change_of_plans", "airline_cancelled", "medical", "other"]}},
         "required": ["booking_id", "reason"]}}},
    {"type": "function", "function": {"name": "search_flights", "description": "Search flights, numbers like SW-1042.",
     "parameters": {"type": "object", "properties": {
         "origin": {"type": "string", "description": "IATA code of the departure airport, e.g. LIS."},
         "destination": {"type": "string", "description": "IATA code of the arrival airport, e.g. OSL."},
         "date": {"type": "string", "format": "date"}},
         "required": ["origin", "destination", "date"]}}},
]  # fmt: skip


def _next_weekday(name):
    import datetime

    today = datetime.date(2026, 1, 5)  # the documented fixed "today" (a Monday)
    target = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"].index(name)
    ahead = (target - today.weekday()) % 7 or 7
    return (today + datetime.timedelta(days=ahead)).isoformat()


def _calls(outcomes, name):
    return [(json.loads(o.message["tool_calls"][0]["function"]["arguments"]), o.probability)
            for o in outcomes if o.message.get("tool_calls") and o.message["tool_calls"][0]["function"]["name"] == name]


def test_each_argument_takes_a_value_of_its_own_shape():
    agent = tk.seeded_agent(AIRLINE)
    context = [{"role": "user", "content": "Please change my flight ABC123 to flight SW-2210 on Friday."}]
    calls = _calls(agent.distribution(context), "change_flight")
    assert calls, "the matched tool must be callable"
    for arguments, _ in calls:
        assert arguments == {"booking_id": "ABC123", "new_flight_number": "SW-2210", "date": _next_weekday("friday")}
    # Independent arithmetic: call 8 vs answer 0.5 (no argument is missing, so no ask), the named
    # tool 8 vs each of the two others 1, and every argument has a single supported value.
    assert sum(p for _, p in calls) == pytest.approx(8 / 8.5 * 8 / 10)


def test_two_booking_codes_are_a_categorical_and_never_fill_other_arguments():
    agent = tk.seeded_agent(AIRLINE)
    context = [{"role": "user", "content": "Change my flight XYZ789 (or maybe ABC123) to SW-2210 on 2026-03-02."}]
    calls = _calls(agent.distribution(context), "change_flight")
    by_booking = {}
    for arguments, probability in calls:
        assert arguments["new_flight_number"] == "SW-2210" and arguments["date"] == "2026-03-02"
        by_booking[arguments["booking_id"]] = by_booking.get(arguments["booking_id"], 0) + probability
    # Rank weights 6 / 2 for the two codes, in the order the person wrote them.
    p_tool = 8 / 8.5 * 8 / 10
    assert by_booking == pytest.approx({"XYZ789": p_tool * 6 / 8, "ABC123": p_tool * 2 / 8})


def test_enum_arguments_come_from_the_enum_with_named_values_favoured():
    agent = tk.seeded_agent(AIRLINE)
    context = [{"role": "user", "content": "Cancel my booking ABC123 please, it is for medical reasons."}]
    calls = _calls(agent.distribution(context), "cancel_booking")
    total = sum(p for _, p in calls)
    by_reason = {}
    for arguments, probability in calls:
        assert arguments["booking_id"] == "ABC123"
        by_reason[arguments["reason"]] = by_reason.get(arguments["reason"], 0) + probability / total
    assert by_reason == pytest.approx({"medical": 8 / 11, "change_of_plans": 1 / 11, "airline_cancelled": 1 / 11, "other": 1 / 11})


def test_places_and_dates_follow_the_parameter_form():
    agent = tk.seeded_agent(AIRLINE)
    context = [{"role": "user", "content": "find flights from lisbon to Oslo on thursday"}]
    calls = _calls(agent.distribution(context), "search_flights")
    assert calls and all(a == {"origin": "LIS", "destination": "OSL", "date": _next_weekday("thursday")} for a, _ in calls)


def test_a_missing_argument_opens_the_ask_action_for_it():
    agent = tk.seeded_agent(AIRLINE)
    outcomes = agent.distribution([{"role": "user", "content": "Please change my flight ABC123."}])
    asks = [o for o in outcomes if o.text.endswith("?")]
    # call 8, answer 0.5, ask 6: the ask carries 6 / 14.5, and asks for the first missing argument.
    assert math.fsum(o.probability for o in asks) == pytest.approx(6 / 14.5)
    assert all("new flight number" in o.text for o in asks)
    # Calling anyway sends the spoken name, which the world refuses as a placeholder.
    for arguments, _ in _calls(outcomes, "change_flight"):
        assert arguments["new_flight_number"] == "the new flight number" and arguments["date"] == "the date"
        assert tk.World(AIRLINE, seed=0).call("change_flight", arguments)["reason"] == "placeholder_argument"


def test_flight_numbers_listed_by_a_search_are_candidates():
    agent = tk.seeded_agent(AIRLINE)
    listed = {"status": "ok", "results": [{"id": "SW-1111"}, {"id": "SW-2222"}, {"id": "SW-3333"}, {"id": "SW-4444"}]}
    context = [
        {"role": "user", "content": "Find flights from Lisbon to Oslo on Friday"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "search_flights", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c0", "content": json.dumps(listed)},
        {"role": "assistant", "content": "Done. search_flights returned: 4 records."},
        {"role": "user", "content": "Great, move my flight booking ABC123 to one of those."},
    ]
    calls = _calls(agent.distribution(context), "change_flight")
    total = sum(p for _, p in calls)
    by_flight = {}
    for arguments, probability in calls:
        assert arguments["booking_id"] == "ABC123" and arguments["date"] == _next_weekday("friday")
        by_flight[arguments["new_flight_number"]] = by_flight.get(arguments["new_flight_number"], 0) + probability / total
    assert by_flight == pytest.approx({"SW-1111": 6 / 9, "SW-2222": 2 / 9, "SW-3333": 1 / 9})


def test_shaped_arguments_keep_exact_logprobs_and_per_argument_tokens():
    agent = tk.seeded_agent(AIRLINE, seed=3)
    prompt = "Change my flight XYZ789 (or maybe ABC123) to SW-2210 on 2026-03-02."
    checked = set()
    for index in range(30):
        row = tk.run_rollout(agent, prompt, world=tk.World(AIRLINE, seed=0), user=False, rollout_index=index, logprobs="tokens", timeout=None)
        steps = [s for s in row["steps"] if "logprob" in s]
        assert [s["logprob"] for s in steps] == pytest.approx(agent.score(row), abs=1e-12)
        for step in steps:
            assert math.fsum(t["logprob"] for t in step["tokens"]) == pytest.approx(step["logprob"], abs=1e-12)
            if step.get("tool") == "change_flight":
                checked.add(step["arguments"]["booking_id"])
                token = next(t for t in step["tokens"] if t["token"].startswith("booking_id="))
                # The booking code's own choice sits on its token: log 6/8 or log 2/8.
                expected = math.log(6 / 8) if step["arguments"]["booking_id"] == "XYZ789" else math.log(2 / 8)
                assert token["logprob"] == pytest.approx(expected)
    assert checked == {"XYZ789", "ABC123"}  # both values were drawn, so both branches were checked


def test_scores_stay_exact_with_the_template_person_and_faults():
    agent = tk.seeded_agent(AIRLINE, seed=5)
    reference = tk.seeded_agent(AIRLINE, seed=5, rate=0.1, temperature=1.5)
    grid = list(tk.situation_grid(AIRLINE, "Never change a basic economy fare.", seed=0))[:16]
    for index, situation in enumerate(grid):
        prompt = tk.write_prompts(situation, 1, tools=AIRLINE)[0]
        row = tk.run_rollout(agent, prompt, situation=situation, rollout_index=index, logprobs=True, fault_rate=0.7, timeout=None)
        recorded = [s["logprob"] for s in row["steps"] if "logprob" in s]
        assert recorded == pytest.approx(agent.score(row), abs=1e-9)
        assert all(math.isfinite(v) for v in reference.score(row))  # the reference policy can produce every turn


@pytest.fixture(scope="module")
def engine_rows():
    # The engine path: template person, faults, situations, a privileged block given to the
    # agent and scrubbed from the rows it returns and writes.
    with open(tk.dataset_path("tools/airline_support.json")) as handle:
        tools = json.load(handle)
    with open(tk.dataset_path("tools/airline_support_policy.md")) as handle:
        policy = handle.read()
    agent = tk.seeded_agent(tools, seed=0)
    data = tk.simulate(agent, tools=tools, system_prompt=policy, budget=48, logprobs=True, repeats=4, repeat_policy="fixed", progress=False, seed=0)
    return tools, agent, list(data.rows)


def test_a_policy_reproduces_the_logprob_of_its_own_simulated_rows(engine_rows):
    tools, agent, rows = engine_rows
    assert len(rows) >= 40
    assert not any("privileged" in row for row in rows)  # scrubbed: scoring must not need it
    # The leak mistake needs the teacher-only reference; the run must contain one for this
    # test to cover the turn whose text depends on it.
    assert any("leak" in row.get("seeded", []) for row in rows)
    for row in rows:
        total = agent.score_total(row)
        assert math.isclose(total, row["logprob"], rel_tol=1e-9, abs_tol=1e-9), (row["rollout_index"], total, row["logprob"])


def test_every_turn_of_a_simulated_row_scores_its_recorded_logprob(engine_rows):
    tools, agent, rows = engine_rows
    reference = tk.seeded_agent(tools, seed=0, rate=0.2, temperature=1.3)
    for row in rows:
        recorded = [step["logprob"] for step in row["steps"] if "logprob" in step]
        scored = agent.score(row)
        assert len(scored) == len(recorded)
        for turn, (mine, theirs) in enumerate(zip(scored, recorded)):
            assert math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=1e-9), (row["rollout_index"], turn, mine, theirs)
        # Same support (rate and temperature differ, no weight is zero): every turn is finite.
        assert all(math.isfinite(value) for value in reference.score(row))
    # A written-and-read row (JSONL) scores the same: nothing the score needs is lost on disk.
    written = json.loads(json.dumps(rows[0]))
    assert agent.score_total(written) == pytest.approx(rows[0]["logprob"], rel=1e-9, abs=1e-9)


def test_a_written_row_keeps_what_the_leak_depends_on_and_nothing_more():
    # Independent arithmetic: with a reference the first report's mistake is one of 5
    # applicable kinds (4 without), so a hedged report has P = rate/5, not rate/4; the leak
    # quotes the reference itself.
    privileged = {"reference": "expected conduct: refuse the refund", "hidden_state": {"world_state": "duplicate"}}
    agent = tk.seeded_agent(TOOLS, seed=3, behaviors=["hedging", "sycophancy", "apology", "boilerplate", "leak"])
    rows = [tk.run_rollout(agent, PROMPT, world=_world(), user=False, rollout_index=i, logprobs=True, privileged=privileged, timeout=None) for i in range(80)]
    written = [json.loads(json.dumps(tk.rows.scrub(row))) for row in rows]
    for row in written:
        assert "privileged" not in row
        if "leak" not in row.get("seeded", []):
            assert "refuse the refund" not in json.dumps(row)  # only the digest is written
    kinds = Counter(kind for row in rows for kind in row.get("seeded", []))
    assert kinds["leak"] and kinds["hedging"]
    for row, on_disk in zip(rows, written):
        assert agent.score(on_disk) == pytest.approx(agent.score(row), abs=1e-12)
        assert agent.score_total(on_disk) == pytest.approx(row["logprob"], abs=1e-9)
    hedged = next(row for row in written if row.get("seeded") == ["hedging"])
    first_report = next(i for i, step in enumerate(hedged["steps"]) if "text" in step and "logprob" in step and step["text"].startswith("I believe"))
    with_digest = agent.score(hedged)
    del hedged["steps"][first_report]["conditioning"]
    without = agent.score(hedged)
    changed = [b - a for a, b in zip(with_digest, without) if a != b]
    assert changed == [pytest.approx(math.log(5 / 4), abs=1e-12)]
    leaked = next(row for row in written if row.get("seeded") == ["leak"])
    turn = next(i for i, step in enumerate(leaked["steps"]) if "For reference, the expected answer is:" in step.get("text", "") and "logprob" in step)
    assert math.isfinite(agent.score_total(leaked))
    # Quoting any other reference is a text this policy could not have written here.
    leaked["steps"][turn]["text"] = leaked["steps"][turn]["text"].replace("refuse the refund", "grant the refund")
    assert agent.score_total(leaked) == -math.inf


# Fields only the exact (enumerating) sampler fills in; everything else must match byte for byte.
_LOGPROB_ROW_FIELDS = ("logprob", "n_tokens", "token_logprobs")
_LOGPROB_STEP_FIELDS = ("logprob", "n_tokens", "tokens")


def _without_logprobs_and_clocks(row):
    kept = {k: v for k, v in row.items() if k not in _LOGPROB_ROW_FIELDS and k not in ("timing",)}
    kept["steps"] = [{k: v for k, v in step.items() if k not in _LOGPROB_STEP_FIELDS} for step in row["steps"]]
    return json.dumps(kept, sort_keys=True, ensure_ascii=False)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("fault_rate", [0.0, 0.5, 1.0])
def test_direct_sampler_without_logprobs_writes_the_same_rows_as_the_enumerating_one(seed, fault_rate):
    # logprobs off: one walk through the choices; on: the whole tree enumerated and the sample
    # read off it. Same seeded draws, so the rows must be identical apart from the fields that
    # only the exact sampler fills in (and the wall clock).
    tools = tk.dataset_path("tools/airline_support.json")
    agent = tk.seeded_agent(tools, seed=seed, rate=0.6)
    prompts = [
        "Please change my flight BK-7731 to Tuesday, and refund the old one.",
        "Can you look up flights from Boston to Denver on 2026-02-03?",
        "I need to cancel something.",
        "What's the weather like?",
    ]
    compared = 0
    for prompt in prompts:
        for rollout_index in range(5):
            for user in (None, False):
                rows = [
                    tk.run_rollout(agent, prompt, tools=tools, user=user, rollout_index=rollout_index, seed=seed,
                                   fault_rate=fault_rate, logprobs=logprobs, timeout=None)  # fmt: skip
                    for logprobs in (False, True, "tokens")
                ]
                assert "logprob" not in rows[0] and "logprob" in rows[1] and "token_logprobs" in rows[2]
                assert not any("logprob" in step or "tokens" in step for step in rows[0]["steps"])
                assert _without_logprobs_and_clocks(rows[0]) == _without_logprobs_and_clocks(rows[1]) == _without_logprobs_and_clocks(rows[2])
                compared += 1
    assert compared == 40


def test_simulate_with_and_without_logprobs_gives_the_same_rows():
    # Whole engine runs (situations, scheduled faults, the template person, privileged
    # references and leaks): logprobs on vs off, row for row.
    tools = tk.dataset_path("tools/airline_support.json")
    runs = {}
    for logprobs in (False, True):
        data = tk.simulate(tk.seeded_agent(tools, seed=2), tools=tools, budget=40, seed=5, logprobs=logprobs, progress=False)
        runs[logprobs] = sorted(data.rows, key=lambda row: (row["prompt"], row["rollout_index"]))
    assert len(runs[False]) == len(runs[True]) == 40
    assert any(row["faults"] for row in runs[False])  # the comparison covers faulted worlds
    for off, on in zip(runs[False], runs[True]):
        assert _without_logprobs_and_clocks(off) == _without_logprobs_and_clocks(on)


def test_turns_read_incrementally_see_what_a_full_read_sees():
    # The policy continues the previous turn's read of the conversation (TurnContext.scratch);
    # at every turn of real rollouts, and after switching to a different conversation with the
    # same scratch, the context must equal a fresh read of the whole history.
    from toolkit.agents.seeded import _read_context

    data = tk.simulate(budget=40, progress=False, seed=3, fault_rate=0.5)
    conversations = [tk.agents.seeded.messages_for_scoring(row) for row in data.trajectories]
    assert sum(len(c) for c in conversations) > 200
    scratch: dict = {}
    compared = 0
    for messages in conversations + conversations[:3]:
        for position in range(1, len(messages) + 1):
            incremental = _read_context(messages[:position], None, scratch)
            full = _read_context(messages[:position], None)
            assert {k: v for k, v in vars(incremental).items() if k != "memo"} == {k: v for k, v in vars(full).items() if k != "memo"}
            compared += 1
    assert compared > 200
    # the returned context does not share mutable state with the kept read
    messages = conversations[0]
    first = _read_context(messages, None, scratch)
    first.user_texts.append("changed")
    assert _read_context(messages, None, scratch).user_texts == _read_context(messages, None).user_texts
