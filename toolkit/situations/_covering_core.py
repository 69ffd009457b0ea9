"""Numpy engine behind :mod:`toolkit.situations.covering` (private; works on level indices only).

Everything here speaks "levels": a factor is an integer count ``v``, a row is an int vector
whose cell ``j`` is a level in ``0..v_j-1`` or ``DONT_CARE`` (-1). Names, values, user
constraints and validation live in :mod:`toolkit.situations.covering`; this module gets an optional
*oracle* (``allowed(row)``, ``completable(row)``, ``complete(row)``) that answers constraint
questions about partial rows.

Pieces, in the order :func:`toolkit.situations.covering.covering_array` uses them:

* exact constructions: Kleitman--Spencer for binary t=2 and Bush's orthogonal arrays for a
  prime-power number of levels q with t <= q and k <= q + 1 (GF(q) tables built here);
* :func:`ipog`: the in-parameter-order greedy of Lei et al. (IPOG, ECBS 2007) with the
  IPOG-F choice rule of Forbes et al. (J. Res. NIST 113(5), 2008): at every step the
  (row, value) with the largest gain over all rows, gains held in a numpy table;
* :func:`eliminate_redundant_rows`, :class:`PairSearch` / :class:`TupleSearch` and
  :func:`shrink_by_search`: post-optimisation (rows whose tuples are all covered elsewhere are
  dropped; then "drop one row and repair" by a focused tabu search on uncovered tuples,
  Nurmela, Discrete Applied Math 138, 2004);
* :func:`order_rows_by_gain`: the final greedy row order (best prefixes).

Hand-written rather than a library: the Python peers are 1.1-1.5x larger than the best-known
sizes and allpairspy takes ~4 s on 10^30 (docs/design/peers.md A.1); this engine gives 209 rows
in ~0.15 s there.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence

import numpy as np

DONT_CARE = -1


# --------------------------------------------------------------------------- tuple spaces


class TupleSpace:
    """Index every t-tuple ``(columns, values)`` of a set of columns as one integer.

    ``subsets`` is a list of column tuples (all the same length); tuple id =
    ``offset[s] + sum(value_j * mult[s, j])`` (mixed radix in the subset's level counts).
    The id ``size`` is a dummy that stands for "a cell is a don't-care".
    """

    def __init__(self, levels: np.ndarray, subsets: Sequence[tuple[int, ...]], width: int):
        self.levels = levels
        self.columns = np.asarray(subsets, dtype=np.intp).reshape(len(subsets), width)
        levels = np.asarray(levels, dtype=np.int64)
        level_table = levels[self.columns] if width else np.ones((len(subsets), 0), dtype=np.int64)
        self.subset_levels = level_table.astype(np.int64)
        mult = np.ones_like(self.subset_levels)
        for j in range(width - 2, -1, -1):
            mult[:, j] = mult[:, j + 1] * self.subset_levels[:, j + 1]
        self.mult = mult
        self.sizes = (
            np.prod(self.subset_levels, axis=1).astype(np.int64) if width else np.ones(len(subsets), dtype=np.int64)
        )
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.size = int(self.sizes.sum())

    def index(self, rows: np.ndarray) -> np.ndarray:
        """Tuple ids (N x S) held by ``rows``; the dummy id where a cell is a don't-care."""
        if self.columns.shape[1] == 1:
            # Strength 2 (one earlier column per tuple) is the hot path: a plain gather is
            # ~5x faster than the general mixed-radix sum below.
            values = rows[:, self.columns[:, 0]]
            ids = values + self.offsets
            ids[values < 0] = self.size
            return ids
        # One column of the subsets at a time: peak memory N x S instead of N x S x t.
        ids = np.broadcast_to(self.offsets, (rows.shape[0], len(self.offsets))).copy()
        dont_care = np.zeros(ids.shape, dtype=bool)
        for j in range(self.columns.shape[1]):
            values = rows[:, self.columns[:, j]]
            ids += values * self.mult[:, j]
            dont_care |= values < 0
        ids[dont_care] = self.size
        return ids

    def decode(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(subset index, values) of each tuple id."""
        subset = np.searchsorted(self.offsets, ids, side="right") - 1
        local = ids - self.offsets[subset]
        values = (local[:, None] // self.mult[subset]) % self.subset_levels[subset]
        return subset, values


def all_subsets_space(levels: np.ndarray, t: int) -> TupleSpace:
    k = len(levels)
    if t == 2:
        # Same lexicographic order as itertools.combinations, ~20x faster for k = 1000.
        first, second = np.triu_indices(k, 1)
        return TupleSpace(levels, np.stack([first, second], axis=1), 2)
    return TupleSpace(levels, list(itertools.combinations(range(k), t)), t)


def tuple_counts(rows: np.ndarray, space: TupleSpace) -> np.ndarray:
    """How many rows hold each tuple (length ``space.size``; don't-cares hold nothing)."""
    if rows.shape[0] == 0:
        return np.zeros(space.size, dtype=np.int64)
    ids = space.index(rows).ravel()
    return np.bincount(ids, minlength=space.size + 1)[: space.size]


# --------------------------------------------------------------------------- exact arrays


def kleitman_spencer_size(k: int) -> int:
    """CAN(2, k, 2): the least N with C(N-1, ceil(N/2)) >= k (Kleitman & Spencer 1973; Katona 1973)."""
    n = 2
    while math.comb(n - 1, (n + 1) // 2) < k:
        n += 1
    return max(n, 4) if k >= 2 else 2


def kleitman_spencer(k: int) -> np.ndarray:
    """Optimal binary strength-2 array: row 0 all zeros, column j = the j-th ceil(N/2)-subset
    of {1..N-1}. Two distinct equal-size subsets are incomparable (gives 01 and 10) and
    intersect because 2*ceil(N/2) > N-1 (gives 11); row 0 gives 00."""
    n = kleitman_spencer_size(k)
    rows = np.zeros((n, k), dtype=np.int64)
    for column, subset in enumerate(itertools.islice(itertools.combinations(range(1, n), (n + 1) // 2), k)):
        rows[list(subset), column] = 1
    return rows


def is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def prime_power(q: int) -> tuple[int, int] | None:
    """(p, m) with q = p^m for a prime p, or None."""
    for p in range(2, q + 1):
        if q % p == 0:
            if not is_prime(p):
                return None
            m, rest = 0, q
            while rest % p == 0:
                rest //= p
                m += 1
            return (p, m) if rest == 1 else None
    return None


def _poly_mulmod(a: list[int], b: list[int], modulus: list[int], p: int) -> list[int]:
    """Product of two coefficient lists (lowest degree first) modulo a monic polynomial."""
    m = len(modulus) - 1
    product = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            product[i + j] = (product[i + j] + x * y) % p
    for degree in range(len(product) - 1, m - 1, -1):
        factor = product[degree]
        if factor:
            for j in range(m + 1):
                product[degree - m + j] = (product[degree - m + j] - factor * modulus[j]) % p
    return (product + [0] * m)[:m]


def galois_field(q: int) -> tuple[np.ndarray, np.ndarray]:
    """Addition and multiplication tables of GF(q), q = p^m; element i <-> the polynomial
    whose base-p digits (lowest first) are its coefficients, reduced modulo the first monic
    irreducible polynomial of degree m (found by checking that it has no factor of degree
    <= m/2, i.e. that multiplication by every nonzero element is a bijection)."""
    p, m = prime_power(q)
    if m == 1:
        # A prime field is arithmetic mod p (the same tables the digit form gives). The
        # digit form below is Python-level O(q^2): 6 s for GF(1009), which the t = 1 rule
        # blocks of a 1,000-tool situation grid used to build twice (issue 21 row 13).
        elements = np.arange(q, dtype=np.int64)
        return (elements[:, None] + elements[None, :]) % q, np.outer(elements, elements) % q
    digits = [[(i // p**j) % p for j in range(m)] for i in range(q)]
    add = np.array([[sum(((da + db) % p) * p**j for j, (da, db) in enumerate(zip(digits[a], digits[b])))
                     for b in range(q)] for a in range(q)], dtype=np.int64)
    if m == 1:
        return add, np.outer(np.arange(q), np.arange(q)) % q
    for tail in itertools.product(range(p), repeat=m):
        modulus = list(tail) + [1]
        if modulus[0] == 0:
            continue
        table = np.array([[sum(c * p**j for j, c in enumerate(_poly_mulmod(digits[a], digits[b], modulus, p)))
                           for b in range(q)] for a in range(q)], dtype=np.int64)
        # A field: every nonzero row of the multiplication table is a permutation of 0..q-1.
        if all(len(set(table[a, 1:])) == q - 1 and 0 not in table[a, 1:] for a in range(1, q)):
            return add, table
    raise ValueError(f"no irreducible polynomial found for GF({q})")  # cannot happen for a prime power


def bush_orthogonal_array(q: int, t: int, k: int) -> np.ndarray:
    """OA(q^t; t, k, q) for a prime power q, t <= q, k <= q + 1 (Bush 1952).

    Rows are the polynomials f of degree < t over GF(q); column x (x in GF(q)) holds f(x) and
    the extra column holds the coefficient of x^(t-1). Any t columns are then an invertible
    (Vandermonde-like) linear map of the coefficients, so every t-tuple occurs exactly once.
    """
    if not (prime_power(q) and 1 <= t <= q and k <= q + 1):
        raise ValueError("Bush's construction needs a prime power q with t <= q and k <= q + 1")
    if t == 1:
        # Polynomials of degree 0 are the constants: row c is c in every column. No field
        # tables needed (they are q x q, 32 MB each for a 2,000-value tool axis).
        return np.repeat(np.arange(q, dtype=np.int64)[:, None], k, axis=1)
    add, mul = galois_field(q)
    coefficients = np.array(list(itertools.product(range(q), repeat=t)), dtype=np.int64)  # q^t x t
    points = np.arange(q, dtype=np.int64)
    # Horner: f(x) = (((c_{t-1} x) + c_{t-2}) x + ...) + c_0, with field tables.
    values = np.repeat(coefficients[:, t - 1 : t], q, axis=1)
    for j in range(t - 2, -1, -1):
        values = add[mul[values, points[None, :]], coefficients[:, j : j + 1]]
    columns = np.concatenate([values, coefficients[:, t - 1 :]], axis=1)
    return columns[:, :k]


# --------------------------------------------------------------------------- greedy (IPOG-F)


class _Rows:
    """A growable int matrix of rows (cells default to DONT_CARE)."""

    def __init__(self, initial: np.ndarray, k: int):
        capacity = max(16, 2 * len(initial))
        self.data = np.full((capacity, k), DONT_CARE, dtype=np.int64)
        self.data[: len(initial)] = initial
        self.n = len(initial)

    def append_blank(self) -> int:
        if self.n == len(self.data):
            grown = np.full((2 * len(self.data), self.data.shape[1]), DONT_CARE, dtype=np.int64)
            grown[: self.n] = self.data
            self.data = grown
        self.n += 1
        return self.n - 1

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.n]


def column_order(levels: np.ndarray) -> list[int]:
    """Most levels first (IPOG's usual order: the big factors fix the row count early)."""
    return sorted(range(len(levels)), key=lambda j: (-int(levels[j]), j))


def ipog(
    levels: np.ndarray,
    t: int,
    start: np.ndarray,
    rng: np.random.Generator,
    oracle=None,
    feasible=None,
    on_column=None,
) -> tuple[np.ndarray, list[tuple[tuple[int, ...], tuple[int, ...]]]]:
    """In-parameter-order greedy with the IPOG-F choice rule; returns (rows with don't-cares,
    infeasible tuples as (columns, levels)).

    ``on_column(done, total)``, if given, is called after each column is placed (``total`` =
    the k - t + 1 columns the loop places); a progress display reads it.

    ``start`` holds rows placed first (required rows; DONT_CARE where free); their fixed
    cells are never changed. ``feasible(columns, values) -> bool`` says whether a tuple can be
    held by a valid row (None: every tuple can).
    """
    k = len(levels)
    order = column_order(levels)
    rows = _Rows(start.astype(np.int64), k)
    infeasible: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for position in range(t - 1, k):
        column = order[position]
        v = int(levels[column])
        previous = sorted(order[:position])
        space = TupleSpace(levels, list(itertools.combinations(previous, t - 1)), t - 1)
        uncovered = np.ones((space.size + 1, v), dtype=bool)
        uncovered[space.size] = False
        if feasible is not None:
            ids = np.arange(space.size)
            subset, values = space.decode(ids) if space.size else (ids, np.zeros((0, t - 1), dtype=np.int64))
            for tuple_id in range(space.size):
                cols = tuple(int(c) for c in space.columns[subset[tuple_id]])
                vals = tuple(int(x) for x in values[tuple_id])
                for b in range(v):
                    full_cols, full_vals = _merge(cols, vals, column, b)
                    if not feasible(full_cols, full_vals):
                        uncovered[tuple_id, b] = False
                        infeasible.append((full_cols, full_vals))
        _horizontal_growth(rows, column, v, space, uncovered, rng, oracle)
        _vertical_growth(rows, column, space, uncovered, oracle)
        if on_column is not None:
            on_column(position - t + 2, k - t + 1)
    return rows.view.copy(), infeasible


def _merge(cols, vals, column, value):
    pairs = sorted(list(zip(cols, vals)) + [(column, value)])
    return tuple(c for c, _ in pairs), tuple(x for _, x in pairs)


def _horizontal_growth(rows: _Rows, column: int, v: int, space: TupleSpace, uncovered, rng, oracle):
    matrix = rows.view
    if len(matrix) == 0:
        return
    ids = space.index(matrix)
    preset = np.flatnonzero(matrix[:, column] >= 0)
    if len(preset):
        uncovered[ids[preset], matrix[preset, column][:, None]] = False
        uncovered[space.size] = False
    free = np.flatnonzero(matrix[:, column] < 0)
    if len(free) == 0:
        return
    free_ids = ids[free]
    if len(free) * free_ids.shape[1] > _GLOBAL_CHOICE_LIMIT:
        _walk_rows(matrix, column, v, free, free_ids, uncovered, rng, oracle)
        return
    gains = uncovered[free_ids].sum(axis=1)  # F x v: tuples each (row, value) would cover
    if oracle is not None:
        for local, r in enumerate(free):
            trial = matrix[r].copy()
            for b in range(v):
                trial[column] = b
                if not oracle.completable(trial):
                    gains[local, b] = -(1 << 40)
    # Uniform noise in [0, 1) only breaks ties between equal integer gains (seeded); the
    # score is gain + noise, so a score below 1 means a gain of 0.
    score = gains + rng.random(gains.shape)
    # A step lowers the score of the rows holding a tuple it just covered, by how many of
    # them each holds. Gathering F x S cells to find them made a column quadratic in the
    # rows (12 s for a 2,000-tool situation grid, issue 21 row 13); past _INDEXED_ROWS rows
    # an index tuple -> rows finds them directly. Both subtract the same integers from the
    # same rows, so the arrays are identical (the scores stay exact: integers taken from
    # gain + noise, never below the noise).
    index = _TupleRows(free_ids, space.size) if len(free) > _INDEXED_ROWS else None
    mask = None if index is not None else np.zeros(space.size + 1, dtype=bool)
    taken = np.zeros(len(free), dtype=bool)
    n_taken = 0
    for _ in range(len(free)):
        flat = int(np.argmax(score))
        local, b = divmod(flat, v)
        if score[local, b] < 1.0:
            break
        r = int(free[local])
        matrix[r, column] = b
        cells = free_ids[local]
        hit = cells[uncovered[cells, b]]
        uncovered[hit, b] = False
        if index is not None:
            holders, counts = index.holders(hit)
            score[holders, b] -= counts
        else:
            mask[hit] = True
            score[:, b] -= mask[free_ids].sum(axis=1)
            mask[hit] = False
        score[local, :] = -np.inf
        taken[local] = True
        n_taken += 1
        # Shrink the working set now and then: the gather cost is proportional to it.
        if n_taken * 4 >= len(free) and len(free) > 32:
            keep = ~taken
            free, free_ids, score = free[keep], free_ids[keep], score[keep]
            taken = np.zeros(len(free), dtype=bool)
            n_taken = 0
            if index is not None:
                index = _TupleRows(free_ids, space.size)


# Below this many free rows the plain F x S gather per step is as fast as the index (measured:
# equal near 1,000 rows at S = 2-4; the index wins 20x at 20,000 rows).
_INDEXED_ROWS = 1000


class _TupleRows:
    """Which rows of ``ids`` (F x S tuple ids; ``dummy`` = a don't-care cell) hold each
    tuple: the row numbers sorted by tuple id, with each tuple's run found by searchsorted."""

    def __init__(self, ids: np.ndarray, dummy: int):
        flat = ids.ravel()
        order = np.argsort(flat, kind="stable")
        self.sorted_ids = flat[order]
        self.rows = order // max(1, ids.shape[1])
        self.dummy = dummy

    def holders(self, tuples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, how many of ``tuples`` each holds) for the rows holding any of them."""
        tuples = tuples[tuples != self.dummy]
        starts = np.searchsorted(self.sorted_ids, tuples, side="left")
        ends = np.searchsorted(self.sorted_ids, tuples, side="right")
        lengths = ends - starts
        total = int(lengths.sum())
        if total == 0:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int64)
        # The concatenated runs starts[i] .. ends[i], without a Python loop.
        shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
        rows = self.rows[np.arange(total) + shift]
        holders, counts = np.unique(rows, return_counts=True)
        return holders, counts


# IPOG-F's global (row, value) choice costs one F x S gather per step, F steps per column:
# quadratic in the rows. Past F x S = 200,000 cells (10^30 at t=3 reaches 1.6M: ~60 s per
# array) we fall back to IPOG's row walk, linear in the rows and only slightly larger arrays.
_GLOBAL_CHOICE_LIMIT = 200_000


def _walk_rows(matrix, column, v, free, free_ids, uncovered, rng, oracle):
    """IPOG's horizontal growth: each free row in turn takes its best value (ties: seeded)."""
    noise = rng.random((len(free), v))
    for local, r in enumerate(free):
        cells = free_ids[local]
        gains = uncovered[cells].sum(axis=0) + noise[local]
        for b in np.argsort(-gains, kind="stable"):
            if gains[b] < 1:
                break
            if oracle is not None:
                trial = matrix[r].copy()
                trial[column] = b
                if not oracle.completable(trial):
                    continue
            matrix[r, column] = b
            uncovered[cells[uncovered[cells, b]], b] = False
            break


def _vertical_growth(rows: _Rows, column: int, space: TupleSpace, uncovered, oracle):
    tuple_ids, values_b = np.nonzero(uncovered[: space.size])
    if len(tuple_ids) == 0:
        return
    subset, values = space.decode(tuple_ids)
    if rows.n == 0 and space.columns.shape[0] == 1:
        # No rows yet and one subset (the first column IPOG adds): no placed row is ever
        # compatible with a later tuple (both differ on a set cell), so the loop below would
        # give every tuple a new row, in this order, after a scan of all rows each time
        # (quadratic: 3 s for the 20,000 rows of a 2,000-tool grid). Same rows, directly.
        cols = np.append(space.columns[0], column)
        for n in range(len(tuple_ids)):
            rows.append_blank()
        rows.view[:, cols] = np.concatenate([values, values_b[:, None]], axis=1)
        uncovered[tuple_ids, values_b] = False
        return
    for n in range(len(tuple_ids)):
        tuple_id, b = int(tuple_ids[n]), int(values_b[n])
        if not uncovered[tuple_id, b]:
            continue
        cols = np.append(space.columns[subset[n]], column)
        vals = np.append(values[n], b)
        matrix = rows.view
        block = matrix[:, cols]
        equal = block == vals
        compatible = (equal | (block < 0)).all(axis=1)
        candidates = np.flatnonzero(compatible)
        chosen = -1
        if len(candidates):
            # Prefer rows that already agree on most cells: they spend fewest don't-cares.
            agreement = equal[candidates].sum(axis=1)
            for r in candidates[np.argsort(-agreement, kind="stable")]:
                if oracle is None:
                    chosen = int(r)
                    break
                trial = matrix[r].copy()
                trial[cols] = vals
                if oracle.completable(trial):
                    chosen = int(r)
                    break
        if chosen < 0:
            chosen = rows.append_blank()
            matrix = rows.view
        matrix[chosen, cols] = vals
        held = space.index(matrix[chosen : chosen + 1])[0]
        uncovered[held, matrix[chosen, column]] = False
        uncovered[space.size] = False


# --------------------------------------------------------------------------- filling, pruning


def fill_dont_cares(rows: np.ndarray, levels: np.ndarray, t: int, rng, oracle=None) -> np.ndarray:
    """Give every don't-care cell a seeded random value (with constraints: a value that keeps
    the row completable). Coverage does not depend on these cells; the search that follows
    uses them as free material."""
    rows = rows.copy()
    if not (rows < 0).any():
        return rows
    if oracle is not None:
        for r in range(len(rows)):
            if (rows[r] < 0).any():
                completed = oracle.complete(rows[r], rng)
                if completed is None:  # the generator only builds completable rows
                    raise RuntimeError("internal error: a generated row cannot be completed")
                rows[r] = completed
        return rows
    empty = np.argwhere(rows < 0)
    random_values = rng.integers(0, np.iinfo(np.int64).max, size=len(empty))
    for (r, c), draw in zip(empty, random_values):
        rows[r, c] = int(draw % levels[c])
    return rows


def eliminate_redundant_rows(
    rows: np.ndarray, levels: np.ndarray, t: int, keep_first: int, needed=None
) -> np.ndarray:
    """Drop rows whose every needed tuple is held by another row (last rows tried first;
    the first ``keep_first`` rows, the required ones, always stay)."""
    space = all_subsets_space(levels, t)
    counts = tuple_counts(rows, space)
    ids = space.index(rows)
    alive = np.ones(len(rows), dtype=bool)
    padded = np.concatenate([counts, [1 << 40]])
    if needed is not None:
        padded[: space.size][~needed] = 1 << 40
    for r in range(len(rows) - 1, keep_first - 1, -1):
        if (padded[ids[r]] >= 2).all():
            alive[r] = False
            np.subtract.at(padded, ids[r], 1)
    return rows[alive]


# --------------------------------------------------------------------------- local search (t=2)


class PairSearch:
    """Focused tabu search on a complete strength-2 array (Nurmela 2004, in numpy).

    State: ``count[pair]`` = rows holding each pair. A step picks a random uncovered pair
    ((c1, a), (c2, b)) and scores every move that would cover it (set ``c1 = a`` in a row
    with ``c2 = b``, or ``c2 = b`` in a row with ``c1 = a``) by the change in the number of
    uncovered pairs, computed for all candidate moves at once with two gathers. The best
    non-tabu move is taken even if it is worse (that is what escapes local minima).
    """

    BIG = 1 << 40

    def __init__(self, rows, levels, fixed, needed, rng, oracle=None):
        self.levels = np.asarray(levels, dtype=np.int64)
        k = len(levels)
        self.k = k
        self.space = all_subsets_space(self.levels, 2)
        base = {tuple(int(c) for c in cols): int(off) for cols, off in zip(self.space.columns, self.space.offsets)}
        dummy = self.space.size
        self.A = np.full((k, k), dummy, dtype=np.int64)
        self.Mx = np.zeros((k, k), dtype=np.int64)
        self.My = np.zeros((k, k), dtype=np.int64)
        for c in range(k):
            for j in range(k):
                if c < j:
                    self.A[c, j], self.Mx[c, j], self.My[c, j] = base[(c, j)], self.levels[j], 1
                elif j < c:
                    self.A[c, j], self.Mx[c, j], self.My[c, j] = base[(j, c)], 1, self.levels[c]
        subset, values = self.space.decode(np.arange(self.space.size))
        self.pair_columns = self.space.columns[subset]
        self.pair_values = values
        self.needed = needed if needed is not None else np.ones(self.space.size, dtype=bool)
        self.rng = rng
        self.oracle = oracle
        self.last_steps = 0
        self.set_rows(rows, fixed)

    def set_rows(self, rows, fixed):
        self.rows = rows.copy()
        self.fixed = fixed.copy()
        counts = tuple_counts(self.rows, self.space)
        self.count = np.concatenate([counts, [self.BIG]]).astype(np.int64)
        self.count[: self.space.size][~self.needed] = self.BIG
        self._reset_open()

    def _reset_open(self):
        # The uncovered pairs as an indexed set (list + position map): a random pick and an
        # update are O(1), where rescanning all pairs cost ~30 us a step on 10^30.
        self.open_list = np.flatnonzero(self.count[: self.space.size] == 0).tolist()
        self.open_position = {pair: i for i, pair in enumerate(self.open_list)}
        self.n_uncovered = len(self.open_list)

    def _open(self, pair):
        if pair not in self.open_position:
            self.open_position[pair] = len(self.open_list)
            self.open_list.append(pair)

    def _close(self, pair):
        i = self.open_position.pop(pair, None)
        if i is not None:
            last = self.open_list.pop()
            if last != pair:
                self.open_list[i] = last
                self.open_position[last] = i

    def delete_row(self, r):
        ids = self.space.index(self.rows[r : r + 1])[0]
        np.subtract.at(self.count, ids, 1)
        self.rows = np.delete(self.rows, r, axis=0)
        self.fixed = np.delete(self.fixed, r, axis=0)
        self._reset_open()

    def unique_load(self):
        """Per row, how many needed pairs only that row holds."""
        ids = self.space.index(self.rows)
        return (self.count[ids] == 1).sum(axis=1)

    def _deltas(self, rr, cc, xx):
        held = self.rows[rr]
        A, Mx, My = self.A[cc], self.Mx[cc], self.My[cc]
        old = held[np.arange(len(rr)), cc]
        base = A + held * My
        new_ids = base + xx[:, None] * Mx
        old_ids = base + old[:, None] * Mx
        gain = (self.count[new_ids] == 0).sum(axis=1)
        loss = (self.count[old_ids] == 1).sum(axis=1)
        return loss - gain, old_ids, new_ids

    def _move(self, r, c, x, old_ids, new_ids):
        """Set cell (r, c) to x; ``old_ids``/``new_ids`` are the pairs the row held before and
        holds after (one per other column; a row holds each pair once, so plain fancy-index
        updates are safe)."""
        self.count[old_ids] -= 1
        self.count[new_ids] += 1
        self.rows[r, c] = x
        for pair in old_ids[self.count[old_ids] == 0].tolist():
            self._open(pair)
        for pair in new_ids[self.count[new_ids] == 1].tolist():
            self._close(pair)
        self.n_uncovered = len(self.open_list)

    def run(self, max_steps: int, deadline: float | None = None, tabu_length: int | None = None,
            noise: float = 0.1) -> bool:
        """Search until every needed pair is covered (True) or the budget ends (False).

        ``noise``: share of steps that take a random candidate move instead of the best one
        (WalkSAT-style); 0.1 measured best of {0, 0.05, 0.1, 0.2} on 5^10 and 3^13.
        """
        n_rows = len(self.rows)
        tabu_length = tabu_length if tabu_length is not None else max(2, min(10, n_rows // 2))
        recent: list[tuple[int, int]] = []
        rows_index = np.arange(n_rows)
        self.last_steps = 0
        for step in range(max_steps):
            self.last_steps = step
            if not self.open_list:
                return True
            if deadline is not None and step % 64 == 0 and time.perf_counter() > deadline:
                return False
            pair = self.open_list[int(self.rng.integers(len(self.open_list)))]
            (c1, c2), (a, b) = self.pair_columns[pair], self.pair_values[pair]
            first = rows_index[(self.rows[:, c2] == b) & ~self.fixed[:, c1]]
            second = rows_index[(self.rows[:, c1] == a) & ~self.fixed[:, c2]]
            rr = np.concatenate([first, second])
            if len(rr) == 0:
                # Nothing holds either half: put the whole pair into a random free row.
                r = int(self.rng.integers(n_rows))
                for c, x in ((c1, a), (c2, b)):
                    if not self.fixed[r, c]:
                        self._apply(r, int(c), int(x))
                continue
            split = len(first)
            in_first = rows_index[: len(rr)] < split
            cc = np.where(in_first, c1, c2)
            xx = np.where(in_first, a, b)
            deltas, old_ids, new_ids = self._deltas(rr, cc, xx)
            self._take_best_move(rr, cc, xx, deltas, old_ids, new_ids, noise, recent, tabu_length)
        self.last_steps = max_steps
        return not self.open_list

    def _take_best_move(self, rr, cc, xx, deltas, old_ids, new_ids, noise, recent, tabu_length):
        """Apply the best allowed candidate move (cell (rr, cc) to value xx): lowest delta
        first, ties broken at random, a random order with probability ``noise``; a move that
        does not improve may not revisit a cell on the tabu list ``recent``."""
        if noise and self.rng.random() < noise:
            order = self.rng.permutation(len(rr))
        else:
            order = np.lexsort((self.rng.random(len(rr)), deltas))
        for m in order:
            r, c = int(rr[m]), int(cc[m])
            if deltas[m] >= 0 and (r, c) in recent:
                continue
            if self.oracle is not None:
                trial = self.rows[r].copy()
                trial[c] = xx[m]
                if not self.oracle.allowed(trial):
                    continue
            self._move(r, c, int(xx[m]), old_ids[m], new_ids[m])
            recent.append((r, c))
            if len(recent) > tabu_length:
                recent.pop(0)
            return

    def _apply(self, r, c, x):
        if self.oracle is not None:
            trial = self.rows[r].copy()
            trial[c] = x
            if not self.oracle.allowed(trial):
                return
        old_ids = self.space.index(self.rows[r : r + 1])[0]
        trial = self.rows[r : r + 1].copy()
        trial[0, c] = x
        new_ids = self.space.index(trial)[0]
        changed = old_ids != new_ids
        self._move(r, c, x, old_ids[changed], new_ids[changed])


class TupleSearch(PairSearch):
    """:class:`PairSearch` for any strength t >= 2 (used for t >= 3).

    A step picks a random uncovered t-tuple; the candidate moves are the rows that agree with
    it on t - 1 cells, each changed in the remaining cell. A move on column c touches the
    C(k-1, t-1) tuples of the subsets containing c, scored with one gather per column group.
    """

    def __init__(self, rows, levels, fixed, needed, rng, oracle=None, strength=3):
        self.levels = np.asarray(levels, dtype=np.int64)
        self.k = len(levels)
        self.t = strength
        self.space = all_subsets_space(self.levels, strength)
        subset, values = self.space.decode(np.arange(self.space.size))
        self.pair_columns = self.space.columns[subset]
        self.pair_values = values
        self.tables = []
        for c in range(self.k):
            members = np.flatnonzero((self.space.columns == c).any(axis=1))
            columns = self.space.columns[members]
            mult = self.space.mult[members]
            position = np.argmax(columns == c, axis=1)
            self.tables.append((columns, mult, self.space.offsets[members], mult[np.arange(len(members)), position]))
        self.needed = needed if needed is not None else np.ones(self.space.size, dtype=bool)
        self.rng = rng
        self.oracle = oracle
        self.last_steps = 0
        self.set_rows(rows, fixed)

    def _group(self, rr, c, x):
        columns, mult, offsets, mult_c = self.tables[c]
        held = self.rows[rr]
        old_ids = (held[:, columns] * mult).sum(axis=-1) + offsets
        new_ids = old_ids + (x - held[:, c])[:, None] * mult_c
        gain = (self.count[new_ids] == 0).sum(axis=1)
        loss = (self.count[old_ids] == 1).sum(axis=1)
        return loss - gain, old_ids, new_ids

    def run(self, max_steps: int, deadline: float | None = None, tabu_length: int | None = None,
            noise: float = 0.1) -> bool:
        n_rows = len(self.rows)
        t = self.t
        tabu_length = tabu_length if tabu_length is not None else max(2, min(10, n_rows // 2))
        recent: list[tuple[int, int]] = []
        rows_index = np.arange(n_rows)
        self.last_steps = 0
        for step in range(max_steps):
            self.last_steps = step
            if not self.open_list:
                return True
            if deadline is not None and step % 64 == 0 and time.perf_counter() > deadline:
                return False
            target = self.open_list[int(self.rng.integers(len(self.open_list)))]
            cols, vals = self.pair_columns[target], self.pair_values[target]
            agree_cells = self.rows[:, cols] == vals
            agree = agree_cells.sum(axis=1)
            groups = []
            for p in range(t):
                rr = rows_index[(agree == t - 1) & ~agree_cells[:, p] & ~self.fixed[:, cols[p]]]
                if len(rr):
                    deltas, old_ids, new_ids = self._group(rr, int(cols[p]), int(vals[p]))
                    groups.append((rr, int(cols[p]), int(vals[p]), deltas, old_ids, new_ids))
            if not groups:
                # No row is one cell away: move the closest free row one cell nearer.
                free = rows_index[~self.fixed[:, cols].any(axis=1)]
                if len(free):
                    closest = free[agree[free] == agree[free].max()]
                    r = int(closest[self.rng.integers(len(closest))])
                    p = int(self.rng.choice(np.flatnonzero(~agree_cells[r])))
                    self._apply(r, int(cols[p]), int(vals[p]))
                continue
            rr = np.concatenate([g[0] for g in groups])
            cc = np.concatenate([np.full(len(g[0]), g[1]) for g in groups])
            xx = np.concatenate([np.full(len(g[0]), g[2]) for g in groups])
            deltas = np.concatenate([g[3] for g in groups])
            old_ids = np.concatenate([g[4] for g in groups])
            new_ids = np.concatenate([g[5] for g in groups])
            self._take_best_move(rr, cc, xx, deltas, old_ids, new_ids, noise, recent, tabu_length)
        self.last_steps = max_steps
        return not self.open_list


def shrink_by_search(rows, levels, fixed, needed, rng, oracle, total_steps: int, deadline: float | None,
                     floor: int = 1, first_allowance: int = 1000, max_failures: int | None = 3,
                     strength: int = 2):
    """Repeatedly delete a row and repair by :class:`PairSearch`; return the smallest complete
    array found (rows, fixed mask).

    The deleted row is the one holding the fewest pairs nobody else holds (the cheapest to
    repair). A repair gets ``first_allowance`` steps; after a failure the search restarts from
    the best array, deletes a different cheap row and doubles the allowance (the last rows are
    the hardest to remove: measured on 5^10, 38 -> 37 rows took ~90,000 steps, 42 -> 41 took 8).
    Rows with a fixed (required) cell are never deleted. Stops at ``floor`` rows (a lower
    bound), after ``max_failures`` failures in a row, when ``total_steps`` steps are spent, or
    at ``deadline`` (perf_counter seconds).
    """
    if strength == 2:
        search = PairSearch(rows, levels, fixed, needed, rng, oracle)
    else:
        search = TupleSearch(rows, levels, fixed, needed, rng, oracle, strength)

    def repair(budget: int) -> tuple[bool, int]:
        solved = search.run(budget, deadline)
        return solved, max(1, search.last_steps)

    return _delete_and_repair(search, repair, total_steps, deadline, floor, first_allowance, max_failures)


def _delete_and_repair(search, repair, total: int, deadline: float | None, floor: int, first_allowance: int,
                       max_failures: int | None):
    """The loop :func:`shrink_by_search` and :func:`shrink_by_annealing` share: delete the
    cheapest row (the fewest tuples held by it alone, seeded jitter after a failure so another
    cheap row is tried), ``repair(budget) -> (solved, spent)``, keep the smaller array on
    success, restore the best and double the allowance on failure."""
    best, best_fixed = search.rows.copy(), search.fixed.copy()
    spent, failures, allowance = 0, 0, first_allowance
    while len(best) > floor and spent < total:
        if deadline is not None and time.perf_counter() > deadline:
            break
        load = search.unique_load().astype(np.float64)
        load[search.fixed.any(axis=1)] = np.inf
        if not np.isfinite(load).any():
            break
        # After a failure, try another of the cheap rows (seeded), not the same one again.
        jitter = search.rng.random(len(load)) * (1.0 + failures)
        search.delete_row(int(np.argmin(load + jitter)))
        solved, used = repair(int(min(allowance, total - spent)))
        spent += used
        if solved:
            best, best_fixed = search.rows.copy(), search.fixed.copy()
            failures = 0
        else:
            failures += 1
            if max_failures is not None and failures >= max_failures:
                break
            allowance *= 2
            search.set_rows(best, best_fixed)
    return best, best_fixed


def anneal(search: TupleSearch, proposals: int, deadline: float | None = None, batch: int = 128,
           start_temperature: float = 0.5, end_temperature: float = 0.05) -> tuple[int, np.ndarray]:
    """Simulated annealing over the uncovered-tuple count of ``search``'s rows (their number
    fixed), as in Cohen, Colbourn & Ling, "Constructing strength three covering arrays with
    augmented annealing", Discrete Math. 308 (2008) 2709-2722: a move sets one free cell to
    another value and is kept if it uncovers no more tuples than it covers, else with
    probability exp(-increase / temperature); the temperature falls geometrically from
    ``start_temperature`` to ``end_temperature`` over the ``proposals`` moves.

    Moves are proposed ``batch`` at a time, all in one column and in distinct rows, and
    scored together with one gather (a lone move costs ~30 us of numpy overhead here; a batch
    of 128 costs ~0.1 ms). Each is judged against the counts before the batch; of the kept
    ones, a move sharing a tuple with an earlier kept move of the same batch is dropped, so
    the counts stay exact. Returns (fewest uncovered tuples seen, the rows then); seeded by
    ``search.rng``. Measured on 6^8 (309 rows, 4M proposals, 3 seeds): batches of 16, 32, 64
    and 128 all ended at 305-307 rows, in 10, 6.2, 3.8 and 2.4 s; starting at 0.5 or 0.3
    ended at 305-307, at 1.0 one row higher (one seed).
    """
    rng = search.rng
    k = search.rows.shape[1]
    uncovered = int((search.count[: search.space.size] == 0).sum())
    best, best_rows = uncovered, search.rows.copy()
    rounds = max(1, proposals // batch)
    touched = np.zeros(len(search.count), dtype=bool)
    free_rows = [np.flatnonzero(~search.fixed[:, c]) for c in range(k)]
    # A one-level factor has no other value to move to.
    movable = np.flatnonzero(search.levels >= 2)
    for step in range(rounds):
        if uncovered == 0 or len(movable) == 0:
            break
        if deadline is not None and step % 64 == 0 and time.perf_counter() > deadline:
            break
        temperature = start_temperature * (end_temperature / start_temperature) ** (step / rounds)
        c = int(movable[rng.integers(len(movable))])
        candidates = free_rows[c]
        if len(candidates) == 0:
            continue
        rr = rng.choice(candidates, size=min(batch, len(candidates)), replace=False)
        v = int(search.levels[c])
        xx = (search.rows[rr, c] + rng.integers(1, v, len(rr))) % v
        columns, mult, offsets, mult_c = search.tables[c]
        held = search.rows[rr]
        old = (held[:, columns] * mult).sum(axis=-1) + offsets
        new = old + (xx - held[:, c])[:, None] * mult_c
        delta = (search.count[old] == 1).sum(axis=1) - (search.count[new] == 0).sum(axis=1)
        kept = np.flatnonzero(
            (delta <= 0) | (rng.random(len(rr)) < np.exp(-np.maximum(delta, 0) / temperature))
        )
        applied = []
        for m in kept.tolist():
            if not (touched[old[m]].any() or touched[new[m]].any()):
                applied.append(m)
                touched[old[m]] = True
                touched[new[m]] = True
        if not applied:
            continue
        applied = np.asarray(applied)
        touched[old[applied].ravel()] = False
        touched[new[applied].ravel()] = False
        search.count[old[applied].ravel()] -= 1
        search.count[new[applied].ravel()] += 1
        search.rows[rr[applied], c] = xx[applied]
        uncovered += int(delta[applied].sum())
        if uncovered < best:
            best, best_rows = uncovered, search.rows.copy()
    return best, best_rows


def shrink_by_annealing(rows, levels, fixed, needed, rng, total_proposals: int, deadline: float | None,
                        floor: int = 1, first_allowance: int = 500_000, max_failures: int | None = 3,
                        strength: int = 3):
    """:func:`shrink_by_search` with :func:`anneal` as the repair: delete the row holding the
    fewest tuples alone, anneal the rest; on success keep the smaller array, on failure
    restore it, try another cheap row and double the allowance (``first_allowance``
    proposals). Stops at ``floor`` rows, after ``max_failures`` failures in a row, when
    ``total_proposals`` are spent, or at ``deadline``. Returns (rows, fixed mask).

    Unconstrained arrays only (a move is not checked against constraints). Measured on 6^8
    (the trimmed OA(343; 3, 8, 7) after the repair search, 309 rows): 305-306 rows in 4M
    proposals (2.5 s), 303 in 30M, where the repair search stays at 304 after 60 s.
    """
    search = TupleSearch(rows, levels, fixed, needed, rng, None, strength)

    def repair(budget: int) -> tuple[bool, int]:
        uncovered, repaired = anneal(search, budget, deadline)
        if uncovered == 0:
            search.set_rows(repaired, search.fixed.copy())  # the counts follow the annealed rows
        return uncovered == 0, budget

    return _delete_and_repair(search, repair, total_proposals, deadline, floor, first_allowance, max_failures)


def order_rows_by_gain(
    rows: np.ndarray, levels: np.ndarray, t: int, keep_first: int, needed=None
) -> np.ndarray:
    """Reorder rows so that every prefix covers as many tuples as a greedy choice can: each
    next row is the one adding the most still-uncovered tuples (ties: original order).

    A run cut short by a budget then still has the widest coverage for its size. Lazy greedy
    (Minoux 1978): gains only shrink as coverage grows, so a row whose stale gain still tops
    the heap after one recomputation is the true best; ~2 recomputations per pick instead of N.
    """
    import heapq

    if len(rows) - keep_first < 2:
        return rows
    space = all_subsets_space(levels, t)
    ids = space.index(rows)
    covered = np.zeros(space.size + 1, dtype=bool)
    covered[space.size] = True
    if needed is not None:
        covered[: space.size] |= ~needed
    order = list(range(keep_first))
    for r in order:
        covered[ids[r]] = True
    heap = [(-int((~covered[ids[r]]).sum()), r) for r in range(keep_first, len(rows))]
    heapq.heapify(heap)
    while heap:
        _, r = heapq.heappop(heap)
        gain = int((~covered[ids[r]]).sum())
        if heap and gain < -heap[0][0]:
            heapq.heappush(heap, (-gain, r))
            continue
        order.append(r)
        covered[ids[r]] = True
    return rows[order]
