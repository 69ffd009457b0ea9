"""Generate ``demo_before.jsonl`` and ``demo_after.jsonl``: two synthetic runs of one customer-
support agent on the same 35 tasks, before and after a change, for ``python -m toolkit demo``.

Run from the repository root:  ``python datasets/make_demo_runs.py``  (writes next to itself).

The model of the data, so a reader knows what the statistics should find:

- 35 tasks in 5 categories (orders, refunds, flights, accounts, shipping), 7 each (35,
  not 40, keeps both files under the 300 KB budget with messages stored). Task ``i``
  has a latent difficulty: its pass probability before the change is
  ``sigmoid(BASE_LOGIT + TASK_SPREAD * z_i)`` with ``z_i ~ Normal(0, 1)``, so some tasks are
  nearly always passed, some nearly never, most in between (as in real suites).
- The change adds ``TRUE_LOGIT_SHIFT`` to every task's logit. Over these 35 tasks that is a true
  mean pass-rate gain of about +0.12 (printed when the script runs); the observed paired delta
  differs from it by sampling noise, which is what the demo's interval is about.
- Each task is run 4 times per arm: two eval runs (``lineage.eval_run`` 0 and 1) of two
  repeats each, so ``delta_report`` can estimate re-run noise. ``rollout_index`` is 0..3.
- ``reward`` is 0/1 from one Bernoulli draw per rollout. One marker, ``hedging`` (the answer
  opens with "I think"): likelier on failures, and the change lowers its rate by a quarter.
  A quarter of rollouts open with a clarifying question and the user's "Yes." (no effect on
  the reward; it makes the conversations less uniform).
- Prompts, tool calls, tool results and final texts come from small templates with ids drawn
  from the same seeded generator, so the files look like real tool-using rollouts while
  staying small (< 300 KB for both).

Every draw comes from one ``numpy.random.Generator`` seeded with ``SEED``; running the script
again rewrites byte-identical rows (the ``.meta.json`` sidecars carry a creation time).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np

SEED = 20261130
N_TASKS_PER_CATEGORY = 7
REPEATS_PER_RUN = 2
EVAL_RUNS = 2
# Centre and spread of task difficulty on the logit scale: a mean pass rate near 0.55 with
# tasks spread from ~0.1 to ~0.95, like the tau-bench airline results (pass^1 0.42).
BASE_LOGIT = 0.25
TASK_SPREAD = 1.4
# Chosen so the true mean gain over the 35 drawn tasks is about +0.12 (a "modest" change).
TRUE_LOGIT_SHIFT = 0.68

SYSTEM_PROMPT = (
    "You are the support agent of Northwind Outfitters. Use the tools to look things up before "
    "answering. Confirm with the customer before any refund, cancellation or change. Never "
    "invent order, booking or account numbers."
)
SYSTEM_SHA = hashlib.sha256(SYSTEM_PROMPT.encode("utf-8")).hexdigest()[:16]
MODELS = {"before": "agent-1.0", "after": "agent-1.1"}

CATEGORIES = {
    "orders": {
        "prompts": ["Where is my order {ref}?", "Can you check the status of order {ref}?", "Has order {ref} shipped yet?"],
        "lookup": ("get_order", "order_id"),
        "result": {"status": "in_transit"},
        "action": None,
        "good": "Order {ref} is in transit, due {date}.",
        "bad": "Order {ref} was delivered yesterday.",
    },
    "refunds": {
        "prompts": ["Refund order {ref}, it arrived damaged.", "Please refund {ref}; wrong size."],
        "lookup": ("get_order", "order_id"),
        "result": {"refundable": True},
        "action": ("refund_order", "order_id"),
        "good": "Refunded {ref}; expect the money in 3-5 days.",
        "bad": "Order {ref} cannot be refunded.",
    },
    "flights": {
        "prompts": ["Move my booking {ref} to {date}.", "Can I change flight {ref} to {date}?"],
        "lookup": ("get_booking", "booking_id"),
        "result": {"changeable": True},
        "action": ("change_booking", "booking_id"),
        "good": "Booking {ref} now departs on {date}.",
        "bad": "Booking {ref} now departs on 2026-12-31.",
    },
    "accounts": {
        "prompts": ["Change the email on {ref} to {email}.", "New email for account {ref}: {email}."],
        "lookup": ("get_account", "account_id"),
        "result": {"verified": True},
        "action": ("update_email", "account_id"),
        "good": "The email on account {ref} is now {email}.",
        "bad": "I could not find account {ref}.",
    },
    "shipping": {
        "prompts": ["What does express shipping to {city} cost for order {ref}?", "Ship {ref} to {city} faster?"],
        "lookup": ("quote_shipping", "order_id"),
        "result": {"express": 14.5},
        "action": None,
        "good": "Express to {city} costs $14.50 for {ref}.",
        "bad": "Express shipping to {city} is free.",
    },
}
CITIES = ["Leeds", "Porto", "Austin", "Osaka", "Lyon", "Quito", "Perth", "Oslo"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _fill(template, values):
    if isinstance(template, str):
        return template.format(**values)
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    return template


def make_tasks(rng: np.random.Generator) -> list[dict]:
    tasks = []
    for category, spec in CATEGORIES.items():
        for number in range(N_TASKS_PER_CATEGORY):
            values = {
                "ref": f"{category[0].upper()}{rng.integers(10_000, 99_999)}",
                "date": f"2026-12-{rng.integers(1, 29):02d}",
                "city": CITIES[rng.integers(len(CITIES))],
                "email": f"kim{rng.integers(10, 99)}@mail.com",
            }
            tasks.append(
                {
                    "scenario_id": f"{category}-{number:02d}",
                    "category": category,
                    "prompt": _fill(spec["prompts"][number % len(spec["prompts"])], values),
                    "values": values,
                    "logit": BASE_LOGIT + TASK_SPREAD * rng.standard_normal(),
                }
            )
    return tasks


def make_row(task: dict, arm: str, index: int, rng: np.random.Generator) -> dict:
    spec = CATEGORIES[task["category"]]
    values = task["values"]
    shift = TRUE_LOGIT_SHIFT if arm == "after" else 0.0
    passed = bool(rng.random() < _sigmoid(task["logit"] + shift))
    asked = bool(rng.random() < 0.25)
    hedge_rate = (0.12 if passed else 0.40) * (0.75 if arm == "after" else 1.0)
    hedged = bool(rng.random() < hedge_rate)

    steps: list[dict] = []
    if asked:
        steps.append({"text": f"Is {values['ref']} correct?"})
        steps.append({"user": "Yes."})
    tool, argument = spec["lookup"]
    steps.append({"tool": tool, "arguments": {argument: values["ref"]}, "result": _fill(spec["result"], values)})
    if spec["action"] is not None and (passed or rng.random() < 0.5):
        action, action_argument = spec["action"]
        arguments = {action_argument: values["ref"]}
        if task["category"] == "flights":
            arguments["date"] = values["date"] if passed else "2026-12-31"
        if task["category"] == "accounts":
            arguments["email"] = values["email"]
        steps.append({"tool": action, "arguments": arguments, "result": {"ok": True}})
    final_text = _fill(spec["good"] if passed else spec["bad"], values)
    if hedged:
        final_text = "I think " + final_text[0].lower() + final_text[1:]
    steps.append({"text": final_text})

    run = index // REPEATS_PER_RUN
    # Lean on purpose: both files must stay under 300 KB with messages rebuilt on write, so
    # only the fields the statistics demo reads are kept (no sampling / judge provenance).
    lineage = {"eval_run": run, "system_prompt_sha": SYSTEM_SHA}
    return {
        "schema_version": "1",
        "scenario_id": task["scenario_id"],
        "category": task["category"],
        "rollout_index": index,
        "prompt": task["prompt"],
        "steps": steps,
        "final_text": final_text,
        "reward": 1.0 if passed else 0.0,
        "markers": {"hedging": int(hedged)},
        "model_version": MODELS[arm],
        "lineage": lineage,
    }


def main(out_dir: Path | None = None) -> dict[str, Path]:
    import toolkit as tk

    out_dir = Path(out_dir) if out_dir is not None else Path(__file__).resolve().parent
    rng = np.random.default_rng(SEED)
    tasks = make_tasks(rng)
    logits = np.array([t["logit"] for t in tasks])
    true_before = float(np.mean(_sigmoid(logits)))
    true_after = float(np.mean(_sigmoid(logits + TRUE_LOGIT_SHIFT)))
    written = {}
    for arm in ("before", "after"):
        rows = [
            make_row(task, arm, index, rng)
            for index in range(EVAL_RUNS * REPEATS_PER_RUN)
            for task in tasks
        ]
        rows.sort(key=lambda r: (r["scenario_id"], r["rollout_index"]))
        meta = {
            "description": f"synthetic demo run '{arm}' (datasets/make_demo_runs.py, seed {SEED})",
            "model_version": MODELS[arm],
            "system_prompt": SYSTEM_PROMPT,
            "true_mean_pass_rate": round(true_before if arm == "before" else true_after, 4),
            "license": "MIT (toolkit project); synthetic, no third-party content",
        }
        written[arm] = tk.save_rows(rows, out_dir / f"demo_{arm}.jsonl", meta=meta)
        observed = sum(r["reward"] for r in rows) / len(rows)
        print(f"{arm}: {len(rows)} rows, observed pass rate {observed:.3f}, true {meta['true_mean_pass_rate']:.3f}")
    print(f"true mean gain {true_after - true_before:+.3f}")
    return written


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
