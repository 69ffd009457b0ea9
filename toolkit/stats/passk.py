"""pass@1, pass^k and pass@k off the same groups of repeated rollouts, with intervals.

For one task with ``n`` graded rollouts of which ``c`` passed (exact 0/1 rewards):

* pass@1 = c / n, averaged over tasks (every task, any group size): the measurement
  headline, because an agent in production answers once.
* pass@k = P(at least one of k draws without replacement passes)
  = 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, "Evaluating Large Language Models Trained
  on Code", arXiv 2107.03374), computed in the stable product form
  ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` (1 when n - c < k).
* pass^k = P(all k draws pass) = C(c, k) / C(n, k) (Yao et al. 2024, "tau-bench",
  arXiv 2406.12045), computed as ``prod_{i=0}^{k-1} (c-i)/(n-i)`` (0 when c < k).
  Both are unbiased for the task's k-draw probabilities.
* headroom = pass@k - pass@1: what a grouped RL update could still learn.

Differences from the systems we studied (docs/design/engine.md §6.1, docs/design/peers.md B.2):

* tau-bench divides every task by the *global* number of trials, so a task with a missing
  trial is scored against the wrong n; we count trials **per task**.
* Tasks with fewer than k rollouts leave the k-way averages (counted in
  ``n_groups_short``) instead of producing NaN (inspect_ai) or an exception (tau2-bench).
* Intervals are percentile bootstraps over tasks (:func:`toolkit.stats.bootstrap_ci`,
  10,000 resamples by default where the engine used 2000); the k-way intervals resample
  the per-task estimates of the k-eligible tasks.
* Degenerate grading is announced before any number: when every graded row has one
  value the note starts "every row scored X (n of n); check the judge" (docs/design/engine.md §9.1),
  and the same sentence is in ``warnings`` and starts the printed line.
* No usable reward is a result too, never a bare None: every number is None and the note
  counts why ("no row has a usable reward: 20 rows, 20 grader errors (error 20; first:
  ZeroDivisionError: ...)"); the printed line says it.
* At k = 1, pass^1 and pass@1 are pass@1 itself: the printed line shows the number once.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit._util.keys import REWARD_FIELDS, binary_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_count, check_level
from toolkit.errors import ConfigError
from toolkit.rows._read import as_row_list
from toolkit.stats.resampling import MIN_UNITS_FOR_INTERVAL, _generator, bootstrap_ci

__all__ = [
    "pass_at",
    "PassAt",
    "PassAtCurve",
    "pass_at_k_estimate",
    "pass_pow_k_estimate",
    "run_config",
]

# Below 4 repeats a k-way number rests on so few draws per task that it mostly reports
# noise (docs/design/engine.md §6.1: "set repeats>=4"); the caller can lower it knowingly.
DEFAULT_MIN_K = 4

# judge_status values that mean "graded fine"; anything else on an ungraded row is a failure.
_JUDGE_OK = {"ok", None, ""}


# --------------------------------------------------------------------------- estimators


def _check_group(n: int, c: int, k: int) -> None:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name} must be an integer; got {value!r}")
    if n < 1 or not 0 <= c <= n:
        raise ConfigError(f"need n >= 1 and 0 <= c <= n; got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ConfigError(f"k must be between 1 and n={n}; got k={k}")


def pass_at_k_estimate(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task: 1 - C(n-c, k)/C(n, k) (Chen et al. 2021, arXiv 2107.03374).

    Product form ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``, exactly 1 when n - c < k.

    Parameters
    ----------
    n : int
        Graded rollouts of the task, ``n >= 1``.
    c : int
        How many of them passed, ``0 <= c <= n``.
    k : int
        Draws, ``1 <= k <= n``.

    Returns
    -------
    float
        The probability that at least one of ``k`` rollouts drawn without replacement from
        the ``n`` passes.

    Raises
    ------
    TypeError
        When ``n``, ``c`` or ``k`` is not an integer (a bool is refused; numpy integers are
        accepted).
    ConfigError
        When they are outside the ranges above.

    References
    ----------
    .. [1] M. Chen et al., "Evaluating Large Language Models Trained on Code", 2021,
       arXiv:2107.03374.
    """
    _check_group(n, c, k)
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=float)))


def pass_pow_k_estimate(n: int, c: int, k: int) -> float:
    """Unbiased pass^k of one task: C(c, k)/C(n, k) = prod_{i=0}^{k-1} (c-i)/(n-i)
    (Yao et al. 2024, tau-bench, arXiv 2406.12045); exactly 0 when c < k.

    Parameters
    ----------
    n : int
        Graded rollouts of the task, ``n >= 1``.
    c : int
        How many of them passed, ``0 <= c <= n``.
    k : int
        Draws, ``1 <= k <= n``.

    Returns
    -------
    float
        The probability that all ``k`` rollouts drawn without replacement from the ``n``
        pass.

    Raises
    ------
    TypeError
        When ``n``, ``c`` or ``k`` is not an integer (a bool is refused; numpy integers are
        accepted).
    ConfigError
        When they are outside the ranges above.

    References
    ----------
    .. [1] S. Yao et al., "tau-bench: A Benchmark for Tool-Agent-User Interaction in
       Real-World Domains", 2024, arXiv:2406.12045.
    """
    _check_group(n, c, k)
    if c < k:
        return 0.0
    i = np.arange(k, dtype=float)
    return float(np.prod((c - i) / (n - i)))


# --------------------------------------------------------------------------- run config

# (config key, where to look in a row: a path of nested keys), first present wins.
_CONFIG_FIELDS: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...] = (
    ("temperature", (("sampling", "temperature"), ("temperature",))),
    ("max_tokens", (("sampling", "max_tokens"), ("max_tokens",))),
    ("policy_version", (("policy_version",),)),
    ("model_version", (("model_version",),)),
    ("judge_version", (("judge_meta", "version"), ("judge_version",), ("judge_name",))),
    ("prompt_hash", (("lineage", "system_prompt_sha"), ("prompt_hash",))),
    ("user_model", (("user_model",),)),
    ("writer_model", (("writer_model",),)),
)
_MISSING = object()
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def _lookup(row: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = row
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return _MISSING
        value = value[key]
    return _MISSING if value is None else value


def _share(count: int, total: int) -> float | None:
    return count / total if total else None


def run_config(rows: Any) -> dict[str, Any]:
    """What a set of rows was run with, for comparability checks (docs/design/engine.md §6.1).

    Each of temperature, max_tokens, policy_version, model_version, judge_version,
    prompt_hash (``lineage.system_prompt_sha``), user_model, writer_model maps to the one
    value every row that carries it agrees on (``None`` when no row carries it); keys on
    which rows disagree are listed in ``mixed`` with their values under ``mixed_values``.
    Shares over all rows: ``truncated_share`` (``finish_reason == "length"`` or a
    truncated step), ``answered_share`` (non-empty ``final_text`` after removing
    ``<think>...</think>``), ``unclosed_think_share`` (``<think>`` without its close) and
    ``graded_share`` (rows with an exact 0/1 reward).

    Parameters
    ----------
    rows : list of dict, SimulationData, DataFrame or path
        The rows: a list of row dicts, anything with ``.rows``, a pandas DataFrame or a path
        to a JSONL file. Each key is looked up in order, first present (not None) wins:
        temperature in ``sampling.temperature`` then ``temperature``; max_tokens in
        ``sampling.max_tokens`` then ``max_tokens``; judge_version in
        ``judge_meta.version``, ``judge_version``, then ``judge_name``; prompt_hash in
        ``lineage.system_prompt_sha`` then ``prompt_hash``; the others in the field of their
        name.

    Returns
    -------
    dict
        The eight config keys, ``mixed``, ``mixed_values``, ``n_rows`` and the four shares
        (each None when there are no rows).

    Raises
    ------
    TypeError
        When ``rows`` is not a row container.
    """
    rows = as_row_list(rows)
    config: dict[str, Any] = {}
    mixed: list[str] = []
    mixed_values: dict[str, list[Any]] = {}
    for name, paths in _CONFIG_FIELDS:
        seen: dict[str, Any] = {}
        for row in rows:
            for path in paths:
                value = _lookup(row, path)
                if value is not _MISSING:
                    seen.setdefault(repr(value), value)
                    break
        if len(seen) > 1:
            config[name] = None
            mixed.append(name)
            mixed_values[name] = [seen[key] for key in sorted(seen)]
        else:
            config[name] = next(iter(seen.values()), None)
    truncated = answered = unclosed = graded = 0
    for row in rows:
        steps = row.get("steps") if isinstance(row.get("steps"), list) else []
        if row.get("finish_reason") == "length" or any(
            isinstance(step, Mapping) and step.get("truncated") is True for step in steps
        ):
            truncated += 1
        text = row.get("final_text")
        text = text if isinstance(text, str) else ""
        lowered = text.lower()
        if lowered.count("<think>") > lowered.count("</think>"):
            unclosed += 1
        # An unclosed <think> leaves no spoken answer: everything after it is reasoning.
        spoken = _THINK_BLOCK.sub("", text)
        if "<think>" in spoken.lower():
            spoken = spoken[: spoken.lower().index("<think>")]
        if spoken.strip():
            answered += 1
        if binary_reward(row) is not None:
            graded += 1
    config["mixed"] = mixed
    config["mixed_values"] = mixed_values
    config["n_rows"] = len(rows)
    config["truncated_share"] = _share(truncated, len(rows))
    config["answered_share"] = _share(answered, len(rows))
    config["unclosed_think_share"] = _share(unclosed, len(rows))
    config["graded_share"] = _share(graded, len(rows))
    return config


# --------------------------------------------------------------------------- results


def _format_number(name: str, value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None:
        return f"{name} n/a"
    if interval is None:
        return f"{name} {value:.2f}"
    return f"{name} {value:.2f} [{interval[0]:.2f}..{interval[1]:.2f}]"


def _interval(values: Sequence[float], level: float, n_resamples: int, seed: Any) -> tuple[float, float] | None:
    if len(values) < MIN_UNITS_FOR_INTERVAL:
        return None
    result = bootstrap_ci(values, "mean", level=level, method="percentile", n_resamples=n_resamples, seed=seed)
    if result.low is None:
        return None
    return (result.low, result.high)


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return math.fsum(values) / len(values)


@dataclass(frozen=True)
class PassAtCurve(Result):
    """pass@k and pass^k with intervals for each k (for ``toolkit.plots.pass_at_k_curve``).

    ``n_groups[i]`` is how many tasks had at least ``ks[i]`` graded rollouts and entered
    the averages at that k; intervals are ``None`` below 3 such tasks.
    """

    ks: tuple[int, ...]
    pass_at_k: tuple[float | None, ...]
    pass_pow_k: tuple[float | None, ...]
    pass_at_k_ci95: tuple[tuple[float, float] | None, ...]
    pass_pow_k_ci95: tuple[tuple[float, float] | None, ...]
    n_groups: tuple[int, ...]
    level: float
    note: str | None = None

    def to_pandas(self) -> Any:
        import pandas as pd

        def bound(interval: tuple[float, float] | None, side: int) -> float | None:
            return None if interval is None else interval[side]

        return pd.DataFrame(
            {
                "k": list(self.ks),
                "pass_at_k": list(self.pass_at_k),
                "pass_at_k_low": [bound(i, 0) for i in self.pass_at_k_ci95],
                "pass_at_k_high": [bound(i, 1) for i in self.pass_at_k_ci95],
                "pass_pow_k": list(self.pass_pow_k),
                "pass_pow_k_low": [bound(i, 0) for i in self.pass_pow_k_ci95],
                "pass_pow_k_high": [bound(i, 1) for i in self.pass_pow_k_ci95],
                "n_groups": list(self.n_groups),
            }
        )

    def __str__(self) -> str:
        if not self.ks:
            return f"pass@k curve: empty ({self.note})"
        parts = [
            f"k={k}: pass@k {_fmt(a)} pass^k {_fmt(p)}"
            for k, a, p in zip(self.ks, self.pass_at_k, self.pass_pow_k)
        ]
        return "pass@k curve | " + " | ".join(parts)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class PassAt(Result):
    """pass@1, pass^k, pass@k and headroom over tasks, each with a bootstrap interval.

    Fields: ``k``; ``pass_at_1`` (mean over tasks of c/n) with ``ci95``; ``pass_pow_k``
    and ``pass_at_k`` (means over tasks with n >= k of the unbiased estimators) with
    ``pass_pow_k_ci95`` / ``pass_at_k_ci95``; ``headroom`` = pass@k - pass@1;
    ``n_groups`` (tasks with a graded row), ``n_rows`` (graded rows), ``n_groups_at_k``,
    ``n_groups_short`` (tasks with fewer than k rows, left out of the k-way numbers),
    ``n_skipped`` (rows whose reward is present but not exactly 0/1: bool, text, partial,
    NaN), ``n_ungraded`` (rows without a reward), ``per_task`` (task -> c/n), ``counts``
    (task -> (c, n)), ``note`` (why a number is missing, and what to do), ``config``
    (:func:`run_config`), ``level``, ``warnings`` (what must be read before the numbers: a
    judge that scored every row alike; ``str()`` starts with them). Intervals are
    ``(low, high)`` tuples or ``None``. No usable reward gives every number None and a note
    saying why; ``str()`` then reads ``pass@1 n/a (0 groups): <note>``.
    """

    k: int | None
    pass_at_1: float | None
    pass_pow_k: float | None
    pass_at_k: float | None
    headroom: float | None
    ci95: tuple[float, float] | None
    pass_pow_k_ci95: tuple[float, float] | None
    pass_at_k_ci95: tuple[float, float] | None
    n_groups: int
    n_rows: int
    n_groups_at_k: int
    n_groups_short: int
    n_skipped: int
    n_ungraded: int
    per_task: dict[str, float]
    counts: dict[str, tuple[int, int]] = field(repr=False)
    note: str | None
    config: dict[str, Any] = field(repr=False)
    level: float = 0.95
    n_resamples: int = 10_000
    seed: Any = field(default=0, repr=False)
    warnings: tuple[str, ...] = ()

    def __str__(self) -> str:
        # what must be read before any number comes first (a judge that scored all alike)
        head = "".join(f"{warning} | " for warning in self.warnings)
        if self.pass_at_1 is None:
            return f"{head}pass@1 n/a ({self.n_groups} groups): {self.note}"
        k = self.k if self.k is not None else "k"
        if k == 1:
            # pass^1 = pass@1 = c/n: one number, printed once (the k-way caveats are in .note)
            return f"{head}{_format_number('pass@1', self.pass_at_1, self.ci95)} ({self.n_groups} groups, k=1)"
        parts = [
            _format_number("pass@1", self.pass_at_1, self.ci95),
            _format_number(f"pass^{k}", self.pass_pow_k, self.pass_pow_k_ci95),
            _format_number(f"pass@{k}", self.pass_at_k, self.pass_at_k_ci95),
            "headroom n/a" if self.headroom is None else f"headroom {self.headroom:.2f}",
        ]
        return head + " | ".join(parts) + f" ({self.n_groups} groups, k={k})"

    def curve(self, ks: Iterable[int] | None = None, level: float | None = None) -> PassAtCurve:
        """pass@k and pass^k with percentile-bootstrap intervals for each k in ``ks``.

        Default ``ks`` = 1 .. the smallest size among tasks with at least 2 graded rows
        (every task then enters every k). For a given k only tasks with n >= k count
        (``n_groups`` per k); same resamples and seed as the result itself.
        """
        level = self.level if level is None else level
        sizes = [n for _, n in self.counts.values()]
        if ks is None:
            repeated = [n for n in sizes if n >= 2]
            top = min(repeated) if repeated else (1 if sizes else 0)
            ks = range(1, top + 1)
        ks = tuple(int(k) for k in ks)
        for k in ks:
            if k < 1:
                raise ConfigError(f"every k must be >= 1; got {k}")
        tasks = sorted(self.counts)
        at_k, pow_k, at_ci, pow_ci, counts = [], [], [], [], []
        for k in ks:
            eligible = [self.counts[t] for t in tasks if self.counts[t][1] >= k]
            counts.append(len(eligible))
            if not eligible:
                for column in (at_k, pow_k, at_ci, pow_ci):
                    column.append(None)
                continue
            at_values = [pass_at_k_estimate(n, c, k) for c, n in eligible]
            pow_values = [pass_pow_k_estimate(n, c, k) for c, n in eligible]
            at_k.append(_mean(at_values))
            pow_k.append(_mean(pow_values))
            at_ci.append(_interval(at_values, level, self.n_resamples, self.seed))
            pow_ci.append(_interval(pow_values, level, self.n_resamples, self.seed))
        note = None
        if not ks:
            note = "no graded groups: nothing to plot; grade first"
        elif any(c < MIN_UNITS_FOR_INTERVAL for c in counts):
            note = (
                f"intervals need {MIN_UNITS_FOR_INTERVAL} tasks with at least k rows; "
                "missing where fewer reached that k"
            )
        return PassAtCurve(ks, tuple(at_k), tuple(pow_k), tuple(at_ci), tuple(pow_ci), tuple(counts), level, note)


# --------------------------------------------------------------------------- pass_at


def _reward_present(row: Mapping[str, Any]) -> bool:
    return any(row.get(name) is not None for name in REWARD_FIELDS)


def _present_reward(row: Mapping[str, Any]) -> Any:
    return next(row[name] for name in REWARD_FIELDS if row.get(name) is not None)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


# A grader's error text can be a whole traceback; the note quotes the start of the first one.
_REASON_CHARS = 200


def _no_usable_reward_note(
    n_rows: int, failed_statuses: Counter, failed_reasons: list[str], n_skipped: int, first_skipped: Any, n_ungraded: int
) -> str:
    """Why no row can be scored, counted: rows, grader errors (by status, the first reason),
    rewards that are not exactly 0/1, rows never graded; then what to do."""
    n_errors = sum(failed_statuses.values())
    errors = _plural(n_errors, "grader error")
    if n_errors:
        statuses = ", ".join(f"{status} {count}" for status, count in sorted(failed_statuses.items()))
        first = f"; first: {failed_reasons[0][:_REASON_CHARS]}" if failed_reasons else ""
        errors += f" ({statuses}{first})"
    parts = [_plural(n_rows, "row"), errors]
    if n_skipped:
        parts.append(f"{n_skipped} with a reward that is not exactly 0 or 1 (first: {first_skipped!r:.{_REASON_CHARS}})")
    never = n_ungraded - n_errors
    if never:
        parts.append(f"{never} not graded")
    if n_errors and n_errors >= n_rows - n_skipped:
        advice = "fix the grader (or re-run the judge) and grade again"
    elif n_skipped:
        advice = "pass@k counts exact 0/1 rewards only: grade with a 0/1 judge, or read tk.stats.metric_summary(rows, 'reward')"
    else:
        advice = "grade first: data.grade(judge=...), tk.grade(rows, judge) or simulate(grader=...)"
    return f"no row has a usable reward: {', '.join(parts)}; {advice}"


def pass_at(
    rows: Any,
    k: int | None = None,
    min_k: int = DEFAULT_MIN_K,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | np.random.Generator | None = 0,
    unanimous_short: bool = False,
) -> PassAt:
    """pass@1, pass^k, pass@k and headroom over tasks, with percentile-bootstrap intervals.

    Parameters
    ----------
    rows : list of row dicts, DataFrame, SimulationData or JSONL path. Only exact 0/1
        rewards count (``reward``, else ``qwen_reward``; within 1e-6); bools, text and
        partial rewards are skipped and counted in ``n_skipped``. Rows are grouped by
        task (``scenario_id``, else ``task_id``, else the prompt).
    k : group size for the k-way numbers; default the smallest group size among tasks
        with at least 2 graded rows (1 if none).
    min_k : below this k the k-way numbers are ``None`` with a note (default 4).
    level, n_resamples, seed : of the bootstrap intervals (over tasks).
    unanimous_short : also count tasks with fewer than k rows whose rows all agree, with
        pass^k = pass@k = their common value (successive sampling stops a task early once
        it is unanimous, docs/design/engine.md §6.1); mixed short tasks stay out either way.

    Returns
    -------
    PassAt (see its docstring). Empty or ungraded input returns a result with a note.
    ``str()`` reads ``pass@1 0.66 [0.50..0.80] | pass^4 0.31 [0.12..0.56] | pass@4 0.94
    [0.81..1.00] | headroom 0.28 (16 groups, k=4)``.
    """
    rows = as_row_list(rows)
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise ConfigError(f"k must be an integer >= 1 or None; got {k!r}")
    if isinstance(min_k, bool) or not isinstance(min_k, (int, np.integer)) or min_k < 1:
        raise ConfigError(f"min_k must be an integer >= 1; got {min_k!r}")
    # Checked up front: with fewer than 3 tasks no bootstrap runs, and a bad level would
    # otherwise pass silently until the data grows.
    level = check_level("level", level)
    n_resamples = check_count("n_resamples", n_resamples)
    _generator(seed)
    config = run_config(rows)

    groups: dict[str, list[int]] = {}
    skipped = ungraded = 0
    first_skipped: Any = None
    failed_statuses: Counter[str] = Counter()
    failed_reasons: list[str] = []
    for row in rows:
        value = binary_reward(row)
        if value is not None:
            groups.setdefault(task_key(row), []).append(value)
            continue
        if _reward_present(row):
            skipped += 1
            if skipped == 1:
                first_skipped = _present_reward(row)
        else:
            ungraded += 1
            status = row.get("judge_status")
            if status not in _JUDGE_OK:
                failed_statuses[str(status)] += 1
                if row.get("reason"):
                    failed_reasons.append(str(row["reason"]))

    tasks = sorted(groups)
    counts = {task: (sum(groups[task]), len(groups[task])) for task in tasks}
    per_task = {task: c / n for task, (c, n) in counts.items()}
    n_rows = sum(n for _, n in counts.values())
    notes: list[str] = []
    warnings: list[str] = []

    def build(**numbers: Any) -> PassAt:
        defaults = dict(
            k=None, pass_at_1=None, pass_pow_k=None, pass_at_k=None, headroom=None, ci95=None,
            pass_pow_k_ci95=None, pass_at_k_ci95=None, n_groups_at_k=0, n_groups_short=0,
        )
        defaults.update(numbers)
        return PassAt(
            n_groups=len(tasks), n_rows=n_rows, n_skipped=skipped, n_ungraded=ungraded,
            per_task=per_task, counts=counts, note="; ".join(notes) if notes else None,
            config=config, level=level, n_resamples=n_resamples, seed=seed, warnings=tuple(warnings), **defaults,
        )

    if not rows:
        notes.append("no rows: nothing to score; pass the rows of a run")
        return build()
    if not tasks:
        notes.append(_no_usable_reward_note(len(rows), failed_statuses, failed_reasons, skipped, first_skipped, ungraded))
        return build()

    # Degenerate grading first: a judge that scores everything alike looks like a clean
    # result with a tight interval (docs/design/engine.md §9.1, #594).
    all_values = {value for task in tasks for value in groups[task]}
    if n_rows >= 2 and len(all_values) == 1:
        only = all_values.pop()
        warnings.append(f"every row scored {only} ({n_rows} of {n_rows}); check the judge before reading this number")
        notes.append(warnings[-1])

    pass_at_1 = _mean(per_task.values())
    ci95 = _interval([per_task[t] for t in tasks], level, n_resamples, seed)
    if ci95 is None:
        notes.append(
            f"no interval on pass@1: {len(tasks)} task(s), and a bootstrap needs "
            f"{MIN_UNITS_FOR_INTERVAL}; run more tasks (or give distinct situations their own task_id)"
        )

    sizes = sorted({n for _, n in counts.values()})
    repeated = [n for n in sizes if n >= 2]
    chosen = int(k) if k is not None else (min(repeated) if repeated else 1)
    eligible = [t for t in tasks if counts[t][1] >= chosen]
    unanimous = [
        t for t in tasks
        if unanimous_short and counts[t][1] < chosen and counts[t][0] in (0, counts[t][1])
    ]
    short = len(tasks) - len(eligible) - len(unanimous)
    if chosen < min_k:
        message = (
            f"pass^k and pass@k need k >= {min_k}: the groups give k={chosen}; "
            f"set repeats>={min_k} (or pass min_k={chosen} to accept a noisier k)"
        )
        if k is None and len(repeated) > 1:
            message += (
                f"; groups are uneven (sizes {', '.join(map(str, sizes))}): pass k={max(sizes)} "
                f"to score the {sum(1 for _, n in counts.values() if n >= max(sizes))} group(s) that reached it"
            )
        notes.append(message)
        return build(k=chosen, pass_at_1=pass_at_1, ci95=ci95, n_groups_at_k=len(eligible), n_groups_short=short)
    if not eligible and not unanimous:
        notes.append(f"no task has {chosen} graded rows; pass a smaller k (largest group: {max(sizes)})")
        return build(k=chosen, pass_at_1=pass_at_1, ci95=ci95, n_groups_short=short)

    scored = sorted(eligible + unanimous)
    at_values, pow_values = [], []
    for task in scored:
        c, n = counts[task]
        if n < chosen:  # unanimous short group: every draw would match its one value
            at_values.append(float(c > 0))
            pow_values.append(float(c > 0))
        else:
            at_values.append(pass_at_k_estimate(n, c, chosen))
            pow_values.append(pass_pow_k_estimate(n, c, chosen))
    pass_at_k = _mean(at_values)
    pass_pow_k = _mean(pow_values)
    at_ci = _interval(at_values, level, n_resamples, seed)
    pow_ci = _interval(pow_values, level, n_resamples, seed)
    if short:
        notes.append(f"{short} task(s) with fewer than {chosen} graded rows left out of pass^{chosen}/pass@{chosen}")
    if at_ci is None:
        notes.append(
            f"no interval on pass^{chosen}/pass@{chosen}: {len(scored)} task(s) scored at k={chosen}, "
            f"and a bootstrap needs {MIN_UNITS_FOR_INTERVAL}"
        )
    return build(
        k=chosen, pass_at_1=pass_at_1, pass_pow_k=pass_pow_k, pass_at_k=pass_at_k,
        headroom=pass_at_k - pass_at_1, ci95=ci95, pass_pow_k_ci95=pow_ci, pass_at_k_ci95=at_ci,
        n_groups_at_k=len(scored), n_groups_short=short,
    )
