"""Running statistics of a run as rows land: pass@1, pass@k (with intervals) and mean KL.

A :class:`ProgressTracker` takes rows one at a time (any thread), and ``point()`` computes
one :class:`ProgressPoint` from every row so far. The statistics are the toolkit's own:

* pass@1 and pass@k come from :func:`toolkit.stats.pass_at` over the rows landed so far
  (percentile bootstrap over tasks; Chen et al. 2021, arXiv:2107.03374 for the unbiased
  pass@k estimator). Tasks still short of k rollouts are left out of the k-way number by
  ``pass_at`` itself, so a half-finished group never inflates pass@k.
* mean KL per token is the sampled ("k1") estimator ``sum(logprob - ref_logprob) /
  sum(n_tokens)`` of :func:`toolkit.mean_kl` (Schulman, "Approximating KL Divergence",
  2020). Its interval is a percentile bootstrap over TASKS of that ratio (rows of one task
  share a prompt and are not independent), drawn with the tracker's seeded generator.

The reference log-probability of a row comes from ``reference``: an object with
``score_total(row)`` (a seeded policy, :func:`toolkit.seeded_agent`), a callable
``row -> float``, a model spec string (any form :func:`toolkit.agents.parse_model_spec` accepts,
a bare ``http(s)://`` server URL included; scored through :func:`toolkit.reference_logprobs`
with one backend built on first use), or the name of a field the rows already carry
(``"ref_logprob"``). A string with ':' that is not a valid spec is refused with the
parser's did-you-mean message rather than read as a field name no row carries.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit._util.hashing import stable_uniform
from toolkit._util.keys import binary_reward, task_key
from toolkit._util.results import Result
from toolkit.agents import model_agent, parse_model_spec
from toolkit.errors import ConfigError
from toolkit.logprobs import reference_logprobs
from toolkit.rows._read import as_row_list
from toolkit.stats.passk import pass_at
from toolkit.stats.sequential import SequenceState

__all__ = ["ProgressPoint", "RunProgress", "ProgressTracker", "run_progress"]

# Bootstrap draws for a LIVE point: 1,000 resamples put the Monte-Carlo error of a 95%
# percentile bound near 0.01 on a [0, 1] scale, below what a live plot can show, at a
# tenth of the cost of the 10,000 used for a final figure.
LIVE_RESAMPLES = 1_000
FINAL_RESAMPLES = 10_000
# The k-way numbers need groups of at least 2 rollouts; pass_at's own default floor (4)
# is for reported numbers, the live view shows pass@2 and pass@3 too, labelled with k.
LIVE_MIN_K = 2


@dataclass(frozen=True)
class ProgressPoint(Result):
    """The run's statistics after ``n_rows`` rows landed (``elapsed`` seconds in).

    ``sequence_low`` / ``sequence_high`` are the anytime-valid bounds on pass@1
    (:func:`toolkit.stats.confidence_sequence`) over the ``n_tasks_complete`` tasks with
    all ``k`` graded rollouts, in the order they completed; unlike the bootstrap band they
    may be watched. With a ``threshold``, ``decided`` is ``"above"`` / ``"below"`` once the
    sequence excluded it, at ``decided_at_rows`` rows.

    KL is over ``n_kl_rows`` rows; ``n_kl_impossible`` more have probability 0 under the
    reference, and ``n_kl_pending`` rows with logprobs wait for reference scoring (a live
    frame caps its scoring time), in which case the KL rows are a seeded random sample of
    the rows landed (:meth:`kl_rows_text` says so).
    """

    n_rows: int
    elapsed: float | None
    n_graded: int
    n_tasks: int
    k: int | None
    pass_at_1: float | None
    pass_at_1_low: float | None
    pass_at_1_high: float | None
    pass_at_k: float | None
    pass_at_k_low: float | None
    pass_at_k_high: float | None
    n_groups_at_k: int
    mean_kl: float | None
    mean_kl_low: float | None
    mean_kl_high: float | None
    n_kl_rows: int
    n_kl_tokens: int
    n_kl_impossible: int = 0
    n_kl_pending: int = 0
    note: str | None = None
    sequence_low: float | None = None
    sequence_high: float | None = None
    n_tasks_complete: int = 0
    threshold: float | None = None
    decided: str | None = None
    decided_at_rows: int | None = None

    @property
    def kl_is_sample(self) -> bool:
        """Whether KL is over a sample: some rows with logprobs were not scored by the
        reference yet (``n_kl_pending`` of them; the live view caps scoring time per frame)."""
        return self.n_kl_pending > 0

    def kl_rows_text(self) -> str:
        """Which rows the KL is over, said plainly: ``"300 rows"``, or ``"a random sample of
        272 of 300 rows"`` when ``n_kl_pending`` rows were not scored yet."""
        if self.kl_is_sample:
            return f"a random sample of {self.n_kl_rows} of {self.n_kl_rows + self.n_kl_pending} rows"
        return f"{self.n_kl_rows} rows"

    def __str__(self) -> str:
        parts = [f"{self.n_rows} rows"]
        if self.pass_at_1 is not None:
            parts.append(f"pass@1 {self.pass_at_1:.3f}{_interval(self.pass_at_1_low, self.pass_at_1_high)}")
        if self.pass_at_k is not None:
            parts.append(f"pass@{self.k} {self.pass_at_k:.3f}{_interval(self.pass_at_k_low, self.pass_at_k_high)}")
        if self.mean_kl is not None:
            parts.append(f"KL {self.mean_kl:.4f} nats/token{_interval(self.mean_kl_low, self.mean_kl_high, 4)}"
                         f" over {self.kl_rows_text()}")
        if self.decided:
            parts.append(f"decided {self.decided} {self.threshold:g} at {self.decided_at_rows} rows "
                         f"(anytime-valid, {self.n_tasks_complete} tasks complete)")
        if self.note:
            parts.append(self.note)
        return " | ".join(parts)


def _interval(low: float | None, high: float | None, digits: int = 2) -> str:
    if low is None or high is None:
        return ""
    return f" [{low:.{digits}f}..{high:.{digits}f}]"


@dataclass(frozen=True)
class RunProgress(Result):
    """Statistics over the course of a run: one :class:`ProgressPoint` per checkpoint."""

    points: tuple
    k: int | None
    reference: str | None
    note: str | None = None

    def __str__(self) -> str:
        if not self.points:
            return f"RunProgress: no rows ({self.note})" if self.note else "RunProgress: no rows"
        return f"RunProgress: {len(self.points)} points; last: {self.points[-1]}"

    def __len__(self) -> int:
        return len(self.points)

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame([p.to_dict() for p in self.points])


def _describe_reference(reference: Any) -> str | None:
    if reference is None:
        return None
    if isinstance(reference, str):
        return reference
    name = getattr(reference, "policy_version", None) or getattr(reference, "__name__", None)
    return str(name or type(reference).__name__)


def _reference_scorer(reference: Any) -> Callable[[list[dict]], list[float | None]]:
    """A function scoring a batch of rows under the reference (None where it cannot)."""
    if reference is None:
        field_name = "ref_logprob"
        return lambda rows: [_number(r.get(field_name)) for r in rows]
    if isinstance(reference, str):
        if _is_model_spec(reference):
            return _model_scorer(reference)
        return lambda rows: [_number(r.get(reference)) for r in rows]
    if hasattr(reference, "score_total"):
        return lambda rows: [_number(reference.score_total(r)) for r in rows]
    if callable(reference):
        return lambda rows: [_number(reference(r)) for r in rows]
    raise TypeError(
        "reference must be a policy with score_total(row) (tk.seeded_agent), a callable "
        f"row -> logprob, a model spec string, or a row field name; got {type(reference).__name__}"
    )


def _is_model_spec(reference: str) -> bool:
    """Whether a reference string is a model spec (``"vllm:<model>@<url>"``, a bare
    ``http(s)://`` server URL, ...) rather than the name of a row field.

    The backends' own parser decides, so a spec form added there is recognised here too.
    A row field name never holds ':' ; a string that does but does not parse is a
    misspelled spec, refused with the parser's did-you-mean message instead of being read
    as a field no row carries (which would silently draw no KL).
    """
    if ":" not in reference:
        return False
    parse_model_spec(reference)  # raises ConfigError naming the nearest prefix
    return True


def _model_scorer(spec: str) -> Callable[[list[dict]], list[float | None]]:
    """Score rows under a model spec with :func:`toolkit.reference_logprobs`.

    The backend is built once, on the first chunk (the renderer thread), not per chunk: a
    bare URL asks the server for its model list when the backend is made.
    """
    backend: list = []

    def score_with_model(rows: list[dict]) -> list[float | None]:
        if not backend:
            backend.append(model_agent(spec))
        scored = reference_logprobs(rows, backend[0])
        statuses = [r.get("ref_status") for r in scored.rows]
        if scored.n_scored == 0 and "error" in statuses and set(statuses) <= {"error", "skipped"}:
            # every row of the chunk failed: the reference is down or misconfigured;
            # raised so the tracker stops scoring and names the error in the point's note
            first = next(r.get("ref_error") for r in scored.rows if r.get("ref_status") == "error")
            raise RuntimeError(f"reference {spec!r}: {first}")
        values = []
        for row in scored.rows:
            if row.get("ref_status") == "unscorable":
                values.append(-math.inf)  # probability 0 under the reference: counted as impossible
            else:
                values.append(_number(row.get("ref_logprob")))
        return values

    return score_with_model


def _number(value: Any) -> float | None:
    """A float (infinities kept: -inf is a reference that cannot produce the row), or None."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _row_logprob(row: Mapping[str, Any]) -> tuple[float | None, int | None]:
    """Summed logprob and token count: the row totals, else the sum over its steps."""
    logprob = _finite(row.get("logprob"))
    n_tokens = row.get("n_tokens")
    if logprob is not None and isinstance(n_tokens, int) and not isinstance(n_tokens, bool):
        return logprob, n_tokens
    values, tokens = [], 0
    for step in row.get("steps") or ():
        if isinstance(step, Mapping) and step.get("logprob") is not None:
            step_logprob = _finite(step.get("logprob"))
            step_tokens = step.get("n_tokens")
            if step_logprob is None or not isinstance(step_tokens, int):
                return None, None
            values.append(step_logprob)
            tokens += step_tokens
    if not values:
        return None, None
    return math.fsum(values), tokens


@dataclass
class _TaskKL:
    differences: list = field(default_factory=list)
    tokens: int = 0


class ProgressTracker:
    """Collects rows as they land and computes :class:`ProgressPoint` s from all so far.

    ``add(row)`` is cheap and thread-safe (the engine's row callback may call it); the
    reference scoring and the statistics happen in ``point()``, on the caller's thread.

    Parameters
    ----------
    k : int or None, default None
        Keyword-only, like every parameter. The group size of the k-way numbers (pass@k).
        Used when >= 2; None (or 1) lets :func:`toolkit.stats.pass_at` take the smallest
        group size among the tasks. Tasks short of k rollouts are left out of pass@k.
    reference : Any, default None
        Where a row's reference log-probability comes from (see the module docstring): a
        policy with ``score_total(row)``, a callable ``row -> float``, a model spec string,
        or a row field name. None reads the field ``"ref_logprob"``. Without reference
        numbers the KL fields stay None.
    level : float, default 0.95
        Confidence level of every bootstrap interval (pass@1, pass@k, mean KL).
    n_resamples : int, default 1000
        Bootstrap resamples per interval (``LIVE_RESAMPLES``); ``point(n_resamples=)``
        overrides it for one call.
    seed : int, default 0
        Seeds the bootstraps and the random order in which rows are scored for KL.
    threshold : float or None, default None
        A pass@1 the run is asked about: each point then says whether the anytime-valid
        sequence has decided it (``decided``, ``decided_at_rows``). None: no question.

    Raises
    ------
    TypeError
        A ``reference`` of none of the accepted kinds.
    ConfigError
        A ``reference`` string with ``:`` that is not a valid model spec.
    """

    def __init__(self, *, k: int | None = None, reference: Any = None, level: float = 0.95,
                 n_resamples: int = LIVE_RESAMPLES, seed: int = 0, threshold: float | None = None):
        if threshold is not None and not (isinstance(threshold, (int, float)) and not isinstance(threshold, bool)
                                          and 0.0 < threshold < 1.0):
            raise ConfigError(f"threshold must be a pass@1 strictly between 0 and 1, or None; got {threshold!r}")
        self.threshold = threshold
        self.k = k
        self.reference = reference
        self.level = level
        self.n_resamples = n_resamples
        self.seed = seed
        self._score = _reference_scorer(reference)
        self._lock = threading.Lock()
        self._pending: list[dict] = []
        # slim copies for pass_at: only what grouping and grading read
        self._graded: list[dict] = []
        self._n_rows = 0
        self._kl_by_task: dict[str, _TaskKL] = {}
        self._kl_rows = 0
        self._kl_unscorable = 0
        self._kl_impossible = 0
        self._kl_no_reference = 0  # rows with logprobs the reference gave no number for
        self._kl_errors: list[str] = []
        self._kl_backlog: list[tuple[float, int, dict, float, int]] = []  # a heap
        self._sequence = 0
        # anytime-valid pass@1: a task is one unit once it has every one of its k graded
        # rollouts (its value fixed from then on), taken in the order tasks complete
        self._task_rewards: dict[str, list[int]] = {}
        self._pass_sequence = SequenceState(level=level)
        self._decided: tuple[str, int] | None = None

    # -- rows in ------------------------------------------------------------------------
    def add(self, row: Mapping[str, Any]) -> None:
        with self._lock:
            self._pending.append(row)  # type: ignore[arg-type]

    def extend(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            self._pending.extend(rows)  # type: ignore[arg-type]

    @property
    def n_rows(self) -> int:
        with self._lock:
            return self._n_rows + len(self._pending)

    def _absorb(self, score_seconds: float | None = None) -> None:
        """Take pending rows in; score the KL backlog for at most ``score_seconds``.

        Grading counts are cheap and always current. Reference scoring can cost as much
        as a rollout (a seeded policy's ``score_total`` on multi-turn engine rows: ~45 ms
        per row on a loaded 2-core box, about half a rollout there), so a live caller
        bounds it per frame: KL is then computed over the rows scored so far, a seeded
        uniform sample of the rows landed (the legend counts them), and an unbounded call
        (``score_seconds=None``, e.g. ``dashboard.figure()``) scores everything.
        """
        with self._lock:
            batch, self._pending = self._pending, []
        first = self._n_rows
        self._n_rows += len(batch)
        for position, row in enumerate(batch, start=first + 1):
            reward = binary_reward(row)
            if reward is not None:
                self._graded.append({"scenario_id": task_key(row), "reward": reward})
                self._count_for_sequence(task_key(row), reward, position)
            logprob, n_tokens = _row_logprob(row)
            if logprob is None or not n_tokens or self._kl_errors:
                self._kl_unscorable += 1
            else:
                # scored in a seeded random order, not landing order: whenever the scoring
                # budget leaves a backlog, the rows scored so far are a uniform random
                # sample of the rows landed (landing order follows the search, so the
                # first rows are not representative)
                self._sequence += 1
                priority = stable_uniform("kl-order", self.seed, self._sequence)
                heapq.heappush(self._kl_backlog, (priority, self._sequence, row, logprob, n_tokens))
        deadline = None if score_seconds is None else time.perf_counter() + score_seconds
        # chunks of 8 rows: a remote reference answers a batch per call; small enough that
        # a frame overshoots its scoring budget by at most a few rows
        while self._kl_backlog and not self._kl_errors:
            chunk = [heapq.heappop(self._kl_backlog)[2:] for _ in range(min(8, len(self._kl_backlog)))]
            try:
                references = self._score([r for r, _, _ in chunk])
            except Exception as error:  # the reference is user code or a remote model
                self._kl_errors.append(f"{type(error).__name__}: {error}")
                self._kl_unscorable += len(chunk) + len(self._kl_backlog)
                self._kl_backlog = []
                break
            for (row, logprob, n_tokens), ref in zip(chunk, references):
                if ref is None:
                    self._kl_unscorable += 1
                    self._kl_no_reference += 1
                    continue
                if ref == -math.inf:
                    # the reference gives the row probability 0: KL(pi || ref) is infinite
                    # on it; counted and named in the note rather than averaged in
                    self._kl_impossible += 1
                    continue
                if not math.isfinite(ref):
                    self._kl_unscorable += 1
                    continue
                entry = self._kl_by_task.setdefault(task_key(row), _TaskKL())
                entry.differences.append(logprob - ref)
                entry.tokens += n_tokens
                self._kl_rows += 1
            if deadline is not None and time.perf_counter() >= deadline:
                break

    def _count_for_sequence(self, task: str, reward: int, n_rows: int) -> None:
        rewards = self._task_rewards.setdefault(task, [])
        rewards.append(reward)
        if len(rewards) != (self.k or 1):
            return  # not complete yet, or complete already (rows beyond k are not units)
        self._pass_sequence.update(sum(rewards) / len(rewards))
        if self.threshold is not None and self._decided is None:
            if self._pass_sequence.low > self.threshold:
                self._decided = ("above", n_rows)
            elif self._pass_sequence.high < self.threshold:
                self._decided = ("below", n_rows)

    # -- statistics out -----------------------------------------------------------------
    def point(self, elapsed: float | None = None, *, n_resamples: int | None = None,
              score_seconds: float | None = None) -> ProgressPoint:
        """Statistics over every row added so far (KL over the rows scored so far, which is
        every row unless ``score_seconds`` bounded the scoring of this call)."""
        self._absorb(score_seconds)
        resamples = n_resamples or self.n_resamples
        notes = []
        pass_fields = self._pass_fields(resamples, notes)
        kl_fields = self._kl_fields(resamples, notes)
        sequence = self._pass_sequence
        return ProgressPoint(
            n_rows=self._n_rows,
            elapsed=None if elapsed is None else round(float(elapsed), 3),
            note="; ".join(notes) or None,
            **pass_fields,
            **kl_fields,
            sequence_low=sequence.low if sequence.n else None,
            sequence_high=sequence.high if sequence.n else None,
            n_tasks_complete=sequence.n,
            threshold=self.threshold,
            decided=self._decided[0] if self._decided else None,
            decided_at_rows=self._decided[1] if self._decided else None,
        )

    def _pass_fields(self, resamples: int, notes: list) -> dict:
        empty = dict(n_graded=len(self._graded), n_tasks=0, k=self.k, pass_at_1=None, pass_at_1_low=None,
                     pass_at_1_high=None, pass_at_k=None, pass_at_k_low=None, pass_at_k_high=None,
                     n_groups_at_k=0)
        if not self._graded:
            if self._n_rows:
                notes.append("no graded rows: pass a grader= to see pass@1")
            return empty
        k = self.k if self.k and self.k >= LIVE_MIN_K else None
        # Live: a bad reward from the grader is counted as skipped, never an exception mid-run.
        result = pass_at(self._graded, k=k, min_k=LIVE_MIN_K, level=self.level,
                         n_resamples=resamples, seed=self.seed, on_bad_reward="skip")
        low, high = result.ci95 if result.ci95 else (None, None)
        k_low, k_high = result.pass_at_k_ci95 if result.pass_at_k_ci95 else (None, None)
        if result.pass_at_k is None and self.k and self.k >= LIVE_MIN_K:
            notes.append(f"pass@{self.k} waits for a task with {self.k} graded rollouts")
        return dict(
            n_graded=len(self._graded),
            n_tasks=result.n_groups,
            k=result.k if result.pass_at_k is not None else self.k,
            pass_at_1=result.pass_at_1,
            pass_at_1_low=low,
            pass_at_1_high=high,
            pass_at_k=result.pass_at_k,
            pass_at_k_low=k_low,
            pass_at_k_high=k_high,
            n_groups_at_k=result.n_groups_at_k,
        )

    def _kl_fields(self, resamples: int, notes: list) -> dict:
        if self._kl_errors:
            notes.append(f"reference scoring failed: {self._kl_errors[-1]}")
        if self._kl_backlog:
            notes.append(f"KL over a random sample: {self._kl_rows} of {self._kl_rows + len(self._kl_backlog)} rows scored "
                         "by the reference so far (scoring time is capped per live frame; the rest wait)")
        if self._kl_impossible:
            notes.append(f"{self._kl_impossible} rows have probability 0 under the reference "
                          "(KL infinite there); KL is over the other rows")
        if self._kl_no_reference:
            if self.reference is None:
                where = "row field 'ref_logprob'"
            elif isinstance(self.reference, str) and ":" not in self.reference:
                where = f"row field {self.reference!r}"
            else:
                where = "the reference"
            notes.append(f"{self._kl_no_reference} rows with logprobs have no reference log-probability "
                         f"({where} gave none); KL is over the other rows")
        tasks = list(self._kl_by_task.values())
        if not tasks:
            return dict(mean_kl=None, mean_kl_low=None, mean_kl_high=None, n_kl_rows=0, n_kl_tokens=0,
                        n_kl_impossible=self._kl_impossible, n_kl_pending=len(self._kl_backlog))
        sums = np.array([math.fsum(t.differences) for t in tasks])
        tokens = np.array([t.tokens for t in tasks], dtype=float)
        total_tokens = int(tokens.sum())
        estimate = math.fsum(sums) / total_tokens
        low = high = None
        # same floor as the toolkit's bootstrap: fewer than 3 units give no interval
        if len(tasks) >= 3:
            rng = np.random.default_rng(self.seed)
            picks = rng.integers(0, len(tasks), size=(resamples, len(tasks)))
            ratios = sums[picks].sum(axis=1) / tokens[picks].sum(axis=1)
            alpha = (1 - self.level) / 2
            low, high = (float(v) for v in np.quantile(ratios, [alpha, 1 - alpha]))
        return dict(mean_kl=estimate, mean_kl_low=low, mean_kl_high=high, n_kl_rows=self._kl_rows,
                    n_kl_tokens=total_tokens, n_kl_impossible=self._kl_impossible, n_kl_pending=len(self._kl_backlog))


def run_progress(rows: Any, *, k: int | None = None, reference: Any = None, checkpoints: int = 30,
                 level: float = 0.95, n_resamples: int = LIVE_RESAMPLES, seed: int = 0,
                 threshold: float | None = None) -> RunProgress:
    """pass@1, pass@k and mean KL per token after each of ``checkpoints`` prefixes of ``rows``.

    Rows are taken in the order given (the order they landed in, for a run's rows), so the
    result is what the dashboard showed during the run, recomputed after the fact; the last
    point covers every row.

    Parameters
    ----------
    rows : Any
        The rows: a list of dicts, a JSONL path, a :class:`SimulationData` (anything with
        ``.rows``) or a pandas DataFrame.
    k : int or None, default None
        Keyword-only, like everything after ``rows``. The k of pass@k, as in
        :class:`ProgressTracker`; also recorded on the result.
    reference : Any, default None
        Where reference log-probabilities come from, as in :class:`ProgressTracker` (None:
        the rows' ``"ref_logprob"`` field).
    checkpoints : int, default 30
        How many prefixes to compute a point after (an integer >= 1): the ends of
        ``checkpoints`` equal shares of the rows, duplicates merged, so fewer rows than
        checkpoints give one point per row.
    level : float, default 0.95
        Confidence level of the bootstrap intervals.
    n_resamples : int, default 1000
        Bootstrap resamples per interval.
    seed : int, default 0
        Seeds the bootstraps.
    threshold : float or None, default None
        A pass@1 to decide about with the anytime-valid sequence (:class:`ProgressTracker`).

    Returns
    -------
    RunProgress
        One :class:`ProgressPoint` per checkpoint (none for no rows, with a note).

    Raises
    ------
    ValueError
        ``checkpoints`` is not an integer >= 1.
    TypeError
        ``rows`` or ``reference`` is of an unusable kind.
    """
    source = as_row_list(rows)
    if isinstance(checkpoints, bool) or not isinstance(checkpoints, int) or checkpoints < 1:
        raise ValueError(f"checkpoints must be an integer >= 1; got {checkpoints!r}")
    tracker = ProgressTracker(k=k, reference=reference, level=level, n_resamples=n_resamples, seed=seed,
                              threshold=threshold)
    if not source:
        return RunProgress(points=(), k=k, reference=_describe_reference(reference), note="no rows")
    marks = sorted({max(1, round(len(source) * i / checkpoints)) for i in range(1, checkpoints + 1)})
    points, start = [], 0
    for mark in marks:
        tracker.extend(source[start:mark])
        start = mark
        points.append(tracker.point())
    return RunProgress(points=tuple(points), k=k, reference=_describe_reference(reference), note=None)
