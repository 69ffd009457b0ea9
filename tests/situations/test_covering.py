"""Covering arrays, checked against an independent brute-force coverage checker."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolkit as tk

# ----------------------------------------------------------------------------- reference


def brute_force_missing(rows, factors, t, valid=None):
    """Every t-tuple (as a frozenset of (factor, value)) no row holds.

    ``valid(full_row_dict) -> bool`` marks the allowed full rows; a tuple is then planned only
    if some allowed row of the full product holds it (plain enumeration, no shared code).
    """
    names = list(factors)
    held = set()
    for row in rows:
        for combo in itertools.combinations(names, t):
            if all(n in row for n in combo):  # a missing key holds no tuple with that factor
                held.add(frozenset((n, row[n]) for n in combo))
    planned = set()
    if valid is None:
        for combo in itertools.combinations(names, t):
            for values in itertools.product(*(factors[n] for n in combo)):
                planned.add(frozenset(zip(combo, values)))
    else:
        for values in itertools.product(*(factors[n] for n in names)):
            full = dict(zip(names, values))
            if valid(full):
                for combo in itertools.combinations(names, t):
                    planned.add(frozenset((n, full[n]) for n in combo))
    return planned - held, planned


def named(levels):
    return {f"x{j}": [f"v{j}_{i}" for i in range(v)] for j, v in enumerate(levels)}


# ----------------------------------------------------------------------------- coverage


@settings(max_examples=40)
@given(
    levels=st.lists(st.integers(1, 6), min_size=3, max_size=8),
    t=st.sampled_from([2, 3]),
    seed=st.integers(0, 2**31 - 1),
)
def test_fast_arrays_cover_every_tuple(levels, t, seed):
    factors = named(levels)
    array = tk.covering_array(factors, t, seed=seed, effort="fast")
    missing, planned = brute_force_missing(array.to_dicts(), factors, t)
    assert not missing
    assert array.size >= array.lower_bound
    assert array.size <= math.prod(levels)
    assert array.rows.shape == (array.size, len(levels))


@settings(max_examples=12)
@given(
    levels=st.lists(st.integers(2, 5), min_size=3, max_size=7),
    t=st.sampled_from([2, 3]),
    seed=st.integers(0, 2**31 - 1),
)
def test_improved_arrays_cover_every_tuple(levels, t, seed):
    factors = named(levels)
    array = tk.covering_array(factors, t, seed=seed)
    missing, _ = brute_force_missing(array.to_dicts(), factors, t)
    assert not missing
    fast = tk.covering_array(factors, t, seed=seed, effort="fast")
    assert array.size <= fast.size


def test_best_effort_respects_its_time_budget_and_covers():
    import time

    factors = named([4] * 8)
    started = time.perf_counter()
    array = tk.covering_array(factors, effort="best", time_budget=0.5, seed=3)
    assert time.perf_counter() - started < 3.0
    assert not brute_force_missing(array.to_dicts(), factors, 2)[0]


def test_best_effort_time_budget_bounds_strength_three():
    # 6^8 at t = 3: the time budget bounds the search and annealing, and more time gives a
    # smaller array (measured: 342 rows after 0.5 s, 305 after 5 s; the construction itself
    # takes ~0.7 s). Both arrays complete.
    import time

    factors = named([6] * 8)
    sizes, elapsed = [], []
    for budget in (0.5, 5.0):
        started = time.perf_counter()
        array = tk.covering_array(factors, 3, effort="best", time_budget=budget, seed=0)
        elapsed.append(time.perf_counter() - started)
        sizes.append(array.size)
        assert not brute_force_missing(array.to_dicts(), factors, 3)[0]
    assert elapsed[0] < 0.5 + 3.0
    assert 5.0 - 0.5 < elapsed[1] < 5.0 + 3.0
    assert sizes[1] < sizes[0]


def test_strength_one_and_four():
    one = tk.covering_array({"a": [1, 2, 3], "b": ["x", "y"]}, strength=1)
    assert one.size == 3 and one.lower_bound == 3
    factors = named([2, 3, 2, 2, 3])
    four = tk.covering_array(factors, strength=4)
    assert not brute_force_missing(four.to_dicts(), factors, 4)[0]
    assert four.size >= 2 * 3 * 3 * 2


def test_same_seed_same_array_and_generators_accepted():
    factors = named([3, 4, 2, 5, 3, 3])
    a = tk.covering_array(factors, seed=11)
    b = tk.covering_array(factors, seed=11)
    assert np.array_equal(a.rows, b.rows)
    c = tk.covering_array(factors, seed=np.random.default_rng(5))
    assert c.seed is None and not brute_force_missing(c.to_dicts(), factors, 2)[0]


# ----------------------------------------------------------------------------- exact sizes


@pytest.mark.parametrize(
    "levels, expected",
    [([2] * 10, 6), ([2] * 100, 10), ([3] * 4, 9), ([5] * 6, 25), ([2] * 4, 5), ([2] * 16, 8), ([7] * 8, 49),
     ([4] * 5, 16), ([8] * 9, 64), ([9] * 10, 81), ([7, 7, 6, 5, 3], 49)],
)
def test_exact_constructions_reach_the_optimum(levels, expected):
    # Optimal values: CAN(2,k,2) from Kleitman & Spencer (1973) (5 for k=4, 6 for k<=10,
    # 8 for 16<=k<=35, 10 for 57<=k<=126); v^2 for an orthogonal array (prime power v,
    # k<=v+1), which meets the v1*v2 bound, also with smaller factors padded in.
    factors = named(levels)
    array = tk.covering_array(factors, effort="fast")
    assert array.size == expected
    assert array.lower_bound == expected
    assert not brute_force_missing(array.to_dicts(), factors, 2)[0]


@pytest.mark.parametrize("levels, expected", [([5] * 6, 125), ([4] * 5, 64)])
def test_strength_three_orthogonal_array(levels, expected):
    factors = named(levels)
    array = tk.covering_array(factors, 3, effort="fast")
    assert array.size == expected == array.lower_bound
    assert not brute_force_missing(array.to_dicts(), factors, 3)[0]


def test_agent_axes_reach_the_product_lower_bound():
    axes = {
        "tool": ["get_order", "cancel_order", "unrelated"],
        "stance": [f"s{i}" for i in range(10)],
        "world_state": [f"w{i}" for i in range(6)],
        "tool_condition": [f"c{i}" for i in range(5)],
        "history": [f"h{i}" for i in range(5)],
    }
    array = tk.covering_array(axes)
    assert array.lower_bound == 60
    assert array.size <= 62  # the replaced engine's greedy gave 62 on these axes
    assert not brute_force_missing(array.to_dicts(), axes, 2)[0]


# ----------------------------------------------------------------------------- constraints


@settings(max_examples=20)
@given(
    levels=st.lists(st.integers(2, 4), min_size=3, max_size=5),
    forbidden_seed=st.integers(0, 10_000),
    n_forbidden=st.integers(1, 5),
    t=st.sampled_from([2, 3]),
)
def test_constraints_are_never_violated_and_feasible_tuples_covered(levels, forbidden_seed, n_forbidden, t):
    factors = named(levels)
    names = list(factors)
    rng = np.random.default_rng(forbidden_seed)
    forbidden = []
    for _ in range(n_forbidden):
        a, b = rng.choice(len(names), 2, replace=False)
        forbidden.append({names[a]: factors[names[a]][rng.integers(levels[a])],
                          names[b]: factors[names[b]][rng.integers(levels[b])]})

    def valid(row):
        return not any(all(row[n] == v for n, v in f.items()) for f in forbidden)

    array = tk.covering_array(factors, t, constraints=forbidden, seed=forbidden_seed)
    rows = array.to_dicts()
    assert all(valid(r) for r in rows)
    missing, planned = brute_force_missing(rows, factors, t, valid)
    assert not missing
    all_tuples = brute_force_missing([], factors, t)[1]
    assert {frozenset(d.items()) for d in array.infeasible} == all_tuples - planned
    report = tk.coverage(rows, factors, t, constraints=forbidden)
    assert report.planned == len(planned) and report.covered == len(planned)


def test_predicate_sees_partial_rows_and_is_respected():
    axes = {
        "tool": ["read", "delete", "none"],
        "world_state": ["exists", "missing", "duplicate"],
        "tool_condition": ["success", "timeout", "denied"],
        "stance": ["ordinary", "adversarial"],
    }
    seen_partial = []

    def allowed(row):
        seen_partial.append(len(row))
        # "none" calls no tool, so a tool condition other than success is meaningless.
        return not (row.get("tool") == "none" and row.get("tool_condition") not in (None, "success"))

    array = tk.covering_array(axes, constraints=[allowed, {"tool": "delete", "world_state": "missing"}])
    rows = array.to_dicts()
    assert min(seen_partial) < len(axes)
    for row in rows:
        assert allowed(dict(row))
        assert not (row["tool"] == "delete" and row["world_state"] == "missing")

    def valid(row):
        return allowed(row) and not (row["tool"] == "delete" and row["world_state"] == "missing")

    assert not brute_force_missing(rows, axes, 2, valid)[0]
    infeasible = {frozenset(d.items()) for d in array.infeasible}
    assert frozenset({("tool", "none"), ("tool_condition", "timeout")}) in infeasible
    assert frozenset({("tool", "delete"), ("world_state", "missing")}) in infeasible


# ----------------------------------------------------------------------------- required rows


def test_required_rows_come_first_and_keep_their_cells():
    factors = named([3, 3, 4, 2, 3])
    required = [
        {"x0": "v0_2", "x1": "v1_0", "x2": "v2_3", "x3": "v3_1", "x4": "v4_0"},
        {"x2": "v2_1"},
        {"x0": "v0_1", "x4": "v4_2"},
    ]
    array = tk.covering_array(factors, required=required, seed=4)
    rows = array.to_dicts()
    assert array.n_required == 3
    for pinned, row in zip(required, rows):
        assert all(row[k] == v for k, v in pinned.items())
    assert not brute_force_missing(rows, factors, 2)[0]


def test_required_row_violating_a_constraint_is_refused():
    with pytest.raises(tk.ConfigError, match=r"required\[0\]"):
        tk.covering_array({"a": [1, 2], "b": [1, 2]}, constraints={"a": 1, "b": 2}, required=[{"a": 1, "b": 2}])


# ----------------------------------------------------------------------------- coverage()


def test_coverage_of_value_dicts_matches_brute_force():
    factors = {"tool": ["a", "b", "c"], "stance": ["calm", "rude"], "fault": ["none", "timeout"]}
    rng = np.random.default_rng(0)
    rows = [{n: vals[rng.integers(len(vals))] for n, vals in factors.items()} for _ in range(4)]
    rows.append({"tool": "a", "stance": "calm", "extra": 1})  # a missing key covers nothing of it
    report = tk.coverage(rows, factors)
    missing, planned = brute_force_missing(rows, factors, 2)
    assert report.planned == len(planned) == 3 * 2 + 3 * 2 + 2 * 2
    assert report.covered == len(planned) - len(missing)
    assert {frozenset(m.items()) for m in report.missing} == missing
    assert report.fraction == round(report.covered / report.planned, 4)
    pair = next(p for p in report.per_factors if p["factors"] == ["tool", "stance"])
    assert pair["planned"] == 6


def test_coverage_reads_scenario_dimensions_and_infers_factors():
    rows = [
        {"task_id": 1, "scenario_dimensions": {"tool": "a", "stance": "calm"}},
        {"task_id": 2, "scenario_dimensions": {"tool": "b", "stance": "rude"}},
    ]
    report = tk.coverage(rows)
    assert (report.planned, report.covered) == (4, 2)
    assert "2/4" in str(report)
    unknown = tk.coverage(rows, {"tool": ["a"], "stance": ["calm", "rude"]})
    assert unknown.n_unknown_cells == 1 and unknown.note


def test_coverage_of_a_covering_array_and_integer_matrix():
    array = tk.covering_array([3, 3, 3, 3])
    report = tk.coverage(array)
    assert report.complete and report.fraction == 1.0 and report.planned == 6 * 9
    partial = tk.coverage(np.asarray(array.rows)[:4], [3, 3, 3, 3])
    assert partial.covered == 4 * 6 and not partial.complete
    assert tk.coverage(array, strength=3).fraction < 1.0


# ----------------------------------------------------------------------------- extension


def test_extend_array_keeps_old_cells_and_covers_new_values_and_factors():
    old_factors = {"tool": ["a", "b"], "stance": ["s1", "s2", "s3"], "world": ["w1", "w2"]}
    old = tk.covering_array(old_factors, seed=2)
    new_factors = {"tool": ["a", "b", "c"], "stance": ["s1", "s2", "s3"], "world": ["w1", "w2"],
                   "history": ["fresh", "retry"]}
    grown = tk.extend_array(old, new_factors)
    rows = grown.array.to_dicts()
    assert grown.n_old == old.size
    for before, after in zip(old.to_dicts(), rows[: old.size]):
        assert all(after[k] == v for k, v in before.items())
    assert grown.filled["history"] == [r["history"] for r in rows[: old.size]]
    assert grown.new_rows == rows[old.size:]
    assert not brute_force_missing(rows, new_factors, 2)[0]
    again = tk.extend_array(old, new_factors)
    assert np.array_equal(again.array.rows, grown.array.rows)


def test_extend_array_refuses_removed_values_and_old_rows_breaking_new_constraints():
    old = tk.covering_array({"a": [1, 2], "b": [1, 2]})
    with pytest.raises(tk.ConfigError, match="old row .* violates the new constraints"):
        tk.extend_array(old, {"a": [1, 2], "b": [1, 2]}, constraints={"a": 1, "b": 2})
    with pytest.raises(tk.ConfigError, match="old value 2"):
        tk.extend_array(old, {"a": [1], "b": [1, 2]})
    with pytest.raises(tk.ConfigError, match="old factor 'b'"):
        tk.extend_array(old, {"a": [1, 2]})


# ----------------------------------------------------------------------------- results


def test_result_object_surfaces():
    array = tk.covering_array({"os": ["linux", "mac"], "py": ["3.11", "3.12"], "db": ["pg", "sqlite"]})
    assert array.size == len(array) == 4
    assert array[0] == next(iter(array))
    frame = array.to_pandas()
    assert list(frame.columns) == ["os", "py", "db"] and len(frame) == 4
    assert "lower bound 4" in str(array)
    assert array.to_dict()["size"] == 4
    assert not array.rows.flags.writeable
    assert "<table" in array._repr_html_()
    assert tk.coverage(array).to_pandas().shape[0] == 3


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: tk.covering_array({"a": [], "b": [1]}), "factor 'a' has no values"),
        (lambda: tk.covering_array({"a": [1, 1], "b": [1]}), "lists the value 1 twice"),
        (lambda: tk.covering_array({"a": [1], "b": [1]}, strength=3), "larger than the number of factors"),
        (lambda: tk.covering_array({"a": [1], "b": [1]}, strength=0), "below 1"),
        (lambda: tk.covering_array({}), "empty"),
        (lambda: tk.covering_array({"tool": [1, 2], "stance": [1]}, constraints=[{"toool": 1}]),
         "unknown factor 'toool'; did you mean 'tool'"),
        (lambda: tk.covering_array({"tool": ["delete", "read"], "s": [1]}, constraints=[{"tool": "delet"}]),
         "did you mean 'delete'"),
        (lambda: tk.covering_array({"tool": [1, 2], "s": [1]}, required=[{"stanse": 1}]), "required\\[0\\]"),
        (lambda: tk.covering_array([2, 0]), "at least 1 level"),
        (lambda: tk.covering_array([2, 2], effort="fastest"), "unknown effort 'fastest'; did you mean 'fast'"),
    ],
)
def test_bad_input_names_the_problem(call, pattern):
    with pytest.raises(tk.ConfigError, match=pattern) as info:
        call()
    assert isinstance(info.value, ValueError) and isinstance(info.value, tk.ToolkitError)


# ----------------------------------------------------------------------------- curves, plots


def test_coverage_curve_matches_brute_force_on_every_prefix():
    factors = named([3, 2, 4, 3])
    array = tk.covering_array(factors, seed=1)
    rows = array.to_dicts()
    curve = tk.coverage_curve(array)
    total = len(brute_force_missing([], factors, 2)[1])
    for n in range(1, len(rows) + 1):
        missing, _ = brute_force_missing(rows[:n], factors, 2)
        assert curve.fraction[n - 1] == pytest.approx((total - len(missing)) / total)
    assert curve.rows_for(1.0) == array.size
    # Greedy row order: the first row covers one pair of every factor pair (6 pairs).
    assert curve.fraction[0] == pytest.approx(6 / total)


def test_random_design_curve_agrees_with_its_closed_form_and_a_hand_formula():
    curve = tk.random_design_curve([4, 5], 30, repeats=400, seed=7)
    # Two factors: a single pair per row; P(a given pair is covered by n rows) = 1-(19/20)^n.
    hand = [1 - (19 / 20) ** n for n in range(1, 31)]
    assert curve.expected == pytest.approx(hand)
    assert curve.fraction[-1] == pytest.approx(hand[-1], abs=0.02)
    assert all(lo - 1e-12 <= f <= hi + 1e-12 for lo, f, hi in zip(curve.low, curve.fraction, curve.high))
    with pytest.raises(tk.ConfigError, match="n_rows"):
        tk.random_design_curve([2, 2], 0)


def test_coverage_figures_are_figures():
    from matplotlib.figure import Figure

    from toolkit import plots

    factors = named([3, 3, 2])
    array = tk.covering_array(factors)
    assert isinstance(plots.coverage_heatmap(array), Figure)
    assert isinstance(plots.coverage_heatmap(array.to_dicts()[:3], factors), Figure)
    curves = [tk.coverage_curve(array), tk.random_design_curve(factors, 9, repeats=5)]
    assert isinstance(plots.coverage_curves(*curves), Figure)
    assert isinstance(plots.design_sizes([{"config": "3.3.2", "covering array": 9, "exhaustive": 18}]), Figure)
    with pytest.raises(tk.ConfigError, match="strength 3"):
        plots.coverage_heatmap(tk.coverage(array, strength=3))


@settings(max_examples=15)
@given(
    levels=st.lists(st.integers(2, 4), min_size=3, max_size=5),
    data_seed=st.integers(0, 10_000),
    t=st.sampled_from([2, 3]),
)
def test_required_rows_with_constraints_property(levels, data_seed, t):
    factors = named(levels)
    names = list(factors)
    rng = np.random.default_rng(data_seed)
    a, b = rng.choice(len(names), 2, replace=False)
    forbidden = {names[a]: factors[names[a]][0], names[b]: factors[names[b]][0]}

    def valid(row):
        return not all(row[n] == v for n, v in forbidden.items())

    required = []
    for _ in range(int(rng.integers(1, 4))):
        row = {n: factors[n][int(rng.integers(len(factors[n])))] for n in names if rng.random() < 0.5}
        if not all(row.get(n) == v for n, v in forbidden.items()):
            required.append(row)
    array = tk.covering_array(factors, t, constraints=[forbidden], required=required, seed=data_seed)
    rows = array.to_dicts()
    for given_row, row in zip(required, rows):
        assert all(row[k] == v for k, v in given_row.items())
    assert all(valid(r) for r in rows)
    assert not brute_force_missing(rows, factors, t, valid)[0]


def test_lower_bounds_from_orthogonal_array_non_existence():
    # No pair of orthogonal Latin squares of order 6 (Tarry 1900): CAN(2,4,6) = 37 > 36.
    array = tk.covering_array([6] * 4, seed=0)
    assert array.lower_bound == 37 and array.size == 37
    assert tk.coverage(array).complete
    # Bush: more than v+1 columns of v levels need more than v^2 rows (3^5 -> at least 10; CAN = 11).
    assert tk.covering_array([3] * 5, effort="fast").lower_bound == 10
    assert tk.covering_array([3] * 4, effort="fast").lower_bound == 9


@pytest.mark.parametrize("levels, t", [([40, 6, 4, 3, 3], 2), ([4, 4, 3, 3, 2, 2], 3)])
def test_forbidden_combinations_alone_answer_as_the_full_search(levels, t):
    # With only forbidden combinations the oracle asks its questions of the factors they name
    # (a speed-up). An always-true predicate switches that off, so the full depth-first
    # search over every factor answers instead: the arrays must be the same, row for row.
    forbidden = [{"f1": 0, "f3": 1}, {"f2": 2, "f4": 0, "f1": 1}]
    fast = tk.covering_array(levels, t, constraints=forbidden, seed=4)
    full = tk.covering_array(levels, t, constraints=[*forbidden, lambda row: True], seed=4)
    assert np.array_equal(fast.rows, full.rows) and fast.infeasible == full.infeasible
    rows = fast.to_dicts()
    assert not any(all(row[n] == v for n, v in combo.items()) for combo in forbidden for row in rows)


def test_prime_fields_are_arithmetic_mod_p():
    # Reference: the definition of GF(p) for a prime p (addition and multiplication mod p).
    from toolkit.situations import _covering_core

    for p in (2, 3, 5, 7, 11, 13, 1009):
        add, mul = _covering_core.galois_field(p)
        x = np.arange(p)
        assert np.array_equal(add, (x[:, None] + x[None, :]) % p)
        assert np.array_equal(mul, (x[:, None] * x[None, :]) % p)
    # A degree-1 polynomial array (t = 1) is one constant row per value.
    oa = _covering_core.bush_orthogonal_array(7, 1, 5)
    assert np.array_equal(oa, np.repeat(np.arange(7)[:, None], 5, axis=1))
