"""The what-if fork: replay recorded traces under a change, decide Ship / Don't Ship / Inconclusive.

``tk.whatif.fork(config)`` takes a config (a YAML/JSON path, a dict or a
:class:`WhatIfConfig`), selects a failure cohort and a baseline cohort of recorded traces,
replays each trace's input through the user's runner with the change applied (system prompt
and/or model; tool calls answered from the trace's recorded tool outputs), scores the
original and the replayed output independently on the same rubric, and returns a
:class:`Verdict` behind a trust floor that no config field can weaken. The command line is
``python -m toolkit whatif fork --config FILE`` (exit 0 Ship, 1 Don't Ship, 2 Inconclusive
or setup failure, 3 internal error: an unexpected exception, never a verdict, with
``TOOLKIT_DEBUG=1`` for the traceback; 130 interrupted), plus ``whatif diff A B``, ``whatif
validate FILE`` and ``whatif init [PATH] [--force]`` (a commented example config and trace
file that validate and run offline). In a notebook, ``await tk.whatif.afork(config)`` runs on
the kernel's loop. A run on the stub scorer or stub source is Inconclusive unless
``--allow-stub`` (``allow_stub=True``) says it is a demo.

A config (YAML; JSON and dicts take the same shape)::

    experiment_shape: failure_rescue          # or regression_check (baseline only)
    source: {adapter: jsonl, path: traces.jsonl, label_field: cohort}
    target: {runner: "python:my_agent.replay:run", max_workers: 4, replays: 1}
    selection:
      failure_cohort: {limit: 20, filter: "score-below:0.6,since:7d"}
      baseline_cohort: {limit: 20, filter: "score-above:0.8"}
    change: {system_prompt: "You are a senior on-call SRE...", model: null}
    scorer: {adapter: python, score_fn: "python:my_agent.judge:score", cache_mode: auto,
             rubric_id: faithfulness-v2, rubric_text: "..."}
    decision: {}        # require_baseline, max_baseline_regression_ratio 0.10,
                        # min_failure_improvement_ratio 0.50, practical_delta_epsilon 0.05,
                        # max_ci_width null, bootstrap_resamples 5000, ci_level 0.95 (>= 0.9),
                        # seed 42, max_trace_drop 0.5, max_severe_drops 0, aa_check false
    reporting: {profile: default}   # default | review | minimal | forensic
    timeouts: {replay_seconds: 60, score_seconds: 30}

Modules: ``config`` (strict pydantic v2 schema, error rendering with did-you-mean),
``sources`` (stub, jsonl, phoenix, langfuse, inspect_log, tau2; cohort selection), ``replay`` (runner contract,
bounded parallel replay, tool cache), ``scoring`` (stub and python scorers, independent
scoring), ``cache`` (score cache: modes, key, lock, corruption), ``decide`` (statistics,
floor, guards, verdict precedence, finding codes and next steps), ``report`` (Verdict, JSON
schema, Markdown, CI line, diff), ``cli``, ``examples`` (a documented example runner and
scorer used by notebook 08, and the ``whatif init`` template).

Design reference: the public ``whatifd`` 0.3.0 (studied in ``docs/design/whatif.md``). Kept: the trust
floor (5 selected / 5 replayed / 5 scored per required cohort, replay validity >= 0.50,
required cohorts present), the guard chain and thresholds, the verdict precedence, the
finding codes and severities, the exit codes, the config schema and its cross-field rules,
the forensic two-affirmation rule.

The reference's shortfalls (docs/design/whatif.md §11) and how this package fixes them:

1. *Scorer output used as the delta.* Each trace is scored twice, original and replayed,
   by the same scorer and rubric, each call seeing one output only; the delta is
   ``replayed - original`` computed in ``scoring``/``_pipeline``. Regressions are possible.
2. *Selection is fiction.* ``limit`` and ``filter`` select traces (``sources.select_cohorts``):
   filter clauses ``score-below``, ``score-above``, ``since``, ``label``, ``has-tool``,
   ``task`` (parsed at load, typos suggested); the failure cohort takes the most recent
   traces, the baseline a seeded hash sample; truncation is disclosed
   (``selection_truncated``) and the report has a Selection section.
3. *Replay and scoring failures conflated.* ``replayed`` and ``scored`` are counted
   separately; each failure carries its own code (``trace_skipped``, ``tool_cache_miss``,
   ``runner_timeout``, ``runner_exception``, ``runner_invalid_output``, ``runner_blocked_loop``,
   ``runner_not_started``, ``runner_starved``, ``scorer_failed``, ``scorer_timeout``,
   ``scorer_invalid_output`` and the three ``scorer_`` twins of the loop codes); skipped
   traces leave a record.
4. *Silent no-op knobs.* ``require_baseline`` changes the required cohorts,
   ``max_ci_width`` is enforced (``ci_too_wide``, blocks_ship), ``score_seconds`` bounds
   each scoring call, each profile changes what the reports contain, each cache mode changes
   reads/writes; a source field of another adapter is refused at load; the stub scorer
   discloses every scorer field it does not read (judge fields, ``score_fn``,
   ``scoring_parameters``) and the inspect_ai adapter the judge fields a scorer cannot take
   (``settings_unused``). Tests prove each effect.
5. *Cache not wired.* The score cache is used by ``fork``: key over scorer, score-function
   source, judge, rubric text, parameters and the case; a flock-based lock; a held lock
   or a corrupt entry makes the verdict Inconclusive with ``cache_lock_unavailable`` /
   ``cache_corruption_detected``; the disclosure reports the mode actually used.
6. *No evidence.* Reports carry per-trace rows (redacted by profile), an Evidence section
   (top improvements and regressions), and ``diff`` lists traces whose class changed.
7. *Thin statistics, a verdict that ignored harm.* Per cohort: the mean delta over traces
   with its interval (``tk.stats.mean_interval``: Student t below 30 traces, bootstrap
   above, clustered t with ``decision.cluster_by``), the median with a seeded percentile
   bootstrap CI (B = 5000, seed 42), the exact paired sign-flip p, the severe drops. The
   threshold rules count traces; Ship also needs (``decide._harm_guards``) every scored
   cohort's mean interval above ``-epsilon`` (``harm_not_excluded``), at most
   ``max_severe_drops`` (default 0) traces falling by more than ``max_trace_drop``
   (default 0.5; ``severe_trace_drops``), and the failure cohort's interval above 0 with
   p < 1 - ci_level (``improvement_not_significant``); ``ci_level`` cannot go below 0.9.
   ``target.replays: N`` replays each trace N times (traces stay the unit; flaky traces are
   counted); ``decision.aa_check`` replays the unchanged configuration first and refuses a
   rescue inside the A/A spread (``inside_aa_noise``). Measured by
   ``benchmarks/bench_whatif.py`` (1,000 draws a cell): a change that does nothing Ships
   0.019 / 0.029 / 0.018 of the time at 10 / 20 / 50 traces (the threshold rules alone:
   0.234 / 0.185 / 0.076); the audit's hidden-catastrophe cohort never Ships (alone: 0.116
   at 20 traces).
8. *regression_check leaks failure logic.* Required cohorts and the guard chain derive from
   the shape; a regression_check run never selects failure-labelled traces.
9. *Poor Jupyter fit.* ``await tk.whatif.afork(config)`` runs on the caller's loop: async
   runners and scorers are awaited there (they can share the kernel's clients, locks and
   queues) and sync ones run on worker threads, so the loop keeps serving. The sync ``fork``
   runs the batch on a worker thread with its own loop (and warns when called inside a
   running loop, which it must block). Each async call's synchronous steps are timed: a
   step that holds the loop for the whole budget is ``runner_blocked_loop``, the calls it
   kept from starting are ``runner_not_started`` and the ones it cut short
   ``runner_starved`` (not 16 false timeouts), and once a batch has returned no further
   call starts. Abandoned sync calls past their timeout are counted and disclosed
   (``abandoned_calls``; Python cannot kill a thread); trace metadata reaches the runner;
   the tool cache hands runners deep copies.
10. *Over-engineering.* No witness tokens or registries of registries: ``decide.decide`` is
    the single function that builds a verdict state and a property test checks it never
    returns Ship without a floor pass; forensic mode really changes the output (full texts).

Other differences: an unknown ``source.adapter`` fails at config load with a suggestion (the
reference failed later at setup); ``auto`` cache mode outside CI means no cache (fresh scores
while iterating); no ``exec:`` runner lane, no Datadog source, no ``report-migrate`` or
``cache`` sub-commands. The ``inspect_ai`` scorer adapter (``_inspect_ai``) runs Inspect AI
scorers (``match()``, ``includes()``, ``model_graded_qa()``, custom ``@scorer``) on one output
at a time; ``inspect_ai`` itself is optional and not installed by default, because 0.3.285
requires ``fsspec<=2026.6.0`` and (through s3fs -> aiobotocore) ``python-dateutil<3``, so pip
moves those two shared packages back (4.0.0 -> 2.9.0.post0 and 2026.9.0 -> 2026.6.0 in the
environment this was built in; no toolkit requirement conflicts with the older versions).
Without it, ``fork`` stops with a SetupError naming the install command. The adapter is tested
against Inspect's own ``match()``/``includes()`` scorers offline; model-graded scorers' model
calls are not exercised (no model API here). The Langfuse
source is tested against recorded responses of its public API served by a local HTTP server
in the tests, not against a live Langfuse.
"""

from toolkit.whatif._pipeline import afork, fork, resolve_profile
from toolkit.whatif.config import ForensicAffirmationError, WhatIfConfig, WhatIfConfigError, load_config
from toolkit.whatif.decide import FLOOR, CohortResult, Finding, FloorFailure, Policy, decide
from toolkit.whatif.replay import FailureRecord, ReplayConfig, ReplayOutput, ToolCache, ToolCacheMiss, TraceInput
from toolkit.whatif.report import REPORT_SCHEMA, ReportError, TraceResult, Verdict, VerdictDiff, diff, load_report
from toolkit.whatif.scoring import ScoreCase
from toolkit.whatif.sources import SetupError, Trace

__all__ = [
    "fork",
    "afork",
    "resolve_profile",
    "load_config",
    "WhatIfConfig",
    "WhatIfConfigError",
    "ForensicAffirmationError",
    "SetupError",
    "Verdict",
    "VerdictDiff",
    "TraceResult",
    "diff",
    "load_report",
    "ReportError",
    "REPORT_SCHEMA",
    "decide",
    "Policy",
    "CohortResult",
    "Finding",
    "FloorFailure",
    "FLOOR",
    "Trace",
    "TraceInput",
    "ReplayConfig",
    "ReplayOutput",
    "ToolCache",
    "ToolCacheMiss",
    "FailureRecord",
    "ScoreCase",
]
