"""The sandbox world: seeded, schema-shaped answers to tool calls, and faults on purpose.

``tk.World(tools, options=tk.WorldOptions(...), seed=0, world_state=..., fault_plan=...)``
answers ``world.call(tool, arguments)`` without any network, the same way for the same
seed, and breaks calls when a fault plan says so. Every injected fault is appended to
``world.ledger``, which a rollout stores on its row as ``faults``; fault detection reads the
ledger, never the result text.

Call order (first match wins; docs/design/engine.md §4.1, with the changes listed below):

1. unknown tool -> ``{"status": "error", "reason": "unknown_tool"}`` (with suggestions);
   a human tool -> ``error / human_tool`` (the simulated person answers those);
   arguments that are not a JSON object -> ``rejected / invalid_arguments``;
2. a scheduled fault (the plan entry for this tool, else ``"*"``) -> the mode's payload;
3. calculator tools (name starts calc/compute/eval/math, argument expression/expr/formula):
   real arithmetic through a safe AST walk;
4. world state ``missing`` -> ``not_found`` for any call;
5. world state ``already_done`` and a non-read tool -> ``already_done`` (reads still work);
6. missing required argument (recursing into object parameters) -> ``rejected /
   missing_required`` naming the field paths;
7. a schema-echo / placeholder argument -> ``rejected / placeholder_argument`` naming the
   field paths, with the hint to ask the person;
8. create verbs -> ``created`` + a world-issued id; read verbs -> ``ok`` + record (or
   ``not_found`` for a dangling reference); delete verbs -> ``deleted``; anything else is an
   update: ``ok`` + the record with the arguments applied and its version bumped.

Where we differ from the reference design, and why:

* Existence of an unknown reference is a continuous hash draw, ``stable_uniform("exists",
  seed, value) < exists_share``, not a draw in tenths, so ``exists_share=0.65`` means 65%,
  not 70% (the reference rounds the share to one decimal).
* A scheduled fault's draw includes the attempt number of that exact (tool, arguments) call,
  so a retry is a fresh (still seeded) draw. In the reference the same arguments always get
  the same verdict, which makes "retry after a timeout" either always or never work at a
  plan rate below 1, and turns a retry-aware agent into an untestable one.
* Plan entries can name the call they break (``on_call``: the 0-based index among the calls
  the entry matches), so "the second refund call times out" is expressible.
* Results put the record under ``"record"`` (searches under ``"results"``) instead of
  spreading it into the top level, so a record's own status (``"state"``) never collides with
  the call's ``"status"``.
* Two more built-in modes: ``rate_limited`` (429 with ``retry_after_seconds``) and
  ``server_error`` (500 with a request id); ``malformed`` returns a truncated JSON body of
  the real answer (the reference returns one fixed garbled string); ``stale`` serves the
  record as it was before this rollout changed it, when it did (the reference only adds an
  ``as_of`` note to the current record); permission_denied, stale and malformed are ledger
  faults like the rest (docs/design/engine.md §11).
* Fault builders are registered per world through ``WorldOptions(fault_modes=...)``; there
  is no global registry, so two notebooks cells (or two threads) cannot change each other's
  worlds.
* World states ``duplicate`` (a reference matches two records: reads list both, writes are
  refused as ambiguous) and ``partial`` (records exist half-done) have concrete behaviour;
  in the reference they only colour the prompt.
* Families the reference adds for coding agents (shell, grep, git, CI listings, file writes)
  are not built; every non-calculator tool is answered as a record or money tool. A coding
  agent's world is better served by ``execute=``.

``execute=fn`` hands every call to the user's own world ``fn(tool_name, arguments)``; no
fault schedule applies (as the seed's ``execute`` parameter says). ``tk.current_rollout()``
tells such a function which rollout it is answering, through :mod:`contextvars`, so it is
correct under threads and asyncio alike.
"""

from toolkit.world._world import WORLD_STATES, World, WorldOptions, tool_verb
from toolkit.world.context import RolloutContext, current_rollout, rollout_context
from toolkit.world.faults import FAULT_MODES, FaultCall
from toolkit.world.tools import REFERENCE_PARAMETER_PATTERN, TOOL_KINDS, ToolSpec, normalize_tools

__all__ = [
    "ToolSpec",
    "normalize_tools",
    "TOOL_KINDS",
    "REFERENCE_PARAMETER_PATTERN",
    "FaultCall",
    "FAULT_MODES",
    "World",
    "WorldOptions",
    "WORLD_STATES",
    "tool_verb",
    "RolloutContext",
    "rollout_context",
    "current_rollout",
]
