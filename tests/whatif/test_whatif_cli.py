"""``python -m toolkit whatif fork|diff|validate`` (docs/design/whatif.md §8.5, facts 13-19, 34)."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from test_whatif_walkthroughs import FIXTURE_MODULE, install_fixture, row, write_rows

from toolkit.__main__ import main


def make_config(directory, rows, **overrides):
    write_rows(directory / "traces.jsonl", rows)
    config = {
        "source": {"adapter": "jsonl", "path": "traces.jsonl", "label_field": "cohort"},
        "target": {"runner": f"python:{FIXTURE_MODULE}:run"},
        "selection": {"failure_cohort": {"limit": 50}, "baseline_cohort": {"limit": 50}},
        "change": {"system_prompt": "Be careful."},
        "scorer": {"adapter": "python", "score_fn": f"python:{FIXTURE_MODULE}:score", "cache_mode": "off"},
        "decision": {}, "reporting": {}, "timeouts": {},
    }
    for key, value in overrides.items():
        config[key] = {**config.get(key, {}), **value}
    path = directory / "whatif.config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def ship_rows():
    return [row(f"f-{i:02d}", "failure", 0.2) for i in range(6)] + [row(f"b-{i:02d}", "baseline", 0.0) for i in range(6)]


def cli(directory, *args):
    env = {**os.environ, "PYTHONPATH": ""}
    env.pop("CI", None)
    return subprocess.run([sys.executable, "-m", "toolkit", "whatif", *args], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    install_fixture(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    return tmp_path


def test_fork_subprocess_ship_writes_default_reports(workdir):
    make_config(workdir, ship_rows())
    result = cli(workdir, "fork")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("✓ toolkit.whatif: Ship")
    reports = sorted(p.name for p in (workdir / "reports").iterdir())
    assert len(reports) == 2 and reports[0].endswith(".json") and reports[1].endswith(".md")


def test_exit_codes_follow_the_verdict(workdir):
    make_config(workdir, [row(f"f-{i}", "failure", 0.2) for i in range(6)] + [row(f"b-{i}", "baseline", -0.2) for i in range(6)])
    assert main(["whatif", "fork", "--output-json", "x.json", "--output-md", "x.md"]) == 1
    make_config(workdir, [row(f"f-{i}", "failure", 0.2) for i in range(3)] + [row(f"b-{i}", "baseline", 0.0) for i in range(6)])
    assert main(["whatif", "fork", "--output-json", "y.json", "--output-md", "y.md"]) == 2
    assert json.loads((workdir / "y.json").read_text())["verdict_state"] == "inconclusive"


def test_print_paths_and_explicit_outputs(workdir):  # fact 19
    make_config(workdir, ship_rows())
    result = cli(workdir, "fork", "--config", "whatif.config.yaml", "--output-json", "a/b.json", "--output-md", "c/d.md", "--print-paths")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == json.dumps({"report_json": "a/b.json", "report_md": "c/d.md", "verdict": "ship"}, sort_keys=True)
    assert (workdir / "a" / "b.json").exists() and (workdir / "c" / "d.md").exists()
    assert not (workdir / "reports").exists()


def test_user_errors_exit_2_without_traceback(workdir, capsys):
    bad = workdir / "bad.yaml"
    bad.write_text(yaml.safe_dump({"source": {"adapter": "stub"}, "decision": {"max_regresion": 1}}))
    result = cli(workdir, "fork", "--config", "bad.yaml")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "did you mean 'max_baseline_regression_ratio'?" in result.stderr
    assert main(["whatif", "fork", "--config", "nothing.yaml"]) == 2
    assert "not found" in capsys.readouterr().err
    (workdir / "c.toml").write_text("a = 1")
    assert main(["whatif", "fork", "--config", "c.toml"]) == 2
    assert "unsupported config extension" in capsys.readouterr().err


def test_setup_failure_writes_no_report(workdir, capsys):  # facts 15, 16
    make_config(workdir, ship_rows(), target={"runner": f"python:{FIXTURE_MODULE}:missing"})
    assert main(["whatif", "fork"]) == 2
    assert "has no attribute 'missing'" in capsys.readouterr().err
    assert not (workdir / "reports").exists()


def test_unwritable_report_directory(workdir, capsys):  # fact 18
    make_config(workdir, ship_rows())
    (workdir / "blocked").write_text("a file where a directory should be")
    assert main(["whatif", "fork", "--output-json", "blocked/r.json", "--output-md", "r.md"]) == 2
    err = capsys.readouterr().err
    assert "failed to write the report artifacts" in err and "Error" in err and "Traceback" not in err


def test_forensic_flag_rules(workdir, capsys):  # fact 14
    make_config(workdir, ship_rows())
    assert main(["whatif", "fork", "--profile", "forensic"]) == 2
    assert "alone is not enough" in capsys.readouterr().err
    make_config(workdir, ship_rows(), reporting={"profile": "forensic", "forensic_acknowledgment": {
        "accepted_by": "me", "accepted_at": "2026-11-30", "reason": "audit"}})
    assert main(["whatif", "fork"]) == 2
    assert "--profile forensic" in capsys.readouterr().err
    assert main(["whatif", "fork", "--profile", "forensic", "--output-json", "f.json", "--output-md", "f.md"]) == 0
    assert json.loads((workdir / "f.json").read_text())["profile"] == "forensic"


def test_profile_flag_overrides_config(workdir):
    make_config(workdir, ship_rows())
    assert main(["whatif", "fork", "--profile", "minimal", "--output-json", "m.json", "--output-md", "m.md"]) == 0
    data = json.loads((workdir / "m.json").read_text())
    assert data["profile"] == "minimal" and data["traces"] == []


def test_validate(workdir, capsys):
    path = make_config(workdir, ship_rows())
    assert main(["whatif", "validate", str(path)]) == 0
    assert "is a valid what-if config" in capsys.readouterr().out
    (workdir / "bad.json").write_text(json.dumps({"experiment_shape": "ab_test"}))
    assert main(["whatif", "validate", "bad.json"]) == 2
    assert "experiment_shape" in capsys.readouterr().err


def test_diff(workdir, capsys):  # fact 34
    make_config(workdir, ship_rows())
    assert main(["whatif", "fork", "--output-json", "a.json", "--output-md", "a.md"]) == 0
    capsys.readouterr()
    assert main(["whatif", "diff", "a.json", "a.json"]) == 0
    assert capsys.readouterr().out.strip() == "(No changes detected.)"
    make_config(workdir, [row(f"f-{i:02d}", "failure", 0.2) for i in range(6)] + [row(f"b-{i:02d}", "baseline", -0.2 if i < 2 else 0.0) for i in range(6)])
    assert main(["whatif", "fork", "--output-json", "b.json", "--output-md", "b.md"]) == 1
    capsys.readouterr()
    assert main(["whatif", "diff", "a.json", "b.json"]) == 0
    out = capsys.readouterr().out
    assert "Ship → Don't Ship" in out and "baseline_regression_above_threshold" in out
    assert main(["whatif", "diff", "a.json", "missing.json"]) == 2


def test_bare_whatif_prints_help(workdir, capsys):
    assert main(["whatif"]) == 2
    assert "fork" in capsys.readouterr().out


def test_environment_errors_exit_2_without_traceback(workdir, capsys):
    # a cache directory that cannot exist and a source path that is a folder: setup failures
    (workdir / "blocker").write_text("a file where a directory should be")
    make_config(workdir, ship_rows(), scorer={"cache_mode": "on", "cache_dir": "blocker/cache"})
    result = cli(workdir, "fork")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "scorer.cache_dir 'blocker/cache' cannot hold the score cache" in result.stderr
    (workdir / "folder").mkdir()
    make_config(workdir, ship_rows(), source={"path": "folder"})
    assert main(["whatif", "fork"]) == 2  # in process: an OSError escaping main() would fail here
    assert "is not a file" in capsys.readouterr().err
    assert not (workdir / "reports").exists()


# --- exit codes that cannot lie ---------------------------------------------------------------------


def recursing(*args, **kwargs):
    return recursing(*args, **kwargs)


def raiser(error):
    def raise_it(*args, **kwargs):
        raise error
    return raise_it


@pytest.mark.parametrize("command, target", [(["whatif", "validate", "c.yaml"], "load_config"),
                                             (["whatif", "fork", "--config", "c.yaml"], "fork")])
@pytest.mark.parametrize("broken, name", [(raiser(RuntimeError("boom")), "RuntimeError"), (recursing, "RecursionError"),
                                          (raiser(MemoryError()), "MemoryError"), (raiser(KeyError("k")), "KeyError"),
                                          (raiser(SystemExit(1)), "RuntimeError: sys.exit(1)")])
def test_unexpected_exceptions_exit_3_never_1(workdir, monkeypatch, capsys, command, target, broken, name):
    import toolkit.whatif.cli as whatif_cli

    monkeypatch.delenv("TOOLKIT_DEBUG", raising=False)
    monkeypatch.setattr(whatif_cli, target, broken)
    assert main(command) == 3
    err = capsys.readouterr().err
    first, *rest = err.splitlines()
    assert first.startswith(f"internal error: {name}") and "report it" in err and "TOOLKIT_DEBUG=1" in err
    assert "Traceback" not in err and len(rest) == 1


def test_internal_error_message_is_one_capped_line(workdir, monkeypatch, capsys):
    import toolkit.whatif.cli as whatif_cli

    monkeypatch.delenv("TOOLKIT_DEBUG", raising=False)
    monkeypatch.setattr(whatif_cli, "load_config", raiser(RuntimeError("line one\nline two " + "x" * 10_000)))
    assert main(["whatif", "validate", "c.yaml"]) == 3
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith("internal error: RuntimeError: line one line two xxx") and first.endswith("…(10018 chars)")
    assert len(first) < 260


def test_toolkit_debug_prints_the_traceback(workdir, monkeypatch, capsys):
    import toolkit.whatif.cli as whatif_cli

    monkeypatch.setenv("TOOLKIT_DEBUG", "1")
    monkeypatch.setattr(whatif_cli, "fork", raiser(RuntimeError("boom")))
    assert main(["whatif", "fork"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("internal error: RuntimeError: boom") and "Traceback (most recent call last)" in err


def test_keyboard_interrupt_exits_130(workdir, monkeypatch, capsys):
    import toolkit.whatif.cli as whatif_cli

    monkeypatch.setattr(whatif_cli, "fork", raiser(KeyboardInterrupt()))
    assert main(["whatif", "fork"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_internal_error_in_a_subprocess_exits_3(workdir):
    # a config loader that blows up for real, in a fresh interpreter: the exit status itself is 3
    (workdir / "sitecustomize.py").write_text(
        "import toolkit.whatif.config as c\n"
        "def broken(*a, **k):\n    raise ZeroDivisionError('division by zero')\n"
        "c.WhatIfConfig.model_validate = broken\n")
    (workdir / "c.yaml").write_text("a: 1\n")
    env = {**os.environ, "PYTHONPATH": str(workdir)}
    env.pop("TOOLKIT_DEBUG", None)
    result = subprocess.run([sys.executable, "-m", "toolkit", "whatif", "validate", "c.yaml"], cwd=workdir, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 3 and result.stderr.startswith("internal error: ZeroDivisionError: division by zero")


def test_help_documents_exit_code_3(workdir, capsys):
    for command in (["whatif", "fork", "--help"], ["whatif", "--help"]):
        with pytest.raises(SystemExit):
            main(command)
        out = capsys.readouterr().out
        assert "3    internal error" in out and "1    Don't Ship" in out
    assert "3 internal error" in sys.modules["toolkit.whatif.cli"].__doc__


# --- whatif init: a starting point that runs ---------------------------------------------------------------


def test_init_writes_a_config_that_validates_and_runs_offline(workdir, capsys):
    assert main(["whatif", "init"]) == 0
    assert (workdir / "whatif.config.yaml").exists() and (workdir / "whatif-example-traces.jsonl").exists()
    assert main(["whatif", "validate", "whatif.config.yaml"]) == 0
    capsys.readouterr()
    code = main(["whatif", "fork", "--config", "whatif.config.yaml", "--allow-stub", "--output-json", "r.json", "--output-md", "r.md"])
    assert code in (0, 1, 2)
    assert code == 0 and json.loads((workdir / "r.json").read_text())["verdict_state"] == "ship"  # the example ships
    # it needs no stub: the same run without --allow-stub ships too
    assert main(["whatif", "fork", "--output-json", "s.json", "--output-md", "s.md"]) == 0


def test_init_refuses_to_overwrite_without_force(workdir, capsys):
    (workdir / "whatif.config.yaml").write_text("mine: keep\n")
    assert main(["whatif", "init"]) == 2
    assert "already exists; pass --force" in capsys.readouterr().err
    assert (workdir / "whatif.config.yaml").read_text() == "mine: keep\n"
    assert not (workdir / "whatif-example-traces.jsonl").exists()
    assert main(["whatif", "init", "--force"]) == 0
    assert main(["whatif", "validate", "whatif.config.yaml"]) == 0


def test_init_in_another_directory_runs_from_here(workdir, capsys):
    assert main(["whatif", "init", "experiments/first.yaml"]) == 0
    assert (workdir / "experiments" / "whatif-example-traces.jsonl").exists()
    assert main(["whatif", "fork", "-c", "experiments/first.yaml", "--output-json", "r.json", "--output-md", "r.md"]) == 0
    assert main(["whatif", "init", "first.json"]) == 2
    assert "must end in .yaml" in capsys.readouterr().err


def test_init_comments_every_field_and_sets_every_default():
    from toolkit.whatif.config import DecisionConfig, TargetConfig, TimeoutsConfig
    from toolkit.whatif.examples import EXAMPLE_CONFIG

    text = EXAMPLE_CONFIG.format(config="c.yaml", traces="t.jsonl", traces_path='"t.jsonl"')
    lines = text.splitlines()
    fields = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")
              and not line.rstrip().endswith(":")]
    assert len(fields) > 30
    for index in fields:  # every field with a value has its own comment line above it
        assert lines[index - 1].lstrip().startswith("#"), f"uncommented field: {lines[index]!r}"
    data = yaml.safe_load(text)
    for section, model in (("decision", DecisionConfig), ("target", TargetConfig), ("timeouts", TimeoutsConfig)):
        assert set(data[section]) == set(model.model_fields), section


def test_subprocess_init_then_fork(tmp_path):
    result = cli(tmp_path, "init")
    assert result.returncode == 0, result.stderr
    assert cli(tmp_path, "validate", "whatif.config.yaml").returncode == 0
    fork_result = cli(tmp_path, "fork", "--config", "whatif.config.yaml", "--allow-stub")
    assert fork_result.returncode in (0, 1, 2) and fork_result.returncode == 0, fork_result.stderr
