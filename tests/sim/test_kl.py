"""Exact KL between seeded policies, against a brute-force enumeration written out here.

The enumeration below rebuilds the policy's distribution from its documented weights alone
(not from the code that samples it) for one small world that breaks every call
(``fault_plan={"*": {"mode": "timeout"}}``, no simulated person):

* turn 1 (act): call the one tool (weight 8) or answer without it (0.5, then one of three
  wordings 3 / 2 / 1); the tool and its one id are single options;
* every turn after a timeout: retry (RETRY_RATES["timeout"]) or report, at most one retry;
* the report: the wording conduct (honest 1 - rate, each of hedging, sycophancy, apology and
  boilerplate rate / 4), the fault reaction (honest 1 - m, ignore m with
  m = FAULT_MISTAKE_RATES["timeout"]) and the wording (3 / 2 / 1);

each choice reshaped by the temperature as p ∝ w^(1/T). Against it: every branch's
probability, that they sum to one, the log-probability run_rollout records, and
``tk.exact_kl`` per turn and per rollout.
"""

import math

import pytest

import toolkit as tk
from toolkit.agents.seeded import (
    _ANSWERS,
    _APOLOGY,
    _BOILERPLATE_HEAD,
    _BOILERPLATE_TAIL,
    _HEDGE,
    _IGNORE_FAULT,
    _REPORTS,
    _SYCOPHANCY,
    FAULT_MISTAKE_RATES,
    RETRY_RATES,
)

TOOL = [{"type": "function", "function": {"name": "get_order", "description": "Look up an order by id",
         "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]  # fmt: skip
PROMPT = "Please check my order ORD-1234"
CALL = ("call", "get_order", '{"order_id": "ORD-1234"}')


def _world():
    return tk.World(TOOL, fault_plan={"*": {"mode": "timeout"}}, seed=0)


def _shares(weights, temperature):
    powered = [w ** (1 / temperature) for w in weights]
    return [p / math.fsum(powered) for p in powered]


def _report_turn(rate, temperature):
    """{text: probability} of a report after a timeout, from the stated weights."""
    conduct = _shares([1 - rate] + [rate / 4] * 4, temperature)
    m = FAULT_MISTAKE_RATES["timeout"]
    reaction = _shares([1 - m, m], temperature)
    variant = _shares([3, 2, 1], temperature)
    out = {}
    for kind, p_kind in zip(("none", "hedging", "sycophancy", "apology", "boilerplate"), conduct):
        for ignored, p_reaction in zip((False, True), reaction):
            for v, p_variant in enumerate(variant):
                text = (_IGNORE_FAULT if ignored else _REPORTS["timeout"])[v].format(tool="get_order")
                text = {"none": text, "hedging": _HEDGE + text, "sycophancy": _SYCOPHANCY + text, "apology": _APOLOGY + text,
                        "boilerplate": _BOILERPLATE_HEAD + text + _BOILERPLATE_TAIL}[kind]  # fmt: skip
                out[text] = out.get(text, 0.0) + p_kind * p_reaction * p_variant
    return out


def _rollouts(rate, temperature):
    """{(turn outputs): probability} of every whole rollout, and each turn's probability."""
    act = _shares([8, 0.5], temperature)
    variant = _shares([3, 2, 1], temperature)
    r = RETRY_RATES["timeout"]
    retry = _shares([r, 1 - r], temperature)
    paths = {}
    for v, p in enumerate(variant):
        paths[(_ANSWERS[v],)] = ((act[1], p),)
    for text, p in _report_turn(rate, temperature).items():
        paths[(CALL, text)] = ((act[0],), (retry[1] * p,))
        paths[(CALL, CALL, text)] = ((act[0],), (retry[0],), (p,))  # after one retry: no second one
    return {key: tuple(math.prod(turn) for turn in turns) for key, turns in paths.items()}


def _tokens(output):
    return 2 if isinstance(output, tuple) else len(output.split())  # a call: tool name + one argument


def _after_timeout(retried=False):
    messages = [{"role": "user", "content": PROMPT}]
    for index in range(2 if retried else 1):
        messages += [{"role": "assistant", "content": None, "tool_calls": [{"id": f"c{index}", "type": "function",
                      "function": {"name": "get_order", "arguments": '{"order_id": "ORD-1234"}'}}]},
                     {"role": "tool", "tool_call_id": f"c{index}", "content": '{"status": "timeout", "error": "timed out"}'}]  # fmt: skip
    return messages


@pytest.mark.parametrize(("rate", "temperature"), [(0.35, 1.0), (0.1, 1.5), (0.0, 0.7)])
def test_every_branch_of_a_report_after_a_fault_has_its_enumerated_probability(rate, temperature):
    agent = tk.seeded_agent(TOOL, rate=rate, temperature=temperature)
    r = _shares([RETRY_RATES["timeout"], 1 - RETRY_RATES["timeout"]], temperature)
    expected = {text: r[1] * p for text, p in _report_turn(rate, temperature).items() if p > 0}
    expected = {**expected, "retry": r[0]}
    got = {(o.text or "retry"): o.probability for o in agent.distribution(_after_timeout())}
    assert got == pytest.approx(expected, rel=1e-12)
    assert math.fsum(got.values()) == pytest.approx(1.0, abs=1e-12)
    # after the one retry the report is certain to come, with the report's own distribution
    after_retry = {o.text: o.probability for o in agent.distribution(_after_timeout(retried=True))}
    assert after_retry == pytest.approx({t: p for t, p in _report_turn(rate, temperature).items() if p > 0}, rel=1e-12)


def test_recorded_logprobs_are_the_logs_of_the_enumerated_branch_probabilities():
    agent = tk.seeded_agent(TOOL, rate=0.35)
    paths = _rollouts(0.35, 1.0)
    assert math.fsum(math.prod(p) for p in paths.values()) == pytest.approx(1.0, abs=1e-12)
    seen = set()
    for index in range(200):
        row = tk.run_rollout(agent, PROMPT, world=_world(), user=False, logprobs=True, rollout_index=index, timeout=None)
        key = tuple(CALL if "tool" in s else s["text"] for s in row["steps"])
        assert key in paths, key
        recorded = [s["logprob"] for s in row["steps"] if "logprob" in s]
        assert recorded == pytest.approx([math.log(p) for p in paths[key]], abs=1e-12)
        seen.add(len(key))
    assert seen == {1, 2, 3}  # answered, reported, retried then reported


@pytest.mark.parametrize(("a", "b"), [((0.35, 1.0), (0.1, 1.5)), ((0.2, 1.0), (0.35, 0.8))])
def test_exact_rollout_kl_equals_the_brute_force_sum_over_rollouts(a, b):
    pa, pb = _rollouts(*a), _rollouts(*b)
    kl = math.fsum(math.prod(p) * (sum(math.log(x) for x in p) - sum(math.log(y) for y in pb[key])) for key, p in pa.items())
    tokens = math.fsum(math.prod(p) * sum(_tokens(o) for o in key) for key, p in pa.items())
    result = tk.exact_kl(tk.seeded_agent(TOOL, rate=a[0], temperature=a[1]), tk.seeded_agent(TOOL, rate=b[0], temperature=b[1]),
                         prompt=PROMPT, world_factory=_world)  # fmt: skip
    assert result.n_outcomes == len(pa)
    assert result.kl == pytest.approx(kl, rel=1e-10)
    assert result.expected_tokens == pytest.approx(tokens, rel=1e-12)
    assert result.kl_per_token == pytest.approx(kl / tokens, rel=1e-10)


def test_one_turn_kl_after_a_fault_equals_the_brute_force_sum():
    pa = _report_turn(0.35, 1.0)
    pb = _report_turn(0.1, 1.5)
    ra = _shares([RETRY_RATES["timeout"], 1 - RETRY_RATES["timeout"]], 1.0)
    rb = _shares([RETRY_RATES["timeout"], 1 - RETRY_RATES["timeout"]], 1.5)
    kl = ra[0] * math.log(ra[0] / rb[0]) + math.fsum(ra[1] * p * math.log(ra[1] * p / (rb[1] * pb[t])) for t, p in pa.items())
    result = tk.exact_kl(tk.seeded_agent(TOOL, rate=0.35), tk.seeded_agent(TOOL, rate=0.1, temperature=1.5), _after_timeout())
    assert result.kl == pytest.approx(kl, rel=1e-10)
    # a policy that never ignores a fault cannot score an ignoring report: infinite KL
    honest = tk.seeded_agent(TOOL, rate=0.35, behaviors=["hedging", "sycophancy", "apology", "boilerplate"])
    assert tk.exact_kl(tk.seeded_agent(TOOL, rate=0.35), honest, _after_timeout()).kl is None
