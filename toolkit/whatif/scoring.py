"""Scoring: the original and the replayed output are scored independently on one rubric.

The per-trace delta is ``score(replayed) - score(original)``, computed here, never a number a
scorer hands back as "the delta". The reference fed a single judge number in as the delta, so
an absolute 0-1 judge could never produce a regression (docs/design/whatif.md §11.1). A scorer sees one
output per call (a :class:`ScoreCase`), not both, so it cannot compare them.

Scorers:
- ``stub``: an offline, deterministic grounding heuristic: the share of distinct word tokens
  of the trace's recorded tool outputs that appear in the output text (0..1). It is not a
  judge; a run that uses it carries the finding ``stub_scorer_in_use`` (degrades_trust).
  Traces without recorded tool outputs get no stub score (``scorer_invalid_output``).
- ``python``: ``scorer.score_fn = "python:<module>:<attr>"``, called as ``score_fn(case)``
  (sync or async) and returning a number in [0, 1] (``bool`` counts as 1/0), or a dict
  ``{"score": x, "rationale": "..."}``, or an object with ``.score``. Anything else, ``None``,
  NaN or a value outside [0, 1] is ``scorer_invalid_output``; an exception is
  ``scorer_failed``; over ``timeouts.score_seconds`` is ``scorer_timeout``; an ``async def``
  scorer that blocks its event loop is ``scorer_blocked_loop``, and the calls the batch
  bound then cut off are ``scorer_not_started`` / ``scorer_starved`` (replay's module
  docstring describes the execution; :func:`ascore_pairs` is the awaitable form).
- ``inspect_ai``: an Inspect AI scorer (``match()``, ``includes()``, ``model_graded_qa()``, your
  own ``@scorer``) adapted in ``_inspect_ai`` (how a case becomes an Inspect sample and a
  ``Target``, how ``Score.value`` becomes a number). ``inspect_ai`` is an optional package;
  without it ``fork`` raises SetupError naming the install command.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

from toolkit._util.hashing import canonical_json, sha256_hex
from toolkit.whatif.cache import ScoreCache
from toolkit.whatif.replay import FailureRecord, _cut, _execution_failure, arun_bounded, batch_bound, is_async_callable, run_bounded
from toolkit.whatif.sources import resolve_reference

__all__ = ["ScoreCase", "Scorer", "PairScores", "build_scorer", "stub_score", "score_pairs", "ascore_pairs"]

_TOKEN = re.compile(r"[a-z0-9][a-z0-9\-]*")


@dataclasses.dataclass(frozen=True)
class ScoreCase:
    """What a scorer sees: ONE output (original or replayed) and its context."""

    trace_id: str
    cohort: str
    which: str  # "original" | "replayed"
    user_message: str
    output_text: str
    recorded_tool_calls: tuple[Mapping[str, Any], ...]
    rubric_id: str | None = None
    rubric_text: str | None = None
    judge_provider: str | None = None
    judge_model_id: str | None = None
    judge_model_snapshot: str | None = None
    scoring_parameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def _tokens(value: Any) -> set[str]:
    text = value if isinstance(value, str) else canonical_json(value)
    return set(_TOKEN.findall(text.lower()))


def stub_score(case: ScoreCase) -> dict[str, Any] | None:
    """Share of the recorded tool outputs' distinct tokens found in the output text."""
    wanted: set[str] = set()
    for call in case.recorded_tool_calls:
        result = call.get("result")
        if isinstance(result, Mapping):
            for value in result.values():
                wanted |= _tokens(value)
        elif result is not None:
            wanted |= _tokens(result)
    if not wanted:
        return None
    found = wanted & _tokens(case.output_text)
    return {"score": len(found) / len(wanted), "rationale": f"{len(found)}/{len(wanted)} tool-output tokens present"}


@dataclasses.dataclass
class Scorer:
    adapter: str
    function: Any
    reference: str | None
    function_hash: str
    extra_key: dict[str, Any] = dataclasses.field(default_factory=dict)
    unused_fields: tuple[str, ...] = ()

    def key_components(self, config) -> dict[str, Any]:
        scorer = config.scorer
        return {
            **self.extra_key,
            "adapter": self.adapter,
            "score_fn": self.reference,
            "score_fn_source": self.function_hash,
            "judge_provider": scorer.judge_provider,
            "judge_model_id": scorer.judge_model_id,
            "judge_model_snapshot": scorer.judge_model_snapshot,
            "rubric_id": scorer.rubric_id,
            "rubric_hash": sha256_hex(scorer.rubric_text or ""),
            "scoring_parameters_hash": sha256_hex(canonical_json(dict(scorer.scoring_parameters))),
        }


def build_scorer(config) -> Scorer:
    scorer = config.scorer
    if scorer.adapter == "stub":
        return Scorer("stub", stub_score, None, sha256_hex(inspect.getsource(stub_score))[:16])
    if scorer.adapter == "inspect_ai":
        from toolkit.whatif._inspect_ai import build_inspect_scorer

        function, source_hash, extra_key, unused = build_inspect_scorer(scorer)
        return Scorer("inspect_ai", function, scorer.score_fn, source_hash, extra_key, unused)
    function = resolve_reference(scorer.score_fn, "scorer.score_fn")
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        source = getattr(function, "__qualname__", repr(function))
    return Scorer("python", function, scorer.score_fn, sha256_hex(source)[:16])


def _normalise_score(value: Any) -> tuple[float | None, str | None, str | None]:
    """(score, rationale, problem)."""
    rationale = None
    if isinstance(value, Mapping):
        rationale = value.get("rationale")
        value = value.get("score")
    elif hasattr(value, "score") and not isinstance(value, numbers.Real):
        rationale = getattr(value, "rationale", None)
        value = value.score
    if value is None:
        return None, rationale, "the scorer returned no score (None)"
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, numbers.Real):
        return None, rationale, f"the scorer returned {type(value).__name__}; expected a number in [0, 1]"
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return None, rationale, f"score {number!r} is outside [0, 1]"
    return number, None if rationale is None else str(rationale), None


@dataclasses.dataclass(frozen=True)
class PairScores:
    original: Mapping[int, float]
    replayed: Mapping[int, float]
    rationales: Mapping[tuple[int, str], str]
    failures: Mapping[int, FailureRecord]
    abandoned_calls: int


def _prepare_scoring(traces, outputs, scorer: Scorer, config, cache: ScoreCache):
    """Build every case, read the cache; (cases, keys, case components, cached scores, jobs)."""
    settings = config.scorer
    components = scorer.key_components(config)
    cases: dict[tuple[int, str], ScoreCase] = {}
    keys: dict[tuple[int, str], str] = {}
    case_components: dict[tuple[int, str], dict] = {}
    stored: dict[tuple[int, str], dict] = {}
    for position, output in outputs.items():
        trace = traces[position]
        recorded = tuple({"tool": c.name, "arguments": c.arguments, "result": c.result} for c in trace.tool_calls)
        for which, text in (("original", trace.original_output), ("replayed", output.text)):
            case = ScoreCase(
                trace_id=trace.trace_id, cohort=trace.cohort, which=which,
                user_message=trace.user_message, output_text=text, recorded_tool_calls=recorded,
                rubric_id=settings.rubric_id, rubric_text=settings.rubric_text,
                judge_provider=settings.judge_provider, judge_model_id=settings.judge_model_id,
                judge_model_snapshot=settings.judge_model_snapshot,
                scoring_parameters=dict(settings.scoring_parameters), metadata=dict(trace.metadata),
            )
            slot = (position, which)
            cases[slot] = case
            parts = {
                **components,
                "case": {
                    "trace_id": trace.trace_id, "which": which,
                    "input_hash": sha256_hex(trace.user_message),
                    "output_hash": sha256_hex(text),
                    "tools_hash": sha256_hex(canonical_json(list(recorded))),
                    # the score function also sees the trace metadata, so it is an input too
                    "metadata_hash": sha256_hex(canonical_json(dict(trace.metadata))),
                },
            }
            case_components[slot] = parts
            keys[slot] = ScoreCache.key(parts)
            hit = cache.get(keys[slot])  # CacheCorruption propagates: the run is Inconclusive
            if hit is not None:
                stored[slot] = hit
    jobs = [(slot, scorer.function, (case,)) for slot, case in cases.items() if slot not in stored]
    return cases, keys, case_components, stored, jobs


def _pair_scores(traces, outputs, scorer: Scorer, config, cache: ScoreCache, prepared, outcomes, abandoned) -> PairScores:
    cases, keys, case_components, stored, jobs = prepared
    timeout = config.timeouts.score_seconds
    bound = batch_bound(len(jobs), timeout, config.scorer.max_workers)
    scores: dict[tuple[int, str], float] = {}
    rationales: dict[tuple[int, str], str] = {}
    problems: dict[int, FailureRecord] = {}
    for slot in cases:
        position, which = slot
        trace = traces[position]
        if slot in stored:
            scores[slot] = stored[slot]["score"]
            if stored[slot].get("rationale"):
                rationales[slot] = stored[slot]["rationale"]
            continue
        outcome = outcomes[slot]
        base = {"trace_id": trace.trace_id, "cohort": trace.cohort, "stage": "score", "scope": "trace", "id": f"score-{trace.trace_id}"}
        provider = scorer.reference or scorer.adapter
        blocker, blocker_which = None, None
        if outcome.blocked_by is not None:
            other, blocker_which = outcome.blocked_by
            culprit = traces[other].trace_id
            blocker = (f"scoring trace {culprit}'s {blocker_which} output", culprit)
        cut_off = _execution_failure(outcome, "scorer", f"trace {trace.trace_id} ({which} output)", blocker, timeout, bound)
        if cut_off is not None:
            suffix, message, details = cut_off
            if "blocked_by" in details:
                details["blocked_by_which"] = blocker_which
            record = FailureRecord(code=f"scorer_{suffix}", message=message,
                                   details={"which": which, "provider": provider, **details}, **base)
        elif outcome.status == "timeout":
            record = FailureRecord(code="scorer_timeout", message=f"trace {trace.trace_id}: scoring the {which} output exceeded {timeout:g} s",
                                   details={"which": which, "timeout_seconds": timeout, "provider": provider}, **base)
        elif outcome.status == "error":
            record = FailureRecord(code="scorer_failed", message=_cut(f"trace {trace.trace_id}: scorer raised {type(outcome.error).__name__} on the {which} output: {outcome.error}"),
                                   details={"which": which, "exception_type": type(outcome.error).__name__, "provider": provider}, **base)
        else:
            score, rationale, problem = _normalise_score(outcome.value)
            if problem is None:
                scores[slot] = score
                if rationale:
                    rationales[slot] = rationale
                cache.put(keys[slot], case_components[slot], score, rationale)
                continue
            record = FailureRecord(code="scorer_invalid_output", message=f"trace {trace.trace_id}: {problem} for the {which} output",
                                   details={"which": which, "provider": provider, "reason": problem}, **base)
        problems.setdefault(position, record)
    original = {p: scores[(p, "original")] for p in outputs if (p, "original") in scores and p not in problems}
    replayed = {p: scores[(p, "replayed")] for p in outputs if (p, "replayed") in scores and p not in problems}
    return PairScores(original, replayed, rationales, problems, abandoned)


def score_pairs(traces, outputs, scorer: Scorer, config, cache: ScoreCache) -> PairScores:
    """Score each replayed trace's original and replayed output, blocking; failures become records.

    Parameters
    ----------
    traces : sequence of Trace
        The traces, by position.
    outputs : mapping of int to ReplayOutput
        Trace position -> its replayed output; only these traces are scored.
    scorer : Scorer
        From :func:`build_scorer`; its function may be sync or ``async def``.
    config : WhatIfConfig
        Supplies the scorer settings, ``scorer.max_workers`` and ``timeouts.score_seconds``.
    cache : ScoreCache
        Read before scoring, written after each valid score.

    Returns
    -------
    PairScores
        Original and replayed scores and rationales by position, one failure record per
        failed trace (``scorer_failed``, ``scorer_timeout``, ``scorer_invalid_output``,
        ``scorer_blocked_loop``, ``scorer_not_started``, ``scorer_starved``), and the number
        of abandoned calls.

    Raises
    ------
    cache.CacheCorruption
        For a bad cache entry (the caller turns it into an Inconclusive verdict).

    Notes
    -----
    The calls run through :func:`replay.run_bounded` (a fresh event loop; see the replay
    module docstring for timeouts, blocking detection and the batch bound).
    """
    prepared = _prepare_scoring(traces, outputs, scorer, config, cache)
    outcomes, abandoned = run_bounded(prepared[-1], config.timeouts.score_seconds, config.scorer.max_workers,
                                      is_async_callable(scorer.function))
    return _pair_scores(traces, outputs, scorer, config, cache, prepared, outcomes, abandoned)


async def ascore_pairs(traces, outputs, scorer: Scorer, config, cache: ScoreCache) -> PairScores:
    """:func:`score_pairs` on the caller's event loop (:func:`replay.arun_bounded`).

    An ``async def`` scorer is awaited on this loop, so it can share the caller's clients;
    a sync one runs on worker threads while the loop keeps serving. Arguments, result and
    errors are those of :func:`score_pairs`. The score-cache reads and writes are small file
    operations done on this loop directly.
    """
    prepared = _prepare_scoring(traces, outputs, scorer, config, cache)
    outcomes, abandoned = await arun_bounded(prepared[-1], config.timeouts.score_seconds, config.scorer.max_workers,
                                             is_async_callable(scorer.function))
    return _pair_scores(traces, outputs, scorer, config, cache, prepared, outcomes, abandoned)
