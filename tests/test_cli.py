"""The command line: `python -m toolkit --help` and friends work without a traceback."""

import subprocess
import sys

from toolkit.__main__ import build_parser, main


def test_help_lists_the_commands():
    result = subprocess.run([sys.executable, "-m", "toolkit", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert "demo" in result.stdout and "whatif" in result.stdout


def test_no_command_prints_help_and_succeeds(capsys):
    assert main([]) == 0
    assert "COMMAND" in capsys.readouterr().out


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
