"""Hostile config files: each test is the attack, and asserts the refusal it now meets.

A config file is untrusted input to a command whose exit code a CI job branches on. Every
attack here must end in one ``WhatIfConfigError`` (the CLI's one ``error:`` line and exit 2)
that names the file and the place, quickly and in little memory: never a RecursionError, a
MemoryError, a hang, a multi-megabyte message, or an exit code that reads as a verdict.
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolkit as tk
from toolkit.__main__ import main
from toolkit.whatif import config as config_module
from toolkit.whatif.config import MAX_CONFIG_BYTES, MAX_DEPTH, load_config

VALID_YAML = """\
source: {adapter: stub, synthetic_traces: 6, seed: 1}
target: {runner: "python:toolkit.whatif.examples:support_agent"}
selection:
  failure_cohort: {limit: 20}
  baseline_cohort: {limit: 20}
change: {system_prompt: "Quote the tool result verbatim."}
scorer: {adapter: stub, cache_mode: "off"}
decision: {}
reporting: {}
timeouts: {}
"""
VALID = yaml.safe_load(VALID_YAML)


def refused(tmp_path, content, name="c.yaml"):
    """Write ``content`` (str or bytes) and return the WhatIfConfigError message loading it gives."""
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        load_config(path)
    return str(info.value)


def cli(directory, *args):
    env = {**os.environ, "PYTHONPATH": ""}
    env.pop("CI", None)
    return subprocess.run([sys.executable, "-m", "toolkit", "whatif", *args], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=60)  # a hang guard, not a speed test


def test_the_valid_base_loads(tmp_path):
    (tmp_path / "c.yaml").write_text(VALID_YAML)
    assert load_config(tmp_path / "c.yaml").source.adapter == "stub"


# --- bytes and size -------------------------------------------------------------------------------


def test_non_utf8_bytes_name_the_file_and_the_byte_offset(tmp_path):
    content = VALID_YAML.encode() + b"# caf\xe9 in latin-1\n"
    message = refused(tmp_path, content)
    offset = len(VALID_YAML.encode()) + len(b"# caf")
    assert "c.yaml is not UTF-8" in message and f"byte offset {offset}" in message and "0xe9" in message
    assert f"line {VALID_YAML.count(chr(10)) + 1}" in message


def test_utf16_file_is_named_as_such(tmp_path):
    assert "UTF-16" in refused(tmp_path, VALID_YAML.encode("utf-16"))


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    (tmp_path / "c.yaml").write_bytes(b"\xef\xbb\xbf" + VALID_YAML.encode())
    (tmp_path / "c.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(VALID).encode())
    assert load_config(tmp_path / "c.yaml") == load_config(tmp_path / "c.json")


def test_file_over_the_size_cap_is_refused_before_parsing(tmp_path, monkeypatch):
    def no_parse(*args, **kwargs):
        raise AssertionError("parsed a file over the cap")

    monkeypatch.setattr(config_module, "_parse_yaml", no_parse)
    content = VALID_YAML.replace("Quote the tool result verbatim.", "x" * MAX_CONFIG_BYTES)
    message = refused(tmp_path, content)
    assert "limit is 1,048,576" in message and "refused before parsing" in message and len(message) < 400


def test_fifo_named_like_a_config_does_not_block(tmp_path):
    os.mkfifo(tmp_path / "c.yaml")  # open() on it would wait for a writer forever
    result = cli(tmp_path, "validate", "c.yaml")
    assert result.returncode == 2 and "is not a regular file" in result.stderr


def test_symlink_to_an_endless_device_is_refused(tmp_path):
    os.symlink("/dev/zero", tmp_path / "c.yaml")  # stat size 0, read never ends
    result = cli(tmp_path, "validate", "c.yaml")
    assert result.returncode == 2 and "is not a regular file" in result.stderr


# --- nesting ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [
    "extra: " + "[" * 5000 + "]" * 5000,
    "extra: " + "{a: " * 5000 + "1" + "}" * 5000,
    "extra:\n" + "".join("  " * i + "a:\n" for i in range(1, 200)) + "  " * 200 + "a: 1",
    "extra: " + "[" * (MAX_CONFIG_BYTES // 2 - 1000),  # a file that is nothing but '['
])
def test_deep_yaml_nesting_is_a_config_error_not_a_recursion_error(tmp_path, extra):
    message = refused(tmp_path, VALID_YAML + extra + "\n")
    assert "c.yaml does not parse" in message
    assert "nested" in message or "nesting" in message


def test_nesting_at_the_cap_is_named_by_its_depth(tmp_path):
    message = refused(tmp_path, VALID_YAML + "extra: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n")
    assert f"nested more than {MAX_DEPTH} levels deep" in message and "line 11" in message


@pytest.mark.parametrize("depth", [200, 5000, 100_000])
def test_deep_json_nesting_is_a_config_error(tmp_path, depth):
    data = json.dumps(VALID)[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}"
    message = refused(tmp_path, data, "c.json")
    assert "nested" in message and str(MAX_DEPTH) in message


def test_self_containing_mapping_is_refused():
    data = json.loads(json.dumps(VALID))
    data["change"]["system_prompt"] = data["change"]  # contains itself
    with pytest.raises(tk.whatif.WhatIfConfigError, match="nested more than 64 levels"):
        load_config(data)


# --- aliases ------------------------------------------------------------------------------------------


def billion_laughs(levels=9, width=10):
    """~1 KB: each level lists the previous one ``width`` times, 10^9 strings once expanded."""
    items = ['&l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        items.append(f"&l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return "[" + ", ".join(items) + "]"


def test_alias_bomb_in_system_prompt_is_refused_in_little_memory(tmp_path):
    bomb = billion_laughs()
    assert len(bomb) < 1200
    content = VALID_YAML.replace('"Quote the tool result verbatim."', bomb)
    tracemalloc.start()
    try:
        message = refused(tmp_path, content)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "aliases expand this document past" in message and "change.system_prompt" in message
    assert peak < 20 * 2**20  # expanded, it would be ~10^9 list slots (8 GB)
    assert len(message) < 600


def test_alias_bomb_through_the_cli_exits_2(tmp_path):
    (tmp_path / "bomb.yaml").write_text(VALID_YAML.replace('"Quote the tool result verbatim."', billion_laughs()))
    result = cli(tmp_path, "validate", "bomb.yaml")
    assert result.returncode == 2 and "alias" in result.stderr and "Traceback" not in result.stderr


def test_recursive_alias_is_refused(tmp_path):
    message = refused(tmp_path, VALID_YAML.replace('"Quote the tool result verbatim."', "&loop [1, *loop]"))
    assert "recursive alias" in message and "change.system_prompt" in message


def test_a_few_aliases_still_work(tmp_path):
    text = VALID_YAML.replace("failure_cohort: {limit: 20}", "failure_cohort: &cohort {limit: 20, filter: 'since:7d'}")
    text = text.replace("baseline_cohort: {limit: 20}", "baseline_cohort: *cohort")
    (tmp_path / "c.yaml").write_text(text)
    config = load_config(tmp_path / "c.yaml")
    assert config.selection.baseline_cohort == config.selection.failure_cohort


# --- duplicate keys ----------------------------------------------------------------------------------


def test_second_decision_block_names_the_key_and_both_lines(tmp_path):
    text = VALID_YAML + "decision:\n  max_baseline_regression_ratio: 0.9\n"
    message = refused(tmp_path, text)
    first = VALID_YAML.splitlines().index("decision: {}") + 1
    second = VALID_YAML.count("\n") + 1
    assert f"duplicate key 'decision' (decision) at line {second}, first at line {first}" in message


def test_duplicate_key_deep_inside_names_its_path(tmp_path):
    text = VALID_YAML.replace("failure_cohort: {limit: 20}", "failure_cohort: {limit: 20, limit: 5}")
    message = refused(tmp_path, text)
    assert "duplicate key 'limit' (selection.failure_cohort.limit)" in message


def test_duplicate_json_keys_are_refused(tmp_path):
    text = json.dumps(VALID)[:-1] + ', "decision": {"seed": 1}}'
    assert "duplicate key 'decision'" in refused(tmp_path, text, "c.json")


# --- numbers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_json_non_finite_literals_are_refused(tmp_path, literal):
    text = json.dumps(VALID).replace('"decision": {}', f'"decision": {{"max_ci_width": {literal}}}')
    assert "must be finite" in refused(tmp_path, text, "c.json")


FLOAT_FIELDS = [
    ("decision", "max_baseline_regression_ratio"), ("decision", "min_failure_improvement_ratio"),
    ("decision", "practical_delta_epsilon"), ("decision", "max_ci_width"), ("decision", "ci_level"),
    ("decision", "max_trace_drop"), ("timeouts", "replay_seconds"), ("timeouts", "score_seconds"),
]


@pytest.mark.parametrize("section, field", FLOAT_FIELDS)
@pytest.mark.parametrize("literal", [".nan", ".inf", "-.inf"])
def test_nan_and_infinity_refused_in_every_float_field(tmp_path, section, field, literal):
    text = VALID_YAML.replace(f"{section}: {{}}", f"{section}: {{{field}: {literal}}}")
    message = refused(tmp_path, text)
    assert f"{section}.{field}" in message and "finite" in message


def test_nan_refused_in_the_jsonl_threshold(tmp_path):
    text = VALID_YAML.replace("source: {adapter: stub, synthetic_traces: 6, seed: 1}",
                              "source: {adapter: jsonl, path: t.jsonl, failure_below: .nan}")
    assert "source.failure_below" in refused(tmp_path, text)


def test_nan_refused_in_scoring_parameters(tmp_path):
    text = VALID_YAML.replace("scorer: {adapter: stub, cache_mode: \"off\"}",
                              "scorer: {adapter: stub, scoring_parameters: {temperature: .nan, top_p: .inf, n: 1}}")
    message = refused(tmp_path, text)
    assert "scorer.scoring_parameters" in message and "temperature, top_p" in message


@pytest.mark.parametrize("clause", ["score-below:nan", "score-above:inf", "score-below:-inf", "score-below:1e999",
                                    "since:" + "9" * 400 + "d"])
def test_non_finite_filter_numbers_are_refused(tmp_path, clause):
    text = VALID_YAML.replace("failure_cohort: {limit: 20}", f"failure_cohort: {{limit: 20, filter: '{clause}'}}")
    assert "finite" in refused(tmp_path, text)


def test_infinite_timeout_is_a_config_error_not_a_crash_later(tmp_path):
    (tmp_path / "c.yaml").write_text(VALID_YAML.replace("timeouts: {}", "timeouts: {replay_seconds: .inf}"))
    result = cli(tmp_path, "fork", "--config", "c.yaml", "--allow-stub")
    assert result.returncode == 2 and "timeouts.replay_seconds" in result.stderr and "finite" in result.stderr


@pytest.mark.parametrize("section, field, value", [
    ("decision", "practical_delta_epsilon", 1.5), ("decision", "max_ci_width", 2.0),
    ("timeouts", "replay_seconds", 86_401.0), ("timeouts", "score_seconds", 1e300),
    ("decision", "seed", -1), ("decision", "seed", 2**63), ("decision", "bootstrap_resamples", 10**9),
])
def test_numeric_fields_have_finite_bounds(section, field, value):
    data = json.loads(json.dumps(VALID))
    data[section][field] = value
    with pytest.raises(tk.whatif.WhatIfConfigError, match=f"{section}.{field}"):
        load_config(data)


def test_limits_and_source_seed_bounded():
    for mutate in (lambda d: d["selection"]["failure_cohort"].update(limit=1_000_001),
                   lambda d: d["source"].update(seed=2**64)):
        data = json.loads(json.dumps(VALID))
        mutate(data)
        with pytest.raises(tk.whatif.WhatIfConfigError, match="must be <="):
            load_config(data)
    data = json.loads(json.dumps(VALID))
    data["decision"]["seed"] = 2**63 - 1
    assert load_config(data).decision.seed == 2**63 - 1


def test_integer_past_pythons_digit_limit_names_its_line(tmp_path):
    message = refused(tmp_path, VALID_YAML.replace("decision: {}", "decision: {seed: " + "7" * 5000 + "}"))
    assert "cannot read" in message and "line 8" in message and len(message) < 1000
    assert "does not parse" in refused(tmp_path, json.dumps(VALID)[:-1] + ', "x": ' + "7" * 5000 + "}", "c.json")


# --- messages stay bounded ------------------------------------------------------------------------------


def test_a_one_megabyte_string_is_quoted_cut():
    data = json.loads(json.dumps(VALID))
    data["target"]["runner"] = "node:" + "x" * 1_000_000
    data["selection"]["failure_cohort"]["filter"] = "score-below:" + "y" * 1_000_000
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        load_config(data)
    message = str(info.value)
    assert len(message) < 2000 and "…(1000005 chars)" in message and "…(1000012 chars)" in message


def test_a_million_item_list_in_a_string_field_is_quoted_cut():
    data = json.loads(json.dumps(VALID))
    data["change"]["system_prompt"] = list(range(10**6))
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        load_config(data)
    message = str(info.value)
    assert "change.system_prompt" in message and "…(1000000 items)" in message and len(message) < 600


def test_a_huge_mapping_in_a_string_field_is_summarised():
    data = json.loads(json.dumps(VALID))
    data["change"]["system_prompt"] = {f"k{i}": "v" * 100 for i in range(100_000)}
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        load_config(data)
    message = str(info.value)
    assert "got a mapping with 100000 keys" in message and len(message) < 400


def test_thousands_of_problems_list_twenty(tmp_path):
    text = VALID_YAML + "".join(f"unknown_{i}: 1\n" for i in range(5000))
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        (tmp_path / "c.yaml").write_text(text)
        load_config(tmp_path / "c.yaml")
    message = str(info.value)
    assert "(5000 problems)" in message and "… and 4980 more problems" in message and len(message) < 4000


def test_a_one_megabyte_unknown_key_is_cut():
    data = json.loads(json.dumps(VALID))
    data["decision"]["k" * 1_000_000] = 1
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        load_config(data)
    assert len(str(info.value)) < 600 and "…(1000000 chars)" in str(info.value)


def test_an_unprintable_repr_does_not_hide_the_error():
    data = json.loads(json.dumps(VALID))
    data["change"]["system_prompt"] = 10**5000  # repr() raises past 4300 digits
    with pytest.raises(tk.whatif.WhatIfConfigError, match=r"change.system_prompt.*got <int>"):
        load_config(data)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_lone_surrogate_is_a_config_error_not_a_crash_in_the_report_writer(tmp_path, suffix):
    # JSON "\ud800" decodes to a str that no UTF-8 writer accepts (config hash, report);
    # YAML's parser refuses the escape itself
    data = json.loads(json.dumps(VALID))
    data["change"]["system_prompt"] = "a\ud800b"
    (tmp_path / f"c{suffix}").write_text(json.dumps(data) if suffix == ".json" else
                                        VALID_YAML.replace('"Quote the tool result verbatim."', '"a\\ud800b"'))
    for command in (["validate", f"c{suffix}"], ["fork", "--config", f"c{suffix}", "--allow-stub"]):
        result = cli(tmp_path, *command)
        assert result.returncode == 2 and "internal error" not in result.stderr, result.stderr
    assert "lone surrogate" in result.stderr or "invalid Unicode" in result.stderr


def test_scoring_parameters_refuse_objects_and_huge_integers(tmp_path):
    text = VALID_YAML.replace("scorer: {adapter: stub, cache_mode: \"off\"}",
                              "scorer: {adapter: stub, scoring_parameters: {when: 2026-11-30, blob: !!binary aGk=}}")
    assert "when" in refused(tmp_path, text) and "blob" in refused(tmp_path, text)
    data = json.loads(json.dumps(VALID))
    data["scorer"]["scoring_parameters"] = {"max_tokens": 10**40}
    with pytest.raises(tk.whatif.WhatIfConfigError, match="max_tokens"):
        load_config(data)


@pytest.mark.parametrize("argument", ["--output-json", "--output-md"])
@pytest.mark.parametrize("bad", ["r\x00.json", "x" * 300 + ".json", "missing-dir-is-fine/../../../../../../proc/r.json"])
def test_unwritable_report_paths_exit_2(tmp_path, monkeypatch, capsys, argument, bad):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(VALID_YAML)
    other = "--output-md" if argument == "--output-json" else "--output-json"
    code = main(["whatif", "fork", "--config", "c.yaml", "--allow-stub", argument, bad, other, "ok.out"])
    err = capsys.readouterr().err
    assert code == 2 and "failed to write the report artifacts" in err and "internal error" not in err


@pytest.mark.parametrize("name", ["\x00.yaml", "x" * 300 + ".yaml"])
def test_unusable_config_names_exit_2(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    for command in (["validate", name], ["fork", "--config", name], ["init", name]):
        assert main(["whatif", *command]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and len(err) < 600


def test_nul_in_a_path_field_is_a_config_error():
    for mutate in (lambda d: d["scorer"].update(cache_dir="cache\x00dir", cache_mode="on"),
                   lambda d: d.update(source={"adapter": "jsonl", "path": "t\x00.jsonl"})):
        data = json.loads(json.dumps(VALID))
        mutate(data)
        with pytest.raises(tk.whatif.WhatIfConfigError, match="NUL"):
            load_config(data)


# --- YAML that builds odd Python objects -----------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    ("!!python/object/apply:os.system ['true']", "could not determine a constructor"),
    ("!!binary aGVsbG8=", "change.system_prompt"),
    ("!!set {a, b}", "change.system_prompt"),
    ("2026-02-30", "day is out of range"),
])
def test_odd_yaml_values_are_config_errors(tmp_path, value, expected):
    assert expected in refused(tmp_path, VALID_YAML.replace('"Quote the tool result verbatim."', value))


def test_non_string_keys_are_config_errors(tmp_path):
    assert "Keys should be strings" in refused(tmp_path, VALID_YAML + "1: one\n")
    assert "does not parse" in refused(tmp_path, VALID_YAML + "? [a, b]\n: 1\n")


def test_the_pure_python_loader_refuses_the_same(tmp_path):
    # PyYAML built without libyaml falls back to its Python parser: same refusals
    for text, expected in ((VALID_YAML + "decision: {}\n", "duplicate key 'decision'"),
                           (VALID_YAML.replace('"Quote the tool result verbatim."', billion_laughs()), "aliases expand"),
                           (VALID_YAML + "x: " + "[" * 100 + "]" * 100 + "\n", "nested more than 64")):
        with pytest.raises(yaml.YAMLError, match=expected):
            config_module._parse_yaml(text, "c.yaml", config_module._PythonLoader)


# --- property: no config makes the CLI lie ----------------------------------------------------------------

LEAVES = [(section, key) for section, body in VALID.items() for key in body] + [
    ("selection", "failure_cohort"), ("selection", "baseline_cohort"), ("decision", "seed"),
    ("decision", "max_ci_width"), ("decision", "practical_delta_epsilon"), ("decision", "cluster_by"),
    ("timeouts", "replay_seconds"), ("timeouts", "score_seconds"), ("reporting", "profile"),
    ("reporting", "forensic_acknowledgment"), ("target", "replays"), ("target", "max_workers"),
    ("scorer", "scoring_parameters"), ("scorer", "score_fn"), ("scorer", "cache_dir"), ("scorer", "cache_mode"),
    ("source", "path"), ("source", "label_field"), ("experiment_shape", None),
]
DEEP = "__DEEP_NESTING__"
# Hostile values; none is a valid number between 21 and 10**6, so no generated run is large.
HOSTILE = st.one_of(
    st.sampled_from([
        None, True, False, "", " ", "x" * 300, 0, -1, 1, 5, 2**63, -(2**63), 10**30, 1e308, -1e308, 1e-300,
        float("nan"), float("inf"), float("-inf"), [], {}, [1, 2], {"a": 1}, {"limit": 5}, [[[[]]]],
        "score-below:nan", "since:1e999d", "label: Failure ", "2026-02-30", "2026-11-30", "python:a:b",
        "python:toolkit.whatif.examples:grounding_score", "forensic", "regression_check", "stub", "inspect_ai",
        "task_id", "metadata.", "\x00", "\ud800", DEEP,
    ]),
    st.integers(min_value=-30, max_value=30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)


@st.composite
def hostile_files(draw):
    """(file name, bytes): the valid config with a few mutations, in YAML or JSON, maybe corrupted."""
    data = json.loads(json.dumps(VALID))
    # mostly one mutation: the rest of the config stays valid, so the hostile value reaches
    # the code behind validation (the config hash, the run, the report writer)
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 4]))):
        section, key = draw(st.sampled_from(LEAVES))
        action = draw(st.sampled_from(["set", "set", "set", "delete", "unknown"]))
        value = draw(HOSTILE)
        if key is None:
            data[section] = value
        elif action == "unknown":
            data[draw(st.sampled_from([section, "decision", "nonsense"]))] = {draw(st.text(max_size=8)): value}
        elif not isinstance(data.get(section), dict):
            data[section] = {key: value}
        elif action == "delete":
            data[section].pop(key, None)
        else:
            data[section][key] = value
    source = data.get("source")
    if isinstance(source, dict) and isinstance(source.get("synthetic_traces"), int) and source["synthetic_traces"] > 20:
        source["synthetic_traces"] = 20  # keep each run small; the bound itself is tested above
    suffix = draw(st.sampled_from([".yaml", ".json"]))
    text = json.dumps(data) if suffix == ".json" else yaml.safe_dump(data, allow_unicode=True)
    depth = draw(st.sampled_from([3, 70, 5000]))
    text = text.replace(f'"{DEEP}"', "[" * depth + "]" * depth).replace(DEEP, "[" * depth + "]" * depth)
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=8)) + raw[at + draw(st.integers(0, 4)):]
    return "hostile" + suffix, raw


def run_main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(hostile_files())
def test_hostile_configs_never_make_the_cli_raise_or_lie(monkeypatch_env, case):
    name, raw = case
    with tempfile.TemporaryDirectory() as directory, contextlib.chdir(directory):
        with open(name, "wb") as handle:
            handle.write(raw)
        code, _, err = run_main(["whatif", "validate", name])
        assert code in (0, 2), err
        assert "internal error" not in err and "Traceback" not in err
        fork_code, _, fork_err = run_main(["whatif", "fork", "--config", name, "--allow-stub",
                                           "--output-json", "r.json", "--output-md", "r.md"])
        assert fork_code in (0, 1, 2), fork_err
        assert "internal error" not in fork_err and "Traceback" not in fork_err
        if code == 2:
            assert fork_code == 2  # an invalid config never reaches a verdict
        if fork_code in (0, 1):
            # exit 0 and 1 are verdicts: they must be the verdict the report carries
            state = json.loads(open("r.json", encoding="utf-8").read())["verdict_state"]
            assert state == {0: "ship", 1: "dont_ship"}[fork_code]


@pytest.fixture
def monkeypatch_env(monkeypatch):
    # CI=true would switch cache_mode auto to on; the temp directory holds the cache either way
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TOOLKIT_DEBUG", raising=False)
    return monkeypatch


def test_the_valid_base_runs_under_the_property_harness():
    with tempfile.TemporaryDirectory() as directory, contextlib.chdir(directory):
        with open("c.yaml", "w", encoding="utf-8") as handle:
            handle.write(VALID_YAML)
        assert run_main(["whatif", "validate", "c.yaml"])[0] == 0
        code, out, err = run_main(["whatif", "fork", "--config", "c.yaml", "--allow-stub",
                                   "--output-json", "r.json", "--output-md", "r.md"])
        assert code == 0 and "internal error" not in err, err
        assert out.startswith("✓ toolkit.whatif: Ship")
