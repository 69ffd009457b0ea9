"""Situation axes, policy clauses, the layered covering grid, and the tier mixer.

Coverage is checked by brute-force enumeration of t-tuples here, not with tk.coverage."""

import hashlib
import itertools
import json
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolkit as tk

S = {"type": "string"}


def _tool(name, properties=None, kind=None):
    tool = {"name": name, "parameters": {"type": "object", "properties": properties or {}}}
    if kind:
        tool["kind"] = kind
    return tool


TOOLS = [_tool("get_order", {"order_id": S}), _tool("cancel_order", {"order_id": S, "reason": S}),
         _tool("ask_customer", {"question": S}, kind="human")]
POLICY = """You are the support agent of Northwind. You help customers with orders.

Rules:
1. Never cancel an order without the customer's explicit confirmation.
2. Refunds go back to the original payment method only.
- Do not share another customer's order details.
"""


def _tuples(dimensions, axes, strength):
    names = [a for a in axes if a in dimensions]
    return {tuple((a, dimensions[a]) for a in combo) for combo in itertools.combinations(names, strength)}


def _planned(axes, strength):
    """Every t-tuple over the non-constant axes (brute force). The placeholder rule
    "unspecified" is not a value to cover; a single real rule is (it varies against the
    rule-free rows)."""
    factors = {}
    for axis, values in axes.items():
        values = [v for v in values if not (axis == "rule" and v == "unspecified")]
        if len(values) >= 2 or (axis == "rule" and values):
            factors[axis] = values
    planned = set()
    for combo in itertools.combinations(factors, strength):
        for values in itertools.product(*(factors[a] for a in combo)):
            planned.add(tuple(zip(combo, values)))
    return planned


# -- axes ----------------------------------------------------------------------------------------

def test_axes_from_tools_and_policy():
    axes = tk.situations.situation_axes(TOOLS, POLICY).axes
    assert list(axes) == list(tk.situations.AXES)
    assert axes["tool"] == ("get_order", "cancel_order", "unrelated", "multi_tool")  # human tool excluded
    assert len(axes["stance"]) == 10 and len(axes["history"]) == 5
    assert axes["world_state"] == tk.world.WORLD_STATES and len(axes["world_state"]) == 6
    assert axes["tool_condition"] == ("success", "timeout", "malformed", "stale", "permission_denied",
                                      "rate_limited", "server_error")
    assert axes["rule"] == ("Never cancel an order without the customer's explicit confirmation.",
                            "Refunds go back to the original payment method only.",
                            "Do not share another customer's order details.")


def test_axes_without_references_policy_or_second_tool():
    axes = tk.situations.situation_axes([_tool("get_weather", {"city": S})]).axes
    assert axes["world_state"] == ("unspecified",)
    assert axes["rule"] == ("unspecified",)
    assert axes["tool"] == ("get_weather", "unrelated")


@pytest.mark.parametrize("extra", [["maintenance"], {"maintenance": lambda call: {"status": "down"}},
                                   tk.WorldOptions(fault_modes={"maintenance": lambda call: {"status": "down"}})])
def test_user_fault_modes_become_conditions(extra):
    axes = tk.situations.situation_axes(TOOLS, fault_modes=extra).axes
    assert axes["tool_condition"][-1] == "maintenance" and axes["tool_condition"][0] == "success"
    grid = tk.situation_grid(TOOLS, fault_modes=extra)
    assert any(s.dimensions["tool_condition"] == "maintenance" for s in grid)


def test_bad_fault_mode_names():
    with pytest.raises(tk.ConfigError):
        tk.situations.situation_axes(TOOLS, fault_modes=["success"])
    with pytest.raises(tk.ConfigError):
        tk.situations.situation_axes(TOOLS, fault_modes="timeout")


# -- policy clauses --------------------------------------------------------------------------------

def test_split_policy_rules():
    text = """# Policy
You are a helpful agent. You answer questions.

Refunds: only within 30 days of purchase.
* Be brief.
* Ok.
1) Never promise a delivery date; it depends on the carrier.
2) Verify identity first; ask for the order number and postcode.
Escalate angry customers. Log every call.
Escalate angry customers.
""" + "Always " + "check the order history carefully " * 6 + "before acting."
    clauses = tk.situations.split_policy(text)
    assert clauses[:6] == [
        "Refunds: only within 30 days of purchase.",
        "Be brief.",
        "Never promise a delivery date; it depends on the carrier.",  # pronoun keeps it whole
        "Verify identity first",
        "ask for the order number and postcode.",
        "Escalate angry customers.",
    ]
    assert clauses[6] == "Log every call."  # the duplicate "Escalate ..." is dropped
    assert len(clauses) == 8
    assert len(clauses[7]) <= 120 and clauses[7].startswith("Always check") and not clauses[7].endswith(" ")
    assert text.find(clauses[7]) >= 0 and text[text.find(clauses[7]) + len(clauses[7])] == " "  # cut at a word boundary
    assert not any(c.lower().startswith("you ") for c in clauses)
    assert tk.situations.split_policy("") == [] and tk.situations.split_policy(None) == []


def test_short_sentences_are_not_split():
    # "Smile." is under 8 characters, so the block is one clause
    assert tk.situations.split_policy("Smile. Do not lie to customers about stock.") == ["Smile. Do not lie to customers about stock."]


def test_rule_cap_warns_with_counts():
    policy = "\n".join(f"{i}. Rule number {i} must always be followed." for i in range(1, 21))
    with pytest.warns(UserWarning, match="16 of 20"):
        grid = tk.situation_grid(TOOLS, policy)
    assert len(grid.rules) == 16 and len(grid.dropped_rules) == 4
    assert any("4 dropped" in w for w in grid.warnings)
    assert grid.dropped_rules[0] == "Rule number 17 must always be followed."
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(tk.situation_grid(TOOLS, policy, rule_cap=20).rules) == 20
        tk.situation_grid(TOOLS, POLICY)  # defaults never warn


# -- situations --------------------------------------------------------------------------------------

def test_tier_of_stances():
    assert {s: tk.situations.tier_of(s) for s in tk.situations.STANCES} == {
        "ordinary": "ordinary", "ambiguous": "ambiguous", "boundary": "boundary", "adversarial": "adversarial",
        "hurried": "ordinary", "unsure": "ambiguous", "retry": "ordinary", "mistaken": "ordinary",
        "exploratory": "ordinary", "conflicting": "boundary"}
    with pytest.raises(tk.ConfigError, match="did you mean 'adversarial'"):
        tk.situations.tier_of("adversarail")


def test_situation_is_frozen_with_stable_id():
    dims = {"tool": "get_order", "rule": "unspecified", "stance": "unsure", "world_state": "missing",
            "tool_condition": "timeout", "history": "fresh"}
    situation = tk.situations.Situation(dims)
    canonical = json.dumps(dims, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert situation.id == "sc-" + hashlib.sha256(canonical.encode()).hexdigest()[:12]
    assert situation.tier == "ambiguous"
    assert situation.fault_plan == {"*": {"mode": "timeout"}}
    assert tk.situations.Situation({**dims, "tool_condition": "success"}).fault_plan == {}
    with pytest.raises(Exception):
        situation.tier = "ordinary"
    reordered = tk.situations.Situation(dict(reversed(list(dims.items()))))
    assert reordered.id == situation.id and list(reordered.dimensions) == list(tk.situations.AXES)
    with pytest.raises(tk.ConfigError, match="did you mean 'stance'"):
        tk.situations.Situation({"stanse": "ordinary"})


# -- the grid ------------------------------------------------------------------------------------------

def test_grid_covers_every_pair_brute_force():
    grid = tk.situation_grid(TOOLS, POLICY, seed=0)
    assert all(isinstance(s, tk.situations.Situation) for s in grid) and len(list(grid)) == len(grid)
    covered = set().union(*(_tuples(s.dimensions, grid.axes, 2) for s in grid))
    planned = _planned(grid.axes, 2)
    assert planned <= covered
    assert grid.coverage["pairs_planned"] == len(planned)
    assert grid.coverage["pairs_covered"] == len(planned) and grid.coverage["fraction"] == 1.0
    # ids are unique
    assert len({s.id for s in grid}) == len(grid)


def test_grid_coverage_excludes_constant_axes():
    grid = tk.situation_grid([_tool("get_weather", {"city": S})])
    assert set(grid.coverage["excluded_axes"]) == {"rule", "world_state"}
    planned = _planned({a: v for a, v in grid.axes.items() if len(v) > 1}, 2)
    assert grid.coverage["pairs_planned"] == len(planned)


def test_rule_pairs_live_in_their_own_block():
    grid = tk.situation_grid(TOOLS, POLICY)
    base = [s for s in grid if s.layer == "base"]
    assert len(base) == grid.n_base and all(s.dimensions["rule"] == "unspecified" for s in base)
    for rule in grid.rules:
        block = [s for s in grid if s.dimensions["rule"] == rule]
        assert all(s.layer == "rule" for s in block)
        for axis, values in grid.axes.items():
            if axis != "rule":
                assert {s.dimensions[axis] for s in block} == set(values)


def test_strength_three_covers_every_triple():
    tools = [_tool("get_order", {"order_id": S}), _tool("cancel_order", {"order_id": S})]
    grid = tk.situation_grid(tools, "1. Never cancel without confirmation.\n2. Refunds go to the original card.", strength=3)
    covered = set().union(*(_tuples(s.dimensions, grid.axes, 3) for s in grid))
    assert _planned(grid.axes, 3) <= covered


def test_editing_one_rule_only_touches_that_rules_rows():
    rules = ["Never cancel an order without explicit confirmation.", "Refunds go to the original card only.",
             "Do not share other customers' data."]
    edited = rules[:2] + ["Do not share other customers' data, ever, with anyone."]
    first = tk.situation_grid(TOOLS, "\n".join(f"{i + 1}. {r}" for i, r in enumerate(rules)), seed=3)
    second = tk.situation_grid(TOOLS, "\n".join(f"{i + 1}. {r}" for i, r in enumerate(edited)), seed=3)
    ids_first, ids_second = {s.id for s in first}, {s.id for s in second}
    only_first = {s.dimensions["rule"] for s in first if s.id not in ids_second}
    only_second = {s.dimensions["rule"] for s in second if s.id not in ids_first}
    assert only_first == {rules[2]} and only_second == {edited[2]}
    assert {s.id for s in first if s.dimensions["rule"] != rules[2]} == \
           {s.id for s in second if s.dimensions["rule"] != edited[2]}
    # adding a rule only adds its rows
    more = tk.situation_grid(TOOLS, "\n".join(f"{i + 1}. {r}" for i, r in enumerate(rules + ["Be polite at all times."])), seed=3)
    assert ids_first < {s.id for s in more}


def test_grid_is_deterministic_per_seed():
    first = [s.id for s in tk.situation_grid(TOOLS, POLICY, seed=1)]
    assert first == [s.id for s in tk.situation_grid(TOOLS, POLICY, seed=1)]
    assert first != [s.id for s in tk.situation_grid(TOOLS, POLICY, seed=2)]


def test_constraints_are_honoured():
    forbidden = {"tool": "unrelated", "world_state": "missing"}
    rule = "Refunds go back to the original payment method only."
    grid = tk.situation_grid(TOOLS, POLICY, constraints=[forbidden, {"rule": rule, "stance": "adversarial"},
                                                        lambda d: not (d.get("history") == "repeat_visit" and d.get("tool_condition") == "stale")])
    for s in grid:
        d = s.dimensions
        assert not (d["tool"] == "unrelated" and d["world_state"] == "missing")
        assert not (d["rule"] == rule and d["stance"] == "adversarial")
        assert not (d["history"] == "repeat_visit" and d["tool_condition"] == "stale")
    # everything else is still covered
    covered = set().union(*(_tuples(s.dimensions, grid.axes, 2) for s in grid))
    missing = _planned(grid.axes, 2) - covered
    assert missing == {(("tool", "unrelated"), ("world_state", "missing")), (("rule", rule), ("stance", "adversarial")),
                       (("tool_condition", "stale"), ("history", "repeat_visit"))}


@pytest.mark.parametrize("constraint, fragment", [({"tol": "get_order"}, "did you mean 'tool'"),
                                                   ({"tool": "get_ordr"}, "did you mean 'get_order'"),
                                                   (42, "constraints must be")])
def test_bad_constraints(constraint, fragment):
    with pytest.raises(tk.ConfigError) as caught:
        tk.situation_grid(TOOLS, POLICY, constraints=constraint)
    assert fragment in str(caught.value)


def test_grid_views():
    grid = tk.situation_grid(TOOLS, POLICY)
    frame = grid.to_pandas()
    assert list(frame.columns) == ["id", "tier", "layer", *tk.situations.AXES] and len(frame) == len(grid)
    assert sum(grid.tier_counts().values()) == len(grid)
    assert grid.by_id(grid[5].id) is grid[5]
    json.dumps(grid.to_dict())
    assert "situations" in str(grid)
    half = grid.coverage_of([{"scenario_dimensions": dict(s.dimensions)} for s in grid[: len(grid) // 2]])
    assert 0 < half["pairs_covered"] < half["pairs_planned"] == grid.coverage["pairs_planned"]


# -- tier mixer (docs/design/engine.md §10 item 27) ----------------------------------------------------------------

def _plenty():
    return [tk.situations.Situation({"stance": stance, "tool": f"t{i}"}) for stance in tk.situations.STANCES for i in range(12)]


@pytest.mark.parametrize("n, hard_share, ordinary, hard", [(10, 0.4, 6, 4), (10, 0.0, 7, 3), (10, 1.0, 1, 9), (1, 0.5, 1, 0),
                                                          (1, 1.0, 1, 0), (2, 0.0, 1, 1), (20, 0.5, 10, 10), (0, 0.5, 0, 0)])
def test_tier_mixer_facts(n, hard_share, ordinary, hard):
    mix = tk.situations.mix_tiers(_plenty(), n, hard_share, seed=0)
    tiers = [s.tier for s in mix]
    assert tiers.count("ordinary") == ordinary and len(tiers) - tiers.count("ordinary") == hard
    if n >= 1:
        assert tiers[0] == "ordinary"
    if n >= 2:
        assert tiers[1] == "adversarial"
    if n >= 8:
        assert set(tiers) == set(tk.situations.TIERS)
    assert mix.counts["ordinary"] == ordinary and mix.note is None


def test_tier_mixer_round_robin_and_falls_back():
    mix = tk.situations.mix_tiers(_plenty(), 10, 0.4)
    assert mix.counts == {"ordinary": 6, "ambiguous": 1, "boundary": 1, "adversarial": 2}
    only_adversarial = [tk.situations.Situation({"stance": "adversarial", "tool": f"t{i}"}) for i in range(3)] + \
                       [tk.situations.Situation({"stance": "ordinary", "tool": f"t{i}"}) for i in range(20)]
    mix = tk.situations.mix_tiers(only_adversarial, 10, 0.8)
    assert mix.counts["adversarial"] == 3 and mix.counts["ordinary"] == 7 and "ran out" in mix.note
    short = tk.situations.mix_tiers(only_adversarial[:4], 10, 0.5)
    assert len(short) == 4 and "only 4" in short.note


def test_tier_mixer_deterministic_and_validated():
    items = _plenty()
    assert [s.id for s in tk.situations.mix_tiers(items, 12, 0.5, seed=4)] == [s.id for s in tk.situations.mix_tiers(items, 12, 0.5, seed=4)]
    assert [s.id for s in tk.situations.mix_tiers(items, 12, 0.5, seed=4)] != [s.id for s in tk.situations.mix_tiers(items, 12, 0.5, seed=5)]
    with pytest.raises(tk.ConfigError, match=r"\[0, 1\]"):
        tk.situations.mix_tiers(items, 10, 1.5)
    with pytest.raises(tk.ConfigError):
        tk.situations.mix_tiers(items, -1, 0.5)
    dict_items = [{"id": str(i), "stance": s} for i, s in enumerate(tk.situations.STANCES)]
    assert tk.situations.mix_tiers(dict_items, 4, 0.5).counts["ordinary"] == 2


def test_tier_mixer_on_a_grid_meets_hard_share():
    grid = tk.situation_grid(TOOLS, POLICY)
    for share in (0.2, 0.5, 0.8):
        mix = tk.situations.mix_tiers(list(grid), 40, share)
        assert mix.hard_share_drawn == pytest.approx(max(share, 3 / 40), abs=0.5 / 40)




@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", categories=["L", "N", "P", "Zs"]), max_size=160), max_size=12),
       st.sampled_from(["\n", "\n\n", "\n- ", "\n1. ", "; ", " "]))
def test_split_policy_properties(pieces, joiner):
    clauses = tk.situations.split_policy(joiner.join(pieces))
    assert all(8 <= len(c) <= 120 for c in clauses)
    assert len({c.lower() for c in clauses}) == len(clauses)
    assert clauses == tk.situations.split_policy(joiner.join(pieces))


def test_strength_above_the_number_of_axes_is_clipped_with_a_note():
    grid = tk.situation_grid([{"name": "ping"}], strength=6)
    assert grid.strength == 4 and any("t=4" in w for w in grid.warnings)
    assert grid.coverage["fraction"] == 1.0
    with pytest.raises(tk.ConfigError):
        tk.situation_grid([{"name": "ping"}], strength=0)


def test_coverage_factors_reproduce_the_grid_coverage_numbers():
    import toolkit as tk

    tools = [{"type": "function", "function": {"name": "get_order", "description": "Look up an order.",
              "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]
    grid = tk.situation_grid(tools, "1. Never refund without a receipt.\n2. Confirm before cancelling.", seed=0)
    factors = grid.coverage_factors
    assert "unspecified" not in factors.get("rule", ())
    report = tk.coverage([s.dimensions for s in grid], factors, strength=2)
    expected = grid.coverage_of(list(grid))
    assert (report.planned, report.covered) == (expected["pairs_planned"], expected["pairs_covered"])
