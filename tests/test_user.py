"""The simulated person: patience numbers (reference §10 item 29), stance, turn cap, human tools."""

import sys
from pathlib import Path

import pytest
from scipy import stats

import toolkit as tk

sys.path.insert(0, str(Path(__file__).parent))
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
    user = tk.simulated_user(patience=patience, avg_turns=40)
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
    user = tk.simulated_user(patience="normal")
    assert [user.walk_away_chance(q) for q in (1, 2, 3, 7)] == [0.0, 0.35, 0.60, 0.60]
    assert tk.PATIENCE_LEVELS["short"] == (0.60, 0.90)


def test_bad_patience_is_refused_with_the_nearest_name():
    with pytest.raises(tk.ConfigError, match="normal"):
        tk.simulated_user(patience="normall")
    with pytest.raises(tk.ConfigError, match="later"):
        tk.simulated_user(patience={"second": 0.3, "latter": 0.5})
    with pytest.raises(tk.ConfigError, match=r"\[0, 1\]"):
        tk.simulated_user(patience=(0.3, 1.5))


def test_person_speaks_at_most_avg_turns_half_times():
    for avg_turns in (2, 4, 6, 12):
        user = tk.simulated_user(patience="endless", avg_turns=avg_turns)
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
    user = tk.simulated_user(avg_turns=8)  # cap 4: follow up with probability 1 - 1/4
    follows = 0
    for index in range(N):
        state = user.new_state()
        messages = [{"role": "user", "content": "Check ORD-1234"}, {"role": "assistant", "content": "It shipped."}]
        follows += user.respond(messages, prompt="Check ORD-1234", rollout_index=index, state=state).action == "speak"
    assert stats.binomtest(follows, N, 0.75).pvalue > 1e-3


def test_stance_colours_the_answer_and_the_person_gives_their_id():
    hurried = tk.simulated_user({"stance": "hurried"}, patience="endless")
    adversarial = tk.simulated_user({"stance": "adversarial"}, patience="endless")
    messages = [{"role": "user", "content": "Check my order ORD-4321"}, {"role": "assistant", "content": "Which order id?"}]
    a = hurried.respond(messages, prompt=messages[0]["content"], state=hurried.new_state()).text
    b = adversarial.respond(messages, prompt=messages[0]["content"], state=adversarial.new_state()).text
    assert "ORD-4321" in a and "ORD-4321" in b and a != b
    assert len(a.split()) < len(b.split())


def test_unknowable_question_is_answered_i_dont_know_first_then_may_end_the_talk():
    user = tk.simulated_user(patience={"second": 0.0, "later": 1.0}, avg_turns=20)
    state = user.new_state()
    messages = [{"role": "user", "content": "Fix my account"}, {"role": "assistant", "content": "What does the internal database log say?"}]
    first = user.respond(messages, prompt="Fix my account", state=state)
    assert first.action == "speak" and "know" in first.text.lower()
    messages += [{"role": "user", "content": first.text}, {"role": "assistant", "content": "And the API schema version?"}]
    second = user.respond(messages, prompt="Fix my account", state=state)
    assert second.action == "leave" and second.reason == "could_not_know"


def test_human_tool_answered_by_the_person():
    user = tk.simulated_user({"stance": "mistaken"}, patience="endless")
    reply = user.answer_tool("confirm_with_user", {"question": "Shall I cancel order ORD-1234?"}, [], prompt="Cancel ORD-1234", state=user.new_state())
    assert reply.action == "speak" and "ORD-1234" in reply.text


def test_model_user_through_the_local_server():
    with ChatServer() as server:
        user = tk.simulated_user(patience="normal", user_model=f"vllm:chatty@{server.url}")
        messages = [{"role": "user", "content": "Check my order"}, {"role": "assistant", "content": "Which order id?"}]
        move = user.respond(messages, prompt="Check my order", state=user.new_state())
        assert move.action == "speak" and move.text == "Sure, it's ORD-1234."
        body = server.requests[-1][1]
        assert body["temperature"] == pytest.approx(0.475) and body["max_tokens"] == 180
        leaver = tk.simulated_user(patience="normal", user_model=f"vllm:leaver@{server.url}")
        assert leaver.respond(messages, prompt="Check my order", state=leaver.new_state()).action == "leave"
        # An endless person never walks away, whatever the model says: the template line is used.
        endless = tk.simulated_user(patience="endless", user_model=f"vllm:leaver@{server.url}")
        move = endless.respond(messages, prompt="Check my order", state=endless.new_state())
        assert move.action == "speak" and endless.fallbacks == 1
