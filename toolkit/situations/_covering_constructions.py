"""Algebraic and recursive strength-3 covering arrays (private; level indices only).

:func:`toolkit.situations.covering.covering_array` offers these as candidates next to the
IPOG-F greedy when there are no constraints and no required rows; the smallest complete
array wins and is then trimmed (surplus columns dropped, surplus levels freed) and
post-optimised by the repair search. Every function returns a full ``N x k`` int array of
level indices (no don't-cares); none of them is a stored table.

* :func:`hyperoval_orthogonal_array`: OA(q^3; 3, q + 2, q) for q = 2^m (Bush 1952), one
  column more than :func:`toolkit.situations._covering_core.bush_orthogonal_array` gives.
* :func:`raaphorst_moura_stevens`: CA(2q^3 - 1; 3, q^2 + q + 1, q), two linear blocks over
  the points of the projective plane PG(2, q) (Raaphorst, Moura & Stevens 2014).
* :func:`paley_binary`: CA(12; 3, 11, 2) from the quadratic residues mod 11 (Paley 1933).
* :func:`cyclic_starter`: CA(m n v + v; 3, n, v) from m starter vectors under the cyclic
  column shift and value translation (optionally with a fixed point at infinity), found by a
  seeded, step-bounded walk (Chateauneuf, Colbourn & Kreher 1999; Meagher & Stevens 2005).
* :func:`double_columns`: CA(N + (v-1)M; 3, 2k, v) from CA(N; 3, k, v) and CA(M; 2, k, v)
  (Chateauneuf & Kreher 2002; for v = 2 this is Roux's 1987 construction).
* :func:`affine_orbit_array`: CA(m q (q - 1) + q; 3, k, q) from m starter rows under the
  symbol group AGL(1, q), found by a seeded, step-bounded tabu search (the group
  construction of Chateauneuf, Colbourn & Kreher 1999; CA(185; 3, 10, 5) is Chateauneuf &
  Kreher 2002's m = 9 case).
"""

from __future__ import annotations

import itertools
import time
from functools import lru_cache

import numpy as np

from toolkit.situations import _covering_core as _core


def _vectors(q: int) -> np.ndarray:
    """All q^3 vectors of GF(q)^3 (element indices as in :func:`_core.galois_field`)."""
    return np.array(list(itertools.product(range(q), repeat=3)), dtype=np.int64)


def _linear_block(q: int, coefficients: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Cell (r, c) = <coefficients[r], points[c]> over GF(q).

    For three columns whose points are linearly independent, the map from a coefficient
    vector to its three cells is a bijection of GF(q)^3, so every coefficient vector set that
    contains all nonzero vectors covers every 3-tuple except possibly (0, 0, 0).
    """
    add, mul = _core.galois_field(q)
    cells = mul[coefficients[:, None, 0], points[None, :, 0]]
    for i in (1, 2):
        cells = add[cells, mul[coefficients[:, None, i], points[None, :, i]]]
    return cells


def hyperoval_orthogonal_array(q: int, k: int) -> np.ndarray:
    """OA(q^3; 3, k, q) for q = 2^m and k <= q + 2 (Bush 1952, even-q case).

    Bush, K. A. (1952), "Orthogonal arrays of index unity", Ann. Math. Statist. 23(3),
    426-434. Rows are the polynomials c0 + c1 x + c2 x^2 over GF(q); column x holds f(x)
    (the point (1, x, x^2)), and two more columns hold c2 (the point (0, 0, 1)) and c1 (the
    nucleus (0, 1, 0)). In characteristic 2 these q + 2 points form a hyperoval: no three
    are collinear (the determinant of two conic points with the nucleus is (x + y)^2), so
    any three columns see every 3-tuple exactly once.
    """
    p_m = _core.prime_power(q)
    if p_m is None or p_m[0] != 2 or k > q + 2:
        raise ValueError("the hyperoval construction needs q = 2^m and k <= q + 2")
    add, mul = _core.galois_field(q)
    points = [(1, x, int(mul[x, x])) for x in range(q)] + [(0, 0, 1), (0, 1, 0)]
    return _linear_block(q, _vectors(q), np.array(points[:k], dtype=np.int64))


@lru_cache(maxsize=None)
def _singer_points(q: int) -> np.ndarray:
    """The q^2 + q + 1 points of PG(2, q) in the order of a Singer cycle: p_i = C^i e_1,
    normalised so the first nonzero coordinate is 1, for the companion matrix C of a cubic
    whose projective order is q^2 + q + 1 (found by trying cubics in order).

    In this order the lines are translates of one difference set, which is what makes the
    multiplier permutations of :func:`raaphorst_moura_stevens` break collinearity.
    """
    add, mul = _core.galois_field(q)
    n = q * q + q + 1
    inverse = np.zeros(q, dtype=np.int64)
    for a in range(1, q):
        inverse[a] = int(np.flatnonzero(mul[a] == 1)[0])

    def normalise(vector):
        lead = next(x for x in vector if x)
        return tuple(int(mul[inverse[lead], x]) for x in vector)

    for a, b, c in itertools.product(range(q), repeat=3):
        if c == 0:
            continue
        # x^3 = a x^2 + b x + c: C maps (x0, x1, x2) -> (c x2, x0 + b x2, x1 + a x2).
        vector, seen = (1, 0, 0), []
        for _ in range(n):
            seen.append(normalise(vector))
            x0, x1, x2 = vector
            vector = (int(mul[c, x2]), int(add[x0, mul[b, x2]]), int(add[x1, mul[a, x2]]))
        if len(set(seen)) == n:
            return np.array(seen, dtype=np.int64)
    raise ValueError(f"no Singer cycle found for PG(2, {q})")  # cannot happen for a prime power


def _collinear_triples(q: int, points: np.ndarray) -> set[tuple[int, int, int]]:
    """Sorted index triples of ``points`` that lie on a common line of PG(2, q)."""
    block = _linear_block(q, points, points)  # <p_a, p_b>: a line is {p : <u, p> = 0}
    triples: set[tuple[int, int, int]] = set()
    for u in range(len(points)):
        on_line = np.flatnonzero(block[u] == 0)
        triples.update(itertools.combinations(on_line.tolist(), 3))
    return triples


@lru_cache(maxsize=None)
def _rms_multiplier(q: int) -> int | None:
    """The least multiplier d (coprime to n = q^2 + q + 1) such that no three columns are
    collinear both in the Singer order and after i -> d i mod n; None if there is none."""
    n = q * q + q + 1
    lines = _collinear_triples(q, _singer_points(q))
    for d in range(2, n):
        if np.gcd(d, n) != 1:
            continue
        inverse = pow(d, -1, n)
        # Columns (i, j, l) are collinear in the second block when (d i, d j, d l) is.
        if not any(tuple(sorted(inverse * x % n for x in triple)) in lines for triple in lines):
            return d
    return None


def raaphorst_moura_stevens(q: int, k: int) -> np.ndarray | None:
    """CA(2q^3 - 1; 3, k, q) for a prime power q and k <= q^2 + q + 1, or None.

    Raaphorst, S., Moura, L. & Stevens, B. (2014), "A construction for strength-3 covering
    arrays from linear feedback shift register sequences", Designs, Codes and Cryptography
    73(3), 949-968. Column i is the point p_i of PG(2, q) (Singer order, equivalently the
    i-th window of an m-sequence); a block whose rows are all nonzero coefficient vectors and
    whose cells are <coefficients, p_i> covers every nonzero 3-tuple on every non-collinear
    triple of columns. A second block uses the points p_{d i} for a multiplier d under which
    no triple stays collinear, and one all-zero row supplies (0, 0, 0): 2(q^3 - 1) + 1 rows.
    The multiplier is found by checking all collinear triples (returns None if none works).
    """
    n = q * q + q + 1
    if _core.prime_power(q) is None or k > n:
        raise ValueError("the Raaphorst-Moura-Stevens construction needs a prime power q and k <= q^2 + q + 1")
    d = _rms_multiplier(q)
    if d is None:
        return None
    points = _singer_points(q)
    nonzero = _vectors(q)[1:]  # row 0 of _vectors is (0, 0, 0)
    first = _linear_block(q, nonzero, points[:k])
    second = _linear_block(q, nonzero, points[(d * np.arange(k)) % n])
    return np.concatenate([np.zeros((1, k), dtype=np.int64), first, second])


def paley_binary(k: int) -> np.ndarray:
    """CA(12; 3, k, 2) for k <= 11: the cyclic shifts of the indicator of {0} and the
    quadratic residues mod 11, plus the all-zero row.

    Paley, R. E. A. C. (1933), "On orthogonal matrices", J. Math. Phys. 12, 311-320: the
    residue pattern gives a Hadamard 2-(11, 6, 3) design, in which any three points lie in
    a constant number of blocks of each intersection pattern, so every binary 3-tuple but
    (0, 0, 0) occurs among the shifts. 12 rows is optimal for 6 <= k <= 11 (CAN(3, 11, 2) = 12).
    """
    if k > 11:
        raise ValueError("the Paley array has at most 11 columns")
    residues = {(x * x) % 11 for x in range(11)}  # includes 0
    base = np.array([1 if i in residues else 0 for i in range(11)], dtype=np.int64)
    rows = np.array([np.roll(base, s) for s in range(11)] + [np.zeros(11, dtype=np.int64)])
    return rows[:, :k]


def double_columns(strength3: np.ndarray, pairwise: np.ndarray, v: int, k: int) -> np.ndarray:
    """CA(N + (v-1)M; 3, k, v) for k <= 2 k0 from A = CA(N; 3, k0, v) and B = CA(M; 2, k0, v).

    Chateauneuf, M. & Kreher, D. L. (2002), "On the state of strength-three covering
    arrays", J. Combin. Designs 10(4), 217-238 (for v = 2: Roux, G. (1987), "k-propriétés
    dans des tableaux de n colonnes", thesis, Université Paris 6). Rows [A | A] cover every
    triple whose three columns come from three different columns of A; for column j on both
    sides, the rows [B | B + s] (mod v) for s = 1..v-1 supply the values (a, a + s) together
    with any value of a third column, on either side, because B covers every pair.
    """
    k0 = strength3.shape[1]
    if pairwise.shape[1] != k0 or k > 2 * k0:
        raise ValueError("double_columns needs A and B on the same k0 >= k / 2 columns")
    top = np.concatenate([strength3, strength3], axis=1)
    shifted = [np.concatenate([pairwise, (pairwise + s) % v], axis=1) for s in range(1, v)]
    return np.concatenate([top, *shifted])[:, :k]


def uniform_candidates(v: int, k: int) -> list[tuple[np.ndarray, str]]:
    """Direct (non-recursive) strength-3 constructions over q >= v levels that fit k columns:
    (rows over q levels, method). The caller frees the levels >= v and trims columns."""
    out: list[tuple[np.ndarray, str]] = []
    q = max(v, 2)
    while _core.prime_power(q) is None:
        q += 1
    if k <= q + 1 and q >= 3:
        out.append((_core.bush_orthogonal_array(q, 3, k), f"orthogonal-array(q={q})"))
    elif k <= q + 2 and q % 2 == 0 and _core.prime_power(q)[0] == 2:
        out.append((hyperoval_orthogonal_array(q, k), f"bush-hyperoval(q={q})"))
    if v == 2 and k <= 11:
        out.append((paley_binary(k), "paley-hadamard"))
    if k <= q * q + q + 1 and k > q + 1:
        rms = raaphorst_moura_stevens(q, k)
        if rms is not None:
            out.append((rms, f"raaphorst-moura-stevens(q={q})"))
    return out



def cyclic_starter(v: int, n: int, m: int, rng: np.random.Generator, max_steps: int,
                   translate: bool = True, infinity: bool = False, noise: float = 0.1) -> np.ndarray | None:
    """CA(N; 3, n, v) invariant under the cyclic shift of the columns (and, with
    ``translate``, under adding a constant to every cell mod v), or None.

    The cyclic "cover starter" constructions of Chateauneuf, Colbourn & Kreher (1999),
    "Covering arrays of strength three", Designs, Codes and Cryptography 16(3), 235-242, and
    Meagher & Stevens (2005), "Group construction of covering arrays", J. Combin. Designs
    13(1), 70-77. Rows: the n cyclic shifts of m starter vectors (each also translated by
    1..v-1 when ``translate``), plus the v constant rows; N = m n v + v (or m n + v). A column
    triple (c, c + d1, c + d2) is covered iff every non-constant value triple (up to
    translation) occurs as (s[i], s[i + d1], s[i + d2]) for a starter s and position i (mod
    n), so only the C(n - 1, 2) difference patterns are checked, not C(n, 3) triples. With
    ``infinity`` an extra column n is fixed by the shift (Meagher & Stevens's point at
    infinity): every row of a starter's orbit holds the starter's entry n there, and the
    triples (infinity, c, c + d) add n - 1 patterns (n + 1 columns in all).

    The starters are found by a focused walk (as in :class:`_core.TupleSearch`): pick a random
    uncovered (pattern, class), take the best one-cell change that puts it into some window
    (a random one with probability ``noise``), for at most ``max_steps`` steps. Seeded by
    ``rng``; None when the budget ends first.
    """
    positions = np.arange(n)
    # windows[p, j] = the three starter indices that pattern p reads at shift j.
    windows = [np.stack([positions, (positions + a) % n, (positions + b) % n], axis=1)
               for a in range(1, n) for b in range(a + 1, n)]
    if infinity:
        windows += [np.stack([np.full(n, n), positions, (positions + d) % n], axis=1) for d in range(1, n)]
    if not windows or m < 1:
        return None
    windows = np.array(windows, dtype=np.int64)  # P x n x 3
    n_patterns = len(windows)
    classes = v * v if translate else v**3

    def code(a, b, c):
        if translate:
            return ((b - a) % v) * v + (c - a) % v
        return a * v * v + b * v + c

    offsets = np.arange(n_patterns, dtype=np.int64) * classes
    starters = rng.integers(0, v, size=(m, n + 1 if infinity else n))

    def window_ids(row):
        return offsets[:, None] + code(row[windows[..., 0]], row[windows[..., 1]], row[windows[..., 2]])

    count = np.zeros(n_patterns * classes, dtype=np.int64)
    for s in range(m):
        np.add.at(count, window_ids(starters[s]).ravel(), 1)
    constant = [code(x, x, x) for x in range(v)]
    # Constant triples come from the constant rows: never "uncovered".
    for c in set(constant):
        count[offsets + c] += 1 << 40
    slots = np.arange(3)
    values = np.arange(v)
    for _ in range(max_steps):
        open_ids = np.flatnonzero(count == 0)
        if len(open_ids) == 0:
            return _starter_rows(starters, n, v, translate)
        target = int(open_ids[rng.integers(len(open_ids))])
        p, wanted = divmod(target, classes)
        cells = windows[p]  # n x 3
        held = starters[:, cells]  # m x n x 3
        # Every one-cell change (starter, window, slot, value) that gives the wanted class.
        trial = np.broadcast_to(held[:, :, None, None, :], (m, n, 3, v, 3)).copy()
        trial[:, :, slots, :, slots] = values[None, None, None, :]
        hits = code(trial[..., 0], trial[..., 1], trial[..., 2]) == wanted
        s_idx, j_idx, k_idx, x_idx = np.nonzero(hits)
        moves = [(int(s), int(cells[j, k]), int(x)) for s, j, k, x in zip(s_idx, j_idx, k_idx, x_idx)
                 if starters[s, cells[j, k]] != x]
        if not moves:
            continue
        if len(moves) > 1 and rng.random() >= noise:
            deltas = [_starter_delta(starters[s], count, window_ids, i, x) for s, i, x in moves]
            best = min(deltas)
            choices = [c for c, d in enumerate(deltas) if d == best]
            s, i, x = moves[choices[int(rng.integers(len(choices)))]]
        else:
            s, i, x = moves[int(rng.integers(len(moves)))]
        np.subtract.at(count, window_ids(starters[s]).ravel(), 1)
        starters[s, i] = x
        np.add.at(count, window_ids(starters[s]).ravel(), 1)
    return None


def _starter_delta(row, count, window_ids, i, x):
    """Exact change in the number of uncovered (pattern, class) cells if row[i] became x."""
    old_ids = window_ids(row).ravel()
    changed = row.copy()
    changed[i] = x
    new_ids = window_ids(changed).ravel()
    after = count.copy()
    np.subtract.at(after, old_ids, 1)
    np.add.at(after, new_ids, 1)
    touched = np.concatenate([old_ids, new_ids])
    return int((after[touched] == 0).sum() - (count[touched] == 0).sum())


def _starter_rows(starters: np.ndarray, n: int, v: int, translate: bool) -> np.ndarray:
    """The orbit rows: shift r puts starter entry (c + r) mod n in column c (the point at
    infinity, column n if present, keeps its entry), each translated by 0..v-1 if asked;
    then the v constant rows."""
    m, width = starters.shape
    shifts = range(v) if translate else range(1)
    rows = []
    for s in range(m):
        for r in range(n):
            index = np.concatenate([(np.arange(n) + r) % n, np.arange(n, width)])
            rows += [(starters[s][index] + c) % v for c in shifts]
    rows += [np.full(width, x, dtype=np.int64) for x in range(v)]
    return np.array(rows, dtype=np.int64)


# --------------------------------------------------------------------------- affine-orbit starters


def affine_orbits(q: int) -> np.ndarray:
    """``orbit[x, y, z]``: the orbit of the value triple (x, y, z) under AGL(1, q), the maps
    s -> a s + b (a != 0) of GF(q) applied to all three entries at once; -1 for a constant
    triple.

    AGL(1, q) is sharply 2-transitive, so a triple with x != y has exactly one image
    (0, 1, r), and r = (z - x) / (y - x) names its orbit (q orbits); the triples x = y != z
    form one more orbit (id q). So a column triple needs q + 1 orbits besides the constants.
    """
    add, mul = _core.galois_field(q)
    negative = np.argmax(add == 0, axis=1)
    inverse = np.zeros(q, dtype=np.int64)
    inverse[1:] = np.argmax(mul[1:] == 1, axis=1)
    x, y, z = np.meshgrid(np.arange(q), np.arange(q), np.arange(q), indexing="ij")
    ratio = mul[add[z, negative[x]], inverse[add[y, negative[x]]]]
    return np.where(x != y, ratio, np.where(z != x, q, -1)).astype(np.int64)


class OrbitStarterSearch:
    """Tabu search for starter rows M (m x k over GF(q)) whose images under AGL(1, q), plus
    the q constant rows, form a CA(m q (q - 1) + q; 3, k, q): every column triple must meet
    each of the q + 1 non-constant orbits of :func:`affine_orbits` in some row of M.

    A step scores every one-cell change (row, column, value) at once -- the change in the
    number of (column triple, orbit) pairs no row meets -- and takes the best one not on the
    tabu list (a cell changed within the last ``tenure`` steps), unless it reaches a new best.
    The whole neighbourhood is affordable because M is small (m k q moves, each touching the
    C(k - 1, 2) triples of its column); the focused rule of :class:`_core.TupleSearch`, which
    looks only at moves that cover one chosen pair, measured worse here (5^10 with m = 10:
    6-16 pairs left after 10,000 steps, against 0-2 with the whole neighbourhood).
    """

    def __init__(self, rows: np.ndarray, q: int, rng: np.random.Generator):
        self.q = q
        self.rng = rng
        k = rows.shape[1]
        self.triples = np.array(list(itertools.combinations(range(k), 3)), dtype=np.intp)
        # Each triple owns q + 2 ids: its q + 1 orbits and a dummy for the constant triples,
        # whose count is huge (the constant rows hold them), so no lookup needs a branch.
        self.width = q + 2
        orbit = affine_orbits(q)
        orbit[orbit < 0] = q + 1
        self.orbit = orbit
        holds = self.triples[:, :, None] == np.arange(k)[None, None, :]  # triple x slot x column
        # Per column c: the triples holding it (as id bases), c's slot in each, and the
        # other two columns in order.
        by_column = np.stack([np.flatnonzero(holds[:, :, c].any(axis=1)) for c in range(k)])
        slot = np.stack([np.argmax(holds[by_column[c], :, c], axis=1) for c in range(k)])
        self.base = by_column * self.width
        others = ~(slot[:, :, None] == np.arange(3))
        self.others = self.triples[by_column][others].reshape(k, -1, 2)
        # orbit_with[slot, a, b, x] (flattened): the orbit when x sits in ``slot`` and a, b in
        # the other two, so a move is scored with one lookup and no trial rows.
        self.orbit_with = np.stack([orbit.transpose(1, 2, 0), orbit.transpose(0, 2, 1), orbit]).ravel()
        self.slot_base = slot * q**3
        self.set_rows(rows)

    def set_rows(self, rows: np.ndarray) -> None:
        self.rows = rows.copy()
        self.count = np.zeros(len(self.triples) * self.width, dtype=np.int64)
        np.add.at(self.count, self.all_ids(self.rows).ravel(), 1)
        self.count[self.width - 1 :: self.width] = 1 << 40

    def all_ids(self, rows: np.ndarray) -> np.ndarray:
        """(row, triple) -> the (triple, orbit) id it holds."""
        t = self.triples
        orbit = self.orbit[rows[:, t[:, 0]], rows[:, t[:, 1]], rows[:, t[:, 2]]]
        return np.arange(len(t)) * self.width + orbit

    def uncovered(self) -> int:
        return int((self.count == 0).sum())

    def unique_load(self) -> np.ndarray:
        """Per starter row, how many (triple, orbit) pairs only it meets."""
        return (self.count[self.all_ids(self.rows)] == 1).sum(axis=1)

    def _scores(self):
        """(delta, old ids, new ids): delta[r, c, x] is the change in uncovered pairs if cell
        (r, c) became x; old ids are m x k x S, new ids m x k x q x S (S = C(k - 1, 2))."""
        q, rows = self.q, self.rows
        pair = self.slot_base + rows[:, self.others[..., 0]] * (q * q) + rows[:, self.others[..., 1]] * q
        old = self.base + self.orbit_with[pair + rows[:, :, None]]
        new = self.base[:, None, :] + self.orbit_with[pair[:, :, None, :] + np.arange(q)[:, None]]
        changed = new != old[:, :, None, :]
        loss = ((self.count[old] == 1)[:, :, None, :] & changed).sum(axis=-1)
        gain = ((self.count[new] == 0) & changed).sum(axis=-1)
        return loss - gain, old, new

    def run(self, max_steps: int, tenure: int = 2, deadline: float | None = None) -> tuple[bool, int]:
        """Search until every pair is met (True), ``max_steps`` steps or ``deadline``
        (perf_counter seconds); returns (solved, steps taken). ``tenure`` 2 solved the most
        on 5^10 at m = 10 from random starters: 3 of 12 seeds in 5,000 steps (3: 1 of 12),
        2 of 4 in 8,000 (4 and 6: 1 of 4; 20 and 40: 0 of 2)."""
        q = self.q
        m, k = self.rows.shape
        tabu_until = np.full((m, k), -1)
        uncovered = self.uncovered()
        best = uncovered
        values = np.arange(q)[None, None, :]
        for step in range(max_steps):
            if uncovered == 0:
                return True, step
            if deadline is not None and step % 64 == 0 and time.perf_counter() > deadline:
                return False, step
            delta, old, new = self._scores()
            allowed = (values != self.rows[:, :, None]) & (
                (tabu_until < step)[:, :, None] | (uncovered + delta < best)
            )
            scores = np.where(allowed, delta, 1 << 30).ravel()
            choices = np.flatnonzero(scores == scores.min())
            r, rest = divmod(int(choices[self.rng.integers(len(choices))]), k * q)
            c, x = divmod(rest, q)
            np.subtract.at(self.count, old[r, c], 1)
            np.add.at(self.count, new[r, c, x], 1)
            self.rows[r, c] = x
            uncovered += int(delta[r, c, x])
            tabu_until[r, c] = step + tenure
            best = min(best, uncovered)
        return uncovered == 0, max_steps


def develop_affine(starters: np.ndarray, q: int) -> np.ndarray:
    """The rows a s + b (a != 0, b in GF(q)) of every starter s, then the q constant rows."""
    add, mul = _core.galois_field(q)
    images = [add[mul[a][starters], b] for a in range(1, q) for b in range(q)]
    constants = np.repeat(np.arange(q, dtype=np.int64)[:, None], starters.shape[1], axis=1)
    return np.concatenate(images + [constants])


def affine_orbit_array(q: int, k: int, rng: np.random.Generator, max_steps: int, beat: int,
                       deadline: float | None = None, first_allowance: int = 1000) -> np.ndarray | None:
    """CA(m q (q - 1) + q; 3, k, q) with fewer than ``beat`` rows from AGL(1, q)-orbit
    starters, or None (q a prime power).

    The group construction of Chateauneuf, Colbourn & Kreher (1999), "Covering arrays of
    strength three", Des. Codes Cryptogr. 16(3), 235-242, with the symbol group AGL(1, q)
    (Chateauneuf & Kreher 2002, J. Combin. Des. 10(4), 217-238, give CA(185; 3, 10, 5) with
    m = 9 this way; the 1999 paper's CA(88; 3, 8, 4) uses A4 = AGL(1, 4)). The starters
    are searched, not stored: :class:`OrbitStarterSearch` first solves m0 = one starter more
    than the largest m that beats ``beat`` (the extra row makes the first solve easy), then
    deletes the starter meeting the fewest pairs alone and repairs, as
    :func:`_core.shrink_by_search` does with rows (allowance doubling after a failure). All
    within ``max_steps`` steps in total (seeded: the same rng gives the same array) or until
    ``deadline`` (perf_counter seconds). There is no cap on failures in a row: measured on
    5^10 (seeds 0-7, 25,000 steps), stopping after 4 failures kept 4 of the 6 improvements.
    """
    per_starter = q * (q - 1)
    fits = (beat - 1 - q) // per_starter  # the most starters that still beat ``beat``
    if fits < 1:
        return None
    search = OrbitStarterSearch(rng.integers(0, q, size=(fits + 1, k)), q, rng)
    solved, spent = search.run(max_steps, deadline=deadline)
    if not solved:
        return None
    best = search.rows.copy()
    failures, allowance = 0, first_allowance
    while spent < max_steps and len(best) > 1:
        if deadline is not None and time.perf_counter() > deadline:
            break
        load = search.unique_load() + rng.random(len(best)) * (1.0 + failures)
        search.set_rows(np.delete(best, int(np.argmin(load)), axis=0))
        solved, steps = search.run(int(min(allowance, max_steps - spent)), deadline=deadline)
        spent += max(1, steps)
        if solved:
            best, failures = search.rows.copy(), 0
        else:
            failures += 1
            allowance *= 2
            search.set_rows(best)
    rows = develop_affine(best, q)
    return rows if len(rows) < beat else None
