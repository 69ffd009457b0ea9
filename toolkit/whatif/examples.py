"""A small, real example runner and scorer for the what-if fork (used by notebook 08).

``support_agent`` is a deterministic, rule-following support agent, written so a reader can
see how a system-prompt change changes behaviour without a model: it looks up the record the
user asks about through the trace's tool cache (the recorded tool output, never a live call),
then answers according to its system prompt:

- a prompt containing "quote" or "verbatim" makes it state every field of the tool result;
- a prompt containing "status" makes it state the status only;
- otherwise it acknowledges the request without details (the failure seen in production);
- a prompt containing "cancelled orders need no details" makes it answer a cancelled record
  with "That one was cancelled." and nothing else.

A prompt containing "be brief" truncates the answer to its first sentence. The agent reads the
tool name and arguments to use from the trace's recorded tools, as a real agent would decide
on the same call for the same question. ``grounding_score`` scores one output on one rubric:
the share of the recorded tool result's values that the output states (0..1).

Point a config at them with ``target.runner: "python:toolkit.whatif.examples:support_agent"``
and ``scorer: {adapter: python, score_fn: "python:toolkit.whatif.examples:grounding_score"}``.

:data:`EXAMPLE_CONFIG` is such a config with every field commented, and :func:`write_example`
(``python -m toolkit whatif init``) writes it with the small trace file it reads: a starting
point that validates and runs offline, to edit section by section.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolkit.errors import ConfigError
from toolkit.whatif.sources import stub_traces

__all__ = ["support_agent", "async_support_agent", "grounding_score", "support_rows", "OLD_PROMPT", "CURRENT_PROMPT",
           "EXAMPLE_CONFIG", "EXAMPLE_TRACES", "write_example"]

_RECORD = re.compile(r"\b[A-Z]{3}-\d{5}\b")


def _answer(record: Any, prompt: str) -> str:
    prompt = prompt.lower()
    if not isinstance(record, Mapping):
        return "Thanks for reaching out, I'm looking into it and will get back to you."
    if "cancelled orders need no details" in prompt and record.get("status") == "cancelled":
        # a shortcut that helps most tickets and quietly wrecks a few (notebook 08's severity demo)
        return "That one was cancelled."
    if "quote" in prompt or "verbatim" in prompt:
        details = "; ".join(f"{key}: {value}" for key, value in record.items())
        text = f"Here is what I found. {details}."
    elif "status" in prompt:
        text = f"The status is {record.get('status', 'unknown')}."
    else:
        text = "Thanks for reaching out, I'm looking into it and will get back to you."
    if "be brief" in prompt:
        text = text.split(". ")[0].rstrip(".") + "."
    return text


def support_agent(trace_input, replay_config, tool_cache) -> dict[str, Any]:
    """Sync runner: one tool lookup through ``tool_cache``, then an answer per the prompt."""
    prompt = replay_config.system_prompt or trace_input.original_system_prompt or ""
    match = _RECORD.search(trace_input.user_message)
    tool = trace_input.recorded_tools[0] if trace_input.recorded_tools else "lookup"
    record = tool_cache.lookup(tool, {"id": match.group(0)}) if match else None
    return {"text": _answer(record, prompt), "tool_calls": list(tool_cache.calls)}


async def async_support_agent(trace_input, replay_config, tool_cache) -> dict[str, Any]:
    """The same agent as an ``async def`` runner (e.g. for an async model client)."""
    await asyncio.sleep(0)
    return support_agent(trace_input, replay_config, tool_cache)


def grounding_score(case) -> dict[str, Any]:
    """Share of the recorded tool result's values stated in the output (0..1), with a reason."""
    values = []
    for call in case.recorded_tool_calls:
        result = call.get("result")
        if isinstance(result, Mapping):
            values.extend(str(v).lower() for v in result.values())
    if not values:
        return {"score": None, "rationale": "no recorded tool result to check against"}
    text = case.output_text.lower()
    found = [v for v in values if v in text]
    return {"score": len(found) / len(values), "rationale": f"states {len(found)} of {len(values)} looked-up facts"}


# The two prompts the recorded traffic ran under: the failures come from an older prompt that
# only acknowledges, the baselines from the current one that quotes the record.
OLD_PROMPT = "You are a support agent."
CURRENT_PROMPT = "You are a support agent. Look the record up and quote the tool result verbatim."


def support_rows(n_failure: int = 20, n_baseline: int = 20, seed: int = 0) -> list[dict[str, Any]]:
    """Rows (schema v1) of recorded support conversations: failures have reward 0, baselines 1.

    Each row records the system prompt it ran under (:data:`OLD_PROMPT` for the failures,
    :data:`CURRENT_PROMPT` for the baselines), so a replay with no change reproduces it.

    Built from :func:`toolkit.whatif.sources.stub_traces`, so the tool results are the same
    seeded records; write them with ``tk.save_rows`` to get a jsonl source.
    """
    rows = []
    for trace in stub_traces(max(n_failure, n_baseline), seed):
        index = int(trace.trace_id.split("-")[1])
        if (trace.cohort == "failure" and index >= n_failure) or (trace.cohort == "baseline" and index >= n_baseline):
            continue
        rows.append({
            "schema_version": "1",
            "trace_id": trace.trace_id,
            "task_id": trace.trace_id,
            "prompt": trace.user_message,
            "steps": [{"tool": c.name, "arguments": c.arguments, "result": c.result} for c in trace.tool_calls]
            + [{"text": trace.original_output}],
            "final_text": trace.original_output,
            "reward": 0.0 if trace.cohort == "failure" else 1.0,
            # the prompt each conversation ran under, so an A/A replay (no change) reproduces it
            "system_prompt": OLD_PROMPT if trace.cohort == "failure" else CURRENT_PROMPT,
        })
    return rows


# --- a starting point: `python -m toolkit whatif init` ----------------------------------------

EXAMPLE_TRACES = "whatif-example-traces.jsonl"
# 10 per cohort: above the trust floor's 5 per cohort, small enough to replay in a second.
_EXAMPLE_PER_COHORT = 10

EXAMPLE_CONFIG = """\
# A what-if experiment, written by `python -m toolkit whatif init`. It runs offline as it is:
# recorded support conversations in {traces}, the example agent and scorer of
# toolkit.whatif.examples. Replace one section at a time with your own traces, agent, scorer.
#
#   python -m toolkit whatif validate {config}
#   python -m toolkit whatif fork --config {config}
#
# Exit codes: 0 Ship, 1 Don't Ship, 2 Inconclusive or a setup/user error,
# 3 internal error (a bug, never a verdict: please report it), 130 interrupted.

# failure_rescue: does the change fix known-bad traces without breaking known-good ones?
# regression_check: does the change break known-good traces? (then delete failure_cohort)
experiment_shape: failure_rescue

source:
  # where recorded traces come from: jsonl (a file), phoenix (OpenInference spans from a
  # python:<module>:<attr> function), langfuse (its public API: host, key variables) or stub
  # (synthetic, offline). Each adapter takes only its own fields; another's is an error.
  adapter: jsonl
  # the trace file: toolkit rows (one JSON object a line) or a tau-bench results .json.
  # A relative path resolves against the directory the command runs in.
  path: {traces_path}
  # auto tells the two formats apart by the first character; or: rows, tau_bench
  format: auto
  # a trace whose reward is below this is in the failure cohort, the others in the baseline.
  # (label_field: <column> reads the cohort from a column instead: failure / baseline)
  failure_below: 0.5

target:
  # your agent, python:<module.path>:<attr>, called once per trace as
  # runner(trace_input, replay_config, tool_cache) -> {{"text": ...}}; sync or async.
  # Tool calls are answered from the trace's recorded tool outputs (tool_cache.lookup).
  runner: "python:toolkit.whatif.examples:support_agent"
  # traces replayed at once (1..256)
  max_workers: 4
  # replays of each trace under the change (1..20); more than 1 averages out the agent's
  # own randomness, at that many times the calls
  replays: 1

selection:
  failure_cohort:
    # the most traces taken (1..1,000,000), the most recent first
    limit: 20
    # optional; all clauses must hold: score-below:X, score-above:X (the trace's original
    # score), since:24h (s/m/h/d), label:V, has-tool:NAME, task:ID
    filter: "score-below:0.5"
  baseline_cohort:
    # the most traces taken, as a seeded random sample (decision.seed)
    limit: 20
    # the same clauses; here: traces whose original score was good
    filter: "score-above:0.5"

change:
  # the change under test: the system prompt every replay runs with (null: each trace's own)
  system_prompt: "Quote the tool result verbatim."
  # an optional model swap handed to the runner (null: the runner's default)
  model: null

scorer:
  # python (any python:<module>:<attr> function), inspect_ai (Inspect AI scorers; needs
  # score_fn, judge_provider, judge_model_id, rubric_id, rubric_text) or stub (offline check)
  adapter: python
  # scores ONE output at a time: score_fn(case) -> {{"score": 0..1, "rationale": "..."}};
  # the original and the replayed output are scored separately, delta = replayed - original
  score_fn: "python:toolkit.whatif.examples:grounding_score"
  # a human name of the rubric, shown in the report and part of the score-cache key
  rubric_id: grounding-v1
  # the rubric; hashed into the cache key, so an edited rubric is scored afresh
  rubric_text: "The share of the looked-up facts that the answer states."
  # model-graded scorers also set judge_provider, judge_model_id, judge_model_snapshot
  # extra settings passed to the scorer: str, int, float, bool or null values only
  scoring_parameters: {{}}
  # score cache: auto (on when $CI is set, else off), on, off, read_only, refresh
  cache_mode: auto
  # where cached scores are kept (relative to the directory the command runs in)
  cache_dir: .toolkit-whatif/cache
  # outputs scored at once (1..256)
  max_workers: 4

decision:
  # a Ship needs the baseline cohort too (the trust floor asks 5 selected, replayed and
  # scored traces per required cohort, whatever this file says)
  require_baseline: true
  # Don't Ship when more than this share of baseline traces got worse (0..1)
  max_baseline_regression_ratio: 0.10
  # Don't Ship when less than this share of failure traces got better (0..1)
  min_failure_improvement_ratio: 0.50
  # a trace improved / regressed when its score moved by more than this (0..1)
  practical_delta_epsilon: 0.05
  # optional cap on the confidence interval's width (0..1); a wider interval blocks Ship
  max_ci_width: null
  # bootstrap resamples of the median delta's confidence interval (100..1,000,000)
  bootstrap_resamples: 5000
  # the interval's confidence level (0.9 up to, not including, 1)
  ci_level: 0.95
  # seeds the bootstrap and the baseline sample (0..2**63-1): same seed, same report
  seed: 42
  # a trace whose score falls by more than this is a severe drop (0 < x <= 1) ...
  max_trace_drop: 0.5
  # ... and more than this many severe drops block Ship whatever the averages say
  max_severe_drops: 0
  # replay the unchanged config first: a delta within that A/A spread cannot Ship
  aa_check: false
  # traces of one task are not independent: task_id or metadata.<key> makes the interval a
  # cluster bootstrap (null: every trace its own cluster)
  cluster_by: null

reporting:
  # default | review | minimal | forensic (full prompts and outputs; needs a
  # forensic_acknowledgment block here AND --profile forensic on the command line)
  profile: default

timeouts:
  # per-trace wall-clock budget of one replay, in seconds (0 < x <= 86400)
  replay_seconds: 60
  # per-output budget of one scoring call, in seconds (0 < x <= 86400)
  score_seconds: 30
"""


def write_example(path: str | os.PathLike[str] = "whatif.config.yaml", *, force: bool = False) -> list[Path]:
    """Write :data:`EXAMPLE_CONFIG` to ``path`` and its trace file next to it.

    The trace file (:data:`EXAMPLE_TRACES`, 10 failure and 10 baseline support conversations
    from :func:`support_rows`) goes in the config's directory; the config names it by its path
    relative to the current directory, because relative source paths resolve against the
    directory the command runs in.

    Parameters
    ----------
    path : str or path-like, default "whatif.config.yaml"
        The config to write; it must end in ``.yaml`` or ``.yml``.
    force : bool, default False
        Overwrite the config and the trace file when they exist.

    Returns
    -------
    list of pathlib.Path
        The config path, then the trace file path.

    Raises
    ------
    ConfigError
        When a file exists and ``force`` is False, the extension is not YAML, or a file
        cannot be written.
    """
    config = Path(path)
    if config.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"whatif init writes YAML: {_short(config)} must end in .yaml or .yml")
    traces = config.parent / EXAMPLE_TRACES
    try:
        existing = [_short(p) for p in (config, traces) if p.exists() or p.is_symlink()]
        if existing and not force:
            raise ConfigError(f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
                              "pass --force to overwrite (or give another path)")
        relative = os.path.relpath(traces)
        text = EXAMPLE_CONFIG.format(config=config, traces=traces.name, traces_path=json.dumps(relative))
        rows = support_rows(_EXAMPLE_PER_COHORT, _EXAMPLE_PER_COHORT)
        config.parent.mkdir(parents=True, exist_ok=True)
        traces.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows), encoding="utf-8")
        config.write_text(text, encoding="utf-8")
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        raise ConfigError(f"whatif init cannot write {_short(config)}: {type(error).__name__}: {error}") from None
    return [config, traces]


def _short(path: Path) -> str:
    text = str(path)
    return repr(text) if len(text) <= 200 else repr(text[:200]) + f"…({len(text)} chars)"
