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
