"""The sandbox world: tools, the seeded ``World`` that answers their calls, fault modes, and
the context that says which rollout a call belongs to.

``World`` answers ``world.call(tool, arguments)`` from seeded, schema-shaped state with no
network, the same way for the same seed, and breaks calls when a fault plan says so (every
injected fault lands in ``world.ledger``). The call order, the fault modes and where the
design departs from the system we studied are in :mod:`toolkit.world._world`'s docstring.
"""

from toolkit.world._world import WORLD_STATES, World, WorldOptions, tool_verb
from toolkit.world.context import RolloutContext, current_rollout, rollout_context
from toolkit.world.faults import ATTACK_MODES, FAULT_MODES, FaultCall
from toolkit.world.tools import DESTRUCTIVE_NAME, DESTRUCTIVE_WORDS, REFERENCE_PARAMETER_PATTERN, TOOL_KINDS, ToolSpec, normalize_tools

__all__ = [
    "ToolSpec",
    "normalize_tools",
    "TOOL_KINDS",
    "REFERENCE_PARAMETER_PATTERN",
    "DESTRUCTIVE_WORDS",
    "DESTRUCTIVE_NAME",
    "FaultCall",
    "FAULT_MODES",
    "ATTACK_MODES",
    "World",
    "WorldOptions",
    "WORLD_STATES",
    "tool_verb",
    "RolloutContext",
    "rollout_context",
    "current_rollout",
]
