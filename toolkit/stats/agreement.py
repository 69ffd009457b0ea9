"""Measuring a judge against gold labels: the Wilson interval and judge agreement.

Wilson score interval (Wilson 1927, JASA 22:209; Brown, Cai & DasGupta 2001, Stat Sci 16:101)
for s successes in n trials, p = s/n, z = Phi^-1(1 - (1-level)/2):

    center = (p + z^2/(2n)) / (1 + z^2/n)
    half   = z sqrt(p(1-p)/n + z^2/(4n^2)) / (1 + z^2/n)
    [center - half, center + half], clipped to [0, 1].

We use the exact normal quantile (scipy.special.ndtri; 1.959964 at 95%), as statsmodels'
``proportion_confint(method="wilson")`` does, where the reference engine (docs/design/engine.md §6.5)
fixed z = 1.96; its acceptance numbers agree with ours to 4 decimals (tested).

Judge agreement compares a judge's 0/1 reward with a gold 0/1 label on the same rollouts:
agreement = (tp + tn)/n with its Wilson interval; Cohen's kappa (Cohen 1960, Educ Psychol
Meas 20:37) = (po - pe)/(1 - pe) with pe = jp gp + (1-jp)(1-gp) (jp, gp the judge's and
gold's pass rates; when pe = 1 both raters are constant and kappa is 1 if they agree, else
0, where sklearn returns NaN); the leak rate pass_when_gold_fail = fp/(fp + tn) and the miss
rate fail_when_gold_pass = fn/(fn + tp).

Rows whose judge reward or gold label is present but not exactly 0/1 are skipped and
counted, because dropping the hard, partially credited rows silently inflated agreement in
the reference engine (#345).

Labels on several rollouts of one task are not independent trials (a judge that misreads a
task misreads its every rollout), so Wilson's binomial interval over rows is too narrow
when tasks repeat. ``cluster=`` (default: by task) makes the agreement interval the
cluster-robust one of :func:`toolkit.stats.clustered_mean` on the 0/1 agree indicators
``a_i`` (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640, CR1)::

    se_C = sqrt( G/(G-1) sum_c ( sum_{i in c} (a_i - a-bar) )^2 ) / n,
    [a-bar -/+ t_{1-(1-level)/2}(G-1) se_C], clipped to [0, 1],

with Wilson's over rows kept beside it (``wilson_ci95``) and used when every task has one
labelled row. When every pair agrees (or every pair disagrees) se_C is 0 and the t
interval collapses to the point; the interval is then Wilson's with the G tasks as the
trials (each task one unit, the design effect at its largest), never a zero-width one.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scipy.special import ndtri

from toolkit._util.keys import binary_reward, task_key
from toolkit._util.results import Result
from toolkit.errors import ConfigError, did_you_mean
from toolkit.rows._read import as_row_list
from toolkit.stats.resampling import MIN_UNITS_FOR_INTERVAL, cluster_codes, clustered_mean

__all__ = ["wilson", "WilsonInterval", "judge_agreement", "JudgeAgreement"]

# Under 50 labels the agreement interval is wider than +-0.1 at typical agreement, too
# coarse to tell a good judge from a mediocre one; 50-200 labels is the target range
# (docs/design/engine.md §6.5).
COARSE_LABELS = 50
# A judge that passes one in ten rows the gold label fails inflates pass rates by about
# a tenth of the failure rate: worth a warning (docs/design/engine.md §6.5).
LEAK_WARN_RATE = 0.10
_TRUSTED_GOLD = ("human", "program")


@dataclass(frozen=True)
class WilsonInterval(Result):
    """Wilson score interval for a proportion; ``low``/``high`` are None when n = 0."""

    low: float | None
    high: float | None
    estimate: float | None
    successes: int
    n: int
    level: float
    note: str | None = None

    def __iter__(self):  # allows ``low, high = wilson(8, 10)``
        return iter((self.low, self.high))

    def __str__(self) -> str:
        if self.estimate is None:
            return f"no interval (0 trials): {self.note}"
        return (
            f"{self.estimate:.3f} [{self.low:.3f}..{self.high:.3f}] "
            f"({self.successes}/{self.n}, {self.level:.0%} Wilson)"
        )


def _count(value: Any, name: str) -> int:
    if isinstance(value, (bool, float)) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer count; got {value!r}")
    return int(value.__index__())


def wilson(successes: int, n: int, level: float = 0.95) -> WilsonInterval:
    """Wilson score interval for ``successes`` out of ``n`` (formula in the module docstring).

    Equal to ``statsmodels.stats.proportion.proportion_confint(successes, n,
    alpha=1-level, method="wilson")`` to 1e-9. ``n = 0`` gives ``low = high = None`` and a note.

    Parameters
    ----------
    successes : int
        Successes, ``0 <= successes <= n``. Any integer type (``__index__``); a bool or a
        float raises.
    n : int
        Trials, ``n >= 0``; same type rule.
    level : float, optional
        Confidence level strictly between 0 and 1; default 0.95. Sets
        ``z = Phi^-1(1 - (1 - level)/2)``.

    Returns
    -------
    WilsonInterval
        ``low``, ``high`` (clipped to [0, 1]), ``estimate`` = ``successes / n``,
        ``successes``, ``n``, ``level`` and ``note``; unpacks as ``low, high``.

    Raises
    ------
    TypeError
        When ``successes`` or ``n`` is not an integer.
    ConfigError
        When ``level`` is outside (0, 1) or the counts are outside the ranges above.

    References
    ----------
    .. [1] E. B. Wilson, "Probable inference, the law of succession, and statistical
       inference", JASA 22:209, 1927.
    .. [2] L. D. Brown, T. T. Cai and A. DasGupta, "Interval Estimation for a Binomial
       Proportion", Statistical Science 16:101, 2001.
    """
    successes = _count(successes, "successes")
    n = _count(n, "n")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise ConfigError(f"level must be a number strictly between 0 and 1; got {level!r}")
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ConfigError(f"need 0 <= successes <= n; got successes={successes}, n={n}")
    if n == 0:
        return WilsonInterval(None, None, None, successes, 0, float(level),
                              "no trials (n = 0): nothing to estimate; label some rows")
    z = float(ndtri(1.0 - (1.0 - level) / 2.0))
    p = successes / n
    z2 = z * z
    denominator = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    # At p = 0 (or 1) center - half is 0 (or 1) in exact arithmetic but can round to 1e-17 past
    # it (wilson(0, 24) gave low = 1.4e-17 > p), so the bounds are clamped to hold the estimate.
    return WilsonInterval(max(0.0, min(p, center - half)), min(1.0, max(p, center + half)), p, successes, n, float(level))


# --------------------------------------------------------------------------- agreement


@dataclass(frozen=True)
class JudgeAgreement(Result):
    """How well a judge's 0/1 rewards agree with gold 0/1 labels.

    ``n`` pairs with both values exactly 0/1; ``n_skipped`` rows with a value present but
    not 0/1 (bool, text, partial credit); ``n_unmatched`` gold rows (given as a second row
    list) that matched no judged row; ``agreement`` with ``agreement_ci95`` (Wilson);
    ``kappa``; ``confusion`` {tp, fp, fn, tn} with the judge as the test and gold as the
    truth; ``pass_when_gold_fail`` (leak rate), ``fail_when_gold_pass``; pass rates;
    ``gold_kind`` (human / program are trusted; model, unknown, mixed are not);
    ``ok`` = n > 0 and (trusted or allow_model_gold); ``warnings``; ``note``.

    ``agreement_ci95`` is the interval of ``interval_method``: ``"wilson"`` (every
    cluster, by default every task, has one labelled row, or ``cluster=None``),
    ``"clustered t"`` (tasks repeat), ``"wilson over tasks"`` (tasks repeat and every
    pair agrees, or every pair disagrees) or ``"none"`` (tasks repeat in fewer than 3
    clusters). ``wilson_ci95`` is Wilson's over rows whatever the method;
    ``n_clusters``, ``cluster_by``, ``design_effect`` (clustered over binomial variance)
    and ``interval_note`` say how the interval was made.
    """

    n: int
    n_skipped: int
    n_unmatched: int
    agreement: float | None
    agreement_ci95: tuple[float, float] | None
    kappa: float | None
    confusion: dict[str, int]
    pass_when_gold_fail: float | None
    fail_when_gold_pass: float | None
    judge_pass_rate: float | None
    gold_pass_rate: float | None
    gold_kind: str
    trusted: bool
    ok: bool
    matched_by: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    note: str | None = None
    wilson_ci95: tuple[float, float] | None = None
    interval_method: str = "wilson"
    n_clusters: int | None = None
    cluster_by: str | None = None
    design_effect: float | None = None
    interval_note: str | None = None

    def __str__(self) -> str:
        if self.agreement is None:
            return f"judge agreement: no pairs ({self.note})"
        ci = self.agreement_ci95
        interval = f" [{ci[0]:.2f}..{ci[1]:.2f}]" if ci else " [no interval]"
        kappa = "n/a" if self.kappa is None else f"{self.kappa:.2f}"
        leak = "n/a" if self.pass_when_gold_fail is None else f"{self.pass_when_gold_fail:.2f}"
        flag = "" if not self.warnings else f" ({len(self.warnings)} warning(s))"
        if self.interval_method == "wilson" or self.n_clusters is None:
            labels = f"{self.n} labels"
        else:
            labels = f"{self.n} labels in {self.n_clusters} clusters"
        if self.interval_method == "wilson":
            one_each = "" if self.cluster_by is None else f", one per {'task' if self.cluster_by == 'task' else 'cluster'}"
            how = f"Wilson over rows{one_each}"
        elif self.interval_method == "clustered t":
            deff = f", design effect {self.design_effect:.2f}" if self.design_effect is not None else ""
            how = f"clustered t by {self.cluster_by}{deff}"
            how += f": {self.interval_note}" if self.interval_note else ""  # e.g. why it is zero-width
        elif self.interval_method == "wilson over tasks":
            how = f"Wilson over the {self.n_clusters} clusters ({self.cluster_by})"
        else:
            how = f"no interval: {self.interval_note}"
        return (
            f"agreement {self.agreement:.2f}{interval} | kappa {kappa} | leak {leak} "
            f"({labels}, gold {self.gold_kind}; {how}){flag}"
        )


def _content_key(row: Mapping[str, Any]) -> str:
    text = f"{row.get('prompt', '')}{row.get('final_text', '')}"
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _match_keys(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Keys to match a judged row with a gold row, strongest first."""
    keys = []
    if row.get("rollout_id") not in (None, ""):
        keys.append(("rollout_id", str(row["rollout_id"])))
    if row.get("scenario_id") not in (None, "") and row.get("rollout_index") is not None:
        keys.append(("scenario_id#rollout_index", f"{row['scenario_id']}#{row['rollout_index']}"))
    keys.append(("content_hash", _content_key(row)))
    return keys


def _gold_value(row: Mapping[str, Any]) -> tuple[Any, int | None]:
    """(raw value, 0/1 or None) of a gold row: its gold_reward, else its reward."""
    for name in ("gold_reward", "reward"):
        if row.get(name) is not None:
            return row[name], binary_reward(row, name)
    return None, None


def _judge_value(row: Mapping[str, Any], judge: str) -> tuple[Any, int | None]:
    if judge == "reward":
        raw = row.get("reward", row.get("qwen_reward"))
        return raw, binary_reward(row)
    return row.get(judge), binary_reward(row, judge)


def _cluster_label(row: Mapping[str, Any], cluster: Any, position: int) -> Any:
    """The cluster of one judged row under ``cluster=`` (see :func:`judge_agreement`).

    A row with no task identity (no scenario_id, task_id or prompt) is its own cluster
    under ``"task"``: nothing says it shares a task with another row.
    """
    if cluster == "task":
        key = task_key(row)
        return ("task", key) if key else ("row", position)
    if callable(cluster):
        label = cluster(row)
    else:
        label = row
        for step in cluster.split("."):
            label = label.get(step) if isinstance(label, Mapping) else None
    if label is None:
        name = getattr(cluster, "__name__", "the callable") if callable(cluster) else repr(cluster)
        raise ConfigError(
            f"cluster={name}: row {position} (task {task_key(row)!r}) has no cluster label; every labelled "
            "row needs one (or pass cluster='task', the default)"
        )
    return repr(label) if isinstance(label, (dict, list, set)) else label


def _agreement_interval(
    agree: list[int], labels: list[Any], level: float, plain: WilsonInterval
) -> tuple[tuple[float, float] | None, str, int | None, float | None, str | None]:
    """(interval, method, G, design effect, note) of the agreement rate under clusters."""
    codes, n_clusters = cluster_codes(labels, len(agree))
    if n_clusters == len(agree):  # one row per cluster: the rows are the independent units
        return (plain.low, plain.high), "wilson", n_clusters, None, None
    if n_clusters < MIN_UNITS_FOR_INTERVAL:
        return None, "none", n_clusters, None, (
            f"{len(agree)} labels in {n_clusters} cluster(s), and a clustered interval needs "
            f"{MIN_UNITS_FOR_INTERVAL}; label rows of more tasks (Wilson over rows, which treats "
            f"them as independent, is in wilson_ci95)"
        )
    agreeing = sum(agree)
    if agreeing in (0, len(agree)):
        # se_C is 0: treat each task as one trial, the widest the correlation can make it
        interval = wilson(n_clusters if agreeing else 0, n_clusters, level)
        return (interval.low, interval.high), "wilson over tasks", n_clusters, None, (
            f"every labelled row {'agrees' if agreeing else 'disagrees'}: the clustered se is 0, so the interval "
            f"is Wilson's with the {n_clusters} clusters as the trials"
        )
    result = clustered_mean([float(a) for a in agree], codes, level)
    low, high = max(0.0, result.low), min(1.0, result.high)
    return (low, high), "clustered t", n_clusters, result.design_effect, result.note


def _kind(row: Mapping[str, Any]) -> str:
    source = row.get("label_source")
    return str(source).lower() if source not in (None, "") else "unknown"


def judge_agreement(
    rows: Any,
    gold: Any = "gold_reward",
    judge: str = "reward",
    level: float = 0.95,
    allow_model_gold: bool = False,
    *,
    cluster: Any = "task",
) -> JudgeAgreement:
    """Agreement of a judge with gold labels (docs/design/engine.md §6.5).

    Parameters
    ----------
    rows : list of dicts, DataFrame, SimulationData or JSONL path
        The judged rows.
    gold : str or row collection, optional
        A field name on the same rows (default ``"gold_reward"``), or a second row
        collection carrying the labels (its ``gold_reward``, else its ``reward``), matched
        by ``rollout_id``, else ``scenario_id#rollout_index``, else
        sha1(prompt + final_text)[:16].
    judge : str, optional
        The field holding the judge's reward (``"reward"`` falls back to ``qwen_reward``
        like every statistic).
    level : float, optional
        Of the interval on agreement; default 0.95.
    allow_model_gold : bool, optional
        Count model-written or unlabelled gold as good enough for ``ok``.
    cluster : "task", None, str or callable, optional
        Which labelled rows are correlated. ``"task"`` (default): rows of one task
        (``scenario_id``, else ``task_id``, else the prompt) are one cluster, so several
        labelled rollouts of a task count as one unit's worth of evidence, not several
        (the module docstring has the interval). None: rows are independent (Wilson over
        rows). A judged row's field (dotted for nested) or ``callable(row) -> label``
        names coarser clusters (a base task, a tool).

    Returns
    -------
    JudgeAgreement
        ``gold_kind`` comes from the gold rows' ``label_source``; the interval fields say
        which interval ``agreement_ci95`` is.

    Raises
    ------
    ConfigError
        When ``level`` is out of range or a labelled row lacks the ``cluster`` field.
    TypeError
        When ``judge`` is not a field name or ``rows`` not a row container.
    """
    rows = as_row_list(rows)
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        # Checked up front: with no labelled pairs no interval is computed to catch it.
        raise ConfigError(f"level must be a number strictly between 0 and 1; got {level!r}")
    if not isinstance(judge, str):
        raise TypeError(f"judge must be a field name (str); got {type(judge).__name__}")
    if cluster is not None and not callable(cluster) and (not isinstance(cluster, str) or not cluster):
        raise ConfigError(f"cluster must be 'task', None, a row field or a callable; got {cluster!r}")
    pairs: list[tuple[int, int, str]] = []  # (judge, gold, kind)
    pair_labels: list[Any] = []  # the cluster of each pair's judged row
    skipped = 0
    skip_reasons: Counter[str] = Counter()
    unmatched = 0
    matched_by: Counter[str] = Counter()

    def add(
        judge_raw: Any, judge_value: int | None, gold_raw: Any, gold_value: int | None, kind: str,
        row: Mapping[str, Any], position: int,
    ) -> None:
        nonlocal skipped
        if gold_raw is None and judge_raw is None:
            return
        if gold_raw is None:  # not labelled: not part of the audit
            return
        if judge_value is None or gold_value is None:
            skipped += 1
            if judge_raw is None:
                skip_reasons["no judge reward"] += 1
            elif judge_value is None:
                skip_reasons["judge reward not 0/1"] += 1
            else:
                skip_reasons["gold label not 0/1"] += 1
            return
        pairs.append((judge_value, gold_value, kind))
        if cluster is not None:
            pair_labels.append(_cluster_label(row, cluster, position))

    if isinstance(gold, str):
        for position, row in enumerate(rows):
            judge_raw, judge_value = _judge_value(row, judge)
            gold_raw = row.get(gold)
            add(judge_raw, judge_value, gold_raw, binary_reward(row, gold), _kind(row), row, position)
    else:
        gold_rows = as_row_list(gold, "gold")
        index: dict[tuple[str, str], int] = {}
        for position, gold_row in enumerate(gold_rows):
            for key in _match_keys(gold_row):
                index.setdefault(key, position)
        used: set[int] = set()
        for row_position, row in enumerate(rows):
            for key in _match_keys(row):
                position = index.get(key)
                if position is not None and position not in used:
                    used.add(position)
                    matched_by[key[0]] += 1
                    judge_raw, judge_value = _judge_value(row, judge)
                    gold_raw, gold_value = _gold_value(gold_rows[position])
                    add(judge_raw, judge_value, gold_raw, gold_value, _kind(gold_rows[position]), row, row_position)
                    break
        unmatched = len(gold_rows) - len(used)

    n = len(pairs)
    tp = sum(1 for j, g, _ in pairs if j == 1 and g == 1)
    fp = sum(1 for j, g, _ in pairs if j == 1 and g == 0)
    fn = sum(1 for j, g, _ in pairs if j == 0 and g == 1)
    tn = n - tp - fp - fn
    kinds = {kind for _, _, kind in pairs}
    gold_kind = "unknown" if not kinds else (kinds.pop() if len(kinds) == 1 else "mixed")
    trusted = gold_kind in _TRUSTED_GOLD
    warnings: list[str] = []
    if n == 0:
        reasons = ", ".join(f"{r}: {c}" for r, c in sorted(skip_reasons.items()))
        note = (
            "no rows with both a 0/1 judge reward and a 0/1 gold label"
            + (f" ({skipped} skipped: {reasons})" if skipped else "")
            + f"; label rows with {gold if isinstance(gold, str) else 'gold rows'} and grade them"
        )
        fields = {key for row in rows for key in row}
        for given in ([gold] if isinstance(gold, str) else []) + [judge]:
            if rows and given not in fields and not (given == "reward" and "qwen_reward" in fields):
                close = did_you_mean(given, fields)
                note += f"; no row has a field {given!r}" + (
                    f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
                )
        return JudgeAgreement(
            0, skipped, unmatched, None, None, None, {"tp": 0, "fp": 0, "fn": 0, "tn": 0},
            None, None, None, None, gold_kind, trusted, False, dict(matched_by), (), note,
            interval_method="none",
        )

    agreement = (tp + tn) / n
    plain = wilson(tp + tn, n, level)
    if cluster is None:
        ci, method, n_clusters, design, interval_note = (plain.low, plain.high), "wilson", None, None, None
    else:
        ci, method, n_clusters, design, interval_note = _agreement_interval(
            [int(j == g) for j, g, _ in pairs], pair_labels, level, plain
        )
    cluster_by = None if cluster is None else getattr(cluster, "__name__", "a callable") if callable(cluster) else cluster
    judge_rate = (tp + fp) / n
    gold_rate = (tp + fn) / n
    chance = judge_rate * gold_rate + (1 - judge_rate) * (1 - gold_rate)
    if chance >= 1.0:
        kappa = 1.0 if agreement == 1.0 else 0.0
    else:
        kappa = (agreement - chance) / (1.0 - chance)
    leak = fp / (fp + tn) if fp + tn else None
    miss = fn / (fn + tp) if fn + tp else None
    if n < COARSE_LABELS:
        width = ci if ci is not None else (plain.low, plain.high)
        warnings.append(
            f"only {n} labelled rows: the agreement interval is coarse "
            f"(+-{(width[1] - width[0]) / 2:.2f}); {COARSE_LABELS}-200 labels is the target range"
        )
    if leak is not None and leak >= LEAK_WARN_RATE:
        warnings.append(
            f"the judge passes {leak:.0%} of rows the gold label fails (leak rate >= {LEAK_WARN_RATE:.2f}); "
            "pass rates read through this judge are inflated"
        )
    if not trusted:
        warnings.append(
            f"gold labels are {gold_kind!r} (label_source), not human or program: agreement with them "
            "is not a measurement of the judge"
        )
    if skipped:
        reasons = ", ".join(f"{r}: {c}" for r, c in sorted(skip_reasons.items()))
        warnings.append(
            f"{skipped} labelled row(s) skipped ({reasons}): agreement is measured on the rest, "
            "which may be the easier rows"
        )
    if len({g for _, g, _ in pairs}) == 1:
        warnings.append("gold labels are all one class: kappa and the leak/miss rates cannot be measured both ways")
    ok = trusted or allow_model_gold
    return JudgeAgreement(
        n=n, n_skipped=skipped, n_unmatched=unmatched, agreement=agreement,
        agreement_ci95=ci, kappa=kappa,
        confusion={"tp": tp, "fp": fp, "fn": fn, "tn": tn}, pass_when_gold_fail=leak,
        fail_when_gold_pass=miss, judge_pass_rate=judge_rate, gold_pass_rate=gold_rate,
        gold_kind=gold_kind, trusted=trusted, ok=ok, matched_by=dict(matched_by),
        warnings=tuple(warnings), note=None, wilson_ci95=(plain.low, plain.high), interval_method=method,
        n_clusters=n_clusters, cluster_by=cluster_by, design_effect=design, interval_note=interval_note,
    )
