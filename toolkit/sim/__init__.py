"""Simulation: ``simulate()`` and everything one run needs (knobs, the search, one rollout,
the simulated user, the run's data and progress, exact KL over rollouts).
"""

from toolkit.sim.config import MODES, REPEAT_POLICIES, SIMULATE_DEFAULTS, SIMULATE_PARAMETERS, SimulateConfig
from toolkit.sim.data import SimulationData, load
from toolkit.sim.engine import RolloutJob, simulate
from toolkit.sim.kl import ExactKL, exact_kl
from toolkit.sim.knobs import KNOB_KINDS, KNOB_NEEDS, KNOB_TABLES, KnobSpec, RunKnobs, knob_table_markdown
from toolkit.sim.progress import ProgressPoint, ProgressTracker, RunProgress, run_progress
from toolkit.sim.rollout import ENDED_BY, LOST_REASONS, LostRollout, run_rollout
from toolkit.sim.search import (
    ARM_CAPS,
    ARM_FLOORS,
    ARMS,
    START_ARM_WEIGHTS,
    ArmUpdate,
    HashEmbedder,
    NoveltyIndex,
    SuccessiveAllocator,
    action_shape,
    arm_yields,
    behavior_signature,
    failure_aim,
    make_embedder,
    mutate_prompt,
    novelty,
    region_weight,
    update_arm_weights,
)
from toolkit.sim.user import (
    PATIENCE_LEVELS,
    SimulatedUser,
    UserReply,
    UserState,
    resolve_patience,
    simulated_user,
)

__all__ = [
    "KnobSpec",
    "RunKnobs",
    "KNOB_KINDS",
    "KNOB_TABLES",
    "KNOB_NEEDS",
    "knob_table_markdown",
    "NoveltyIndex",
    "ARMS",
    "START_ARM_WEIGHTS",
    "ARM_FLOORS",
    "ARM_CAPS",
    "ArmUpdate",
    "update_arm_weights",
    "arm_yields",
    "behavior_signature",
    "action_shape",
    "HashEmbedder",
    "make_embedder",
    "novelty",
    "mutate_prompt",
    "failure_aim",
    "SuccessiveAllocator",
    "region_weight",
    "PATIENCE_LEVELS",
    "resolve_patience",
    "SimulatedUser",
    "UserReply",
    "UserState",
    "simulated_user",
    "run_rollout",
    "LostRollout",
    "LOST_REASONS",
    "ENDED_BY",
    "ExactKL",
    "exact_kl",
    "SimulationData",
    "load",
    "simulate",
    "SimulateConfig",
    "SIMULATE_PARAMETERS",
    "SIMULATE_DEFAULTS",
    "RolloutJob",
    "MODES",
    "REPEAT_POLICIES",
    "ProgressPoint",
    "RunProgress",
    "ProgressTracker",
    "run_progress",
]
