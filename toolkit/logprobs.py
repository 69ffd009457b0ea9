"""Read the policy's log-probabilities: coverage, sampled KL to a reference policy, calibration
stamps and the off-policy (staleness) check.

The *reference policy* (``pi_ref``, the ``ref`` / ``reference`` arguments, the ``ref_*`` row
fields) is the model the sampled policy ``pi`` is compared with: typically the model before
fine-tuning, so KL says how far training moved it. Nothing picks one for you: the rows carry a
``ref_logprob`` only once :func:`reference_logprobs` has scored them under the model you name
(KL of a model against itself is 0).

Formulas (docs/design/engine.md §6.7):

* ``logprob_report``: mean token logprob = total logprob / total tokens over rows carrying
  both; per-row means summarised at p10/p50/p90 (rounded-index quantiles); the Pearson
  correlation of a 0/1 reward with the row mean logprob, warned at |r| >= 0.3 (a fair judge
  should not pay for the policy's confidence).
* ``mean_kl``: the sampled ("k1") estimator of KL(pi || pi_ref) per generated token,
  ``sum(logprob - ref_logprob) / sum(n_tokens)`` over rows sampled from pi. It is unbiased
  for the per-sequence KL divided by the expected length only in the limit (a ratio
  estimator), and a single sample can be negative; Schulman, "Approximating KL
  Divergence" (2020, joschu.net/blog/kl-approx.html) discusses k1 vs k2/k3.
* ``staleness_report``: rows sampled by another policy are usable for an off-policy update
  only with the sampler's version and logprobs, which form the importance ratio
  ``exp(log pi_new - log pi_old)`` (Schulman et al., PPO, arXiv:1707.06347; Noukhovitch et
  al., Asynchronous RLHF, arXiv:2410.18252).

Where we differ from whileai-sdk's engine (docs/design/engine.md): ``reference_logprobs`` records a per-row
``ref_status`` (ok / error / unscorable) instead of leaving a failed row without a field,
and the reference's token count (``ref_n_tokens``) next to the policy's, because a
reference with another tokenizer scores the same text in a different number of tokens.
When the first 3 rows all fail, the rest are marked ``skipped`` without a call (a dead
server would otherwise spend its retries on every row, pain #88).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolkit._util.keys import binary_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import is_count
from toolkit.agents import model_agent
from toolkit.errors import LogprobError, ToolkitError, did_you_mean, unknown_name_message
from toolkit.rows import messages_from_steps, scrub
from toolkit.rows._read import as_row_list
from toolkit.rows._results import RowsResult
from toolkit.stats.agreement import wilson
from toolkit.stats.passk import pass_at

__all__ = [
    "LogprobReport",
    "MeanKL",
    "CalibrationReport",
    "StalenessReport",
    "ReferenceLogprobs",
    "logprob_report",
    "mean_kl",
    "calibrate",
    "staleness_report",
    "reference_logprobs",
    "row_match_key",
    "LogprobError",
]

# |r| >= 0.3 between reward and policy confidence is the reference's "judge pays for
# fluency" threshold; below it the correlation is within what task difficulty explains.
_CONFIDENCE_WARN = 0.3
_KL_DECIMALS = 6
# After this many failures with no row scored, the reference is taken as down and the
# remaining rows are marked "skipped" (kept, never dropped) instead of each retrying.
_MAX_LEADING_FAILURES = 3
_DEFAULT_REF_FIELD = "ref_logprob"
_POLICY_FIELDS = frozenset({"logprob", "n_tokens", "token_logprobs"})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _row_totals(row: Mapping[str, Any]) -> tuple[float | None, int | None]:
    """The row's (summed logprob, generated tokens): row totals, else the sum over steps
    when every assistant step carries both."""
    logprob, n_tokens = _number(row.get("logprob")), row.get("n_tokens")
    if logprob is not None and is_count(n_tokens):
        return logprob, int(n_tokens)
    steps = [s for s in row.get("steps") or [] if isinstance(s, Mapping) and "user" not in s]
    if steps and all(_number(s.get("logprob")) is not None and is_count(s.get("n_tokens")) for s in steps):
        return math.fsum(float(s["logprob"]) for s in steps), sum(int(s["n_tokens"]) for s in steps)
    return None, None


def row_match_key(row: Mapping[str, Any]) -> str:
    """How two row lists are matched: rollout_id, else scenario_id#rollout_index, else
    sha1(prompt + final_text)[:16] (the rule of judge_agreement, docs/design/engine.md §6.5).

    Parameters
    ----------
    row : mapping
        One row. Read: ``rollout_id`` (used when present and not ``""``), else
        ``scenario_id`` together with ``rollout_index`` (both needed; ``scenario_id`` not
        ``""``), else ``prompt`` and ``final_text`` (each ``str()``-ed, missing ones as
        ``""``). The row is not changed.

    Returns
    -------
    str
        ``"id:<rollout_id>"``, ``"sr:<scenario_id>#<rollout_index>"`` or ``"h:"`` followed by
        the first 16 hex digits of the SHA-1 of the UTF-8 ``prompt + final_text``.
    """
    if row.get("rollout_id") not in (None, ""):
        return f"id:{row['rollout_id']}"
    if row.get("scenario_id") not in (None, "") and row.get("rollout_index") is not None:
        return f"sr:{row['scenario_id']}#{row['rollout_index']}"
    text = str(row.get("prompt", "")) + str(row.get("final_text", ""))
    return "h:" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _quantile_rounded(sorted_values: Sequence[float], q: float) -> float:
    return sorted_values[int(round(q * (len(sorted_values) - 1)))]


# --------------------------------------------------------------------------------------
# logprob_report
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogprobReport(Result):
    n_rows: int
    n_with_logprobs: int
    coverage: float | None
    n_tokens: int
    mean_token_logprob: float | None
    p10: float | None
    p50: float | None
    p90: float | None
    reward_confidence_r: float | None
    n_graded: int
    n_truncated: int
    warnings: list
    note: str | None = None

    def __str__(self) -> str:
        if self.mean_token_logprob is None:
            return f"logprobs on 0 of {self.n_rows} rows"
        r = f", reward~confidence r={self.reward_confidence_r:+.2f}" if self.reward_confidence_r is not None else ""
        return (
            f"logprobs on {self.n_with_logprobs} of {self.n_rows} rows; mean token logprob "
            f"{self.mean_token_logprob:.3f} (p10 {self.p10:.3f}, p90 {self.p90:.3f}){r}"
        )


def logprob_report(rows: Any) -> LogprobReport:
    """How much of the policy's log-probability was captured, and whether reward tracks it.

    A row's totals are its own ``logprob`` and integer ``n_tokens``, else the sums over its
    assistant steps when every such step carries both; rows with no totals or
    ``n_tokens <= 0`` are not used. Formulas (module docstring): mean token logprob =
    total logprob / total tokens over the used rows; ``p10`` / ``p50`` / ``p90`` of the
    per-row means ``logprob / n_tokens`` at the rounded index ``round(q (m - 1))`` of the
    sorted m means; ``reward_confidence_r`` the Pearson r of the exact 0/1 reward with the
    per-row mean over graded used rows (3 or more, both sides varying), with a warning at
    ``|r| >= 0.3``.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame or a path
        to a JSONL file (read with :func:`toolkit.rows.read_rows`).

    Returns
    -------
    LogprobReport
        ``n_rows``, ``n_with_logprobs``, ``coverage`` (their share; None for no rows),
        ``n_tokens``, ``mean_token_logprob``, ``p10`` / ``p50`` / ``p90``,
        ``reward_confidence_r`` (None when it cannot be formed), ``n_graded``,
        ``n_truncated`` (rows with ``finish_reason == "length"`` or a truncated step, over
        all rows), ``warnings`` and ``note``.

    Raises
    ------
    TypeError
        When ``rows`` is not a row container.
    """
    source = as_row_list(rows)
    totals = [(_row_totals(r), r) for r in source]
    usable = [((lp, n), r) for (lp, n), r in totals if lp is not None and n and n > 0]
    total_lp = math.fsum(lp for (lp, _), _ in usable)
    total_n = sum(n for (_, n), _ in usable)
    means = sorted(lp / n for (lp, n), _ in usable)
    n_truncated = sum(
        1
        for r in source
        if r.get("finish_reason") == "length" or any(isinstance(s, Mapping) and s.get("truncated") for s in r.get("steps") or [])
    )
    warnings = []
    r_value = None
    graded = [(binary_reward(r), lp / n) for (lp, n), r in usable if binary_reward(r) is not None]
    if len(graded) >= 3:
        rewards = [g for g, _ in graded]
        confidences = [c for _, c in graded]
        if len(set(rewards)) > 1 and len(set(confidences)) > 1:
            from scipy import stats

            r_value = float(stats.pearsonr(rewards, confidences)[0])
            if abs(r_value) >= _CONFIDENCE_WARN:
                warnings.append(
                    f"reward correlates with the policy's confidence (r = {r_value:+.2f}); the judge may pay for fluency"
                )
    note = None
    if not usable:
        note = "no row carries logprob and n_tokens; run with logprobs=True (or a backend that returns them)"
    elif len(usable) < len(source):
        warnings.append(f"{len(source) - len(usable)} of {len(source)} rows carry no logprob")
    return LogprobReport(
        n_rows=len(source),
        n_with_logprobs=len(usable),
        coverage=len(usable) / len(source) if source else None,
        n_tokens=total_n,
        mean_token_logprob=total_lp / total_n if total_n else None,
        p10=_quantile_rounded(means, 0.1) if means else None,
        p50=_quantile_rounded(means, 0.5) if means else None,
        p90=_quantile_rounded(means, 0.9) if means else None,
        reward_confidence_r=r_value,
        n_graded=len(graded),
        n_truncated=n_truncated,
        warnings=warnings,
        note=note,
    )


# --------------------------------------------------------------------------------------
# mean_kl
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MeanKL(Result):
    mean_kl: float | None
    per_task: dict
    n_rows: int
    n_skipped: int
    n_tokens: int
    n_unmatched: int
    ref: str
    note: str | None = None

    def __str__(self) -> str:
        if self.mean_kl is None:
            return f"mean KL: none ({self.note})"
        return (f"mean KL(policy || reference policy, from {self.ref}) {self.mean_kl:.4f} nats/token over {self.n_rows} rows, "
                f"{self.n_tokens} tokens, {len(self.per_task)} tasks")


def _served_temperature(row: Mapping[str, Any]) -> float | None:
    """The temperature a row was sampled at when it is not 1 and its logprobs came from a
    model server (the row names one), else None."""
    if not isinstance(row.get("server"), Mapping):
        return None
    temperature = (row.get("sampling") or {}).get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and temperature != 1:
        return float(temperature)
    return None


def _reference_values(source: list[dict], ref: Any) -> tuple[list[float | None], int, str]:
    if isinstance(ref, str):
        if source and ref != _DEFAULT_REF_FIELD and not any(ref in r for r in source):
            # no row carries the field: a typo when a row carries a close name, else the
            # rows were simply never scored (the result's note says how to score them).
            # The policy's own fields are never the reference, so they are not suggested.
            keys = sorted({k for r in source for k in r if isinstance(k, str)} - _POLICY_FIELDS)
            if did_you_mean(ref, keys):
                raise LogprobError(unknown_name_message("ref field", ref, keys))
        return [_number(r.get(ref)) for r in source], 0, ref
    ref_rows = as_row_list(ref, "ref")
    by_key: dict[str, float | None] = {}
    for r in ref_rows:
        by_key[row_match_key(r)] = _row_totals(r)[0]
    values, unmatched = [], 0
    for r in source:
        key = row_match_key(r)
        if key not in by_key:
            unmatched += 1
            values.append(None)
        else:
            values.append(by_key[key])
    return values, unmatched, "second row list (its logprob)"


def mean_kl(rows: Any, ref: Any = "ref_logprob") -> MeanKL:
    """Sampled KL(pi || pi_ref) per generated token: sum(logprob - ref_logprob) / sum(n_tokens).

    ``per_task`` pools the same ratio over each task's rollouts. Rows without both numbers
    (or with ``n_tokens <= 0``) are counted in ``n_skipped``; KL is rounded to 6 decimals.

    The estimate over the rows ``r`` sampled from pi, with ``n_r`` generated tokens::

        KL_hat = sum_r (logprob_r - ref_logprob_r) / sum_r n_r

    (the "k1" estimator; a ratio estimator, and a single sample can be negative, see the
    module docstring).

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows sampled from the policy (any container :func:`logprob_report` takes). The
        policy side of a row is its ``logprob`` / ``n_tokens``, else the sums over its
        assistant steps.
    ref : str or rows, optional
        Where the reference policy's summed logprob of the same completion is. A string is the row
        field holding it (default ``"ref_logprob"``, what :func:`reference_logprobs` writes);
        a name other than the default that no row carries raises when a row carries a close
        name (a typo), else every row is skipped and the note says to score the rows. Any
        other value is a second row list, matched by :func:`row_match_key`, whose
        ``logprob`` (or step sums) is the reference policy's; rows with no match count in
        ``n_unmatched`` (and in ``n_skipped``).

    Returns
    -------
    MeanKL
        ``mean_kl`` (None when no row has both numbers), ``per_task``, ``n_rows`` (rows
        used), ``n_skipped``, ``n_tokens``, ``n_unmatched``, ``ref`` (the field name or
        ``"second row list (its logprob)"``) and ``note`` (also set when the estimate is
        negative).

    Raises
    ------
    LogprobError
        When ``ref`` names a field no row carries and a row carries a close name.
    TypeError
        When ``rows`` (or ``ref`` given as rows) is not a row container.

    References
    ----------
    .. [1] J. Schulman, "Approximating KL Divergence", 2020,
       http://joschu.net/blog/kl-approx.html
    """
    source = as_row_list(rows)
    refs, unmatched, ref_name = _reference_values(source, ref)
    diff_by_task: dict[str, list[float]] = defaultdict(list)
    tokens_by_task: Counter = Counter()
    n_rows = n_skipped = 0
    for row, ref_value in zip(source, refs):
        logprob, n_tokens = _row_totals(row)
        if logprob is None or ref_value is None or not n_tokens or n_tokens <= 0:
            n_skipped += 1
            continue
        n_rows += 1
        key = task_key(row)
        diff_by_task[key].append(logprob - ref_value)
        tokens_by_task[key] += n_tokens
    total_tokens = sum(tokens_by_task.values())
    if not n_rows:
        return MeanKL(
            mean_kl=None,
            per_task={},
            n_rows=0,
            n_skipped=n_skipped,
            n_tokens=0,
            n_unmatched=unmatched,
            ref=ref_name,
            note=f"no row has both logprob/n_tokens and {ref_name}; score the rows with reference_logprobs() first",
        )
    overall = math.fsum(d for ds in diff_by_task.values() for d in ds) / total_tokens
    per_task = {k: round(math.fsum(v) / tokens_by_task[k], _KL_DECIMALS) for k, v in diff_by_task.items()}
    note = None
    if overall < 0:
        note = "negative: the sampled estimator is noisy on few rows (true KL >= 0); add rollouts"
    tempered = sorted({t for r in source if (t := _served_temperature(r)) is not None})
    if tempered:
        # Measured on llama.cpp (tests/real, docs/design/real_servers.md): rows sampled at
        # temperature 0.3 and scored by the same model give -0.006 nats/token, as at 1.0,
        # although sampling at 0.3 is a different policy from sampling at 1.
        warning = (
            f"rows sampled at temperature {', '.join(f'{t:g}' for t in tempered)} carry a model server's logprobs, which "
            "llama.cpp's server and vLLM (its default logprobs mode) give before temperature: this estimates the KL "
            "between the untempered models, not between the sampling policies"
        )
        note = f"{note}; {warning}" if note else warning
    return MeanKL(
        mean_kl=round(overall, _KL_DECIMALS),
        per_task=per_task,
        n_rows=n_rows,
        n_skipped=n_skipped,
        n_tokens=total_tokens,
        n_unmatched=unmatched,
        ref=ref_name,
        note=note,
    )


# --------------------------------------------------------------------------------------
# calibrate
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationReport(RowsResult):
    rows: list = field(repr=False)  # never printed in full: the in-memory rows keep privileged
    n_stamped: int
    n_carried: int
    n_ungraded: int
    per_task: dict
    pass_at: Any
    note: str | None = None

    def __str__(self) -> str:
        return f"calibration stamped on {self.n_stamped} rows over {len(self.per_task)} tasks ({self.n_carried} carried)"


def _policy_ref(policy: Any, row: Mapping[str, Any]) -> Any:
    if policy is None:
        return row.get("policy_version") or row.get("model_version")
    if isinstance(policy, str):
        return policy
    if isinstance(policy, Mapping):
        return dict(policy)
    return getattr(policy, "name", None) or type(policy).__name__


def calibrate(rows: Any, *, policy: Any = None, ref: Any = None) -> CalibrationReport:
    """Stamp ``calibration`` on every row with a 0/1 reward.

    The stamp is ``{task_id, student, n, pass_rate, pass_rate_ci95, mean_kl}`` for the
    row's task: n graded rollouts, their pass rate with a Wilson 95% interval, and the
    task's sampled KL to ``ref``. A carried stamp whose n is larger than the rows now hold
    is kept (a selection pruned the group; ``n_carried``). Returns stamped copies in
    ``.rows``; the input rows are not changed.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The graded rows (any container :func:`logprob_report` takes). A row counts as graded
        when its reward is exactly 0 or 1 (within 1e-6); other rows are copied unstamped
        and counted in ``n_ungraded``.
    policy : str, mapping, object or None, optional
        What the stamp's ``student`` names. Default None: each row's own ``policy_version``,
        else its ``model_version``. A string is used as given, a mapping is copied as a
        dict, any other object gives its ``name`` attribute, else its type name.
    ref : str, rows or None, optional
        Where the reference policy's logprobs for the per-task ``mean_kl`` are: a field name or a second row list,
        exactly as in :func:`mean_kl`. Default None: no KL is computed and ``mean_kl`` is
        None in every stamp.

    Returns
    -------
    CalibrationReport
        ``rows`` (the copies), ``n_stamped``, ``n_carried``, ``n_ungraded``, ``per_task``
        (the stamp of each task, without ``student``), ``pass_at`` (:func:`toolkit.stats.pass_at`
        of the graded copies, None when there are none or pass_at refuses them; the refusal
        is then in ``note``) and ``note``.
    """
    source = as_row_list(rows)
    groups: dict[str, list[int]] = defaultdict(list)
    for row in source:
        b = binary_reward(row)
        if b is not None:
            groups[task_key(row)].append(b)
    kl_per_task = mean_kl(source, ref).per_task if ref is not None else {}
    per_task = {}
    for key, values in groups.items():
        interval = wilson(sum(values), len(values))
        per_task[key] = {
            "task_id": key,
            "n": len(values),
            "pass_rate": sum(values) / len(values),
            "pass_rate_ci95": [interval.low, interval.high],
            "mean_kl": kl_per_task.get(key),
        }
    out = []
    n_stamped = n_carried = n_ungraded = 0
    for row in source:
        row = dict(row)
        if binary_reward(row) is None:
            n_ungraded += 1
            out.append(row)
            continue
        stamp = dict(per_task[task_key(row)])
        stamp["student"] = _policy_ref(policy, row)
        carried = row.get("calibration")
        if isinstance(carried, Mapping) and isinstance(carried.get("n"), int) and carried["n"] > stamp["n"]:
            n_carried += 1
        else:
            row["calibration"] = stamp
            n_stamped += 1
        out.append(row)
    summary = None
    if groups:
        try:
            summary = pass_at([r for r in out if binary_reward(r) is not None])
        except ToolkitError as exc:  # pass_at refuses some shapes; the stamps still stand
            summary = None
            note = f"pass_at summary unavailable: {exc}"
            return CalibrationReport(out, n_stamped, n_carried, n_ungraded, per_task, summary, note)
    return CalibrationReport(
        rows=out,
        n_stamped=n_stamped,
        n_carried=n_carried,
        n_ungraded=n_ungraded,
        per_task=per_task,
        pass_at=summary,
        note=None if groups else "no row has a 0/1 reward; grade first",
    )


# --------------------------------------------------------------------------------------
# staleness_report
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StalenessReport(Result):
    n_rows: int
    by_policy_version: dict
    by_model: dict
    base_model: str | None
    n_stale: int
    n_stale_without_logprobs: int
    temperatures: dict
    coverage: dict
    warnings: list
    n_unknown_model: int = 0

    def __str__(self) -> str:
        unknown = f", {self.n_unknown_model} with no model_version" if self.n_unknown_model else ""
        return (
            f"{self.n_rows} rows, {len(self.by_policy_version)} policy version(s), {self.n_stale} stale "
            f"({self.n_stale_without_logprobs} without logprobs){unknown}"
        )


def staleness_report(rows: Any, *, base_model: str | None = None) -> StalenessReport:
    """Which policy sampled these rows, and can an off-policy trainer use the stale ones.

    Counts rows per ``policy_version`` and per ``model_version``; a stale row is usable
    off-policy only with its logprobs (the importance ratio
    ``exp(log pi_new - log pi_old)`` needs them). Reports the temperature histogram
    (``sampling.temperature``, ``"unknown"`` when absent) and the coverage of ``sampling``,
    ``logprob`` and ``token_logprobs``.

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows (any container :func:`logprob_report` takes).
    base_model : str or None, optional
        The model the trainer now holds. A row whose ``model_version`` is not equal to it is
        stale; a row naming no model (missing or ``""``) is counted in ``n_unknown_model``,
        neither stale nor fresh. Default None: staleness is not measured (``n_stale`` is 0)
        and a warning says so.

    Returns
    -------
    StalenessReport
        ``n_rows``, ``by_policy_version`` and ``by_model`` (counts keyed by the ``str()`` of
        the value, ``"None"`` when absent), ``base_model``, ``n_stale``,
        ``n_stale_without_logprobs``, ``temperatures``, ``coverage`` (shares; None for no
        rows), ``warnings`` and ``n_unknown_model``.

    References
    ----------
    .. [1] J. Schulman et al., "Proximal Policy Optimization Algorithms", arXiv:1707.06347.
    .. [2] M. Noukhovitch et al., "Asynchronous RLHF", arXiv:2410.18252.
    """
    source = as_row_list(rows)
    versions = Counter(str(r.get("policy_version")) for r in source)
    models = Counter(str(r.get("model_version")) for r in source)
    temperatures: Counter = Counter()
    for r in source:
        sampling = r.get("sampling")
        t = sampling.get("temperature") if isinstance(sampling, Mapping) else None
        temperatures["unknown" if t is None else str(t)] += 1
    has_logprob = [_row_totals(r)[0] is not None for r in source]
    # a row that does not name its model cannot be called stale or fresh: counted apart
    unknown_model = [r.get("model_version") in (None, "") for r in source]
    stale = [
        base_model is not None and not unknown and r.get("model_version") != base_model
        for r, unknown in zip(source, unknown_model)
    ]
    n_stale_bare = sum(1 for s, lp in zip(stale, has_logprob) if s and not lp)
    n = len(source)
    coverage = {
        "sampling": sum(1 for r in source if isinstance(r.get("sampling"), Mapping)) / n if n else None,
        "logprob": sum(has_logprob) / n if n else None,
        "token_logprobs": sum(1 for r in source if r.get("token_logprobs")) / n if n else None,
    }
    warnings = []
    real_versions = [v for v in versions if v != "None"]
    if len(real_versions) > 1:
        warnings.append(f"rows come from {len(real_versions)} policy versions; an on-policy update would mix them")
    if "None" in versions:
        warnings.append(f"{versions['None']} row(s) carry no policy_version; their sampler cannot be named")
    if n_stale_bare:
        warnings.append(
            f"{n_stale_bare} stale row(s) have no logprobs: the importance ratio cannot be formed, drop them "
            "or re-sample with logprobs=True"
        )
    if base_model is None:
        warnings.append("no base_model given; staleness not measured")
    elif any(unknown_model):
        warnings.append(
            f"{sum(unknown_model)} row(s) carry no model_version; whether they are stale cannot be told"
        )
    return StalenessReport(
        n_rows=n,
        by_policy_version=dict(versions),
        by_model=dict(models),
        base_model=base_model,
        n_stale=sum(stale),
        n_stale_without_logprobs=n_stale_bare,
        temperatures=dict(temperatures),
        coverage=coverage,
        warnings=warnings,
        n_unknown_model=sum(unknown_model),
    )


# --------------------------------------------------------------------------------------
# reference_logprobs
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceLogprobs(RowsResult):
    rows: list = field(repr=False)  # never printed in full: the in-memory rows keep privileged
    reference: str
    n_scored: int
    n_failed: int
    failures: dict
    field: str
    note: str | None = None

    def __str__(self) -> str:
        return f"{self.field} from {self.reference} on {self.n_scored} rows ({self.n_failed} failed)"

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


def _completion_text(message: Mapping[str, Any]) -> str:
    """The text a reference scores for one assistant turn: its content, then its tool calls
    as a JSON list of ``{"name", "arguments"}``. Chat templates render tool calls in their
    own markup, which the server does not expose, so a tool-call turn is scored on this
    rendering: an approximation, exact only for templates that print calls as JSON."""
    import json

    text = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if calls:
        text += json.dumps([dict(c.get("function", c)) for c in calls], ensure_ascii=False)
    return text


def _assistant_turn_contexts(row: Mapping[str, Any]) -> list[tuple[list[dict], dict]]:
    """(context messages, assistant message) for every assistant turn of the row."""
    clean = scrub(dict(row))
    messages = messages_from_steps(
        clean.get("prompt", ""), clean.get("steps") or [], system_prompt=clean.get("system_prompt"),
        prefix=clean.get("prefix") or (),
    )
    return [(messages[:i], dict(m)) for i, m in enumerate(messages) if m.get("role") == "assistant"]


def reference_logprobs(
    data: Any,
    reference: Any,
    *,
    field: str = "ref_logprob",
    **backend_options: Any,
) -> ReferenceLogprobs:
    """Score existing rows under a reference policy (the model KL is measured against, see the
    module docstring); stamp ``field`` (summed logprob of the assistant turns the row's policy
    generated) on copies of the rows.

    Each row also gets ``ref_model``, ``ref_status`` (ok / error / unscorable / skipped)
    and, from a backend, ``ref_n_tokens``; a row that fails keeps its place with the error
    in ``ref_error`` rather than disappearing. When the first 3 rows all fail, the
    reference is taken as down: the remaining rows are marked ``skipped`` without a call (a
    dead server would otherwise cost its retries on every row).

    Parameters
    ----------
    data : list of dict, SimulationData, DataFrame or path
        The rows to score (any container :func:`logprob_report` takes); they are copied,
        never changed.
    reference : agent, model backend or str
        One of: a seeded agent (anything with ``score_total(row)``, offline; its value is
        the row's total), a model backend with ``prompt_logprobs(messages, completion)``
        (vLLM's OpenAI-compatible server returns prompt log-probabilities for a
        completion), or a model spec string (``"vllm:<model>@<url>"``), resolved with
        ``tk.model_agent(spec, **backend_options)``. With a backend, every assistant turn
        of the row (scrubbed, as :func:`toolkit.rows.messages_from_steps` renders it) is
        scored in its context and the logprobs are summed; a turn's text is its content
        then its tool calls as a JSON list of ``{"name", "arguments"}`` (an approximation
        of the chat template's own tool-call markup), and empty turns are left out.
        ``ref_model`` is the string itself, else the object's ``name``, else its type name.
    field : str, optional
        The row field the summed reference logprob is written to; default
        ``"ref_logprob"`` (what :func:`mean_kl` reads by default). Set to None on rows that
        fail.
    **backend_options
        Keyword options for :func:`toolkit.agents.model_agent`, used only when
        ``reference`` is a spec string; with an agent or backend object they are ignored.

    Returns
    -------
    ReferenceLogprobs
        ``rows`` (the stamped copies; the result also iterates over them and has their
        ``len``), ``reference`` (the name), ``n_scored``, ``n_failed`` (every row not
        scored, skipped ones included), ``failures`` (count per exception type name, plus
        ``"unscorable"`` for a -inf total and ``"skipped"``), ``field`` and ``note``.

    Raises
    ------
    LogprobError
        When ``reference`` (after resolving a spec string) has neither ``score_total`` nor
        ``prompt_logprobs``. A bad spec string raises what :func:`toolkit.agents.model_agent`
        raises. Errors raised while scoring a row are recorded on the row, not raised.
    """
    source = as_row_list(data)
    name = reference if isinstance(reference, str) else getattr(reference, "name", None) or type(reference).__name__
    scorer = reference
    if isinstance(reference, str):
        scorer = model_agent(reference, **backend_options)
    if not (hasattr(scorer, "score_total") or hasattr(scorer, "prompt_logprobs")):
        raise LogprobError(
            f"reference={name!r} (the reference policy) can neither score_total(row) (a seeded agent) nor prompt_logprobs(messages, "
            "completion) (a model backend); pass one of those or a model spec string"
        )
    out, failures = [], Counter()
    n_scored = 0
    first_error = None
    n_errors = 0  # rows whose call raised; all of the first 3 -> the reference is down
    reference_down = False
    for index, row in enumerate(source):
        row = dict(row)
        row["ref_model"] = str(name)
        if index == _MAX_LEADING_FAILURES and n_errors == index:
            reference_down = True
        if reference_down:
            # a dead reference would otherwise burn its retries on every remaining row (pain #88)
            row[field] = None
            row["ref_status"] = "skipped"
            row["ref_error"] = f"not attempted: the reference policy {name!r} failed on the first {_MAX_LEADING_FAILURES} rows ({first_error})"
            failures["skipped"] += 1
            out.append(row)
            continue
        try:
            if hasattr(scorer, "score_total"):
                value = float(scorer.score_total(row))
                n_ref_tokens = None
            else:
                total, n_ref_tokens = [], 0
                for context, completion in _assistant_turn_contexts(row):
                    text = _completion_text(completion)
                    if not text:
                        continue  # an empty turn generated no tokens to score
                    scored = scorer.prompt_logprobs(context, text)
                    total.append(float(scored.logprob))
                    n_ref_tokens += int(scored.n_tokens)
                value = math.fsum(total)
            if not math.isfinite(value):
                row["ref_status"] = "unscorable"
                row["ref_error"] = f"the reference policy {name!r} gives this completion probability 0 (logprob -inf)"
                row[field] = None
                failures["unscorable"] += 1
            else:
                row[field] = value
                row["ref_status"] = "ok"
                if n_ref_tokens is not None:
                    row["ref_n_tokens"] = n_ref_tokens
                n_scored += 1
        except Exception as exc:  # one row's failure is recorded on that row; the batch goes on
            row[field] = None
            row["ref_status"] = "error"
            row["ref_error"] = f"{type(exc).__name__}: {exc}"
            failures[type(exc).__name__] += 1
            first_error = first_error or row["ref_error"]
            n_errors += 1
        out.append(row)
    return ReferenceLogprobs(
        rows=out,
        reference=str(name),
        n_scored=n_scored,
        n_failed=len(source) - n_scored,
        failures=dict(failures),
        field=field,
        note=None if n_scored else "no row could be scored; see ref_error on the rows",
    )
