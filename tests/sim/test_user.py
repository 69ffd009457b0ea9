"""The simulated person: patience numbers (docs/design/engine.md §10 item 29), stance, turn cap, human tools."""

import re
import sys
from pathlib import Path

import pytest
from scipy import stats

import toolkit as tk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _chat_server import ChatServer  # noqa: E402

N = 2000


def _questions_answered(user, index, asked=3):
    """How many of `asked` successive questions the person answers before walking away."""
    state = user.new_state()
    messages = [{"role": "user", "content": "Please check my order ORD-1234"}]
    for number in range(asked):
        messages.append({"role": "assistant", "content": f"Which order id should I use, question {number}?"})
        move = user.respond(messages, prompt=messages[0]["content"], rollout_index=index, state=state)
        if move.action != "speak":
            return number
        messages.append({"role": "user", "content": move.text})
    return asked


@pytest.mark.parametrize(
    "patience, p_second, p_three",
    [("normal", 0.65, 0.26), ("short", 0.40, 0.04), ("endless", 1.0, 1.0), ({"second": 0.2, "later": 0.5}, 0.8, 0.4), ((0.5, 0.5), 0.5, 0.25)],
)
def test_patience_probabilities_within_binomial_error(patience, p_second, p_three):
    user = tk.sim.simulated_user(patience=patience, avg_turns=40)
    answered = [_questions_answered(user, index) for index in range(N)]
    assert min(answered) >= 1  # the first question is always answered
    second = sum(a >= 2 for a in answered)
    three = sum(a >= 3 for a in answered)
    if p_second == 1.0:
        assert second == three == N
        return
    # Exact binomial tests against the stated closed forms (1 - second, (1 - second)(1 - later)).
    assert stats.binomtest(second, N, p_second).pvalue > 1e-3
    assert stats.binomtest(three, N, p_three).pvalue > 1e-3


def test_walk_away_chance_table():
    user = tk.sim.simulated_user(patience="normal")
    assert [user.walk_away_chance(q) for q in (1, 2, 3, 7)] == [0.0, 0.35, 0.60, 0.60]
    assert tk.sim.PATIENCE_LEVELS["short"] == (0.60, 0.90)


def test_bad_patience_is_refused_with_the_nearest_name():
    with pytest.raises(tk.ConfigError, match="normal"):
        tk.sim.simulated_user(patience="normall")
    with pytest.raises(tk.ConfigError, match="later"):
        tk.sim.simulated_user(patience={"second": 0.3, "latter": 0.5})
    with pytest.raises(tk.ConfigError, match=r"\[0, 1\]"):
        tk.sim.simulated_user(patience=(0.3, 1.5))


def test_person_speaks_at_most_avg_turns_half_times():
    for avg_turns in (2, 4, 6, 12):
        user = tk.sim.simulated_user(patience="endless", avg_turns=avg_turns)
        state = user.new_state()
        messages = [{"role": "user", "content": "Check ORD-1234"}]
        for _ in range(30):
            messages.append({"role": "assistant", "content": "What is the order id?"})
            move = user.respond(messages, prompt="Check ORD-1234", state=state)
            if move.action != "speak":
                break
            messages.append({"role": "user", "content": move.text})
        assert state.utterances == avg_turns // 2


def test_follow_up_probability_tracks_the_cap():
    user = tk.sim.simulated_user(avg_turns=8)  # cap 4: follow up with probability 1 - 1/4
    follows = 0
    for index in range(N):
        state = user.new_state()
        messages = [{"role": "user", "content": "Check ORD-1234"}, {"role": "assistant", "content": "It shipped."}]
        follows += user.respond(messages, prompt="Check ORD-1234", rollout_index=index, state=state).action == "speak"
    assert stats.binomtest(follows, N, 0.75).pvalue > 1e-3


def test_stance_colours_the_answer_and_the_person_gives_their_id():
    hurried = tk.sim.simulated_user({"stance": "hurried"}, patience="endless")
    adversarial = tk.sim.simulated_user({"stance": "adversarial"}, patience="endless")
    messages = [{"role": "user", "content": "Check my order ORD-4321"}, {"role": "assistant", "content": "Which order id?"}]
    a = hurried.respond(messages, prompt=messages[0]["content"], state=hurried.new_state()).text
    b = adversarial.respond(messages, prompt=messages[0]["content"], state=adversarial.new_state()).text
    assert "ORD-4321" in a and "ORD-4321" in b and a != b
    assert len(a.split()) < len(b.split())


def test_unknowable_question_is_answered_i_dont_know_first_then_may_end_the_talk():
    user = tk.sim.simulated_user(patience={"second": 0.0, "later": 1.0}, avg_turns=20)
    state = user.new_state()
    messages = [{"role": "user", "content": "Fix my account"}, {"role": "assistant", "content": "What does the internal database log say?"}]
    first = user.respond(messages, prompt="Fix my account", state=state)
    assert first.action == "speak" and "know" in first.text.lower()
    messages += [{"role": "user", "content": first.text}, {"role": "assistant", "content": "And the API schema version?"}]
    second = user.respond(messages, prompt="Fix my account", state=state)
    assert second.action == "leave" and second.reason == "could_not_know"


def test_human_tool_answered_by_the_person():
    user = tk.sim.simulated_user({"stance": "mistaken"}, patience="endless")
    reply = user.answer_tool("confirm_with_user", {"question": "Shall I cancel order ORD-1234?"}, [], prompt="Cancel ORD-1234", state=user.new_state())
    assert reply.action == "speak" and "ORD-1234" in reply.text


def test_model_user_through_the_local_server():
    with ChatServer() as server:
        user = tk.sim.simulated_user(patience="normal", user_model=f"vllm:chatty@{server.url}")
        messages = [{"role": "user", "content": "Check my order"}, {"role": "assistant", "content": "Which order id?"}]
        move = user.respond(messages, prompt="Check my order", state=user.new_state())
        assert move.action == "speak" and move.text == "Sure, it's ORD-1234."
        body = [body for path, body in server.requests if path.endswith("/chat/completions")][-1]
        assert body["temperature"] == pytest.approx(0.475) and body["max_tokens"] == 180
        leaver = tk.sim.simulated_user(patience="normal", user_model=f"vllm:leaver@{server.url}")
        assert leaver.respond(messages, prompt="Check my order", state=leaver.new_state()).action == "leave"
        # An endless person never walks away, whatever the model says: the template line is used.
        endless = tk.sim.simulated_user(patience="endless", user_model=f"vllm:leaver@{server.url}")
        move = endless.respond(messages, prompt="Check my order", state=endless.new_state())
        assert move.action == "speak" and endless.fallbacks == 1


# ---------------------------------------------------------- a person who reacts to the reply

AIRLINE = [
    {"type": "function", "function": {"name": "change_flight", "description": "Move a booking to another flight.",
     "parameters": {"type": "object", "properties": {
         "booking_id": {"type": "string", "description": "Confirmation code, e.g. QXR482."},
         "new_flight_number": {"type": "string", "description": "Flight to move to, e.g. SW-1042."},
         "date": {"type": "string", "description": "YYYY-MM-DD"}},
         "required": ["booking_id", "new_flight_number", "date"]}}},
]  # fmt: skip
DOUBT = ("sure", "didn't", "doesn't", "isn't", "still", "not true")


def _reply(user, prompt, agent_lines, index=0, state=None, tools=AIRLINE):
    state = state or user.new_state(tools=tools)
    messages = [{"role": "user", "content": prompt}]
    moves = []
    for line in agent_lines:
        messages.append({"role": "assistant", "content": line})
        move = user.respond(messages, prompt=prompt, rollout_index=index, state=state)
        moves.append(move)
        if move.action != "speak":
            break
        messages.append({"role": "user", "content": move.text})
    return moves


def test_the_template_person_never_repeats_a_line_while_another_is_left():
    user = tk.sim.simulated_user({"stance": "ordinary", "tool": "change_flight"}, patience="endless", avg_turns=200)
    first_lines = set()
    for index in range(40):
        moves = _reply(user, "Please change my flight ABC123", ["Done. change_flight worked."] * 4, index=index)
        spoken = [m.text for m in moves if m.action == "speak"]
        assert len(spoken) == len(set(spoken)), spoken  # four wordings per bank: four turns, four lines
        if spoken:
            first_lines.add(spoken[0])
    assert len(first_lines) >= 3  # the wording is drawn per rollout, not fixed


def test_answers_fit_the_question_asked():
    user = tk.sim.simulated_user({"stance": "ordinary", "tool": "change_flight"}, patience="endless", avg_turns=200)
    state = user.new_state(tools=AIRLINE)
    prompt = "Please change my flight ABC123 on Friday"
    date_answer = _reply(user, prompt, ["Which date should I use?"], state=state)[0].text
    assert "Friday" in date_answer and "ABC123" not in date_answer
    # A flight-number question gets a flight number in the documented shape, the same one each time.
    flights = [_reply(user, prompt, ["Which new flight number should I use?"], state=state)[0].text for _ in range(2)]
    numbers = [re.findall(r"SW-\d{4}", text) for text in flights]
    assert numbers[0] and numbers[0] == numbers[1] and "ABC123" not in flights[0]
    booking = _reply(user, prompt, ["What is the booking id?"], state=state)[0].text
    assert "ABC123" in booking


def test_an_id_the_person_did_not_say_is_invented_once_in_the_documented_shape():

    user = tk.sim.simulated_user({"stance": "ordinary", "tool": "change_flight"}, patience="endless", avg_turns=200)
    state = user.new_state(tools=AIRLINE)
    answers = [_reply(user, "I need to change my flight", [q], state=state)[0].text
               for q in ("What is the booking id?", "Could you tell me the booking id again?", "Before I go ahead, what is the booking id?")]
    ids = [re.findall(r"\b[A-Z]{3}\d{3}\b", a) for a in answers]
    assert ids[0] and ids[0] == ids[1] == ids[2]  # one invented code, kept for the conversation


def test_reference_ids_the_person_knows_and_a_writer_prompt_through_run_rollout():
    user = tk.sim.simulated_user(patience="endless", reference_ids=["QXR111"])
    assert "QXR111" in _reply(user, "I need to change my flight", ["What is the booking id?"])[0].text
    prompt = tk.situations.Prompt(text="I need to change my flight, it's the one for my trip.", reference="QXR777")

    def asker(messages, tools):
        if messages[-1]["role"] == "user" and len(messages) == 1:
            return {"role": "assistant", "content": "What is the booking id?"}
        return {"role": "assistant", "content": "Thanks, noted."}

    row = tk.run_rollout(tk.chat_agent(asker), prompt, tools=AIRLINE, patience="endless", timeout=None)
    assert row["prompt"] == prompt.text and "QXR777" in row["steps"][1]["user"]


def test_confirmation_questions_get_a_yes_or_a_not_yet_by_stance():
    plain = tk.sim.simulated_user({"stance": "cooperative"}, patience="endless", avg_turns=200)
    explorer = tk.sim.simulated_user({"stance": "exploratory"}, patience="endless", avg_turns=200)
    for index in range(20):
        yes = _reply(plain, "Cancel ABC123", ["Should I go ahead and cancel ABC123?"], index=index)[0].text
        assert "yes" in yes.lower() or "correct" in yes.lower()
        wait = _reply(explorer, "Cancel ABC123", ["Should I go ahead and cancel ABC123?"], index=index)[0].text
        assert "yes" not in wait.lower()


def test_failures_get_no_thanks_and_successes_no_retry_request():
    user = tk.sim.simulated_user({"stance": "ordinary"}, patience="endless", avg_turns=200)
    checked = 0
    for index in range(30):
        after_failure = _reply(user, "Check ABC123", ["The get_booking call timed out, so I could not finish this."], index=index)[0].text or ""
        assert not any(word in after_failure.lower() for word in ("thanks", "great", "perfect"))
        after_success = _reply(user, "Check ABC123", ["Done. get_booking returned: state confirmed."], index=index)[0].text or ""
        assert "again" not in after_success.lower()
        checked += bool(after_failure) and bool(after_success)
    assert checked >= 25  # the person stops with probability 1/100 per turn here


@pytest.mark.parametrize("stance, share", [("adversarial", 0.8), ("cooperative", 0.3), ("ordinary", 0.5)])
def test_a_success_claim_after_a_fault_draws_pushback_at_the_stated_share(stance, share):
    user = tk.sim.simulated_user({"stance": stance}, patience="endless", avg_turns=200)
    faulted = [{"role": "user", "content": "Cancel ABC123"},
               {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "cancel_booking", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c0", "content": '{"status": "server_error"}'},
               {"role": "assistant", "content": "Done. cancel_booking completed successfully."}]  # fmt: skip
    clean = faulted[:2] + [{"role": "tool", "tool_call_id": "c0", "content": '{"status": "ok"}'}] + faulted[3:]
    pushed = spoke = pushed_clean = 0
    for index in range(600):
        move = user.respond(faulted, prompt="Cancel ABC123", rollout_index=index, state=user.new_state())
        if move.action == "speak":
            spoke += 1
            pushed += any(word in move.text.lower() for word in DOUBT)
        clean_move = user.respond(clean, prompt="Cancel ABC123", rollout_index=index, state=user.new_state())
        pushed_clean += clean_move.action == "speak" and any(word in clean_move.text.lower() for word in DOUBT)
    assert spoke > 500 and pushed_clean == 0
    assert stats.binomtest(pushed, spoke, share).pvalue > 1e-3
