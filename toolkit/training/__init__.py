"""Training cuts from graded rows: SFT, preference pairs (DPO), RL groups (GRPO), reward-model
sets, the publish gate and decontamination.
"""

from toolkit.training.export import (
    DecontaminationReport,
    ExportError,
    PreferencePairs,
    PublishGateError,
    PublishGateReport,
    RewardModelSet,
    RLSelection,
    SFTSelection,
    TrainingSet,
    build_preference_pairs,
    decontaminate,
    export_preference,
    publish_gate,
    reward_model_set,
    select_for_rl,
    select_for_sft,
    training_rows,
    write_jsonl,
)

__all__ = [
    "ExportError",
    "PublishGateError",
    "TrainingSet",
    "SFTSelection",
    "PreferencePairs",
    "RLSelection",
    "RewardModelSet",
    "PublishGateReport",
    "DecontaminationReport",
    "training_rows",
    "select_for_sft",
    "build_preference_pairs",
    "export_preference",
    "select_for_rl",
    "reward_model_set",
    "publish_gate",
    "decontaminate",
    "write_jsonl",
]
