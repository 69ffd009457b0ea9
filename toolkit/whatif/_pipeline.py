"""``fork``: config -> traces -> cohorts -> replay -> score -> decision -> Verdict."""

from __future__ import annotations

import datetime as _dt
import platform
import sys
from collections import defaultdict
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit._version import __version__
from toolkit.errors import unknown_name_message
from toolkit.whatif.cache import CacheCorruption, CacheLockUnavailable, ScoreCache, resolve_cache_mode
from toolkit.whatif.config import ForensicAffirmationError, WhatIfConfig, WhatIfConfigError, load_config
from toolkit.whatif.decide import FLOOR, Policy, classify_delta, decide, make_finding, summarize_cohort
from toolkit.whatif.replay import FailureRecord, ReplayConfig, replay_traces
from toolkit.whatif.report import TraceResult, Verdict
from toolkit.whatif.scoring import build_scorer, score_pairs
from toolkit.whatif.sources import load_traces, resolve_reference, select_cohorts

__all__ = ["fork", "resolve_profile"]


def resolve_profile(config: WhatIfConfig, requested: str | None) -> str:
    """The reporting profile in force, enforcing the forensic two-affirmation rule.

    Forensic output (full prompts and outputs) needs BOTH ``reporting.profile: forensic`` with
    an acknowledgment block in the config AND ``--profile forensic`` on the command line (or
    ``fork(..., profile="forensic")``). Any other requested profile overrides the config's.

    Parameters
    ----------
    config : WhatIfConfig
        The validated config; its ``reporting.profile`` is the configured profile.
    requested : str or None
        The profile asked for on the command line or by ``fork(profile=...)``: one of
        ``"default"``, ``"review"``, ``"minimal"``, ``"forensic"``. None keeps the config's.

    Returns
    -------
    str
        The profile in force.

    Raises
    ------
    ForensicAffirmationError
        When only one of the two places asks for ``forensic``.
    WhatIfConfigError
        For an unknown requested profile.
    """
    configured = config.reporting.profile
    if requested is None:
        if configured == "forensic":
            raise ForensicAffirmationError(
                "the config asks for profile 'forensic' but the command line did not: "
                "pass --profile forensic (or fork(..., profile='forensic')) to confirm"
            )
        return configured
    if requested == "forensic" and configured != "forensic":
        raise ForensicAffirmationError(
            "--profile forensic alone is not enough: the config must also set reporting.profile: forensic "
            "with a forensic_acknowledgment block (accepted_by, accepted_at, reason)"
        )
    if requested not in ("default", "review", "minimal", "forensic"):
        raise WhatIfConfigError(unknown_name_message("profile", requested, ("default", "review", "minimal", "forensic")))
    return requested


def _cluster_label(trace: Any, cluster_by: str | None) -> Any:
    """The trace's cluster under ``decision.cluster_by``; a trace without the key is its own."""
    if cluster_by is None:
        return None
    if cluster_by == "task_id":
        value = trace.task_id
    else:
        value = (trace.metadata or {}).get(cluster_by[len("metadata."):])
    if value is None or isinstance(value, (dict, list)):
        # Its own cluster: never merged with another trace it may not belong with.
        return ("unlabelled", trace.trace_id)
    return value


def _methodology(config: WhatIfConfig, policy: Policy, scorer_adapter: str, cache_summary: dict) -> dict[str, Any]:
    return {
        "unit_of_analysis": "paired_trace_delta",
        "delta": "score(replayed) - score(original), each scored independently on the same rubric",
        "experiment_shape": config.experiment_shape,
        "required_cohorts": list(policy.required_cohorts),
        "per_trace_classes": f"improved if delta > {policy.practical_delta_epsilon:g}, regressed if < -{policy.practical_delta_epsilon:g}",
        "bootstrap": {
            "statistic": "median", "method": "percentile", "resamples": policy.bootstrap_resamples,
            "seed": policy.seed, "ci_level": policy.ci_level, "computed_when_scored_at_least": FLOOR.min_scored,
            "assumption": (
                f"cluster bootstrap: whole clusters by {policy.cluster_by} resampled, sign flips per cluster"
                if policy.cluster_by else "i.i.d. resampling across traces (no cluster boundaries respected; "
                "set decision.cluster_by when traces share a task)"
            ),
        },
        "test": "paired sign-flip test on the deltas (two-sided; exact when n <= 20), reported only",
        "multiplicity": "none: the verdict rules are threshold rules, not hypothesis tests",
        "scorer": scorer_adapter,
        "judge_model": config.scorer.judge_model_id,
        "judge_model_snapshot": config.scorer.judge_model_snapshot,
        "rubric_id": config.scorer.rubric_id,
        "score_cache": {"mode": cache_summary["mode"], "enabled": cache_summary["mode"] != "off"},
        "effect_size": {"practical_delta": policy.practical_delta_epsilon, "source": "policy", "judge_noise_floor": None},
        "per_trace_inference": "descriptive_only",
        "causal_claim_scope": "associated_under_cached_tool_replay",
        "limitations": [
            "tool calls are answered from recorded outputs: a change that needs a new tool call fails as tool_cache_miss",
            "each trace is replayed once; agent and judge randomness are not averaged out",
            "the practical delta is a policy value, not calibrated against the scorer's noise",
        ],
    }


def fork(config: "WhatIfConfig | dict | str", profile: str | None = None) -> Verdict:
    """Run a what-if experiment and return its :class:`Verdict`.

    Per-trace problems become failure records, never exceptions; user errors (bad config,
    unloadable runner or scorer, unreadable source) raise ToolkitError.

    Parameters
    ----------
    config : WhatIfConfig, dict, str or path
        A path to a YAML/JSON file, a mapping, or a :class:`WhatIfConfig`, loaded with
        :func:`load_config`.
    profile : str or None, optional
        Overrides ``reporting.profile`` (see :func:`resolve_profile`); ``"forensic"`` is the
        second affirmation the forensic profile needs. Default None uses the config's.

    Returns
    -------
    Verdict
        Ship / Don't Ship / Inconclusive with cohorts, findings, floor, failures, per-trace
        results, selection, cache, methodology and manifest.

    Raises
    ------
    ToolkitError
        For a user error: :class:`WhatIfConfigError`, :class:`ForensicAffirmationError`,
        :class:`SetupError` and the like.
    """
    started = _dt.datetime.now(_dt.timezone.utc)
    config = load_config(config)
    profile = resolve_profile(config, profile)
    policy = Policy.from_config(config)
    runner = resolve_reference(config.target.runner, "target.runner")
    scorer = build_scorer(config)
    traces = load_traces(config.source)
    selection = select_cohorts(traces, config)

    run_findings = []
    mode, signal = resolve_cache_mode(config.scorer.cache_mode)
    if signal is not None:
        run_findings.append(make_finding(
            "cache_mode_inferred", f"cache_mode auto resolved to 'on' because ${signal} is set",
            {"input_mode": "auto", "resolved_mode": mode, "env_signal": signal}))
    unused = list(scorer.unused_fields)
    if scorer.adapter == "stub":
        run_findings.append(make_finding(
            "stub_scorer_in_use", "scored with the offline stub scorer (tool-output grounding), not a rubric judge"))
        # everything the stub does not read is disclosed, score_fn and parameters included
        unused = config.scorer.judge_fields_set()
        if config.scorer.score_fn is not None:
            unused.insert(0, "score_fn")
        if config.scorer.scoring_parameters:
            unused.append("scoring_parameters")
    if unused:
        run_findings.append(make_finding(
            "settings_unused", f"the {scorer.adapter} scorer does not read scorer.{', scorer.'.join(unused)}",
            {"fields": ", ".join(unused)}))
    for name, chosen in selection.items():
        if chosen.truncated:
            run_findings.append(make_finding(
                "selection_truncated",
                f"{name} cohort: {len(chosen.traces)} of {chosen.available} matching traces selected (limit {chosen.limit})",
                {"cohort": name, "available": chosen.available, "limit": chosen.limit}, name))

    ordered = [trace for name in ("failure", "baseline") if name in selection for trace in selection[name].traces]
    cache = ScoreCache(config.scorer.cache_dir, mode)
    failures: list[FailureRecord] = []
    halted = None
    original_scores: dict[int, float] = {}
    replayed_scores: dict[int, float] = {}
    rationales: dict = {}
    outputs: dict = {}
    replay_seconds: dict = {}
    abandoned = 0
    per_trace_failures: dict[int, FailureRecord] = {}  # by position in ``ordered``
    try:
        cache.acquire()
    except CacheLockUnavailable as error:
        record = FailureRecord("failure_001", "cache_lock_unavailable", "cache", "run", str(error),
                               details={"lock_path": error.lock_path, **{f"holder_{k}": v for k, v in error.holder.items()}})
        failures.append(record)
        halted = make_finding("cache_lock_unavailable", f"the score cache is locked by another run: {error.lock_path}",
                              {"lock_path": error.lock_path, **{f"holder_{k}": v for k, v in error.holder.items()}},
                              failure_ids=[record.id])
    if halted is None:
        try:
            change = ReplayConfig(config.change.system_prompt, config.change.model, {})
            replay = replay_traces(ordered, runner, change, config.timeouts.replay_seconds, config.target.max_workers)
            outputs, replay_seconds, abandoned = dict(replay.outputs), dict(replay.seconds), replay.abandoned_calls
            per_trace_failures = dict(replay.failures)
            try:
                scores = score_pairs(ordered, outputs, scorer, config, cache)
            except CacheCorruption as error:
                record = FailureRecord("failure_001", "cache_corruption_detected", "cache", "run", str(error),
                                       details={"cache_path": error.entry_path, "reason": error.reason})
                failures.append(record)
                halted = make_finding("cache_corruption_detected", f"a score-cache entry is corrupt: {error.entry_path}",
                                      {"cache_path": error.entry_path}, failure_ids=[record.id])
            else:
                per_trace_failures.update(scores.failures)
                original_scores, replayed_scores, rationales = dict(scores.original), dict(scores.replayed), dict(scores.rationales)
                abandoned += scores.abandoned_calls
            failures.extend(per_trace_failures[p] for p in sorted(per_trace_failures))
        finally:
            cache.release()
    if abandoned:
        run_findings.append(make_finding(
            "abandoned_calls", f"{abandoned} runner/scorer call(s) outlived their timeout on background threads",
            {"count": abandoned}))

    if cache.write_errors:
        run_findings.append(make_finding(
            "cache_write_failed", f"{cache.write_errors} score(s) could not be written to the score cache",
            {"count": cache.write_errors, "first_error": cache.first_write_error}))

    cohorts = {}
    trace_results = []
    for name, chosen in selection.items():
        positions = [i for i, t in enumerate(ordered) if t.cohort == name]
        deltas, counts, ids, labels = [], defaultdict(int), defaultdict(list), []
        for position in positions:
            trace = ordered[position]
            record = per_trace_failures.get(position)
            delta = None
            if record is None and position in original_scores and position in replayed_scores:
                delta = replayed_scores[position] - original_scores[position]
                deltas.append(delta)
                labels.append(_cluster_label(trace, policy.cluster_by))
            elif record is not None:
                counts[record.code] += 1
                ids[record.code].append(record.id)
            output = outputs.get(position)
            trace_results.append(TraceResult(
                trace_id=trace.trace_id, cohort=name,
                status="scored" if delta is not None else (record.code if record else "not_scored"),
                original_score=original_scores.get(position) if record is None else None,
                replayed_score=replayed_scores.get(position) if record is None else None,
                delta=delta,
                delta_class=None if delta is None else classify_delta(delta, policy.practical_delta_epsilon),
                failure_message=None if record is None else record.message,
                replay_seconds=replay_seconds.get(position),
                user_message=trace.user_message,
                original_output=trace.original_output,
                replayed_output=None if output is None else output.text,
                rationale_original=rationales.get((position, "original")),
                rationale_replayed=rationales.get((position, "replayed")),
            ))
        cohorts[name] = summarize_cohort(
            name, deltas, selected=len(positions), replayed=sum(1 for p in positions if p in outputs),
            policy=policy, failure_counts=counts, failure_ids=ids,
            available=chosen.available, labelled=chosen.labelled,
            clusters=labels if policy.cluster_by else None)

    decision = decide(cohorts, policy, run_findings, halted_by=halted)
    finished = _dt.datetime.now(_dt.timezone.utc)
    cache_summary = cache.summary()
    cache_summary["requested_mode"] = config.scorer.cache_mode
    manifest = {
        "experiment_id": "toolkit-whatif-fork",
        "toolkit_version": __version__,
        "config_hash": config.config_hash(),
        "selection_seed": policy.seed,
        "source": config.source.adapter,
        "target": config.target.runner,
        "scorer": config.scorer.adapter if scorer.reference is None else scorer.reference,
        "change": {"system_prompt_sha256": None if config.change.system_prompt is None else sha256_hex(config.change.system_prompt),
                   "model": config.change.model},
        "trust_floor": {"version": FLOOR.version, "min_selected": FLOOR.min_selected, "min_replayed": FLOOR.min_replayed,
                        "min_scored": FLOOR.min_scored, "min_replay_validity": FLOOR.min_replay_validity},
        "experiment_shape": config.experiment_shape,
        "forensic_acknowledgment": None if profile != "forensic" else config.reporting.forensic_acknowledgment.model_dump(),
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": finished.isoformat(timespec="seconds"),
        "duration_seconds": round((finished - started).total_seconds(), 3),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    selection_summary = {
        name: {"labelled": chosen.labelled, "available": chosen.available, "selected": len(chosen.traces),
               "limit": chosen.limit, "filter": chosen.filter, "truncated": chosen.truncated}
        for name, chosen in selection.items()
    }
    return Verdict(
        state=decision.verdict_state,
        experiment_shape=config.experiment_shape,
        profile=profile,
        cohorts=decision.cohorts,
        findings=decision.findings,
        floor_passed=decision.floor_passed,
        floor_failures=decision.floor_failures,
        failures=tuple(failures),
        trace_results=tuple(trace_results),
        policy=policy,
        selection=selection_summary,
        cache=cache_summary,
        methodology=_methodology(config, policy, scorer.adapter, cache_summary),
        manifest=manifest,
    )
