"""t-wise covering arrays and coverage measurement.

Most software failures are triggered by one or two factors acting together (Kuhn, Wallace
& Gallo, "Software Fault Interactions and Implications for Software Testing", IEEE TSE
30(6), 2004). A *covering array* CA(N; t, k, v) is an N x k table in which every choice of t
columns holds every combination of their values in at least one row, so a test design built
on one exercises every t-way interaction in N runs instead of the v^k of the full product.

Public surface
--------------
* :func:`covering_array` builds one (mixed levels, strength t = 1..k, constraints, required
  rows, seeded, effort levels) and returns a :class:`CoveringArray`.
* :func:`coverage` measures what any set of rows covers (a :class:`CoverageReport`), including
  the ``scenario_dimensions`` dicts of a finished simulation.
* :func:`extend_array` adds values or factors to an existing array and returns the rows to
  append, leaving every earlier cell as it was.

Method
------
1. **Exact constructions** when there are no constraints and no required rows:
   Kleitman--Spencer for two-level factors at t = 2 (optimal: the least N with
   C(N-1, ceil(N/2)) >= k; 6 rows for 2^10, 10 for 2^100), and Bush's orthogonal array
   OA(q^t; t, q+1, q) for a prime power q >= every level count with t <= q (q^t rows, over
   GF(q); optimal when all factors have q levels: 8^9 -> 64 rows, where the greedy and search
   gave 91). Factors with fewer levels than p use the padded array with the
   surplus cells freed and redundant rows removed.
   At t = 3 the candidates also include (module ``_covering_constructions``; issue 19):
   Bush's OA(q^3; 3, q+2, q) for even q (hyperoval), Raaphorst--Moura--Stevens
   CA(2q^3-1; 3, q^2+q+1, q) (4^20 -> 127 rows), the Paley CA(12; 3, 11, 2), the
   Chateauneuf--Kreher / Roux doubling CA(3, 2k, v) of the best array on half the factors
   (2^20 -> 18), starters under the symbol group AGL(1, q) found by a seeded tabu search
   for q + 2 < k <= 2q at the default effort (5^10 -> 205 at seed 0; the construction's
   best-known CA(185; 3, 10, 5) for some seeds), and, for three levels at the default effort,
   cyclic cover starters found by a short seeded walk (3^13 -> 45, 3^20 -> 63). Each is
   trimmed to the factors (surplus columns dropped, surplus levels freed); with mixed levels
   a construction on the top-level factors also seeds the greedy. The lower bound at t >= 3 is v_max x CAN(t-1) of the other factors.
2. **IPOG-F greedy** (Lei et al., ECBS 2007; Forbes et al., J. Res. NIST 113(5), 2008):
   columns are added largest-first; each new column is filled by repeatedly taking the
   (row, value) with the largest number of still-uncovered t-tuples over *all* rows (a numpy
   gain table, updated by one gather per step); cells that gain nothing stay don't-care and are
   spent by vertical growth (new rows only for tuples no existing row can take). At t = 2
   with more factors than an orthogonal array allows, the greedy starts from the padded
   OA(q^2; 2, q+1, q) on the q+1 largest factors instead of from nothing (10^20: 181 rows
   after the search instead of 185).
3. **Improvement** (``effort`` other than ``"fast"``): rows whose tuples are all held by
   other rows are dropped, then "delete a row and repair" by a focused tabu search on the
   uncovered tuples with 10% random moves (Nurmela, Discrete Appl. Math. 138, 2004; the noise
   is what lets it leave plateaus -- without it, 5^10 stalled at 41 rows, with it 37-38). For
   t >= 3 a move changes the one cell in which a row differs from an uncovered tuple. At
   t >= 3 (unconstrained), where that search removed a row, "delete a row and anneal" follows:
   simulated annealing over the uncovered-tuple count (Cohen, Colbourn & Ling, Discrete Math.
   308, 2008), counted in proposals (6^8: 309 -> 306 rows).
4. **Row order**: the rows are finally ordered greedily (each next row adds the most
   uncovered tuples), so any prefix -- a run cut short by its budget -- covers as much as it
   can. (The replaced engine's one-row-at-a-time greedy had this property by construction.)

Where we differ from the engine this toolkit replaces (an AETG-like one-row-at-a-time greedy,
62 rows for its own agent axes against a lower bound of 60): we start from exact
constructions, use IPOG-F plus a repair search, support t > 2, constraints, required rows and
deterministic extension, and report the lower bound next to the size.

Against the Python peer (allpairspy 2.5.1, measured in benchmarks/bench_covering.py): our
pairwise arrays are 0-33% smaller (15 vs 17 rows on 3^13, 209 vs 248 on 10^30) and faster
from 2^100 up; its ``n=3`` mode does not guarantee 3-way coverage (25 rows covering 59% of the
triples of 3^10), whereas every array here is complete by construction and checked in tests.

Determinism: the default effort spends a fixed number of search steps (not seconds), so the
same inputs and the same integer seed give the same array on any machine. ``effort="best"``
searches until ``time_budget`` seconds, so its result can depend on machine speed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from toolkit._util.results import Result
from toolkit.errors import ConfigError, unknown_name_message
from toolkit.rows._read import as_row_list
from toolkit.situations import _covering_constructions as _constructions
from toolkit.situations import _covering_core as _core

__all__ = [
    "CoveringArray",
    "CoverageReport",
    "ArrayExtension",
    "CoverageCurve",
    "covering_array",
    "coverage",
    "coverage_curve",
    "random_design_curve",
    "extend_array",
]

_EFFORTS = ("fast", "default", "best")
# "best" without a time_budget searches this long: the issue's "a minute for paper-grade
# arrays". The t = 2 repair search settles within 2-5 s; at t = 3 the annealing keeps
# removing rows for longer (6^8: 305-306 rows after 2.5 s, 303 after 27 s).
_BEST_DEFAULT_SECONDS = 60.0
# At "best" with t >= 3 (unconstrained), the repair search gets this share of the time and
# the annealing the rest: the search removes the easy rows in seconds and then stalls
# (6^8: 304 rows after 60 s of search alone).
_BEST_SEARCH_SHARE = 0.25
# The default effort's search budget, in tabu steps. A step costs a few numpy calls over the
# rows that could take the chosen pair (~20-60 us here), so the budget is scaled by the array
# size: 6e6 / (rows x factors) steps, at most 40,000 and at least 300. Measured (CPU s): 10^30
# 0.17 s for 211 rows (1.2e7 gave 209 rows in 0.20 s), 5^10 0.45 s for 38 rows (same size as
# 1.2e7 in half the time); see benchmarks/bench_covering.py.
_DEFAULT_WORK = 6e6
_DEFAULT_MAX_STEPS = 40_000
_DEFAULT_MIN_STEPS = 300
# ~3e8 gathered cells is ~2-3 s of numpy here; below _DEFAULT_MIN_STEPS steps the search is
# skipped (too few steps to remove a row of a large array).
_DEFAULT_MAX_GATHERED = 3e8
# Three failed repairs in a row (with a doubling step allowance: 1k, 2k, 4k) end the default
# search; more rarely pays at that size (see the step counts in _covering_core.shrink_by_search).
_DEFAULT_MAX_FAILURES = 3
# The default effort's annealing budget (t >= 3, after a repair search that removed a row):
# proposals x C(k-1, t-1) gathered tuple ids at most 8.4e7 = 4M proposals on 6^8 (~2.5 s
# here, 309 -> 305-306 rows, ~1,600 proposals per cell), and at most 2,000 proposals per
# cell (a small array settles long before); none when fewer than 10 per cell remain.
_ANNEAL_WORK = 8.4e7
_ANNEAL_MAX_PER_CELL = 2000
_ANNEAL_MIN_PER_CELL = 10


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True, eq=False)
class CoveringArray(Result):
    """A covering array: ``rows[i, j]`` is the level index of factor ``j`` in row ``i``.

    Iterating yields ``{factor: value}`` dicts; ``len()`` is the number of rows.
    """

    rows: np.ndarray
    factors: dict[str, tuple]
    strength: int
    size: int
    lower_bound: int
    lower_bound_kind: str
    method: str
    infeasible: tuple[dict, ...]
    n_required: int
    seed: int | None
    effort: str

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(self.size):
            yield self[i]

    def __getitem__(self, i: int) -> dict[str, Any]:
        row = self.rows[i]
        return {name: values[int(level)] for (name, values), level in zip(self.factors.items(), row)}

    def to_dicts(self) -> list[dict[str, Any]]:
        return list(self)

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.to_dicts(), columns=list(self.factors))

    def __str__(self) -> str:
        levels = "x".join(str(len(v)) for v in self.factors.values())
        extra = f", {len(self.infeasible)} infeasible tuples" if self.infeasible else ""
        return (
            f"CoveringArray(t={self.strength}, {self.size} rows, lower bound {self.lower_bound}, "
            f"levels {levels}, method {self.method}{extra})"
        )

    __repr__ = __str__

    def _repr_html_(self) -> str:
        import html

        shown = 20  # a screenful; to_pandas() has every row
        table = self.to_pandas().head(shown).to_html(index=True, border=0)
        more = f"<p>... {self.size - shown} more rows (to_pandas() has all)</p>" if self.size > shown else ""
        return f"<div><p><b>{html.escape(str(self))}</b></p>{table}{more}</div>"


@dataclasses.dataclass(frozen=True, eq=False)
class CoverageReport(Result):
    """What a set of rows covers: planned t-tuples, covered ones, the missing ones."""

    strength: int
    n_rows: int
    planned: int
    covered: int
    fraction: float | None
    missing: tuple[dict, ...]
    per_factors: tuple[dict, ...]
    n_infeasible: int
    n_unknown_cells: int
    note: str | None

    @property
    def complete(self) -> bool:
        return self.planned == self.covered

    def __str__(self) -> str:
        name = {1: "value", 2: "pairwise", 3: "3-way"}.get(self.strength, f"{self.strength}-way")
        if self.fraction is None:
            return f"{name} coverage: nothing planned ({self.note})"
        return (
            f"{name} coverage {self.covered}/{self.planned} = {self.fraction:.4f} over {self.n_rows} rows"
            + (f" ({self.planned - self.covered} missing)" if self.covered < self.planned else "")
        )

    def to_pandas(self):
        """One row per factor combination: planned, covered, fraction."""
        import pandas as pd

        return pd.DataFrame(
            [{"factors": " x ".join(d["factors"]), **{k: d[k] for k in ("planned", "covered", "fraction")}}
             for d in self.per_factors]
        )


@dataclasses.dataclass(frozen=True, eq=False)
class ArrayExtension(Result):
    """An array grown by :func:`extend_array`: old rows first (old cells unchanged)."""

    array: CoveringArray
    new_rows: list[dict]
    filled: dict[str, list]
    n_old: int

    def __str__(self) -> str:
        added = f"; filled new factors {sorted(self.filled)} on the old rows" if self.filled else ""
        return f"ArrayExtension({self.n_old} old rows kept, {len(self.new_rows)} rows to append{added})"


@dataclasses.dataclass(frozen=True, eq=False)
class CoverageCurve(Result):
    """Share of planned t-tuples covered by the first ``n`` rows of a design, for n = 1..N.

    Read it as a detection probability: a *t-factor bug* fires exactly when one particular
    t-tuple of values occurs in a row. If the bug's tuple is uniform over the planned tuples,
    ``fraction[n-1]`` is the probability that the first n rows trigger it.
    For random designs, ``fraction`` is the mean over ``repeats`` random designs, ``low`` and
    ``high`` the 2.5% and 97.5% quantiles, and ``expected`` the closed form
    ``mean over tuples of 1 - (1 - 1/prod(levels of the tuple))^n`` for uniform rows.
    """

    label: str
    strength: int
    planned: int
    n_rows: list[int]
    fraction: list[float]
    low: list[float] | None
    high: list[float] | None
    expected: list[float] | None
    repeats: int | None

    def rows_for(self, target: float = 1.0) -> int | None:
        """The fewest rows whose (mean) coverage reaches ``target``; None if never reached."""
        for n, f in zip(self.n_rows, self.fraction):
            if f >= target - 1e-12:
                return n
        return None

    def __str__(self) -> str:
        if not self.n_rows:
            return f"CoverageCurve({self.label}: no rows)"
        return (
            f"CoverageCurve({self.label}: t={self.strength}, {self.fraction[-1]:.3f} of {self.planned} "
            f"tuples after {self.n_rows[-1]} rows)"
        )


# --------------------------------------------------------------------------- validation


def _validate_factors(factors: Any) -> dict[str, tuple]:
    if isinstance(factors, Mapping):
        if not factors:
            raise ConfigError("factors is empty; give at least one factor, e.g. {'tool': ['a', 'b']}")
        out: dict[str, tuple] = {}
        for name, values in factors.items():
            if not isinstance(name, str):
                raise ConfigError(f"factor names must be strings; got {name!r} ({type(name).__name__})")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | set | frozenset | np.ndarray):
                try:
                    values = list(values)
                except TypeError:
                    raise ConfigError(
                        f"factor {name!r} must be a list of values; got {type(values).__name__}"
                    ) from None
            values = tuple(values.tolist() if isinstance(values, np.ndarray) else values)
            if not values:
                raise ConfigError(f"factor {name!r} has no values; give at least one")
            seen: set = set()
            for value in values:
                try:
                    duplicate = value in seen
                except TypeError:
                    raise ConfigError(
                        f"factor {name!r} has an unhashable value {value!r}; use strings, numbers or tuples"
                    ) from None
                if duplicate:
                    raise ConfigError(f"factor {name!r} lists the value {value!r} twice; values must be distinct")
                seen.add(value)
            out[name] = values
        return out
    if isinstance(factors, (str, bytes)) or not isinstance(factors, Sequence | np.ndarray):
        raise ConfigError(
            f"factors must be a mapping name -> list of values or a list of level counts; got {type(factors).__name__}"
        )
    counts = list(factors)
    if not counts:
        raise ConfigError("factors is empty; give at least one level count, e.g. [3, 3, 2]")
    out = {}
    for j, count in enumerate(counts):
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
            raise ConfigError(f"factors[{j}] = {count!r}: a level count must be an integer >= 1")
        if count < 1:
            raise ConfigError(f"factors[{j}] = {count}: a factor needs at least 1 level")
        out[f"f{j}"] = tuple(range(int(count)))
    return out


def _validate_strength(strength: Any, k: int) -> int:
    if isinstance(strength, bool) or not isinstance(strength, (int, np.integer)):
        raise ConfigError(f"strength must be an integer in 1..{k}; got {strength!r}")
    if strength < 1:
        raise ConfigError(f"strength={strength} is below 1; strength must be in 1..{k}")
    if strength > k:
        raise ConfigError(
            f"strength={strength} is larger than the number of factors ({k}); strength must be in 1..{k}"
        )
    return int(strength)


def _level_of(factors: dict[str, tuple], name: str, value: Any, where: str) -> tuple[int, int]:
    names = list(factors)
    if name not in factors:
        raise ConfigError(f"{where}: " + unknown_name_message("factor", name, names))
    values = factors[name]
    # Same type first, so that True does not match the value 1 when both are listed.
    for level, candidate in enumerate(values):
        if type(candidate) is type(value) and candidate == value:
            return names.index(name), level
    for level, candidate in enumerate(values):
        if candidate == value:
            return names.index(name), level
    raise ConfigError(
        f"{where}: " + unknown_name_message(f"value of factor {name!r}", str(value), [str(v) for v in values])
    )


class _Oracle:
    """Answers constraint questions about partial rows of level indices (-1 = unassigned)."""

    def __init__(self, factors: dict[str, tuple], forbidden: list[list[tuple[int, int]]], predicates: list[Callable]):
        self.names = list(factors)
        self.values = list(factors.values())
        self.levels = [len(v) for v in self.values]
        self.forbidden = forbidden
        self.predicates = predicates
        self._allowed: dict[bytes, bool] = {}
        self._completion: dict[bytes, np.ndarray | None] = {}
        # Forbidden combinations alone (no predicate) depend only on the factors they name:
        # a free factor outside them can take any value. Then both questions are asked of
        # those factors only, so rows that differ elsewhere share one cached answer (a
        # 1,000-tool grid with one forbidden pair asked 300,000 distinct rows, 13 s).
        self._projection: tuple[np.ndarray, _Oracle] | None = None
        named = sorted({c for combination in forbidden for c, _ in combination})
        if not predicates and forbidden and len(named) < len(self.levels):
            position = {c: i for i, c in enumerate(named)}
            sub = _Oracle(
                {self.names[c]: self.values[c] for c in named},
                [[(position[c], level) for c, level in combination] for combination in forbidden],
                [],
            )
            self._projection = (np.array(named, dtype=np.intp), sub)

    def as_dict(self, row: np.ndarray) -> dict[str, Any]:
        return {self.names[j]: self.values[j][int(x)] for j, x in enumerate(row) if x >= 0}

    def allowed(self, row: np.ndarray) -> bool:
        if self._projection is not None:
            columns, sub = self._projection
            return sub.allowed(np.asarray(row, dtype=np.int64)[columns])
        key = row.tobytes()
        cached = self._allowed.get(key)
        if cached is not None:
            return cached
        ok = True
        for combination in self.forbidden:
            if all(row[c] == level for c, level in combination):
                ok = False
                break
        if ok and self.predicates:
            partial = self.as_dict(row)
            ok = all(bool(predicate(dict(partial))) for predicate in self.predicates)
        self._allowed[key] = ok
        return ok

    def _complete(self, row: np.ndarray) -> np.ndarray | None:
        """A valid full row extending ``row`` (first in level order), or None (depth-first)."""
        key = row.tobytes()
        if key in self._completion:
            return self._completion[key]
        result = None
        if self.allowed(row):
            free = np.flatnonzero(row < 0)
            if len(free) == 0:
                result = row.copy()
            else:
                column = int(free[0])
                for level in range(self.levels[column]):
                    trial = row.copy()
                    trial[column] = level
                    result = self._complete(trial)
                    if result is not None:
                        break
        self._completion[key] = result
        return result

    def completable(self, row: np.ndarray) -> bool:
        row = np.asarray(row, dtype=np.int64)
        if self._projection is not None:
            columns, sub = self._projection
            return sub._complete(row[columns]) is not None
        return self._complete(row) is not None

    def complete(self, row: np.ndarray, rng: np.random.Generator) -> np.ndarray | None:
        """Fill every free cell with a seeded random value that keeps the row completable."""
        row = np.asarray(row, dtype=np.int64).copy()
        if not self.completable(row):
            return None
        for column in np.flatnonzero(row < 0):
            for level in rng.permutation(self.levels[column]):
                row[column] = level
                if self.completable(row):
                    break
        return row


def _compile_constraints(constraints: Any, factors: dict[str, tuple]) -> _Oracle | None:
    if constraints is None:
        return None
    items = [constraints] if isinstance(constraints, Mapping) or callable(constraints) else list(constraints)
    if not items:
        return None
    forbidden: list[list[tuple[int, int]]] = []
    predicates: list[Callable] = []
    for position, item in enumerate(items):
        if isinstance(item, Mapping):
            if not item:
                raise ConfigError(f"constraints[{position}] is an empty dict; it would forbid every row")
            forbidden.append(
                [_level_of(factors, name, value, f"constraints[{position}]") for name, value in item.items()]
            )
        elif callable(item):
            predicates.append(item)
        else:
            raise ConfigError(
                f"constraints[{position}] is a {type(item).__name__}; expected a dict of forbidden "
                "{factor: value} or a callable(partial_row) -> bool (True = allowed)"
            )
    return _Oracle(factors, forbidden, predicates)


def _compile_required(required: Any, factors: dict[str, tuple], oracle: _Oracle | None) -> np.ndarray:
    k = len(factors)
    if required is None:
        return np.zeros((0, k), dtype=np.int64)
    if isinstance(required, Mapping):
        required = [required]
    rows = np.full((len(required), k), _core.DONT_CARE, dtype=np.int64)
    for i, row in enumerate(required):
        if not isinstance(row, Mapping):
            raise ConfigError(f"required[{i}] is a {type(row).__name__}; expected a dict {{factor: value}}")
        for name, value in row.items():
            column, level = _level_of(factors, name, value, f"required[{i}]")
            rows[i, column] = level
        if oracle is not None and not oracle.completable(rows[i]):
            raise ConfigError(f"required[{i}] = {dict(row)!r} violates the constraints (no valid row contains it)")
    return rows


def _as_generator(seed: Any) -> tuple[np.random.Generator, int | None]:
    if isinstance(seed, np.random.Generator):
        return seed, None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ConfigError(f"seed must be an int or a numpy Generator; got {seed!r}")
    return np.random.default_rng(int(seed)), int(seed)


# --------------------------------------------------------------------------- lower bound


def _lower_bound(
    levels: np.ndarray, t: int, needed_per_subset: np.ndarray | None, constrained: bool
) -> tuple[int, str]:
    """The best simple lower bound on the number of rows, and what it is."""
    ordered = sorted((int(v) for v in levels), reverse=True)
    bound = math.prod(ordered[:t])
    kind = f"product of the {t} largest level counts"
    if constrained:
        # Every valid tuple of one t-subset of columns needs its own row.
        bound = int(needed_per_subset.max()) if needed_per_subset is not None and len(needed_per_subset) else 0
        return bound, "most feasible tuples of any one t-subset of factors (constrained)"
    if t == 2 and ordered[0] == 2:
        binary = sum(1 for v in ordered if v == 2)
        if binary >= 2:
            return _core.kleitman_spencer_size(binary), "exact (Kleitman-Spencer 1973)"
    if t == 2:
        top = ordered[0]
        m = sum(1 for v in ordered if v == top)
        # An array with exactly v^2 rows on m v-level columns is an orthogonal array of index
        # 1, which needs m <= v + 1 (Bush 1952): with more columns, v^2 rows cannot suffice.
        if m >= top + 2 and top >= 2:
            return top * top + 1, "v^2 + 1 (no orthogonal array of index 1 on more than v+1 columns; Bush 1952)"
        # Two known non-existence results for index-1 orthogonal arrays: no pair of orthogonal
        # Latin squares of order 6 (Tarry 1900), no projective plane of order 10 (Lam, Thiel &
        # Swiercz 1989), so 6^4 and 10^11 need more than v^2 rows.
        if (top == 6 and m >= 4) or (top == 10 and m >= 11):
            return top * top + 1, "v^2 + 1 (no orthogonal array OA(v^2; 2, k, v) exists for this v and k)"
    if t >= 3 and len(ordered) > t:
        # The rows holding each value of a largest factor form a strength-(t-1) array on the
        # other factors, so N >= v_max * CAN(t-1, rest) (the standard recursive bound).
        below, below_kind = _lower_bound(np.array(ordered[1:]), t - 1, None, False)
        if ordered[0] * below > bound:
            return ordered[0] * below, f"{ordered[0]} x (strength-{t - 1} bound on the rest: {below_kind})"
    return bound, kind


# --------------------------------------------------------------------------- construction


def covering_array(
    factors: Mapping[str, Sequence] | Sequence[int],
    strength: int = 2,
    *,
    constraints: Any = None,
    required: Any = None,
    seed: int | np.random.Generator = 0,
    effort: str = "default",
    time_budget: float | None = None,
) -> CoveringArray:
    """Build a strength-``t`` covering array over ``factors``.

    Parameters
    ----------
    factors : mapping or sequence of int
        Mapping ``name -> list of values`` (mixed sizes; order kept) or a list of level counts
        (factors are then named ``f0, f1, ...`` with values ``0..v-1``).
    strength : int
        t in ``1..k``: every combination of values of every t factors appears in some row.
        Default 2.
    constraints : mapping, callable or list of them, optional
        A forbidden combination ``{factor: value, ...}``, a predicate
        ``callable(partial_row_dict) -> bool`` (True = allowed; it sees partial rows and must
        answer True when it cannot decide yet), or a list of them. No row of the result
        violates a constraint; tuples no valid row can hold are listed in ``.infeasible``.
        Whether a partial row can still be completed is decided by a depth-first search over
        the free factors, so a predicate should reject as early as it can (one that only
        decides on full rows makes that search exponential in the number of factors).
        Default None. With constraints (or required rows) the exact constructions are skipped.
    required : mapping or list of mapping, optional
        Rows (dicts, full or partial) that come first, in order, with their given cells kept.
        The search never deletes or edits them. Default None.
    seed : int or numpy.random.Generator
        Int or ``numpy.random.Generator``; the same int gives the same array. Default 0.
    effort : str
        ``"fast"``: construction only; ``"default"`` (default): plus a fixed-size improvement
        search (deterministic; at t = 3 also the step-bounded starter searches and the
        annealing); ``"best"``: improvement until ``time_budget`` seconds (default 60).
    time_budget : float, optional
        Seconds the ``"best"`` search may run (a positive number; default None = 60 s).
        Checked for every effort but used only by ``"best"``.

    Returns
    -------
    CoveringArray
        ``rows`` (level indices), ``size``, ``lower_bound`` (with ``lower_bound_kind``),
        ``method``, ``infeasible``.

    Raises
    ------
    ConfigError
        If the factors, strength, effort, time budget, seed, constraints or required rows
        are malformed, or a required row violates the constraints.

    References
    ----------
    The constructions and searches, as the module docstring describes them:

    * Kleitman & Spencer (1973): optimal two-level arrays at t = 2.
    * Bush (1952): orthogonal arrays OA(q^t; t, q+1, q) over GF(q), and OA(q^3; 3, q+2, q)
      for even q.
    * Raaphorst, Moura & Stevens, Des. Codes Cryptogr. 73(3), 2014: CA(2q^3-1; 3, q^2+q+1, q).
    * Chateauneuf & Kreher, J. Combin. Des. 10(4), 2002 (Roux 1987 for v = 2): doubling
      CA(3, 2k, v) from CA(3, k, v) and CA(2, k, v).
    * Chateauneuf, Colbourn & Kreher, Des. Codes Cryptogr. 16(3), 1999; Meagher & Stevens,
      J. Combin. Des. 13(1), 2005: cyclic cover starters (t = 3, three levels), and starters
      under the symbol group AGL(1, q) (Chateauneuf & Kreher 2002 give CA(185; 3, 10, 5)).
    * Cohen, Colbourn & Ling, Discrete Math. 308, 2008: annealing as post-optimisation.
    * Paley (1933): the quadratic-residue CA(12; 3, 11, 2).
    * Lei et al., ECBS 2007; Forbes et al., J. Res. NIST 113(5), 2008: the IPOG-F greedy.
    * Nurmela, Discrete Appl. Math. 138, 2004: the delete-a-row-and-repair tabu search.

    Examples
    --------
    >>> import toolkit as tk
    >>> a = tk.covering_array({"os": ["linux", "mac"], "py": ["3.11", "3.12"], "db": ["pg", "sqlite"]})
    >>> a.size, tk.coverage(a).fraction
    (4, 1.0)
    """
    return _build(factors, strength, constraints, required, seed, effort, time_budget, None)


def _build(factors, strength, constraints, required, seed, effort, time_budget, on_progress, anneal=True):
    """:func:`covering_array`, with ``on_progress(fraction)`` called as the construction
    advances (0 < fraction <= 1; the situation grid draws its progress bar from it);
    ``anneal=False`` skips the annealing (for ingredients of a recursive construction)."""
    named = _validate_factors(factors)
    k = len(named)
    t = _validate_strength(strength, k)
    if effort not in _EFFORTS:
        raise ConfigError(unknown_name_message("effort", str(effort), _EFFORTS))
    if time_budget is not None and (not isinstance(time_budget, (int, float)) or time_budget <= 0):
        raise ConfigError(f"time_budget must be a positive number of seconds; got {time_budget!r}")
    rng, seed_int = _as_generator(seed)
    oracle = _compile_constraints(constraints, named)
    start = _compile_required(required, named, oracle)
    levels = np.array([len(v) for v in named.values()], dtype=np.int64)
    started = time.perf_counter()
    deadline = None
    if effort == "best":
        deadline = started + float(time_budget if time_budget is not None else _BEST_DEFAULT_SECONDS)

    needed = None
    if oracle is None:
        lower_bound, bound_kind = _lower_bound(levels, t, None, False)
    on_column = None
    if on_progress is not None:
        # The greedy's columns are most of the work on a wide axis; the last tenth is the
        # pruning, search and row order after it.
        def on_column(done, total):
            on_progress(0.9 * done / max(1, total))

    rows, infeasible, method = _construct(
        levels, t, start, rng, oracle, None if oracle else lower_bound, effort, on_column, deadline
    )
    if oracle is not None:
        space = _core.all_subsets_space(levels, t)
        needed = np.ones(space.size, dtype=bool)
        if infeasible:
            needed[_tuple_ids(space, infeasible)] = False
        needed_per_subset = np.add.reduceat(needed.astype(np.int64), space.offsets) if space.size else None
        lower_bound, bound_kind = _lower_bound(levels, t, needed_per_subset, True)

    n_required = len(start)
    if len(rows) > lower_bound:
        rows = _core.eliminate_redundant_rows(rows, levels, t, n_required, needed)
    steps = _search_steps(effort, len(rows), k, t)
    anneals = anneal and t >= 3 and oracle is None and effort != "fast"
    searched = False
    if t >= 2 and len(rows) > lower_bound and steps >= _DEFAULT_MIN_STEPS:
        # Required rows are never deleted nor edited by the search (their free cells were
        # already spent by the construction).
        fixed = np.zeros(rows.shape, dtype=bool)
        fixed[:n_required] = True
        search_deadline = deadline
        if deadline is not None and anneals:
            now = time.perf_counter()
            search_deadline = now + _BEST_SEARCH_SHARE * max(0.0, deadline - now)
        improved, _ = _core.shrink_by_search(
            rows, levels, fixed, needed, rng, oracle, steps, search_deadline,
            floor=max(lower_bound, n_required),
            max_failures=_DEFAULT_MAX_FAILURES if effort == "default" else None,
            strength=t,
        )
        if len(improved) < len(rows):
            rows = improved
            method += "+search"
            searched = True
    # Annealing at the default effort only where the repair search removed a row: the arrays
    # it cannot shrink (Raaphorst-Moura-Stevens 4^20, the doublings of 2^20, 4^10, 3^50 and
    # 2^100, the starters) were as tight for the annealing (measured: no row off 4^10 in
    # 0.8 s, 5^10's 225-row doubling in 1.7 s, 3^50 in 9 s, 2^100 in 21 s).
    proposals = _anneal_proposals(effort, len(rows), k, t)
    if anneals and len(rows) > max(lower_bound, n_required) and proposals and (searched or effort == "best"):
        fixed = np.zeros(rows.shape, dtype=bool)
        fixed[:n_required] = True
        annealed, _ = _core.shrink_by_annealing(
            rows, levels, fixed, needed, rng, proposals, deadline,
            floor=max(lower_bound, n_required),
            # At the default effort three failures (allowance doubling) spend 7/8 of the
            # budget; at "best" the deadline bounds it and the first repair gets 500,000
            # proposals (6^8: ~0.3 s), as measured above.
            first_allowance=max(1, proposals // 8) if effort == "default" else 500_000,
            max_failures=_DEFAULT_MAX_FAILURES if effort == "default" else None,
            strength=t,
        )
        if len(annealed) < len(rows):
            rows = annealed
            method += "+annealing"
    rows = _core.order_rows_by_gain(rows, levels, t, n_required, needed)
    if on_progress is not None:
        on_progress(1.0)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    rows.setflags(write=False)
    infeasible_dicts = tuple(
        {list(named)[c]: named[list(named)[c]][v] for c, v in zip(cols, vals)} for cols, vals in infeasible
    )
    return CoveringArray(
        rows=rows,
        factors=named,
        strength=t,
        size=len(rows),
        lower_bound=int(lower_bound),
        lower_bound_kind=bound_kind,
        method=method,
        infeasible=infeasible_dicts,
        n_required=n_required,
        seed=seed_int,
        effort=effort,
    )


def _search_steps(effort: str, n_rows: int, k: int, t: int) -> int:
    """How many repair-search steps an effort level allows (0 = no search)."""
    if effort == "fast" or n_rows == 0:
        return 0
    if effort == "best":
        return 1 << 62  # bounded by the deadline instead
    steps = min(_DEFAULT_MAX_STEPS, max(_DEFAULT_MIN_STEPS, _DEFAULT_WORK / (n_rows * k)))
    # A step gathers ~ rows x C(k-1, t-1) x t cells; cap the total so that huge high-strength
    # arrays (10^30 at t=3: 4,000 rows) do not spend minutes here.
    gathered = n_rows * math.comb(k - 1, t - 1) * t
    return int(min(steps, _DEFAULT_MAX_GATHERED / gathered))


def _anneal_proposals(effort: str, n_rows: int, k: int, t: int) -> int:
    """How many annealing moves an effort level allows (0 = no annealing)."""
    if effort == "fast" or n_rows == 0:
        return 0
    if effort == "best":
        return 1 << 62  # bounded by the deadline instead
    proposals = min(_ANNEAL_MAX_PER_CELL * n_rows * k, int(_ANNEAL_WORK / math.comb(k - 1, t - 1)))
    return proposals if proposals >= _ANNEAL_MIN_PER_CELL * n_rows * k else 0


def _tuple_ids(space: _core.TupleSpace, tuples) -> np.ndarray:
    lookup = {tuple(int(c) for c in cols): s for s, cols in enumerate(space.columns)}
    ids = []
    for cols, vals in tuples:
        s = lookup[tuple(cols)]
        ids.append(int(space.offsets[s] + np.dot(np.asarray(vals), space.mult[s])))
    return np.asarray(ids, dtype=np.int64)


def _strength_three_candidates(levels: np.ndarray, rng, effort: str, deadline: float | None = None
                               ) -> list[tuple[np.ndarray, str]]:
    """Strength-3 constructions over ``v = max(levels)`` levels, trimmed to ``levels``:
    surplus columns dropped, levels a factor lacks freed (see :func:`_pad`).

    Direct ones (Bush, hyperoval, Raaphorst-Moura-Stevens, Paley; see
    :mod:`toolkit.situations._covering_constructions`) and, from 8 factors up, the
    Chateauneuf-Kreher / Roux doubling of the best array on half the factors (built by
    :func:`covering_array` itself at the same effort, so the halves are recursive and
    search-improved). With mixed levels a candidate over 4x the product bound is dropped:
    freeing that many surplus cells leaves an array the greedy beats, and pruning it costs time.
    Then, for a prime-power v with v + 2 < k <= 2v, starters under AGL(1, v) (see
    :func:`_affine_orbit_candidate`), and for three levels cyclic starters.
    """
    k = len(levels)
    v = int(levels.max())
    uniform = bool((levels == v).all())
    limit = math.inf if uniform else 4 * math.prod(sorted(levels.tolist())[-3:])
    out = []
    for rows, method in _constructions.uniform_candidates(v, k):
        if len(rows) <= limit:
            out.append((_pad(rows, levels), method))
    # Below 8 factors the halves (<= 4 columns) are plain products of 3 levels and the
    # doubling (v^3 + (v-1)v^2 rows) loses to a direct construction or the greedy.
    if k >= 8 and v >= 2:
        half = (k + 1) // 2
        sub_effort = "fast" if effort == "fast" else "default"
        seed = int(rng.integers(1 << 31))
        # The half is an ingredient: no annealing there (10^10's half 10^5 spent 6 s on it
        # for a candidate that loses to OA(11^3) anyway); the final array still gets it.
        a = _build([v] * half, 3, None, None, seed, sub_effort, None, None, anneal=False)
        b = covering_array([v] * half, 2, seed=seed, effort=sub_effort)
        doubled = _constructions.double_columns(np.asarray(a.rows), np.asarray(b.rows), v, k)
        if len(doubled) <= limit:
            out.append((_pad(doubled, levels), f"doubling({a.method})"))
    if effort != "fast" and _core.prime_power(v) and v + 2 < k <= 2 * v:
        beat = min((len(rows) for rows, _ in out), default=limit)
        out.extend(_affine_orbit_candidate(v, k, beat if math.isfinite(beat) else 1 << 62, rng, effort,
                                           levels, deadline))
    # Three levels only: there the walk finds starters within its budget (3^14, 3^20). With
    # more levels it found none smaller than the other candidates (4^20 with 1 starter, 5^10
    # with 4 in 8,000 steps, 6^8 with 5-6 in 3,000), so trying would only cost time.
    if effort != "fast" and v == 3:
        beat = min((len(rows) for rows, _ in out), default=limit)
        out.extend(_cyclic_candidates(v, k, beat if math.isfinite(beat) else 1 << 62, rng, effort, levels))
    return out


# A cyclic-starter attempt gets this many walk steps at the default effort (4x at "best"):
# measured with seeds 0-1, 3^14 -> 45 rows and 3^20 -> 63 were found within 1,500 steps
# (0.02-1.4 s), while the failures (5^10: none in 20,000) did not profit from more steps.
_CYCLIC_STEPS = 1500
# Work cap per attempt, starters x columns x difference patterns (one step costs about that
# many gathered cells per candidate move): 3^20 is 3,420; 3^50 (58,800) would take minutes.
_CYCLIC_MAX_WORK = 20_000
# At most this many (columns, starters) attempts per array: each failure costs ~1 s.
_CYCLIC_ATTEMPTS = 2


# The AGL(1, q)-orbit starter search gets this many tabu steps at the default effort (4x at
# "best", where the deadline also bounds it). Measured on 5^10, seeds 0-7: 25,000 steps
# (~5 s here) gave 205 rows for five seeds and 185 for one (two kept the 225-row doubling);
# 15,000 gave 205 for three and 185 for one.
_ORBIT_STEPS = 25_000
# Work cap, starters x columns x levels x C(k - 1, 2) x steps (what the steps gather): 5^10
# is 11 x 10 x 5 x 36 x 25,000 = 5e8 (~5 s); above it the step budget shrinks, and below
# 2,000 steps the search is skipped (5^10's first solve alone takes 300-900 steps).
_ORBIT_MAX_WORK = 5e8
_ORBIT_MIN_STEPS = 2000


def _affine_orbit_candidate(v: int, k: int, beat: int, rng, effort: str, levels: np.ndarray,
                            deadline: float | None):
    """The AGL(1, v)-orbit construction (Chateauneuf, Colbourn & Kreher 1999; see
    :func:`_constructions.affine_orbit_array`) with fewer than ``beat`` rows, if found within
    the step budget. Tried for v + 2 < k <= 2v: up to v + 2 columns an orthogonal array is
    optimal, and 2v is where the construction's known arrays sit (CA(88; 3, 8, 4),
    CA(185; 3, 10, 5)); past it 4^10 (k = 2.5v) did not beat the doubling's 112 rows in
    12,000 steps (2 of 6 seeds tied it)."""
    fits = (beat - 1 - v) // (v * (v - 1))
    if fits < 1:
        return []
    per_step = (fits + 1) * k * v * math.comb(k - 1, 2)
    steps = int(min(_ORBIT_STEPS * (4 if effort == "best" else 1), _ORBIT_MAX_WORK / per_step))
    if steps < _ORBIT_MIN_STEPS:
        return []
    rows = _constructions.affine_orbit_array(v, k, rng, steps, beat, deadline)
    if rows is None:
        return []
    return [(_pad(rows, levels), f"affine-orbit-starters(q={v})")]


def _cyclic_candidates(v: int, k: int, beat: int, rng, effort: str, levels: np.ndarray):
    """Cyclic cover-starter arrays (m n v + v rows on n in {k, k + 1} columns, trimmed to k)
    smaller than ``beat`` rows, from the fewest starters m a pattern count allows up."""
    out = []
    attempts = 0
    steps = _CYCLIC_STEPS * (4 if effort == "best" else 1)
    for n in (k, k + 1):
        # Each difference pattern needs its v^2 - 1 non-constant classes among m n windows.
        m = max(1, math.ceil((v * v - 1) / n))
        while m * n * v + v < beat and attempts < _CYCLIC_ATTEMPTS:
            if m * n * math.comb(n - 1, 2) > _CYCLIC_MAX_WORK:
                break
            attempts += 1
            rows = _constructions.cyclic_starter(v, n, m, rng, steps)
            if rows is not None:
                out.append((_pad(rows[:, :k], levels), f"cyclic-starter(m={m}, n={n})"))
                beat = len(rows)
                break
            m += 1
    return out


def _construct(levels, t, start, rng, oracle, lower_bound=None, effort="default", on_column=None, deadline=None):
    """Candidate constructions; the smallest complete one wins (exact ones first on ties).
    An exact construction that meets ``lower_bound`` is returned without running the greedy."""
    k = len(levels)
    candidates = []
    top = int(levels.max())
    q = max(top, 2)
    while not _core.prime_power(q):
        q += 1
    if oracle is None and len(start) == 0:
        if t == 2 and top <= 2 and k >= 2:
            candidates.append((_pad(_core.kleitman_spencer(k), levels), "kleitman-spencer"))
        # 4x the product bound: past that the padded array is far from optimal and the greedy
        # wins anyway (and q^t rows would cost time to prune).
        if t != 3 and t <= q and k <= q + 1 and q**t <= 4 * math.prod(sorted(levels.tolist())[-t:]):
            candidates.append((_pad(_core.bush_orthogonal_array(q, t, k), levels), f"orthogonal-array(q={q})"))
        if t == 3:
            candidates.extend(_strength_three_candidates(levels, rng, effort, deadline))
    for rows, method in candidates:
        if lower_bound is not None and len(rows) == lower_bound and (levels == levels.max()).all():
            return rows, [], method
    seeded = None
    if oracle is None and len(start) == 0 and t == 2 and k > q + 1 and q <= 2 * top:
        # Too many factors for an orthogonal array: let its q+1 columns seed the greedy (on
        # the largest factors, which IPOG-F places first). Measured over seeds 0-3 after the
        # default search: 10^20 179-181 rows instead of 185-187, 10^30 209-211 instead of
        # 211-214, 6^20 68-69 instead of 69-70; equal on 3^13, 3^50, 4^20, 5^10.
        order = _core.column_order(levels)[: q + 1]
        seeded = np.full((q * q, k), _core.DONT_CARE, dtype=np.int64)
        seeded[:, order] = _pad(_core.bush_orthogonal_array(q, 2, q + 1), levels[order])
        greedy, _ = _core.ipog(levels, t, seeded, rng, on_column=on_column)
        candidates.append((greedy, f"ipog-f+oa-seed(q={q})"))
    infeasible = []
    # With at least q+1 factors at the top level the seeded run was never worse (above), so the
    # plain run is skipped; with fewer, the padded seed is mostly don't-cares and both run.
    if oracle is None and len(start) == 0 and t == 3 and 3 <= int((levels == top).sum()) < k:
        # Mixed levels: a construction on the top-level factors (IPOG-F places them first)
        # seeds the greedy, which extends it to the other factors.
        top_columns = np.flatnonzero(levels == top)
        uniform = _strength_three_candidates(levels[top_columns], rng, effort, deadline)
        if uniform:
            part = min((rows for rows, _ in uniform), key=len)
            seeded3 = np.full((len(part), k), _core.DONT_CARE, dtype=np.int64)
            seeded3[:, top_columns] = part
            greedy, _ = _core.ipog(levels, t, seeded3, rng, on_column=on_column)
            candidates.append((greedy, "ipog-f+construction-seed"))
    if seeded is None or int((levels == top).sum()) <= q:
        greedy, infeasible = _core.ipog(
            levels, t, start, rng, oracle, feasible=_feasibility(oracle) if oracle is not None else None,
            on_column=on_column,
        )
        candidates.append((greedy, "ipog-f"))
    best_rows, best_method = None, ""
    for rows, method in candidates:
        rows = _core.fill_dont_cares(rows, levels, t, rng, oracle)
        if len(candidates) > 1:  # compare the candidates without their redundant rows
            rows = _core.eliminate_redundant_rows(rows, levels, t, len(start))
        if best_rows is None or len(rows) < len(best_rows):
            best_rows, best_method = rows, method
    return best_rows, infeasible, best_method


def _pad(rows: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Free the cells of a uniform array whose value a smaller factor does not have."""
    rows = rows.copy()
    rows[rows >= levels[None, :]] = _core.DONT_CARE
    return rows


def _feasibility(oracle: _Oracle):
    k = len(oracle.levels)

    def feasible(cols, vals) -> bool:
        row = np.full(k, _core.DONT_CARE, dtype=np.int64)
        row[list(cols)] = vals
        return oracle.completable(row)

    return feasible


# --------------------------------------------------------------------------- coverage


def _rows_to_levels(rows: Any, factors: dict[str, tuple] | None) -> tuple[np.ndarray, dict[str, tuple], int]:
    """(level matrix with -1 for unknown/missing cells, factors, number of unknown cells)."""
    if isinstance(rows, CoveringArray):
        if factors is None or factors == rows.factors:
            return np.asarray(rows.rows), rows.factors, 0
        rows = rows.to_dicts()
    if isinstance(rows, np.ndarray) and rows.dtype.kind in "iu":
        if factors is None:
            raise ConfigError("coverage() of an integer array needs factors (a mapping or level counts)")
        if rows.ndim != 2 or rows.shape[1] != len(factors):
            raise ConfigError(f"rows has shape {rows.shape}; expected (N, {len(factors)}) for {len(factors)} factors")
        levels = np.array([len(v) for v in factors.values()])
        out = rows.astype(np.int64).copy()
        bad = (out >= levels[None, :]) | (out < 0)
        out[bad] = _core.DONT_CARE
        return out, factors, int(bad.sum())
    dict_rows = as_row_list(rows, "rows")
    dict_rows = [
        row["scenario_dimensions"] if isinstance(row.get("scenario_dimensions"), Mapping) else row
        for row in dict_rows
    ]
    if factors is None:
        seen: dict[str, list] = {}
        for row in dict_rows:
            for name, value in row.items():
                if value is None or value == "":
                    continue
                bucket = seen.setdefault(str(name), [])
                if value not in bucket:
                    bucket.append(value)
        if not seen:
            raise ConfigError("coverage(): the rows hold no factor values and no factors were given")
        factors = {name: tuple(values) for name, values in seen.items()}
    out = np.full((len(dict_rows), len(factors)), _core.DONT_CARE, dtype=np.int64)
    lookups = [{_hashable(v): level for level, v in enumerate(values)} for values in factors.values()]
    unknown = 0
    for i, row in enumerate(dict_rows):
        for j, name in enumerate(factors):
            if name in row and row[name] is not None:
                level = lookups[j].get(_hashable(row[name]))
                if level is None:
                    unknown += 1
                else:
                    out[i, j] = level
    return out, factors, unknown


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        from toolkit._util.hashing import canonical_json

        return ("json", canonical_json(value))


def coverage(
    rows: Any,
    factors: Mapping[str, Sequence] | Sequence[int] | None = None,
    strength: int = 2,
    *,
    constraints: Any = None,
) -> CoverageReport:
    """Which t-tuples of factor values ``rows`` cover.

    Parameters
    ----------
    rows : CoveringArray, numpy.ndarray or rows
        A :class:`CoveringArray`, an ``N x k`` integer array of level indices (then
        ``factors`` is required; an out-of-range index covers nothing), or row dicts
        ``{factor: value}`` -- for example the rows of a finished simulation (a row's
        ``scenario_dimensions`` dict is used when present). Keys that are not factors are
        ignored; a missing key or a value not among the factor's values covers nothing
        (counted in ``n_unknown_cells``).
    factors : mapping or sequence of int, optional
        As in :func:`covering_array`. Default None: the array's own factors, or the keys and
        values seen in the rows.
    strength : int
        t in ``1..k``: the size of the tuples counted. Default 2.
    constraints : mapping, callable or list of them, optional
        As in :func:`covering_array`; tuples they forbid are not planned. Default None.

    Returns
    -------
    CoverageReport
        ``fraction = covered / planned`` (None when nothing is planned), the ``missing``
        tuples and the counts per set of t factors (``per_factors``).

    Raises
    ------
    ConfigError
        If the factors or strength are invalid, an integer array comes without factors or
        with the wrong number of columns, or the rows hold no factor value and no factors
        were given.
    """
    named = _validate_factors(factors) if factors is not None else None
    matrix, named, unknown = _rows_to_levels(rows, named)
    k = len(named)
    t = _validate_strength(strength, k)
    levels = np.array([len(v) for v in named.values()], dtype=np.int64)
    space = _core.all_subsets_space(levels, t)
    needed = _needed_tuples(space, named, constraints)
    counts = _core.tuple_counts(matrix, space)
    covered_mask = needed & (counts > 0)
    planned, covered = int(needed.sum()), int(covered_mask.sum())
    names = list(named)
    missing_ids = np.flatnonzero(needed & (counts == 0))
    missing: list[dict] = []
    if len(missing_ids):
        subset, values = space.decode(missing_ids)
        for s, vals in zip(subset, values):
            cols = space.columns[s]
            missing.append({names[c]: named[names[c]][int(v)] for c, v in zip(cols, vals)})
    per = []
    planned_by = np.add.reduceat(needed.astype(np.int64), space.offsets) if space.size else []
    covered_by = np.add.reduceat(covered_mask.astype(np.int64), space.offsets) if space.size else []
    for s, cols in enumerate(space.columns):
        p, c = int(planned_by[s]), int(covered_by[s])
        per.append({"factors": [names[j] for j in cols], "planned": p, "covered": c,
                    "fraction": round(c / p, 4) if p else None})
    note = None
    if planned == 0:
        note = "no tuple is planned (every tuple is forbidden by the constraints); relax the constraints"
    elif unknown:
        note = f"{unknown} cell(s) held a value outside the factors and covered nothing; pass factors= to include them"
    return CoverageReport(
        strength=t,
        n_rows=int(matrix.shape[0]),
        planned=planned,
        covered=covered,
        fraction=round(covered / planned, 4) if planned else None,
        missing=tuple(missing),
        per_factors=tuple(per),
        n_infeasible=int(space.size - planned),
        n_unknown_cells=unknown,
        note=note,
    )


def _first_covering_row(matrix: np.ndarray, space: _core.TupleSpace) -> np.ndarray:
    """Per tuple, the index of the first row holding it (len(matrix) when none does)."""
    n = len(matrix)
    first = np.full(space.size + 1, n, dtype=np.int64)
    if n:
        ids = space.index(matrix)
        np.minimum.at(first, ids.ravel(), np.repeat(np.arange(n), ids.shape[1]))
    return first[: space.size]


def _prefix_fractions(first: np.ndarray, needed: np.ndarray, n: int) -> np.ndarray:
    planned = int(needed.sum())
    hits = np.bincount(first[needed], minlength=n + 1)[:n]
    return np.cumsum(hits) / planned if planned else np.zeros(n)


def coverage_curve(
    rows: Any,
    factors: Mapping[str, Sequence] | Sequence[int] | None = None,
    strength: int = 2,
    *,
    constraints: Any = None,
    label: str = "design",
) -> CoverageCurve:
    """Coverage of the first n rows of ``rows`` for every n (rows as in :func:`coverage`).

    A covering array's curve ends at 1.0; its shape shows how early the array finds a random
    t-factor bug (see :class:`CoverageCurve`).

    Parameters
    ----------
    rows : CoveringArray, numpy.ndarray or rows
        The design, in run order, as :func:`coverage` takes it.
    factors : mapping or sequence of int, optional
        As in :func:`coverage`. Default None: taken from the array or the rows.
    strength : int
        t of the tuples counted. Default 2.
    constraints : mapping, callable or list of them, optional
        As in :func:`coverage`; forbidden tuples are not planned. Default None.
    label : str
        The curve's name in a figure legend. Default ``"design"``.

    Returns
    -------
    CoverageCurve
        A point for every n = 1..N, with no band and no closed form (``repeats`` None).
    """
    named = _validate_factors(factors) if factors is not None else None
    matrix, named, _ = _rows_to_levels(rows, named)
    t = _validate_strength(strength, len(named))
    levels = np.array([len(v) for v in named.values()], dtype=np.int64)
    space = _core.all_subsets_space(levels, t)
    needed = _needed_tuples(space, named, constraints)
    fractions = _prefix_fractions(_first_covering_row(matrix, space), needed, len(matrix))
    return CoverageCurve(
        label=label, strength=t, planned=int(needed.sum()), n_rows=list(range(1, len(matrix) + 1)),
        fraction=[float(f) for f in fractions], low=None, high=None, expected=None, repeats=None,
    )


def random_design_curve(
    factors: Mapping[str, Sequence] | Sequence[int],
    n_rows: int,
    strength: int = 2,
    *,
    repeats: int = 200,
    seed: int | np.random.Generator = 0,
    label: str = "random rows",
) -> CoverageCurve:
    """Coverage of designs whose rows are drawn uniformly at random from the full product.

    The curve holds the mean over the designs, the 2.5%/97.5% quantiles and the closed-form
    expectation (see :class:`CoverageCurve`). This is the baseline a covering array is
    measured against: random testing of the same size. No constraints apply: every tuple of
    the full product is planned.

    Parameters
    ----------
    factors : mapping or sequence of int
        As in :func:`covering_array`.
    n_rows : int
        Rows in each random design (an integer >= 1); the curve has a point for 1..n_rows.
    strength : int
        t of the tuples counted. Default 2.
    repeats : int
        Independent random designs drawn (an integer >= 1). Default 200.
    seed : int or numpy.random.Generator
        Seed of the draws. Default 0.
    label : str
        The curve's name in a figure legend. Default ``"random rows"``.

    Returns
    -------
    CoverageCurve

    Raises
    ------
    ConfigError
        If the factors, strength, ``n_rows``, ``repeats`` or seed are invalid.
    """
    named = _validate_factors(factors)
    t = _validate_strength(strength, len(named))
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 1:
        raise ConfigError(f"n_rows must be an integer >= 1; got {n_rows!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ConfigError(f"repeats must be an integer >= 1; got {repeats!r}")
    rng, _ = _as_generator(seed)
    levels = np.array([len(v) for v in named.values()], dtype=np.int64)
    space = _core.all_subsets_space(levels, t)
    needed = np.ones(space.size, dtype=bool)
    curves = np.empty((repeats, n_rows))
    for r in range(repeats):
        design = rng.integers(0, levels, size=(n_rows, len(levels)))
        curves[r] = _prefix_fractions(_first_covering_row(design, space), needed, n_rows)
    # Closed form: a uniform row holds a given tuple with probability 1/prod(its levels).
    per_tuple = 1.0 / np.repeat(space.sizes, space.sizes).astype(np.float64)
    n = np.arange(1, n_rows + 1)
    expected = 1.0 - np.mean((1.0 - per_tuple[None, :]) ** n[:, None], axis=1)
    return CoverageCurve(
        label=label, strength=t, planned=space.size, n_rows=n.tolist(),
        fraction=curves.mean(axis=0).tolist(),
        low=np.quantile(curves, 0.025, axis=0).tolist(),
        high=np.quantile(curves, 0.975, axis=0).tolist(),
        expected=expected.tolist(), repeats=int(repeats),
    )


def _needed_tuples(space: _core.TupleSpace, named: dict[str, tuple], constraints: Any) -> np.ndarray:
    needed = np.ones(space.size, dtype=bool)
    oracle = _compile_constraints(constraints, named)
    if oracle is not None and space.size:
        subset, values = space.decode(np.arange(space.size))
        for tuple_id in range(space.size):
            row = np.full(len(named), _core.DONT_CARE, dtype=np.int64)
            row[space.columns[subset[tuple_id]]] = values[tuple_id]
            needed[tuple_id] = oracle.completable(row)
    return needed


# --------------------------------------------------------------------------- extension


def extend_array(
    array: CoveringArray,
    factors: Mapping[str, Sequence],
    *,
    constraints: Any = None,
    seed: int | np.random.Generator | None = None,
    effort: str = "default",
    time_budget: float | None = None,
) -> ArrayExtension:
    """Grow ``array`` to new ``factors`` without touching its rows.

    ``factors`` must keep every old factor and every old value (order may change; values and
    factors may be added). The old rows stay first and keep every old cell; for a factor that
    is new, each old row gets a value chosen to cover as many new tuples as possible
    (deterministic for the seed), reported in ``.filled``. The rows to append cover every
    tuple the old rows miss. So a situation grid can grow with a policy: rows of unchanged
    rules keep their situations, and only the appended rows are new.

    The grown array is built by :func:`covering_array` at the old array's strength, with the
    old rows as required rows; required rows rule out the exact constructions, so the IPOG-F
    greedy and the repair search do the work (see the References of :func:`covering_array`).

    Parameters
    ----------
    array : CoveringArray
        The array to grow (from :func:`covering_array`).
    factors : mapping
        The new factors, ``name -> list of values``: every old factor and every old value
        kept, in any order; values and factors may be added.
    constraints : mapping, callable or list of them, optional
        As in :func:`covering_array`. Every old row must still be completable under them
        (old cells are never rewritten). Default None.
    seed : int or numpy.random.Generator, optional
        Seed of the extension. Default None: the old array's integer seed, else 0.
    effort : str
        As in :func:`covering_array`. Default ``"default"``.
    time_budget : float, optional
        As in :func:`covering_array` (used by ``effort="best"`` only). Default None.

    Returns
    -------
    ArrayExtension
        The grown ``array`` (old rows first), the ``new_rows`` to append, the values
        ``filled`` into the old rows for each new factor, and ``n_old``.

    Raises
    ------
    ConfigError
        If ``array`` is not a CoveringArray, an old factor or value is missing from
        ``factors``, or an old row violates the new constraints.
    """
    if not isinstance(array, CoveringArray):
        raise ConfigError(f"array must be a CoveringArray (from tk.covering_array); got {type(array).__name__}")
    named = _validate_factors(factors)
    for name, values in array.factors.items():
        if name not in named:
            raise ConfigError(
                f"extend_array: the old factor {name!r} is missing from the new factors; factors can be added, "
                "not removed (build a new array instead)"
            )
        new_values = named[name]
        for value in values:
            if value not in new_values:
                raise ConfigError(
                    f"extend_array: the old value {value!r} of factor {name!r} is missing; "
                    "values can be added, not removed"
                )
    old_rows = array.to_dicts()
    if constraints is not None:
        oracle = _compile_constraints(constraints, named)
        for i, row in enumerate(old_rows):
            partial = np.full(len(named), _core.DONT_CARE, dtype=np.int64)
            for name, value in row.items():
                partial[list(named).index(name)] = _level_of(named, name, value, f"old row {i}")[1]
            if oracle is not None and not oracle.completable(partial):
                raise ConfigError(
                    f"extend_array: old row {i} = {row!r} violates the new constraints; an extension never "
                    "rewrites old rows, so build a new array (tk.covering_array) instead"
                )
    grown = covering_array(
        named,
        array.strength,
        constraints=constraints,
        required=old_rows,
        seed=array.seed if seed is None and array.seed is not None else (0 if seed is None else seed),
        effort=effort,
        time_budget=time_budget,
    )
    n_old = len(old_rows)
    dicts = grown.to_dicts()
    added = [name for name in named if name not in array.factors]
    return ArrayExtension(
        array=grown,
        new_rows=dicts[n_old:],
        filled={name: [row[name] for row in dicts[:n_old]] for name in added},
        n_old=n_old,
    )
