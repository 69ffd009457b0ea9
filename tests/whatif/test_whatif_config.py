"""Config loading and validation (docs/design/whatif.md §6 and acceptance facts 1-16 of docs/design/whatif.md §10)."""

import copy
import json

import pytest
import yaml

import toolkit as tk
from toolkit.whatif.config import parse_filter

BASE = {
    "source": {"adapter": "stub"},
    "target": {"runner": "python:toolkit.whatif.examples:support_agent"},
    "selection": {"failure_cohort": {"limit": 5}, "baseline_cohort": {"limit": 5}},
    "change": {"system_prompt": "Quote the tool result."},
    "scorer": {"adapter": "stub"},
    "decision": {},
    "reporting": {},
    "timeouts": {},
}


def with_change(change):
    data = copy.deepcopy(BASE)
    change(data)
    return data


def problems(data):
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        tk.whatif.load_config(data)
    return str(info.value)


def test_defaults_of_every_section():
    config = tk.whatif.load_config(BASE)
    assert config.experiment_shape == "failure_rescue"
    assert config.decision.require_baseline is True
    assert config.decision.max_baseline_regression_ratio == 0.10
    assert config.decision.min_failure_improvement_ratio == 0.50
    assert config.decision.practical_delta_epsilon == 0.05
    assert config.decision.max_ci_width is None
    assert config.reporting.profile == "default"
    assert config.timeouts.replay_seconds == 60.0 and config.timeouts.score_seconds == 30.0
    assert config.scorer.cache_mode == "auto" and config.scorer.scoring_parameters == {}
    assert config.change.model is None


@pytest.mark.parametrize("section", ["decision", "reporting", "timeouts", "source", "target", "selection", "change", "scorer"])
def test_every_section_is_required_as_a_key(section):
    message = problems(with_change(lambda d: d.pop(section)))
    assert f"{section}: field required" in message


def test_unknown_nested_key_names_path_and_nearest_name():  # fact 1
    message = problems(with_change(lambda d: d["decision"].update(max_regresion=0.2)))
    assert "decision.max_regresion: unknown field" in message
    assert "did you mean 'max_baseline_regression_ratio'?" in message


def test_unknown_top_level_section_is_named():  # fact 2
    assert "mystery_section: unknown field" in problems(with_change(lambda d: d.update(mystery_section={})))


def test_forensic_typo_suggests_the_real_name():
    message = problems(with_change(lambda d: d["reporting"].update(forensic_ackn0wledgment={})))
    assert "did you mean 'forensic_acknowledgment'?" in message


def test_failure_rescue_needs_failure_cohort():  # fact 3
    message = problems(with_change(lambda d: d["selection"].pop("failure_cohort")))
    assert "(root)" in message and "failure_cohort is required" in message


def test_regression_check_rejects_failure_cohort():  # fact 4
    message = problems(with_change(lambda d: d.update(experiment_shape="regression_check")))
    assert "must be removed" in message
    ok = with_change(lambda d: (d.update(experiment_shape="regression_check"), d["selection"].pop("failure_cohort")))
    assert tk.whatif.load_config(ok).experiment_shape == "regression_check"


@pytest.mark.parametrize("shape", ["failure_rescue", "regression_check"])
def test_baseline_cohort_always_required(shape):  # fact 5
    def change(d):
        d["experiment_shape"] = shape
        d["selection"].pop("baseline_cohort")
        if shape == "regression_check":
            d["selection"].pop("failure_cohort")

    assert "selection.baseline_cohort: field required" in problems(with_change(change))


def test_range_hints():  # facts 6, 7, 8
    assert "must be >= 1" in problems(with_change(lambda d: d["selection"]["failure_cohort"].update(limit=0)))
    assert "fraction in [0, 1]" in problems(with_change(lambda d: d["decision"].update(max_baseline_regression_ratio=1.5)))
    assert "must be > 0" in problems(with_change(lambda d: d["timeouts"].update(replay_seconds=0)))
    assert "must be >= 0" in problems(with_change(lambda d: d["decision"].update(max_ci_width=-1)))
    loaded = tk.whatif.load_config(with_change(lambda d: d["timeouts"].update(replay_seconds=60)))
    assert loaded.timeouts.replay_seconds == 60.0 and isinstance(loaded.timeouts.replay_seconds, float)


def test_strict_types_refuse_coercion():
    assert "require_baseline" in problems(with_change(lambda d: d["decision"].update(require_baseline="yes")))
    assert "limit" in problems(with_change(lambda d: d["selection"]["baseline_cohort"].update(limit="5")))


def test_unknown_shape_named():  # fact 9
    assert "experiment_shape" in problems(with_change(lambda d: d.update(experiment_shape="ab_test")))


def test_inspect_ai_lists_missing_fields():  # fact 10
    message = problems(with_change(lambda d: d["scorer"].update(adapter="inspect_ai", judge_model_id="m", rubric_id="r", rubric_text="t")))
    assert "score_fn, judge_provider" in message


def test_python_scorer_needs_score_fn():
    assert "requires score_fn" in problems(with_change(lambda d: d["scorer"].update(adapter="python")))


def test_nested_scoring_parameters_rejected():  # fact 11
    message = problems(with_change(lambda d: d["scorer"].update(scoring_parameters={"stops": ["a", "b"], "temperature": 0.1})))
    assert "stops" in message and "temperature" not in message.split("key(s):")[1]


def test_source_adapter_rules():  # fact 12 and our stricter rules
    assert "spans_provider" in problems(with_change(lambda d: d["source"].update(adapter="phoenix")))
    assert "requires: path" in problems(with_change(lambda d: d["source"].update(adapter="jsonl")))
    assert "did you mean 'phoenix'" in problems(with_change(lambda d: d["source"].update(adapter="phenix")))
    stray = problems(with_change(lambda d: d["source"].update(path="x.jsonl")))
    assert "path (adapter jsonl) do not apply to adapter 'stub'" in stray


def test_file_errors(tmp_path):  # fact 13
    toml = tmp_path / "c.toml"
    toml.write_text("x = 1")
    with pytest.raises(tk.whatif.WhatIfConfigError, match="unsupported config extension"):
        tk.whatif.load_config(toml)
    listed = tmp_path / "c.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(tk.whatif.WhatIfConfigError, match="must parse to a mapping"):
        tk.whatif.load_config(listed)
    with pytest.raises(tk.whatif.WhatIfConfigError, match="not found"):
        tk.whatif.load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "b.json"
    broken.write_text("{")
    with pytest.raises(tk.whatif.WhatIfConfigError, match="does not parse"):
        tk.whatif.load_config(broken)


def test_yaml_and_json_load_the_same(tmp_path):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(BASE))
    (tmp_path / "c.json").write_text(json.dumps(BASE))
    a, b = tk.whatif.load_config(tmp_path / "c.yaml"), tk.whatif.load_config(str(tmp_path / "c.json"))
    assert a == b and a.config_hash() == b.config_hash()


def test_forensic_block_rules():  # fact 14 (config half)
    assert "forensic_acknowledgment" in problems(with_change(lambda d: d["reporting"].update(profile="forensic")))
    bad_date = problems(with_change(lambda d: d["reporting"].update(
        profile="forensic", forensic_acknowledgment={"accepted_by": "a", "accepted_at": "yesterday", "reason": "r"})))
    assert "accepted_at" in bad_date and "ISO 8601" in bad_date
    for stamp in ("2026-11-30", "2026-11-30T10:00Z", "2026-11-30 10:00:01.5+01:00"):
        tk.whatif.load_config(with_change(lambda d: d["reporting"].update(
            profile="forensic", forensic_acknowledgment={"accepted_by": "a", "accepted_at": stamp, "reason": "r"})))


def test_runner_reference_shape():  # fact 15 (format half; resolution is in the pipeline tests)
    assert "one ':'" in problems(with_change(lambda d: d["target"].update(runner="python:pkg.mod")))
    assert "one ':'" in problems(with_change(lambda d: d["target"].update(runner="python:a:b:c")))
    assert "unsupported runner scheme 'node'" in problems(with_change(lambda d: d["target"].update(runner="node:x")))


def test_several_problems_listed_at_once():
    error = None
    try:
        tk.whatif.load_config(with_change(lambda d: (d["decision"].update(max_ci_width=-1, practical_delta_epsilon=-1),
                                                     d["timeouts"].update(score_seconds=0))))
    except tk.whatif.WhatIfConfigError as caught:
        error = caught
    assert error is not None and len(error.problems) == 3
    assert "3 problems" in str(error)
    assert isinstance(error, tk.ConfigError) and isinstance(error, tk.ToolkitError)


def test_filter_grammar():
    clauses = parse_filter("score-below:0.6, since:24h,label:failure,has-tool:lookup,task:7")
    assert [c.name for c in clauses] == ["score-below", "since", "label", "has-tool", "task"]
    assert clauses[0].number == 0.6 and clauses[1].number == 24 * 3600
    assert "did you mean 'score-below'" in problems(with_change(lambda d: d["selection"]["failure_cohort"].update(filter="score-belw:0.6")))
    assert "needs a number" in problems(with_change(lambda d: d["selection"]["failure_cohort"].update(filter="score-below:low")))
    assert "duration" in problems(with_change(lambda d: d["selection"]["failure_cohort"].update(filter="since:yesterday")))


def test_model_and_dict_and_path_all_accepted(tmp_path):
    model = tk.whatif.load_config(BASE)
    assert tk.whatif.load_config(model) is model
    with pytest.raises(tk.whatif.WhatIfConfigError, match="must be a path, a dict"):
        tk.whatif.load_config(42)


def test_the_documented_example_config_validates():
    doc = tk.whatif.__doc__
    block = doc[doc.index("    experiment_shape"): doc.index("Modules:")]
    config = tk.whatif.load_config(yaml.safe_load("\n".join(line[4:] for line in block.splitlines())))
    assert config.selection.failure_cohort.clauses[1].number == 7 * 86400
    assert config.decision == tk.whatif.load_config(BASE).decision


# --- the user's spec example (seeds/004 "Full example"), copied verbatim -----------------------------

SPEC_EXAMPLE = """\
source:
  adapter: langfuse                    # or "stub" for offline use
target:
  runner: "python:my_agent.replay:run"
selection:
  failure_cohort:
    limit: 20
    filter: "score-below:0.6,since:24h"  # optional; adapter-interpreted
  baseline_cohort:
    limit: 20
    filter: "score-above:0.8,since:24h"
change:
  system_prompt: "You are a senior on-call SRE..."
  # model: "claude-haiku-4-5"          # optional model swap
scorer:
  adapter: inspect_ai                  # or "stub"
  cache_mode: auto                     # auto | on | off | read_only | refresh
decision:
  require_baseline: true
  max_baseline_regression_ratio: 0.10
  min_failure_improvement_ratio: 0.50
  practical_delta_epsilon: 0.05
  # max_ci_width: 0.5                  # optional cap on CI width
reporting:
  profile: default                     # default | review | minimal | forensic
timeouts:
  replay_seconds: 60.0
  score_seconds: 30.0
"""


def test_spec_example_fails_only_on_adapter_fields_each_explained(tmp_path):
    (tmp_path / "whatif.config.yaml").write_text(SPEC_EXAMPLE)
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        tk.whatif.load_config(tmp_path / "whatif.config.yaml")
    error = info.value
    assert len(error.problems) == 2  # the langfuse host, the inspect_ai judge fields; nothing else
    source, scorer = error.problems
    assert source.startswith("source: adapter 'langfuse' requires: host")
    assert "source.host: the base URL of your Langfuse server" in source and 'e.g. host: "https://cloud.langfuse.com"' in source
    assert scorer.startswith("scorer: adapter 'inspect_ai' requires: score_fn, judge_provider, judge_model_id, rubric_id, rubric_text")
    for field in ("score_fn", "judge_provider", "judge_model_id", "rubric_id", "rubric_text"):
        assert f"scorer.{field}: " in scorer and f"e.g. {field}: " in scorer


def test_spec_example_loads_with_the_named_fields_added(tmp_path):
    text = SPEC_EXAMPLE.replace("  adapter: langfuse                    # or \"stub\" for offline use\n",
                                "  adapter: langfuse\n  host: \"https://cloud.langfuse.com\"\n")
    text = text.replace("  adapter: inspect_ai                  # or \"stub\"\n",
                        "  adapter: inspect_ai\n  score_fn: \"python:my_agent.judge:score\"\n  judge_provider: anthropic\n"
                        "  judge_model_id: claude-haiku-4-5\n  rubric_id: faithfulness-v2\n  rubric_text: \"Score 1 if ...\"\n")
    (tmp_path / "c.yaml").write_text(text)
    config = tk.whatif.load_config(tmp_path / "c.yaml")
    assert config.source.host == "https://cloud.langfuse.com" and config.decision.practical_delta_epsilon == 0.05
    assert config.selection.failure_cohort.clauses[1].number == 24 * 3600


def test_spec_example_loads_as_is_with_its_offline_alternatives(tmp_path):
    # the example's own comments: adapter "stub" for the source and the scorer
    text = SPEC_EXAMPLE.replace("adapter: langfuse", "adapter: stub").replace("adapter: inspect_ai", "adapter: stub")
    (tmp_path / "c.yaml").write_text(text)
    assert tk.whatif.load_config(tmp_path / "c.yaml").scorer.adapter == "stub"


def test_every_required_adapter_field_says_why_and_gives_an_example():
    for source, field in (({"adapter": "jsonl"}, "path"), ({"adapter": "phoenix"}, "spans_provider"),
                          ({"adapter": "langfuse"}, "host")):
        message = problems(with_change(lambda d: d.update(source=source)))
        assert f"source.{field}: " in message and f"e.g. {field}: " in message
    message = problems(with_change(lambda d: d["scorer"].update(adapter="python")))
    assert "requires score_fn" in message and 'e.g. score_fn: "python:' in message


# --- dates -----------------------------------------------------------------------------------------------


def forensic_yaml(stamp):
    return yaml.safe_dump({**BASE, "reporting": {}}).replace(
        "reporting: {}", "reporting:\n  profile: forensic\n  forensic_acknowledgment:\n"
        f"    accepted_by: me\n    accepted_at: {stamp}\n    reason: audit")


@pytest.mark.parametrize("stamp, stored", [
    ("2026-11-30", "2026-11-30"),  # YAML reads this as a datetime.date
    ("2026-11-30 10:00:00", "2026-11-30T10:00:00"),  # ... and this as a datetime
    ("2026-11-30T10:00:00Z", "2026-11-30T10:00:00+00:00"),
    ("'2026-11-30T10:00Z'", "2026-11-30T10:00Z"),
])
def test_accepted_at_takes_unquoted_yaml_dates(tmp_path, stamp, stored):
    (tmp_path / "c.yaml").write_text(forensic_yaml(stamp))
    config = tk.whatif.load_config(tmp_path / "c.yaml")
    assert config.reporting.forensic_acknowledgment.accepted_at == stored


@pytest.mark.parametrize("stamp", ["'2026-13-45'", "'2026-02-30'", "'2026-11-30T25:00'", "'2026-11-30T10:61Z'", "2026-02-30"])
def test_accepted_at_refuses_impossible_dates(tmp_path, stamp):
    (tmp_path / "c.yaml").write_text(forensic_yaml(stamp))
    with pytest.raises(tk.whatif.WhatIfConfigError) as info:
        tk.whatif.load_config(tmp_path / "c.yaml")
    message = str(info.value)
    assert "accepted_at" in message or "day is out of range" in message
    assert "not a real date" in message or "out of range" in message


def test_accepted_at_date_objects_from_a_mapping():
    import datetime

    for value in (datetime.date(2026, 11, 30), datetime.datetime(2026, 11, 30, 10, 0)):
        config = tk.whatif.load_config(with_change(lambda d: d["reporting"].update(
            profile="forensic", forensic_acknowledgment={"accepted_by": "a", "accepted_at": value, "reason": "r"})))
        assert config.reporting.forensic_acknowledgment.accepted_at.startswith("2026-11-30")
