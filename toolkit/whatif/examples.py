"""A small, real example runner and scorer for the what-if fork (used by notebook 08).

``support_agent`` is a deterministic, rule-following support agent, written so a reader can
see how a system-prompt change changes behaviour without a model: it looks up the record the
user asks about through the trace's tool cache (the recorded tool output, never a live call),
then answers according to its system prompt:

- a prompt containing "quote" or "verbatim" makes it state every field of the tool result;
- a prompt containing "status" makes it state the status only;
- otherwise it acknowledges the request without details (the failure seen in production).

A prompt containing "be brief" truncates the answer to its first sentence. The agent reads the
tool name and arguments to use from the trace's recorded tools, as a real agent would decide
on the same call for the same question. ``grounding_score`` scores one output on one rubric:
the share of the recorded tool result's values that the output states (0..1).

Point a config at them with ``target.runner: "python:toolkit.whatif.examples:support_agent"``
and ``scorer: {adapter: python, score_fn: "python:toolkit.whatif.examples:grounding_score"}``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from toolkit.whatif.sources import stub_traces

__all__ = ["support_agent", "async_support_agent", "grounding_score", "support_rows"]

_RECORD = re.compile(r"\b[A-Z]{3}-\d{5}\b")


def _answer(record: Any, prompt: str) -> str:
    prompt = prompt.lower()
    if not isinstance(record, Mapping):
        return "Thanks for reaching out, I'm looking into it and will get back to you."
    if "quote" in prompt or "verbatim" in prompt:
        details = "; ".join(f"{key}: {value}" for key, value in record.items())
        text = f"Here is what I found. {details}."
    elif "status" in prompt:
        text = f"The status is {record.get('status', 'unknown')}."
    else:
        text = "Thanks for reaching out, I'm looking into it and will get back to you."
    if "be brief" in prompt:
        text = text.split(". ")[0].rstrip(".") + "."
    return text


def support_agent(trace_input, replay_config, tool_cache) -> dict[str, Any]:
    """Sync runner: one tool lookup through ``tool_cache``, then an answer per the prompt."""
    prompt = replay_config.system_prompt or trace_input.original_system_prompt or ""
    match = _RECORD.search(trace_input.user_message)
    tool = trace_input.recorded_tools[0] if trace_input.recorded_tools else "lookup"
    record = tool_cache.lookup(tool, {"id": match.group(0)}) if match else None
    return {"text": _answer(record, prompt), "tool_calls": list(tool_cache.calls)}


async def async_support_agent(trace_input, replay_config, tool_cache) -> dict[str, Any]:
    """The same agent as an ``async def`` runner (e.g. for an async model client)."""
    await asyncio.sleep(0)
    return support_agent(trace_input, replay_config, tool_cache)


def grounding_score(case) -> dict[str, Any]:
    """Share of the recorded tool result's values stated in the output (0..1), with a reason."""
    values = []
    for call in case.recorded_tool_calls:
        result = call.get("result")
        if isinstance(result, Mapping):
            values.extend(str(v).lower() for v in result.values())
    if not values:
        return {"score": None, "rationale": "no recorded tool result to check against"}
    text = case.output_text.lower()
    found = [v for v in values if v in text]
    return {"score": len(found) / len(values), "rationale": f"states {len(found)} of {len(values)} looked-up facts"}


def support_rows(n_failure: int = 20, n_baseline: int = 20, seed: int = 0) -> list[dict[str, Any]]:
    """Rows (schema v1) of recorded support conversations: failures have reward 0, baselines 1.

    Built from :func:`toolkit.whatif.sources.stub_traces`, so the tool results are the same
    seeded records; write them with ``tk.save_rows`` to get a jsonl source.
    """
    rows = []
    for trace in stub_traces(max(n_failure, n_baseline), seed):
        index = int(trace.trace_id.split("-")[1])
        if (trace.cohort == "failure" and index >= n_failure) or (trace.cohort == "baseline" and index >= n_baseline):
            continue
        rows.append({
            "schema_version": "1",
            "trace_id": trace.trace_id,
            "task_id": trace.trace_id,
            "prompt": trace.user_message,
            "steps": [{"tool": c.name, "arguments": c.arguments, "result": c.result} for c in trace.tool_calls]
            + [{"text": trace.original_output}],
            "final_text": trace.original_output,
            "reward": 0.0 if trace.cohort == "failure" else 1.0,
        })
    return rows
