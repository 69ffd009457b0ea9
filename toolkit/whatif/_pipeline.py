"""``fork``: config -> traces -> cohorts -> replay -> score -> decision -> Verdict."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import platform
import statistics
import sys
import threading
import warnings
from collections import defaultdict
from typing import Any

from toolkit._util.hashing import sha256_hex
from toolkit._version import __version__
from toolkit.errors import unknown_name_message
from toolkit.whatif.cache import CacheCorruption, CacheLockUnavailable, ScoreCache, resolve_cache_mode
from toolkit.whatif.config import ForensicAffirmationError, WhatIfConfig, WhatIfConfigError, load_config
from toolkit.whatif.decide import FLOOR, Policy, classify_delta, decide, make_finding, summarize_cohort
from toolkit.whatif.replay import FailureRecord, ReplayConfig, areplay_traces, replay_traces
from toolkit.whatif.report import TraceResult, Verdict
from toolkit.whatif.scoring import ascore_pairs, build_scorer, score_pairs
from toolkit.whatif.sources import load_traces, resolve_reference, select_cohorts

__all__ = ["fork", "afork", "resolve_profile"]

# by how much user content each profile lets out of the process (report.py's profile table)
_PROFILE_RANK = {"minimal": 0, "default": 1, "review": 2, "forensic": 3}


def resolve_profile(config: WhatIfConfig, requested: str | None) -> str:
    """The reporting profile in force, enforcing the two-affirmation rule for more content.

    Profiles rank by how much user content leaves the process: minimal < default < review <
    forensic. Forensic output (full prompts and outputs) needs BOTH ``reporting.profile:
    forensic`` with an acknowledgment block in the config AND ``--profile forensic`` on the
    command line (or ``fork(..., profile="forensic")``). A requested profile below the
    configured one is always allowed (it reveals less); one above it (``--profile review``
    on a ``minimal`` config) needs the same two affirmations: the config's
    ``forensic_acknowledgment`` block and the flag.

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
        When only one of the two places asks for ``forensic``, or a requested profile above
        the configured one comes without the config's acknowledgment block.
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
    if requested not in _PROFILE_RANK:
        raise WhatIfConfigError(unknown_name_message("profile", requested, tuple(_PROFILE_RANK)))
    if requested == "forensic" and configured != "forensic":
        raise ForensicAffirmationError(
            "--profile forensic alone is not enough: the config must also set reporting.profile: forensic "
            "with a forensic_acknowledgment block (accepted_by, accepted_at, reason)"
        )
    if _PROFILE_RANK[requested] > _PROFILE_RANK[configured] and config.reporting.forensic_acknowledgment is None:
        raise ForensicAffirmationError(
            f"--profile {requested} shows more user content than the config's profile {configured!r}: "
            "raising a profile needs the config's reporting.forensic_acknowledgment block (accepted_by, "
            f"accepted_at, reason) as well; or set reporting.profile: {requested} in the config"
        )
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
        "decision_interval": (
            f"{policy.ci_level:.0%} interval on the mean delta over traces (toolkit.stats.mean_interval: clustered t "
            "with clusters, Wilson when every delta is 0 or 1, Student t below 30 traces, percentile bootstrap above)"
        ),
        "test": "paired sign-flip test on the per-trace mean deltas (two-sided; exact when at most 20 units)",
        "harm_rules": (
            f"Ship needs every scored cohort's mean interval above -{policy.practical_delta_epsilon:g}, at most "
            f"{policy.max_severe_drops} trace(s) falling by more than {policy.max_trace_drop:g}, and the failure "
            f"cohort's interval above 0 with p < {1 - policy.ci_level:.3g}"
        ),
        "replays": {"per_trace": policy.replays, "unit": "trace (replays averaged within a trace; the original is rescored each replay)"},
        "aa_check": policy.aa_check,
        "multiplicity": (
            "none across cohorts: Ship needs every guard to pass (an intersection-union rule, each test at its own level, "
            "which keeps the false-Ship rate at or below the largest single level)"
        ),
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
            ("each trace is replayed once; agent and judge randomness are not averaged out (target.replays)"
             if policy.replays == 1 else f"each trace is replayed {policy.replays} times; traces are the unit"),
            ("the practical delta is a policy value, not calibrated against the scorer's noise (decision.aa_check)"
             if not policy.aa_check else "the A/A run measures the replay's own noise; the failure cohort must beat it"),
        ],
    }


def _stub_findings(config: WhatIfConfig, scorer, allow_stub: bool) -> list:
    """A stub scorer or stub source: disclosed, and without ``allow_stub`` never exit 0."""
    findings = []
    stubs = [part for part, used in (("scorer", scorer.adapter == "stub"), ("source", config.source.adapter == "stub")) if used]
    if config.source.adapter == "stub":
        findings.append(make_finding(
            "stub_source_in_use", "the traces are synthetic (source.adapter: stub), not recorded traffic"))
    if stubs and not allow_stub:
        findings.append(make_finding(
            "stub_not_allowed",
            f"the stub {' and the stub '.join(stubs)} cannot back a verdict; pass --allow-stub "
            "(fork(..., allow_stub=True)) to run it as a demo",
            {"stubs": ", ".join(stubs)}))
    return findings


def _selection_findings(selection) -> list:
    findings = []
    for name, chosen in selection.items():
        if chosen.truncated:
            findings.append(make_finding(
                "selection_truncated",
                f"{name} cohort: {len(chosen.traces)} of {chosen.available} matching traces selected (limit {chosen.limit})",
                {"cohort": name, "available": chosen.available, "limit": chosen.limit}, name))
        collapsed = getattr(chosen, "duplicates_collapsed", 0)
        if collapsed:
            ids = tuple(getattr(chosen, "duplicate_ids", ()))
            findings.append(make_finding(
                "duplicate_traces_collapsed",
                f"{name} cohort: {collapsed} duplicate trace(s) collapsed before the trust floor counted "
                f"(same trace id, or the same input and original output)",
                {"cohort": name, "count": collapsed}, name, ids))
    unknown = dict(getattr(selection, "unrecognised_labels", {}) or {})
    if unknown:
        shown = ", ".join(f"{label!r} x{count}" for label, count in list(unknown.items())[:5])
        findings.append(make_finding(
            "unrecognised_labels",
            f"{sum(unknown.values())} trace(s) left out of both cohorts: unrecognised label(s) {shown}",
            {"count": sum(unknown.values()), "labels": shown}))
    return findings


async def _replays(ordered, runner, change: ReplayConfig, config: WhatIfConfig, times: int, tag: str, isolated: bool):
    """Replay ``ordered`` ``times`` times; keys (replay index, position); record ids made unique.

    ``isolated`` (the sync :func:`fork`): the batch runs on a worker thread with its own loop,
    whose watchdog can stop waiting for a runner that blocks its loop; otherwise on the
    caller's loop (:func:`afork`), where a blocking step is seen only when it returns.
    """
    expanded = [trace for _ in range(times) for trace in ordered]
    arguments = (expanded, runner, change, config.timeouts.replay_seconds, config.target.max_workers)
    result = await (asyncio.to_thread(replay_traces, *arguments) if isolated else areplay_traces(*arguments))
    size = len(ordered)

    def key(k):
        return (tag, k // size, k % size)

    def rename(record, k):
        if times == 1 and tag == "change":
            return record
        suffix = ("" if tag == "change" else "-aa") + (f"-r{k // size + 1}" if times > 1 else "")
        return dataclasses.replace(record, id=record.id + suffix)

    return ({key(k): v for k, v in result.outputs.items()}, {key(k): rename(v, k) for k, v in result.failures.items()},
            {key(k): v for k, v in result.seconds.items()}, result.abandoned_calls)


async def afork(config: "WhatIfConfig | dict | str", profile: str | None = None, *, allow_stub: bool = False) -> Verdict:
    """Run a what-if experiment on the caller's event loop and return its :class:`Verdict`.

    ``await tk.whatif.afork(config)`` in a notebook: async runners and scorers run on the
    kernel's own loop (so they can share its clients, locks and queues), sync ones on
    worker threads, and the loop keeps serving other tasks meanwhile.

    Parameters
    ----------
    config : WhatIfConfig, dict, str or path
        As for :func:`fork`.
    profile : str or None, optional
        As for :func:`fork`.
    allow_stub : bool, optional
        As for :func:`fork`; default False.

    Returns
    -------
    Verdict
        As for :func:`fork`.

    Notes
    -----
    An ``async def`` runner that blocks the loop (a synchronous call inside it) blocks the
    caller's loop too, and is seen only when its step returns; it is then reported as
    ``runner_blocked_loop``. The sync :func:`fork` can stop waiting for it at the batch bound.
    """
    return await _afork(config, profile, allow_stub, isolated=False)


async def _afork(config, profile: str | None, allow_stub: bool, isolated: bool) -> Verdict:
    started = _dt.datetime.now(_dt.timezone.utc)
    config = load_config(config)
    configured_profile = config.reporting.profile
    profile = resolve_profile(config, profile)
    policy = Policy.from_config(config)
    runner = resolve_reference(config.target.runner, "target.runner")
    scorer = build_scorer(config)
    traces = load_traces(config.source)
    selection = select_cohorts(traces, config)

    run_findings = _stub_findings(config, scorer, allow_stub)
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
    run_findings.extend(_selection_findings(selection))
    skipped = list(getattr(traces, "lines_skipped", []) or [])
    if skipped:
        run_findings.append(make_finding(
            "source_lines_skipped",
            f"{len(skipped)} line(s) of source.path held no trace and were skipped (line {', '.join(map(str, skipped[:5]))}: a last "
            "line cut off mid-write); that trace is in neither cohort",
            {"count": len(skipped), "lines": ", ".join(map(str, skipped[:20]))}))
    for said in list(getattr(traces, "source_warnings", []) or []):
        # what the reader warned while loading (a scorer chosen among several, simulations
        # that never ran, an empty file) changes what the traces mean: in the verdict, not
        # only on stderr
        run_findings.append(make_finding(
            "source_warnings", f"source.adapter {config.source.adapter}: {said}",
            {"adapter": config.source.adapter, "warning": said}))

    ordered = [trace for name in ("failure", "baseline") if name in selection for trace in selection[name].traces]
    # the cache outlives this report: it keeps rationales only where the profile shows them
    cache = ScoreCache(config.scorer.cache_dir, mode, keep_rationales=profile in ("review", "forensic"))
    failures: list[FailureRecord] = []
    halted = None
    original_scores: dict = {}
    replayed_scores: dict = {}
    rationales: dict = {}
    outputs: dict = {}
    replay_seconds: dict = {}
    abandoned = 0
    # keyed (tag, replay index, position in ``ordered``); tag "change" or "aa"
    per_trace_failures: dict = {}
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
            runs = []
            if policy.aa_check:  # the unchanged configuration first, as an A/A run does
                runs.append(await _replays(ordered, runner, ReplayConfig(None, None, {}), config, policy.replays, "aa", isolated))
            change = ReplayConfig(config.change.system_prompt, config.change.model, {})
            runs.append(await _replays(ordered, runner, change, config, policy.replays, "change", isolated))
            for run_outputs, run_failures, run_seconds, run_abandoned in runs:
                outputs.update(run_outputs)
                per_trace_failures.update(run_failures)
                replay_seconds.update(run_seconds)
                abandoned += run_abandoned
            keys = sorted(outputs, key=_key_order)
            flat = [ordered[k[2]] for k in keys]
            try:
                arguments = (flat, {i: outputs[k] for i, k in enumerate(keys)}, scorer, config, cache)
                scores = await (asyncio.to_thread(score_pairs, *arguments) if isolated else ascore_pairs(*arguments))
            except CacheCorruption as error:
                record = FailureRecord("failure_001", "cache_corruption_detected", "cache", "run", str(error),
                                       details={"cache_path": error.entry_path, "reason": error.reason})
                failures.append(record)
                halted = make_finding("cache_corruption_detected",
                                      f"a score-cache entry is corrupt: {error.entry_path} ({error.reason})",
                                      {"cache_path": error.entry_path, "reason": error.reason}, failure_ids=[record.id])
            else:
                for i, record in scores.failures.items():
                    per_trace_failures[keys[i]] = _scoring_record(record, keys[i], policy.replays)
                original_scores = {keys[i]: v for i, v in scores.original.items()}
                replayed_scores = {keys[i]: v for i, v in scores.replayed.items()}
                rationales = {(keys[i], which): v for (i, which), v in scores.rationales.items()}
                abandoned += scores.abandoned_calls
            failures.extend(per_trace_failures[k] for k in sorted(per_trace_failures, key=_key_order))
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
    eps = policy.practical_delta_epsilon
    for name, chosen in selection.items():
        positions = [i for i, t in enumerate(ordered) if t.cohort == name]
        deltas, counts, ids, labels, owners = [], defaultdict(int), defaultdict(list), [], []
        aa_deltas: dict = {}
        replayed = 0
        for position in positions:
            trace = ordered[position]
            pairs, first_record = [], None  # (original, replayed) of each scored replay
            for r in range(policy.replays):
                key = ("change", r, position)
                record = per_trace_failures.get(key)
                if record is None and key in original_scores and key in replayed_scores:
                    pairs.append((original_scores[key], replayed_scores[key]))
                elif record is not None and first_record is None:
                    first_record = record
                aa_key = ("aa", r, position)
                if aa_key not in per_trace_failures and aa_key in original_scores and aa_key in replayed_scores:
                    aa_deltas.setdefault(position, []).append(replayed_scores[aa_key] - original_scores[aa_key])
            replayed += any(("change", r, position) in outputs for r in range(policy.replays))
            for original, replayed_score in pairs:
                deltas.append(replayed_score - original)
                owners.append(position)
                labels.append(_cluster_label(trace, policy.cluster_by))
            if not pairs and first_record is not None:
                # a trace counts once among the failures, by its first failed replay
                counts[first_record.code] += 1
                ids[first_record.code].append(first_record.id)
            delta = statistics.fmean([b - a for a, b in pairs]) if pairs else None
            first = ("change", 0, position)
            output = outputs.get(first)
            record = None if pairs else first_record
            trace_results.append(TraceResult(
                trace_id=trace.trace_id, cohort=name,
                status="scored" if delta is not None else (record.code if record else "not_scored"),
                original_score=statistics.fmean([a for a, _ in pairs]) if pairs else None,
                replayed_score=statistics.fmean([b for _, b in pairs]) if pairs else None,
                delta=delta,
                delta_class=None if delta is None else classify_delta(delta, eps),
                failure_message=None if record is None else record.message,
                replay_seconds=replay_seconds.get(first),
                user_message=trace.user_message,
                original_output=trace.original_output,
                replayed_output=None if output is None else output.text,
                rationale_original=rationales.get((first, "original")),
                rationale_replayed=rationales.get((first, "replayed")),
            ))
        cohorts[name] = summarize_cohort(
            name, deltas, selected=len(positions), replayed=replayed,
            policy=policy, failure_counts=counts, failure_ids=ids,
            available=chosen.available, labelled=chosen.labelled,
            clusters=labels if policy.cluster_by else None,
            trace_ids=[ordered[p].trace_id for p in owners],
            aa_deltas={ordered[p].trace_id: v for p, v in aa_deltas.items()} if policy.aa_check else None)

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
               "limit": chosen.limit, "filter": chosen.filter, "truncated": chosen.truncated,
               "duplicates_collapsed": getattr(chosen, "duplicates_collapsed", 0)}
        for name, chosen in selection.items()
    }
    selection_summary["left_out"] = {"unrecognised_labels": dict(getattr(selection, "unrecognised_labels", {}) or {}),
                                     "unlabelled": getattr(selection, "unlabelled", 0)}
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
        configured_profile=configured_profile,
    )


def _key_order(key):
    tag, replay, position = key
    return (tag != "aa", replay, position)


def _scoring_record(record: FailureRecord, key, replays: int) -> FailureRecord:
    tag, replay, _ = key
    if replays == 1 and tag == "change":
        return record
    suffix = ("" if tag == "change" else "-aa") + (f"-r{replay + 1}" if replays > 1 else "")
    return dataclasses.replace(record, id=record.id + suffix)


def fork(config: "WhatIfConfig | dict | str", profile: str | None = None, *, allow_stub: bool = False) -> Verdict:
    """Run a what-if experiment and return its :class:`Verdict`.

    Per-trace problems become failure records, never exceptions; user errors (bad config,
    unloadable runner or scorer, unreadable source) raise ToolkitError.

    Parameters
    ----------
    config : WhatIfConfig, dict, str or path
        A path to a YAML/JSON file, a mapping, or a :class:`WhatIfConfig`, loaded with
        :func:`load_config`.
    profile : str or None, optional
        Overrides ``reporting.profile`` (see :func:`resolve_profile`): lowering it is free,
        raising it needs the config's ``forensic_acknowledgment`` block as well. Default
        None uses the config's.
    allow_stub : bool, optional
        Without it (default False) a run on the stub scorer or the stub source is
        Inconclusive (finding ``stub_not_allowed``), so a demo config can never exit 0 in CI.

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

    Notes
    -----
    The run happens on a fresh event loop: on this thread when it runs no loop, else on a
    worker thread (a notebook cell's loop is running). A synchronous call cannot leave a
    running loop free while it waits, so inside a notebook ``fork`` warns and
    ``await tk.whatif.afork(...)`` is the form that keeps the kernel's loop serving.
    """
    coroutine = _afork(config, profile, allow_stub, isolated=True)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    warnings.warn("tk.whatif.fork() blocks this thread's running event loop until the run ends; "
                  "use `await tk.whatif.afork(...)` to keep it serving", RuntimeWarning, stacklevel=2)
    box: dict = {}

    def work():
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as error:  # re-raised in the caller's thread
            box["error"] = error

    worker = threading.Thread(target=work, name="toolkit-whatif-fork", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
