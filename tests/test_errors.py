import toolkit as tk
from toolkit.errors import did_you_mean, unknown_name_message


def test_did_you_mean_finds_typo():
    assert did_you_mean("max_baseline_regresion_ratio", ["max_baseline_regression_ratio", "seed"]) == [
        "max_baseline_regression_ratio"
    ]


def test_case_only_difference_is_suggested():
    assert did_you_mean("Seed", ["seed", "budget"]) == ["seed"]


def test_message_names_kind_and_suggestion():
    message = unknown_name_message("knob", "patiense", ["patience", "seed"])
    assert message == "unknown knob 'patiense'; did you mean 'patience'?"


def test_message_lists_valid_names_when_nothing_is_close():
    message = unknown_name_message("factor", "zzz", ["tool", "stance"])
    assert "valid names: stance, tool" in message


def test_error_tree_is_public_and_valueerror_compatible():
    assert issubclass(tk.KnobError, tk.ToolkitError)
    assert issubclass(tk.ConfigError, ValueError)
    assert "ToolkitError" in tk.__all__


def test_the_error_tree_in_the_docstring_is_the_real_one():
    # every ToolkitError subclass lives in toolkit.errors and is drawn, under its real parent,
    # in the module docstring
    import inspect
    import re

    import toolkit.errors as errors

    classes = {name: cls for name, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, errors.ToolkitError)}
    assert set(classes) == set(errors.__all__) - {"did_you_mean", "unknown_name_message"}
    drawn = []  # (column, name, marked ValueError)
    for line in (line for line in errors.__doc__.splitlines() if line.startswith("    ")):  # the drawing
        match = re.search(r"([A-Z][A-Za-z]+(?:Error|Busy|Rollout|Reply))( \(ValueError\))?", line)
        if match and match.group(1) in classes:
            drawn.append((match.start(1), match.group(1), bool(match.group(2))))
    assert sorted(name for _, name, _ in drawn) == sorted(classes)
    for position, (column, name, marked) in enumerate(drawn):
        cls = classes[name]
        assert marked == (ValueError in cls.__bases__), name
        if cls is errors.ToolkitError:
            continue
        parent = next(n for c, n, _ in reversed(drawn[:position]) if c < column)
        assert cls.__mro__[1].__name__ == parent, (name, parent)


def test_agent_reply_error_and_backend_error_keep_their_fields_through_pickling():
    # rollouts may run in a process pool: what they raise comes back pickled
    import pickle

    reply = pickle.loads(pickle.dumps(tk.AgentReplyError("bad", shape="message", got="int")))
    assert isinstance(reply, TypeError) and (reply.shape, reply.got, str(reply)) == ("message", "int", "bad")
    backend = pickle.loads(pickle.dumps(tk.errors.BackendError("down", "connection", 0, first_contact=True)))
    assert (backend.status, backend.retries, backend.first_contact, str(backend)) == ("connection", 0, True, "down")
    assert tk.errors.BackendError("x").first_contact is False
