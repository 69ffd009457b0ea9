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
* headroom = pass@k - pass@1 over **one task set**, the tasks scored at k: what a grouped
  RL update could still learn. (Subtracting a pass@1 over every task from a pass@k over
  the few tasks that reached k compared two different populations.)

Intervals (over tasks, never rollouts) follow one rule for every number
(:func:`toolkit.stats._intervals.mean_interval`): with ``cluster=`` the cluster-robust t
interval (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640; CR1 with
``t(G - 1)``), the cluster bootstrap beside it; without, Wilson's interval over tasks
(Wilson 1927; Brown, Cai & DasGupta 2001) when every per-task value is 0 or 1 (pass^k and
pass@k at ``n = k``, pass@1 with one rollout a task), Student's t below 30 tasks, else the
percentile bootstrap (:func:`toolkit.stats.bootstrap_ci`, 10,000 resamples). The printed
line names the method whenever it is not the plain bootstrap, and the clustering.

Differences from the systems we studied (docs/design/engine.md §6.1, docs/design/peers.md B.2):

* tau-bench divides every task by the *global* number of trials, so a task with a missing
  trial is scored against the wrong n; we count trials **per task**.
* Tasks with fewer than k rollouts leave the k-way averages (counted in
  ``n_groups_short``) instead of producing NaN (inspect_ai) or an exception (tau2-bench).
* A bootstrap of 0/1 per-task values with no 1 among them is the zero-width
  ``[0.00..0.00]`` (the engine printed it for a rare pass^4); Wilson over tasks gives
  ``[0.00..0.21]`` at 0 of 16.
* Rows are checked, not silently filtered: a reward that is not a number (text, a bool),
  not finite, or outside [0, 1] raises :class:`ConfigError` naming the row, the task, the
  field and the value (``on_bad_reward="skip"`` skips and counts them instead); a
  fractional reward in (0, 1) is legitimate partial credit, so it is skipped from pass@k
  and counted. Duplicate rows (a repeated ``rollout_id``, or identical rows without one)
  are dropped, keeping the first, with a warning: a row counted twice moved pass@1.
* Degenerate grading is announced before any number: when every graded row has one
  value the note starts "every row scored X (n of n); check the judge" (docs/design/engine.md §9.1),
  and the same sentence is in ``warnings`` and starts the printed line.
* No usable reward is a result too, never a bare None: every number is None and the note
  counts why ("no row has a usable reward: 20 rows, 20 grader errors (error 20; first:
  ZeroDivisionError: ...)"); the printed line says it.
* At k = 1, pass^1 and pass@1 are pass@1 itself: the printed line shows the number once.

Scale: rows are read column by column (one list comprehension per field, numpy for the
classification and the per-task counts, the estimators once per distinct ``(n, c)``), so
10^6 rows (250,000 tasks x 4) score in about 2 s on a 2-core machine
(``benchmarks/bench_stats.py``), where the row-by-row version took about 115 s of CPU.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import numbers
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit._util.keys import _BINARY_TOLERANCE, REWARD_FIELDS, binary_reward, task_key
from toolkit._util.results import Result
from toolkit._util.validate import check_level
from toolkit.errors import ConfigError
from toolkit.rows._read import as_row_list
from toolkit.stats._intervals import MeanInterval, cluster_note, mean_interval, task_clusters
from toolkit.stats.resampling import MIN_UNITS_FOR_INTERVAL, _generator, check_resamples

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

_ON_BAD_REWARD = ("raise", "skip")

# Why a present reward is not scored (the keys of ``skipped_by``, in the printed order).
_FRACTIONAL = "fractional"
_NOT_A_NUMBER = "not a number"
_NOT_FINITE = "not finite"
_OUT_OF_RANGE = "outside [0, 1]"

# The names the printed line gives the interval methods of mean_interval.
_METHOD_LABELS = {
    "clustered t": "clustered t",
    "wilson over tasks": "Wilson over tasks",
    "student t": "Student t",
    "percentile bootstrap": "percentile bootstrap",
}
_PLAIN_METHOD = "percentile bootstrap"


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


def _k_way(c: np.ndarray, n: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """pass@k and pass^k per task for arrays of counts (every ``n >= k``).

    The estimators are evaluated once per distinct ``(n, c)`` pair (a suite of 250,000
    tasks with 4 rollouts has 5) and scattered back, so the values are bit-identical to
    :func:`pass_at_k_estimate` / :func:`pass_pow_k_estimate` at the cost of a few calls.
    """
    if c.size == 0:
        return np.empty(0), np.empty(0)
    width = int(c.max()) + 1
    keys, inverse = np.unique(n.astype(np.int64) * width + c, return_inverse=True)
    at = np.array([pass_at_k_estimate(int(key // width), int(key % width), k) for key in keys.tolist()])
    pow_ = np.array([pass_pow_k_estimate(int(key // width), int(key % width), k) for key in keys.tolist()])
    return at[inverse], pow_[inverse]


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
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def _share(count: int, total: int) -> float | None:
    return count / total if total else None


def _column(rows: list[dict[str, Any]], path: tuple[str, ...]) -> list[Any]:
    """``row[path[0]][path[1]]...`` for every row, None where a step is missing."""
    values = [row.get(path[0]) for row in rows]
    for key in path[1:]:
        values = [
            value.get(key) if type(value) is dict or isinstance(value, Mapping) else None
            for value in values
        ]
    return values


def _distinct(values: Iterable[Any]) -> dict[str, Any]:
    """``{repr(value): value}`` over the non-None values, first seen first."""
    present = [value for value in values if value is not None]
    try:
        # typed keys keep 1 and 1.0 apart, as the repr comparison below does
        candidates: Iterable[Any] = [value for _, value in dict.fromkeys((type(v), v) for v in present)]
    except TypeError:  # an unhashable value (a dict): compare by repr only
        candidates = present
    seen: dict[str, Any] = {}
    for value in candidates:
        seen.setdefault(repr(value), value)
    return seen


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
    return _run_config(as_row_list(rows))


def _run_config(rows: list[dict[str, Any]], graded: int | None = None) -> dict[str, Any]:
    """:func:`run_config` on a row list; ``graded`` (rows with an exact 0/1 reward) when known.

    A field no row carries costs nothing: the top-level keys present anywhere are collected
    once, and only their columns are read (at 10^6 rows of three keys this is ~0.1 s where
    a lookup of every path in every row took ~10 s).
    """
    present = set(itertools.chain.from_iterable(rows))
    config: dict[str, Any] = {}
    mixed: list[str] = []
    mixed_values: dict[str, list[Any]] = {}
    for name, paths in _CONFIG_FIELDS:
        values: list[Any] | None = None
        for path in paths:
            if path[0] not in present:
                continue
            column = _column(rows, path)
            if values is None:
                values = column
            else:  # the first path present (not None) wins row by row
                values = [first if first is not None else later for first, later in zip(values, column)]
        seen = _distinct(values or ())
        if len(seen) > 1:
            config[name] = None
            mixed.append(name)
            mixed_values[name] = [seen[key] for key in sorted(seen)]
        else:
            config[name] = next(iter(seen.values()), None)
    truncated = answered = unclosed = 0
    if "finish_reason" in present or "steps" in present:
        for row in rows:
            steps = row.get("steps")
            if row.get("finish_reason") == "length" or (
                type(steps) is list
                and any(isinstance(step, Mapping) and step.get("truncated") is True for step in steps)
            ):
                truncated += 1
    if "final_text" in present:
        for text in _column(rows, ("final_text",)):
            if type(text) is not str or not text:
                continue
            if "<" not in text:  # no tag, so no think block: the text is the answer
                answered += bool(text.strip())
                continue
            lowered = text.lower()
            if lowered.count("<think>") > lowered.count("</think>"):
                unclosed += 1
            # An unclosed <think> leaves no spoken answer: everything after it is reasoning.
            spoken = _THINK_BLOCK.sub("", text)
            if "<think>" in spoken.lower():
                spoken = spoken[: spoken.lower().index("<think>")]
            if spoken.strip():
                answered += 1
    if graded is None:
        graded = sum(1 for row in rows if binary_reward(row) is not None)
    config["mixed"] = mixed
    config["mixed_values"] = mixed_values
    config["n_rows"] = len(rows)
    config["truncated_share"] = _share(truncated, len(rows))
    config["answered_share"] = _share(answered, len(rows))
    config["unclosed_think_share"] = _share(unclosed, len(rows))
    config["graded_share"] = _share(graded, len(rows))
    return config


# --------------------------------------------------------------------------- reading rows


def _is_dataframe(rows: Any) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(rows, pandas.DataFrame)


def _missing_cell(value: Any) -> bool:
    """A DataFrame's empty cell: None, NaN, pd.NA or NaT (``to_dict`` writes these for a gap)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except (TypeError, ValueError):  # pd.NA: its comparison is NA, whose truth is undefined
        return True


def _missing_id(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _content_key(row: Mapping[str, Any], dataframe: bool) -> Any:
    """A key that identical rows (and only they) share.

    A flat row of hashable values is keyed by its items with their types (so a reward of
    ``True`` is not the same row as a reward of ``1``), about 1 us a row; a row holding
    lists or dicts (or a DataFrame row, whose empty cells are NaN, which is not equal to
    itself) by the sha1 of its canonical JSON, about 10 us.
    """
    if not dataframe:
        try:
            return frozenset(row.items()), frozenset(zip(row.keys(), map(type, row.values())))
        except TypeError:
            pass
    return _content_digest(row)


def _content_digest(row: Mapping[str, Any]) -> bytes:
    """sha1 of the row's canonical JSON: identical rows (and only they) share it."""
    try:
        text = json.dumps(row, sort_keys=True, default=repr, separators=(",", ":"))
    except (TypeError, ValueError):  # keys of mixed types cannot be sorted
        text = repr(sorted((repr(key), repr(value)) for key, value in row.items()))
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class _Duplicates:
    kept: list[dict[str, Any]]
    positions: list[int] | None  # input index of each kept row; None when nothing was dropped
    by_id: int
    by_content: int
    example: str | None


# A row holding nothing but what pass_at reads (its task and its grade) cannot tell two
# rollouts with the same outcome apart: three rows {"task_id": "a", "reward": 1} are three
# passes (the live tracker keeps rows this bare), so such rows are never dropped as identical.
_SCORE_ONLY_FIELDS = frozenset({"scenario_id", "task_id", "prompt", *REWARD_FIELDS, "judge_status"})


def _drop_duplicates(rows: list[dict[str, Any]], dataframe: bool = False) -> _Duplicates:
    """Keep the first of rows sharing a ``rollout_id`` (or, without one, identical content).

    Identical content counts only for rows carrying something a rollout of its own would
    change (its text, steps, ``rollout_index``, a seed): a row of only
    :data:`_SCORE_ONLY_FIELDS` is kept however often it repeats. The common case (every
    row carries a distinct id, as engine and tau-bench rows do) is one set comparison;
    only otherwise are rows walked, and only id-less rows hashed.
    """
    ids = [row.get("rollout_id") for row in rows]
    if set(map(type, ids)) <= {str, int}:
        distinct = set(ids)
        if len(distinct) == len(ids) and "" not in distinct:
            return _Duplicates(rows, None, 0, 0, None)
    seen: set[Any] = set()
    kept: list[dict[str, Any]] = []
    positions: list[int] = []
    by_id = by_content = 0
    example = None
    for position, (row, rollout_id) in enumerate(zip(rows, ids)):
        if _missing_id(rollout_id):
            if row.keys() <= _SCORE_ONLY_FIELDS:
                kept.append(row)
                positions.append(position)
                continue
            key: Any = ("content", _content_key(row, dataframe))
        else:
            try:
                hash(rollout_id)
                key = ("id", rollout_id)
            except TypeError:  # an unhashable id (a list) is compared by its repr
                key = ("id", repr(rollout_id))
        if key in seen:
            if key[0] == "id":
                by_id += 1
                example = example or f"row {position} repeats rollout_id {rollout_id!r}"
            else:
                by_content += 1
                example = example or f"row {position} (task {task_key(row)!r}) is identical to an earlier row"
            continue
        seen.add(key)
        kept.append(row)
        positions.append(position)
    return _Duplicates(kept, positions, by_id, by_content, example)


def _is_numeric_type(kind: type) -> bool:
    # numbers.Real admits numpy scalars; bools (numpy's too) are refused: True is not a score
    return issubclass(kind, numbers.Real) and not issubclass(kind, (bool, np.bool_))


@dataclass(frozen=True)
class _Rewards:
    values: np.ndarray  # float reward per kept row (NaN where absent or not a number)
    absent: np.ndarray  # no reward in any reward field
    not_number: np.ndarray
    from_qwen: frozenset[int]  # kept rows whose reward came from ``qwen_reward``
    raw: list[Any]


def _read_rewards(kept: list[dict[str, Any]], dataframe: bool) -> _Rewards:
    """The reward of every row (``reward``, else ``qwen_reward``), classified by numpy.

    Column-wise: one list of raw values, the set of their types (ints and floats take the
    fast path into a float array), and element-wise work only for the rows whose type is
    not a number. In a DataFrame an empty cell is NaN, so there NaN means "no reward".
    """
    raw = [row.get(REWARD_FIELDS[0]) for row in kept]
    n = len(raw)
    missing = _missing_cell if dataframe else (lambda value: value is None)
    if dataframe:
        gaps = [i for i, value in enumerate(raw) if _missing_cell(value)]
    elif type(None) in set(map(type, raw)):
        gaps = [i for i, value in enumerate(raw) if value is None]
    else:
        gaps = []
    from_qwen: list[int] = []
    absent_positions: list[int] = []
    for i in gaps:
        fallback = kept[i].get(REWARD_FIELDS[1])
        if missing(fallback):
            raw[i] = None
            absent_positions.append(i)
        else:
            raw[i] = fallback
            from_qwen.append(i)
    absent = np.zeros(n, dtype=bool)
    absent[absent_positions] = True
    kinds = set(map(type, raw)) - {type(None)}
    numeric = {kind for kind in kinds if _is_numeric_type(kind)}
    not_number = np.zeros(n, dtype=bool)
    if kinds == numeric:  # every present reward is a number: one conversion, no per-row checks
        values = np.array(raw if not absent_positions else [np.nan if v is None else v for v in raw], dtype=float)
    else:
        values = np.full(n, np.nan)
        for i, value in enumerate(raw):
            if value is None:
                continue
            if type(value) in numeric:
                values[i] = float(value)
            else:
                not_number[i] = True
    return _Rewards(values, absent, not_number, frozenset(from_qwen), raw)


def _task_keys(kept: list[dict[str, Any]]) -> list[str]:
    """``task_key(row)`` for every row, read a column at a time (scenario_id, task_id, prompt).

    Same rule as :func:`toolkit._util.keys.task_key` (first of scenario_id, task_id that
    is neither None nor "", as text; else the prompt), at a list comprehension per field
    instead of a function call per row; a column that names every row's task ends it.
    """
    keys: list[Any] = [None] * len(kept)
    pending: list[int] | None = None  # None: every row
    for name in ("scenario_id", "task_id"):
        if pending is None:
            column = [row.get(name) for row in kept]
            kinds = set(map(type, column))
            if kinds <= {str} and "" not in column:
                return column
            if kinds == {type(None)}:  # no row carries this field: the next one decides
                continue
            positions: Iterable[int] = range(len(kept))
        else:
            if not pending:
                return keys
            column = [kept[i].get(name) for i in pending]
            positions = pending
        still = []
        for i, value in zip(positions, column):
            if value is None or (type(value) is str and not value):
                still.append(i)
            else:
                keys[i] = value if type(value) is str else task_key({name: value})
        pending = still
    for i in pending if pending is not None else range(len(kept)):
        keys[i] = str(kept[i].get("prompt", ""))
    return keys


def _skip_phrase(skipped_by: Mapping[str, int]) -> str:
    parts = [f"{count} {kind}" for kind, count in skipped_by.items() if count]
    return ", ".join(parts)


def _bad_reward_error(
    position: int, row: Mapping[str, Any], field_name: str, value: Any, why: str, others: int
) -> ConfigError:
    more = f" ({others} more row(s) like it)" if others else ""
    if isinstance(value, (bool, np.bool_)):
        what = "is a bool, not a score"
    elif why == _NOT_A_NUMBER:
        what = f"is not a number ({type(value).__name__})"
    elif why == _NOT_FINITE:
        what = "is not finite"
    else:
        what = "is outside [0, 1]"
    return ConfigError(
        f"row {position} (task {task_key(row)!r}): {field_name} = {value!r:.80} {what}{more}; pass@k reads "
        "rewards in [0, 1] (exact 0/1 are scored, partial credit is skipped and counted): fix the grader, "
        "or pass on_bad_reward='skip' to skip and count such rows"
    )


# --------------------------------------------------------------------------- results


def _format_number(name: str, value: float | None, interval: tuple[float, float] | None) -> str:
    if value is None:
        return f"{name} n/a"
    if interval is None:
        return f"{name} {value:.2f}"
    return f"{name} {value:.2f} [{interval[0]:.2f}..{interval[1]:.2f}]"


def _interval(
    values: Sequence[float] | np.ndarray, tasks: Sequence[str], clusters: Mapping[str, Any] | None,
    level: float, n_resamples: int, seed: Any,
) -> MeanInterval:
    """The interval on the mean of per-task ``values`` (0/1 values count as proportions).

    Every value is a probability, so the mean is in [0, 1] and so is the truth: a t
    interval that reaches past an end (4 tasks at 0.17-0.73 gave [-0.04..1.08]) is clipped
    there, which changes no coverage.
    """
    labels = None if clusters is None else [clusters[task] for task in tasks]
    interval = mean_interval(values, clusters=labels, level=level, n_resamples=n_resamples, seed=seed, proportion=True)
    return _clipped(interval)


def _clipped(interval: MeanInterval) -> MeanInterval:
    if interval.low is None or (interval.low >= 0.0 and interval.high <= 1.0):
        return interval
    return dataclasses.replace(interval, low=max(0.0, interval.low), high=min(1.0, interval.high))


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return math.fsum(values) / len(values)


def _methods_phrase(methods: Sequence[tuple[str, str]]) -> str | None:
    """'intervals: pass@1 Student t, pass^4 and pass@4 Wilson over tasks' (None when plain)."""
    methods = [(name, method) for name, method in methods if method != "none"]
    if not methods or all(method == _PLAIN_METHOD for _, method in methods):
        return None
    grouped: dict[str, list[str]] = {}
    for name, method in methods:
        grouped.setdefault(method, []).append(name)
    if len(grouped) == 1:
        return f"intervals: {_METHOD_LABELS.get(methods[0][1], methods[0][1])}"
    parts = [f"{' and '.join(names)} {_METHOD_LABELS.get(method, method)}" for method, names in grouped.items()]
    return "intervals: " + ", ".join(parts)


@dataclass(frozen=True)
class PassAtCurve(Result):
    """pass@k and pass^k with intervals for each k (for ``toolkit.plots.pass_at_k_curve``).

    ``n_groups[i]`` is how many tasks entered the averages at ``ks[i]``: with
    ``same_tasks`` (the default) the same tasks at every k, those with at least
    ``max(ks)`` graded rows, so pass@k rises and pass^k falls with k by construction;
    ``n_left_out`` counts the tasks with fewer rows. Intervals are ``None`` below 3 tasks
    (or clusters); ``pass_at_k_method`` / ``pass_pow_k_method`` name each interval's
    method (``mean_interval``'s rule).
    """

    ks: tuple[int, ...]
    pass_at_k: tuple[float | None, ...]
    pass_pow_k: tuple[float | None, ...]
    pass_at_k_ci95: tuple[tuple[float, float] | None, ...]
    pass_pow_k_ci95: tuple[tuple[float, float] | None, ...]
    n_groups: tuple[int, ...]
    level: float
    note: str | None = None
    pass_at_k_method: tuple[str, ...] = ()
    pass_pow_k_method: tuple[str, ...] = ()
    same_tasks: bool = True
    n_left_out: int = 0
    cluster_by: str | None = None

    def to_pandas(self) -> Any:
        import pandas as pd

        def bound(interval: tuple[float, float] | None, side: int) -> float | None:
            return None if interval is None else interval[side]

        columns = {
            "k": list(self.ks),
            "pass_at_k": list(self.pass_at_k),
            "pass_at_k_low": [bound(i, 0) for i in self.pass_at_k_ci95],
            "pass_at_k_high": [bound(i, 1) for i in self.pass_at_k_ci95],
            "pass_pow_k": list(self.pass_pow_k),
            "pass_pow_k_low": [bound(i, 0) for i in self.pass_pow_k_ci95],
            "pass_pow_k_high": [bound(i, 1) for i in self.pass_pow_k_ci95],
            "n_groups": list(self.n_groups),
        }
        if len(self.pass_at_k_method) == len(self.ks):
            columns["pass_at_k_method"] = list(self.pass_at_k_method)
            columns["pass_pow_k_method"] = list(self.pass_pow_k_method)
        return pd.DataFrame(columns)

    def __str__(self) -> str:
        if not self.ks:
            return f"pass@k curve: empty ({self.note})"
        parts = [
            f"k={k}: pass@k {_fmt(a)} pass^k {_fmt(p)}"
            for k, a, p in zip(self.ks, self.pass_at_k, self.pass_pow_k)
        ]
        tail = f" ({self.note})" if self.note else ""
        return "pass@k curve | " + " | ".join(parts) + tail


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class PassAt(Result):
    """pass@1, pass^k, pass@k and headroom over tasks, each with an interval over tasks.

    Fields: ``k``; ``pass_at_1`` (mean over tasks of c/n, every graded task) with
    ``ci95``; ``pass_pow_k`` and ``pass_at_k`` (means over the tasks scored at k of the
    unbiased estimators) with ``pass_pow_k_ci95`` / ``pass_at_k_ci95``;
    ``pass_at_1_scored`` (pass@1 over those same scored tasks) and ``headroom`` =
    pass_at_k - pass_at_1_scored, so both terms are over one task set; ``n_groups``
    (tasks with a graded row), ``n_rows`` (graded rows), ``n_groups_at_k``,
    ``n_groups_short`` (tasks with fewer than k rows, left out of the k-way numbers),
    ``n_skipped`` (rows whose reward is present but not exactly 0/1) with ``skipped_by``
    (fractional / not a number / not finite / outside [0, 1]), ``n_ungraded`` (rows
    without a reward), ``n_duplicates`` (rows dropped as repeats of an earlier row),
    ``per_task`` (task -> c/n), ``counts`` (task -> (c, n)), ``note`` (why a number is
    missing, and what to do), ``config`` (:func:`run_config`), ``level``, ``warnings``
    (what must be read before the numbers: duplicates, a judge that scored every row alike;
    ``str()`` starts with them).

    Interval fields: ``interval_method`` ({"pass_at_1" | "pass_pow_k" | "pass_at_k":
    "clustered t" | "wilson over tasks" | "student t" | "percentile bootstrap" | "none"}),
    ``interval_notes`` (the same keys: why an interval is one-sided, zero-width or
    missing), ``bootstrap_ci95`` (the cluster bootstrap beside a clustered t interval),
    ``design_effect`` (of pass@1 under clustering: clustered over naive variance),
    ``n_clusters`` (clusters among the pass@1 tasks), ``cluster_by`` (the key or callable
    used), ``cluster_note`` (the printed clustering phrase, or why ``cluster="auto"`` found
    none), ``covers`` (what the pass@1 interval covers), ``clusters`` (task -> label);
    ``k_note`` (why the k-way numbers are None, printed after them).
    Intervals are ``(low, high)`` tuples or ``None``. No usable reward gives every number
    None and a note saying why; ``str()`` then reads ``pass@1 n/a (0 groups): <note>``.
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
    pass_at_1_scored: float | None = None
    interval_method: dict[str, str] = field(default_factory=dict)
    interval_notes: dict[str, str] = field(default_factory=dict)
    bootstrap_ci95: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    design_effect: float | None = None
    n_clusters: int | None = None
    cluster_by: str | None = None
    cluster_note: str | None = None
    covers: str | None = None
    skipped_by: dict[str, int] = field(default_factory=dict)
    n_duplicates: int = 0
    clusters: dict[str, Any] | None = field(default=None, repr=False)
    k_note: str | None = None

    def _names(self) -> dict[str, str]:
        k = self.k if self.k is not None else "k"
        return {"pass_at_1": "pass@1", "pass_pow_k": f"pass^{k}", "pass_at_k": f"pass@{k}"}

    def _details(self, keys: Sequence[str]) -> list[str]:
        """The parenthetical after the numbers: methods, clustering, task sets, skips, notes."""
        names = self._names()
        details = []
        methods = _methods_phrase([(names[key], self.interval_method.get(key, _PLAIN_METHOD)) for key in keys])
        if methods:
            details.append(methods)
        if self.cluster_note:
            details.append(self.cluster_note)
        if (
            "pass_at_k" in keys and self.pass_at_1_scored is not None and self.n_groups_at_k != self.n_groups
        ):
            details.append(
                f"headroom over the {self.n_groups_at_k} tasks scored at k={self.k} (pass@1 there "
                f"{self.pass_at_1_scored:.2f})"
            )
        if self.n_skipped:
            details.append(f"{_plural(self.n_skipped, 'row')} skipped: {_skip_phrase(self.skipped_by)}")
        if self.n_ungraded:
            details.append(f"{self.n_ungraded} ungraded")
        if self.k_note and "pass_at_k" not in keys and self.k != 1:
            details.append(self.k_note)  # why the k-way numbers read n/a
        intervals = {"pass_at_1": self.ci95, "pass_pow_k": self.pass_pow_k_ci95, "pass_at_k": self.pass_at_k_ci95}
        for key in keys:
            note = self.interval_notes.get(key)
            interval = intervals[key]
            if note is None and interval is not None and interval[0] == interval[1]:
                # never a zero-width interval without its reason
                note = "zero-width interval: every resample gave the same mean"
            if note and interval is not None:
                # one number on the line (k = 1) needs no name: pass@1 is printed once
                details.append(note if len(keys) == 1 and self.k == 1 else f"{names[key]}: {note}")
        return details

    def __str__(self) -> str:
        # what must be read before any number comes first (duplicates, a judge that scored all alike)
        head = "".join(f"{warning} | " for warning in self.warnings)
        if self.pass_at_1 is None:
            return f"{head}pass@1 n/a ({self.n_groups} groups): {self.note}"
        k = self.k if self.k is not None else "k"
        if k == 1:
            # pass^1 = pass@1 = c/n: one number, printed once (the k-way caveats are in .note)
            details = "".join(f"; {d}" for d in self._details(["pass_at_1"]))
            return f"{head}{_format_number('pass@1', self.pass_at_1, self.ci95)} ({self.n_groups} groups, k=1{details})"
        parts = [
            _format_number("pass@1", self.pass_at_1, self.ci95),
            _format_number(f"pass^{k}", self.pass_pow_k, self.pass_pow_k_ci95),
            _format_number(f"pass@{k}", self.pass_at_k, self.pass_at_k_ci95),
            "headroom n/a" if self.headroom is None else f"headroom {self.headroom:.2f}",
        ]
        keys = ["pass_at_1"] + (["pass_pow_k", "pass_at_k"] if self.pass_at_k is not None else [])
        details = "".join(f"; {d}" for d in self._details(keys))
        return head + " | ".join(parts) + f" ({self.n_groups} groups, k={k}{details})"

    def curve(
        self, ks: Iterable[int] | None = None, level: float | None = None, same_tasks: bool = True
    ) -> PassAtCurve:
        """pass@k and pass^k with intervals for each k in ``ks``, over one task set.

        Parameters
        ----------
        ks : iterable of int, optional
            The k values; default ``1 .. m`` with ``m`` the smallest size among tasks with
            at least 2 graded rows.
        level : float, optional
            Confidence level; default the result's.
        same_tasks : bool, optional
            True (default): every k averages the same tasks, those with at least
            ``max(ks)`` graded rows. Each task's pass@k is non-decreasing and its pass^k
            non-increasing in k, so averages over a fixed set are monotone; letting each k
            take every task that reaches it mixes populations (pass@k read 0.787, 0.667,
            1.000 at k = 4, 5, 6 on uneven groups). The note says how many tasks were left
            out. False: each k uses every task with at least k rows (the former behaviour).

        Returns
        -------
        PassAtCurve
            Intervals by the same rule, clusters and resamples as the result itself.
        """
        level = self.level if level is None else check_level("level", level)
        if not isinstance(same_tasks, bool):
            raise ConfigError(f"same_tasks must be True or False; got {same_tasks!r}")
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
        c_all = np.array([self.counts[t][0] for t in tasks], dtype=np.int64)
        n_all = np.array([self.counts[t][1] for t in tasks], dtype=np.int64)
        common = n_all >= max(ks) if ks and same_tasks else None
        left_out = int(np.count_nonzero(~common)) if common is not None else 0
        at_k, pow_k, at_ci, pow_ci, counts, at_method, pow_method = [], [], [], [], [], [], []
        for k in ks:
            chosen = common if common is not None else n_all >= k
            names = [t for t, keep in zip(tasks, chosen.tolist()) if keep]
            counts.append(len(names))
            if not names:
                for column in (at_k, pow_k, at_ci, pow_ci):
                    column.append(None)
                at_method.append("none")
                pow_method.append("none")
                continue
            at_values, pow_values = _k_way(c_all[chosen], n_all[chosen], k)
            at_k.append(_mean(at_values.tolist()))
            pow_k.append(_mean(pow_values.tolist()))
            at_interval = _interval(at_values, names, self.clusters, level, self.n_resamples, self.seed)
            pow_interval = _interval(pow_values, names, self.clusters, level, self.n_resamples, self.seed)
            at_ci.append(at_interval.pair)
            pow_ci.append(pow_interval.pair)
            at_method.append(at_interval.method)
            pow_method.append(pow_interval.method)
        notes = []
        if not ks:
            notes.append("no graded groups: nothing to plot; grade first")
        else:
            if left_out:
                notes.append(
                    f"every k uses the same {counts[0]} task(s), those with at least {max(ks)} graded rows; "
                    f"{left_out} task(s) with fewer were left out (same_tasks=False lets each k use every task "
                    "that reaches it, and the curve may then turn back)"
                )
            if any(c < MIN_UNITS_FOR_INTERVAL for c in counts):
                notes.append(
                    f"intervals need {MIN_UNITS_FOR_INTERVAL} tasks with at least k rows; "
                    "missing where fewer reached that k"
                )
        return PassAtCurve(
            ks, tuple(at_k), tuple(pow_k), tuple(at_ci), tuple(pow_ci), tuple(counts), level,
            "; ".join(notes) if notes else None, tuple(at_method), tuple(pow_method), same_tasks, left_out,
            self.cluster_by,
        )


# --------------------------------------------------------------------------- pass_at


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
    *,
    cluster: Any = None,
    on_bad_reward: str = "raise",
) -> PassAt:
    """pass@1, pass^k, pass@k and headroom over tasks, with intervals over tasks.

    For task ``t`` with ``n_t`` graded rollouts of which ``c_t`` passed, over the ``T``
    graded tasks and the ``S`` tasks scored at ``k`` (``n_t >= k``)::

        pass@1   = (1/T) sum_t c_t / n_t
        pass^k   = (1/S) sum_{t in S} C(c_t, k) / C(n_t, k)          (Yao et al. 2024)
        pass@k   = (1/S) sum_{t in S} 1 - C(n_t - c_t, k) / C(n_t, k)  (Chen et al. 2021)
        headroom = pass@k - (1/S) sum_{t in S} c_t / n_t              (one task set)

    Parameters
    ----------
    rows : list of row dicts, DataFrame, SimulationData or JSONL path
        Rewards are read from ``reward``, else ``qwen_reward``; exact 0/1 (within 1e-6)
        are scored. Rows are grouped by task (``scenario_id``, else ``task_id``, else the
        prompt). In a DataFrame an empty (NaN) reward cell means "not graded".
    k : int, optional
        Group size for the k-way numbers; default the smallest group size among tasks with
        at least 2 graded rows (1 if none).
    min_k : int, optional
        Below this k the k-way numbers are ``None`` with a note (default 4).
    level : float, optional
        Confidence level of every interval, in (0, 1); default 0.95.
    n_resamples : int, optional
        Resamples of any bootstrap (>= 100, a warning below 1,000; default 10,000).
    seed : int, numpy.random.Generator or None, optional
        Seed of the bootstraps; default 0.
    unanimous_short : bool, optional
        Also count tasks with fewer than k rows whose rows all agree, with
        pass^k = pass@k = their common value (successive sampling stops a task early once
        it is unanimous, docs/design/engine.md §6.1); mixed short tasks stay out either way.
    cluster : None, "auto", str or callable, optional
        Tasks that share a cluster (phrasings or situations of one base task, one tool)
        are not independent, and an interval that treats them so is too narrow (coverage
        0.69 at 20 clusters x 10 tasks, against 0.95 clustered; ``clustered_mean``).
        None (default): tasks are independent. ``"auto"``: the first of ``cluster``,
        ``cluster_id``, ``task_family``, ``scenario_dimensions.tool`` that every graded
        row carries (the note says when none is). A row field (dotted for nested, e.g.
        ``"scenario_dimensions.tool"``) or ``callable(row) -> label``. Every number's
        interval is then the cluster-robust t interval with ``G - 1`` degrees of freedom
        (Miller 2024), and the printed line says ``clustered by <key>: T tasks in G
        clusters``.
    on_bad_reward : {"raise", "skip"}, optional
        A reward that is not a number (text, a bool), not finite, or outside [0, 1] means
        the grader is broken: ``"raise"`` (default) raises :class:`ConfigError` naming the
        row index, its task, the field and the value; ``"skip"`` skips and counts such rows
        (``skipped_by``, and the printed line). A fractional reward in (0, 1) is never an
        error: it is skipped from pass@k (which needs 0/1) and counted.

    Returns
    -------
    PassAt
        See its docstring. Empty or ungraded input returns a result with a note.
        ``str()`` reads ``pass@1 0.66 [0.50..0.80] | pass^4 0.31 [0.12..0.56] | pass@4
        0.94 [0.81..1.00] | headroom 0.28 (16 groups, k=4; intervals: pass@1 Student t,
        pass^4 and pass@4 Wilson over tasks)``.

    Raises
    ------
    ConfigError
        For a bad reward (above), bad ``k`` / ``min_k`` / ``level`` / ``n_resamples`` /
        ``on_bad_reward``, or a ``cluster`` key a graded row lacks (or a task split across
        two clusters).

    Notes
    -----
    Rows repeating an earlier row's ``rollout_id``, or identical to an earlier row when
    they carry none, are dropped (the first kept) and counted in ``n_duplicates``, with a
    warning the printed line starts with: rows exported twice, or a retry appended
    beside the original, otherwise count one rollout twice. Give distinct rollouts a
    ``rollout_id`` (or ``rollout_index``) so identical-looking rows stay apart.

    References
    ----------
    .. [1] M. Chen et al., "Evaluating Large Language Models Trained on Code", 2021,
       arXiv:2107.03374.
    .. [2] S. Yao et al., "tau-bench", 2024, arXiv:2406.12045.
    .. [3] E. Miller, "Adding Error Bars to Evals: A Statistical Approach to Language
       Model Evaluations", 2024, arXiv:2411.00640.
    .. [4] E. B. Wilson, "Probable inference, the law of succession, and statistical
       inference", JASA 22:209, 1927; L. D. Brown, T. T. Cai and A. DasGupta, "Interval
       Estimation for a Binomial Proportion", Statistical Science 16:101, 2001.
    """
    dataframe = _is_dataframe(rows)
    # a list of plain dicts is already what as_row_list would build (its per-row check is
    # a third of the time at 10^6 rows)
    if not (type(rows) is list and set(map(type, rows)) <= {dict}):
        rows = as_row_list(rows)
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise ConfigError(f"k must be an integer >= 1 or None; got {k!r}")
    if isinstance(min_k, bool) or not isinstance(min_k, (int, np.integer)) or min_k < 1:
        raise ConfigError(f"min_k must be an integer >= 1; got {min_k!r}")
    if not (cluster is None or callable(cluster) or (isinstance(cluster, str) and cluster)):
        raise ConfigError(f"cluster must be None, 'auto', a row field or a callable; got {cluster!r}")
    if not isinstance(on_bad_reward, str) or on_bad_reward not in _ON_BAD_REWARD:
        raise ConfigError(f"on_bad_reward must be 'raise' or 'skip'; got {on_bad_reward!r}")
    # Checked up front: with fewer than 3 tasks no interval is drawn, and a bad level would
    # otherwise pass silently until the data grows.
    level = check_level("level", level)
    n_resamples = check_resamples(n_resamples)
    _generator(seed)

    duplicates = _drop_duplicates(rows, dataframe)
    kept = duplicates.kept
    rewards = _read_rewards(kept, dataframe)
    values = rewards.values
    finite = np.isfinite(values)
    one = finite & (np.abs(values - 1.0) <= _BINARY_TOLERANCE)
    zero = finite & (np.abs(values) <= _BINARY_TOLERANCE)
    outside = finite & ((values < -_BINARY_TOLERANCE) | (values > 1.0 + _BINARY_TOLERANCE))
    not_finite = ~finite & ~rewards.absent & ~rewards.not_number
    fractional = finite & ~one & ~zero & ~outside
    bad = rewards.not_number | not_finite | outside
    if on_bad_reward == "raise" and bad.any():
        first = int(np.argmax(bad))
        why = _NOT_A_NUMBER if rewards.not_number[first] else _NOT_FINITE if not_finite[first] else _OUT_OF_RANGE
        position = first if duplicates.positions is None else duplicates.positions[first]
        field_name = REWARD_FIELDS[1] if first in rewards.from_qwen else REWARD_FIELDS[0]
        raise _bad_reward_error(position, kept[first], field_name, rewards.raw[first], why, int(bad.sum()) - 1)
    skipped_by = {
        _FRACTIONAL: int(fractional.sum()),
        _NOT_A_NUMBER: int(rewards.not_number.sum()),
        _NOT_FINITE: int(not_finite.sum()),
        _OUT_OF_RANGE: int(outside.sum()),
    }
    skipped_mask = fractional | bad
    skipped = int(skipped_mask.sum())
    first_skipped = rewards.raw[int(np.argmax(skipped_mask))] if skipped else None
    ungraded = int(rewards.absent.sum())
    failed_statuses: Counter[str] = Counter()
    failed_reasons: list[str] = []
    for i in np.flatnonzero(rewards.absent).tolist():
        status = kept[i].get("judge_status")
        if status not in _JUDGE_OK:
            failed_statuses[str(status)] += 1
            if kept[i].get("reason"):
                failed_reasons.append(str(kept[i]["reason"]))

    # Group by task: codes in first-seen order, counted by bincount, tasks reported sorted.
    graded = one | zero
    keys = _task_keys(kept)
    index: dict[str, int] = dict.fromkeys(keys)  # distinct tasks in first-seen order
    for code, name in enumerate(index):
        index[name] = code
    codes = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys))
    names = list(index)
    n_per = np.bincount(codes[graded], minlength=len(names))
    c_per = np.bincount(codes[one], minlength=len(names))
    raw_per = np.bincount(codes, minlength=len(names))  # every kept row, graded or not
    order = np.array(sorted(range(len(names)), key=names.__getitem__), dtype=np.int64)
    order = order[n_per[order] > 0] if order.size else order
    tasks = [names[i] for i in order.tolist()]
    c_arr, n_arr, raw_arr = c_per[order], n_per[order], raw_per[order]
    counts = dict(zip(tasks, zip(c_arr.tolist(), n_arr.tolist())))
    rates = c_arr / n_arr if tasks else np.empty(0)
    per_task = dict(zip(tasks, rates.tolist()))
    n_rows = int(n_arr.sum())
    config = _run_config(kept, graded=n_rows)

    notes: list[str] = []
    warnings: list[str] = []
    n_duplicates = duplicates.by_id + duplicates.by_content
    if n_duplicates:
        kinds = []
        if duplicates.by_id:
            kinds.append(f"{duplicates.by_id} repeat an earlier rollout_id")
        if duplicates.by_content:
            kinds.append(f"{duplicates.by_content} identical to an earlier row without rollout_id")
        warnings.append(
            f"{_plural(n_duplicates, 'duplicate row')} dropped ({'; '.join(kinds)}; first: {duplicates.example}): "
            "each rollout is counted once (give distinct rollouts a rollout_id)"
        )

    labels: dict[str, Any] | None = None
    used: str | None = None
    if cluster is not None and tasks:
        # the rows that enter the numbers: an ungraded row need not carry a cluster label
        scored_positions = np.flatnonzero(graded).tolist()
        try:
            labels, used = task_clusters([kept[i] for i in scored_positions], cluster)
        except ConfigError as error:
            if len(scored_positions) == len(rows):
                raise
            raise ConfigError(f"{error} (row numbers count the {len(scored_positions)} rows with a 0/1 reward)") from None
    if labels is None and used:  # cluster="auto" found no key: the note says so, not only the line
        notes.append(used)
    cluster_by = used if labels is not None else None
    printed_cluster = cluster_note(labels, used, tasks) if labels is not None else used
    n_clusters = len({labels[t] for t in tasks}) if labels is not None else None
    interval_method: dict[str, str] = {}
    interval_notes: dict[str, str] = {}
    bootstrap_pairs: dict[str, tuple[float, float] | None] = {}

    def record(key: str, interval: MeanInterval) -> None:
        interval_method[key] = interval.method
        if interval.note:
            interval_notes[key] = interval.note
        if interval.method == "clustered t":
            bootstrap_pairs[key] = interval.bootstrap

    def build(**numbers: Any) -> PassAt:
        defaults = dict(
            k=None, pass_at_1=None, pass_pow_k=None, pass_at_k=None, headroom=None, ci95=None,
            pass_pow_k_ci95=None, pass_at_k_ci95=None, n_groups_at_k=0, n_groups_short=0,
            pass_at_1_scored=None, design_effect=None, covers=None, k_note=None,
        )
        defaults.update(numbers)
        return PassAt(
            n_groups=len(tasks), n_rows=n_rows, n_skipped=skipped, n_ungraded=ungraded,
            per_task=per_task, counts=counts, note="; ".join(notes) if notes else None,
            config=config, level=level, n_resamples=n_resamples, seed=seed, warnings=tuple(warnings),
            interval_method=interval_method, interval_notes=interval_notes, bootstrap_ci95=bootstrap_pairs,
            n_clusters=n_clusters, cluster_by=cluster_by, cluster_note=printed_cluster,
            skipped_by=skipped_by, n_duplicates=n_duplicates, clusters=labels, **defaults,
        )

    if not rows:
        notes.append("no rows: nothing to score; pass the rows of a run")
        return build()
    if not tasks:
        notes.append(_no_usable_reward_note(len(kept), failed_statuses, failed_reasons, skipped, first_skipped, ungraded))
        return build()

    # Degenerate grading first: a judge that scores everything alike looks like a clean
    # result with a tight interval (docs/design/engine.md §9.1, #594).
    if n_rows >= 2 and (not one.any() or not zero.any()):
        only = 1 if one.any() else 0
        warnings.append(f"every row scored {only} ({n_rows} of {n_rows}); check the judge before reading this number")
        notes.append(warnings[-1])

    dropped = skipped + ungraded
    dropped_phrase = ""
    if dropped:
        pieces = [f"{skipped} skipped ({_skip_phrase(skipped_by)})"] if skipped else []
        pieces += [f"{ungraded} ungraded"] if ungraded else []
        dropped_phrase = f"{dropped} of {len(kept)} rows carry no 0/1 reward ({', '.join(pieces)})"

    pass_at_1 = _mean(rates.tolist())
    first_interval = _interval(rates, tasks, labels, level, n_resamples, seed)
    record("pass_at_1", first_interval)
    ci95 = first_interval.pair
    if ci95 is None:
        if first_interval.n_clusters is not None:
            notes.append(f"no interval on pass@1: {first_interval.note}")
        else:
            notes.append(
                f"no interval on pass@1: {len(tasks)} task(s), and an interval needs "
                f"{MIN_UNITS_FOR_INTERVAL}; run more tasks (or give distinct situations their own task_id)"
            )
    headline = dict(
        pass_at_1=pass_at_1, ci95=ci95, design_effect=first_interval.design_effect, covers=first_interval.covers,
    )

    sizes = sorted(set(n_arr.tolist()))
    repeated = [n for n in sizes if n >= 2]
    chosen = int(k) if k is not None else (min(repeated) if repeated else 1)
    eligible = n_arr >= chosen
    unanimous = (~eligible & ((c_arr == 0) | (c_arr == n_arr))) if unanimous_short else np.zeros(len(tasks), bool)
    short_mask = ~eligible & ~unanimous
    short = int(short_mask.sum())
    # a task is short *because of dropped rows* when it had k rows before they were dropped
    short_by_dropping = int(np.count_nonzero(short_mask & (raw_arr >= chosen)))
    if chosen < min_k:
        raw_repeated = raw_arr[raw_arr >= 2]
        run_k = int(raw_repeated.min()) if raw_repeated.size else 1
        if k is not None:
            message = (
                f"pass^k and pass@k need k >= {min_k}; k={chosen} was asked "
                f"(pass min_k={chosen} to accept a noisier k)"
            )
        elif run_k >= min_k and dropped:
            # the run had the repeats; rows without a 0/1 reward shortened the groups
            reaching = int(np.count_nonzero(n_arr >= run_k))
            message = (
                f"pass^k and pass@k need k >= {min_k}: the smallest repeated group has {chosen} graded rows "
                f"although the run has {run_k} rows per task, because {dropped_phrase}; fix the rewards "
                f"(pass@k scores exact 0/1), not the repeats"
            )
            if reaching:
                message += f", or pass k={run_k} to score the {reaching} task(s) that kept {run_k} graded rows"
        else:
            message = (
                f"pass^k and pass@k need k >= {min_k}: the groups give k={chosen}; "
                f"set repeats>={min_k} (or pass min_k={chosen} to accept a noisier k)"
            )
            if len(repeated) > 1:
                message += (
                    f"; groups are uneven (sizes {', '.join(map(str, sizes))}): pass k={max(sizes)} "
                    f"to score the {int(np.count_nonzero(n_arr >= max(sizes)))} group(s) that reached it"
                )
        notes.append(message)
        return build(k=chosen, n_groups_at_k=int(eligible.sum()), n_groups_short=short, k_note=message, **headline)
    if not eligible.any() and not unanimous.any():
        cause = f" ({short_by_dropping} had {chosen}+ rows before: {dropped_phrase})" if short_by_dropping else ""
        message = f"no task has {chosen} graded rows{cause}; pass a smaller k (largest group: {max(sizes)})"
        notes.append(message)
        return build(k=chosen, n_groups_short=short, k_note=message, **headline)

    scored = eligible | unanimous
    scored_tasks = [t for t, keep in zip(tasks, scored.tolist()) if keep]
    at_values = np.empty(int(scored.sum()))
    pow_values = np.empty_like(at_values)
    full = eligible[scored]
    at_values[full], pow_values[full] = _k_way(c_arr[eligible], n_arr[eligible], chosen)
    # a unanimous short group: every draw would match its one value
    at_values[~full] = pow_values[~full] = (c_arr[unanimous] > 0).astype(float)
    pass_at_k = _mean(at_values.tolist())
    pass_pow_k = _mean(pow_values.tolist())
    pass_at_1_scored = _mean(rates[scored].tolist())
    at_interval = _interval(at_values, scored_tasks, labels, level, n_resamples, seed)
    pow_interval = _interval(pow_values, scored_tasks, labels, level, n_resamples, seed)
    record("pass_pow_k", pow_interval)
    record("pass_at_k", at_interval)
    if short:
        cause = (
            f" ({short_by_dropping} of them had {chosen}+ rows before rows were dropped: {dropped_phrase})"
            if short_by_dropping else ""
        )
        notes.append(
            f"{short} task(s) with fewer than {chosen} graded rows left out of pass^{chosen}/pass@{chosen} "
            f"and headroom{cause}"
        )
    if at_interval.pair is None:
        notes.append(
            f"no interval on pass^{chosen}/pass@{chosen}: {len(scored_tasks)} task(s) scored at k={chosen}, "
            f"and an interval needs {MIN_UNITS_FOR_INTERVAL}"
            + (f" ({at_interval.note})" if at_interval.n_clusters is not None else "")
        )
    return build(
        k=chosen, pass_pow_k=pass_pow_k, pass_at_k=pass_at_k, headroom=pass_at_k - pass_at_1_scored,
        pass_pow_k_ci95=pow_interval.pair, pass_at_k_ci95=at_interval.pair, n_groups_at_k=len(scored_tasks),
        n_groups_short=short, pass_at_1_scored=pass_at_1_scored, **headline,
    )
