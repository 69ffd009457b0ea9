"""The command line: `python -m toolkit --help` and friends work without a traceback."""

import subprocess
import sys

from toolkit.__main__ import build_parser, main


def test_help_lists_the_commands():
    result = subprocess.run([sys.executable, "-m", "toolkit", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert "demo" in result.stdout and "whatif" in result.stdout


def test_no_command_prints_help_and_exits_2(capsys):
    # a usage error like a bad command line (2), so a CI script that forgot its command
    # fails; --help, asked for, still exits 0 (test_help_lists_the_commands)
    bare = subprocess.run([sys.executable, "-m", "toolkit"], capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2
    assert "COMMAND" in bare.stderr and "demo" in bare.stderr and "whatif" in bare.stderr
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_user_error_is_a_message_not_a_traceback(tmp_path, capsys):
    code = main(["whatif", "validate", str(tmp_path / "missing.yaml")])
    captured = capsys.readouterr()
    assert code == 2
    assert "Traceback" not in captured.err
    assert "missing.yaml" in captured.err + captured.out


def test_parser_knows_every_command():
    parser = build_parser()
    assert parser.parse_args(["demo"]).command == "demo"


def test_demo_simulates_grades_and_writes_rows_and_figures(tmp_path, capsys):
    import toolkit as tk

    assert main(["demo", "--out", str(tmp_path), "--budget", "40"]) == 0
    out = capsys.readouterr().out
    assert "pass@1" in out and "PASS" in out  # the simulated run's line, then the paired report
    rows = tk.read_rows(tmp_path / "simulated_rows.jsonl")
    assert len(rows) == 40 and all("privileged" not in row for row in rows)
    assert all(row.get("judge_name") == "conduct" for row in rows)
    for name in ("simulated_pass_at_k.png", "simulated_coverage.png", "pass_at_k.pdf", "delta_forest.pdf"):
        assert (tmp_path / name).stat().st_size > 1000, name
    # the line that reconciles the budget with the summary counts what the rows hold
    prompts, situations = len({r["prompt"] for r in rows}), len({r["scenario_id"] for r in rows})
    assert f"40 rows = {prompts} prompts x 4 repeats, on {situations} situations" in out
    assert 4 * prompts == 40 and f"situations {situations}, unique prompts {prompts}," in out  # as the summary says


def test_demo_budget_help_is_the_arithmetic_of_its_default():
    # the help once said "80 situations" while the summary counted 74: it now promises only
    # prompts x repeats (which the demo test above checks on the rows) and says why there are
    # fewer situations
    import re

    from toolkit._demo import REPEATS

    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    budget = next(action for action in demo._actions if "--budget" in action.option_strings)
    default, prompts, repeats = map(int, re.search(r"default (\d+) = (\d+) prompts x (\d+) repeats", budget.help).groups())
    assert default == budget.default == prompts * repeats and repeats == REPEATS
    assert "fewer situations" in budget.help and "situations x" not in budget.help
