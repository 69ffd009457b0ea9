"""The reply checks of toolkit/agents/_protocol.py: a wrong type is AgentReplyError, a bad value BadReply."""

import pickle

import pytest

import toolkit as tk
from toolkit.agents._protocol import check_message_reply, normalize_reply
from toolkit.errors import AgentReplyError, BadReply


def test_a_message_reply_is_a_dict_or_a_plain_str():
    reply, plain = check_message_reply({"steps": [], "final_text": "ok"})
    assert reply == {"steps": [], "final_text": "ok"} and plain is False
    reply, plain = check_message_reply("Done.")
    assert reply == {"steps": [], "final_text": "Done."} and plain is True
    # right types, values for the rollout to judge: not raised here
    assert check_message_reply({"steps": [{"odd": 1}], "final_text": None})[1] is False
    assert check_message_reply({"steps": "not a list"})[1] is False


@pytest.mark.parametrize(
    "reply, field",
    [(None, "the reply"), (0, "the reply"), (b"bytes", "the reply"), ({"answer": "x"}, "the reply"),
     ({"final_text": ["x"]}, "reply['final_text']")],
)  # fmt: skip
def test_a_message_reply_of_an_impossible_type_names_the_field_and_the_shape(reply, field):
    with pytest.raises(AgentReplyError) as caught:
        check_message_reply(reply, agent="mine")
    text = str(caught.value)
    assert text.startswith(f"agent 'mine' (message-shaped): {field} must be ")
    assert "'final_text'" in text or field != "the reply"
    assert caught.value.shape == "message"


def test_chat_values_a_model_can_produce_are_bad_replies_with_a_reason():
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
    cases = {
        "bad_tool_arguments": {"content": None, "tool_calls": [call]},
        "empty_reply": {"content": "", "tool_calls": []},
        "bad_reply": {"content": None, "tool_calls": [{"function": {"name": ""}}]},
        "tool_markup": {"content": "[TOOL_CALLS] f"},
    }
    for reason, reply in cases.items():
        with pytest.raises(BadReply) as caught:
            normalize_reply(reply)
        assert caught.value.reason == reason
    assert normalize_reply("plain text")["content"] == "plain text"
    assert normalize_reply({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})["content"] == "ab"


@pytest.mark.parametrize(
    "reply, field",
    [(None, "the reply"), (1, "the reply"), ([], "the reply"), (("a",), "the reply"), ({"final_text": "x"}, "the reply"),
     ({"content": 1.5}, "reply['content']"), ({"content": None, "tool_calls": {"name": "f"}}, "reply['tool_calls']"),
     ({"content": None, "tool_calls": [None]}, "reply['tool_calls'][0]")],
)  # fmt: skip
def test_a_chat_reply_of_an_impossible_type_is_an_agent_reply_error(reply, field):
    with pytest.raises(AgentReplyError) as caught:
        normalize_reply(reply, agent="policy")
    assert str(caught.value).startswith(f"agent 'policy' (chat-shaped): {field} must be ")
    assert caught.value.shape == "chat" and not isinstance(caught.value, BadReply)


def test_agent_reply_error_is_a_type_error_that_survives_pickling():
    # a process-pool executor sends it back pickled: the message and the extras survive
    error = tk.AgentReplyError("agent 'x' (chat-shaped): the reply must be ...", shape="chat", got="NoneType")
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, TypeError) and isinstance(back, tk.ToolkitError)
    assert str(back) == str(error) and back.shape == "chat" and back.got == "NoneType"
    assert tk.agents.AgentReplyError is tk.errors.AgentReplyError is tk.AgentReplyError


def test_a_failing_repr_does_not_hide_the_error():
    class Broken:
        def __repr__(self):
            raise RuntimeError("no repr")

    with pytest.raises(AgentReplyError, match="got Broken <Broken with a failing repr>"):
        normalize_reply(Broken())
