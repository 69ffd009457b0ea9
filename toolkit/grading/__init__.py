"""Grading rows: the conduct grader, model judges and judge trust, and the reward-hack scan.
"""

from toolkit.grading.conduct import CONDUCT_CHECKS, ConductVerdict, conduct_grade, conduct_grader
from toolkit.grading.hackscan import REGIMES, HackScan, HackScanError, hack_scan
from toolkit.grading.judge import (
    JUDGE_STATUSES,
    JUDGE_VERDICT_SCHEMA,
    PROBES,
    GradeReport,
    JudgeError,
    JudgeTrust,
    JudgeTrustError,
    RefusalReport,
    TraceFlagReport,
    grade,
    judge_trust,
    model_judge,
    rank,
    refusal_report,
    resolvable_rate,
    trace_flag_report,
)
from toolkit.grading.state import STATE_MARKERS, StateVerdict, check_goal, state_grade, state_grader

__all__ = [
    "ConductVerdict",
    "conduct_grade",
    "conduct_grader",
    "CONDUCT_CHECKS",
    "JudgeError",
    "JudgeTrustError",
    "GradeReport",
    "JudgeTrust",
    "RefusalReport",
    "TraceFlagReport",
    "grade",
    "judge_trust",
    "refusal_report",
    "trace_flag_report",
    "rank",
    "model_judge",
    "resolvable_rate",
    "JUDGE_STATUSES",
    "PROBES",
    "HackScan",
    "HackScanError",
    "hack_scan",
    "REGIMES",
    "JUDGE_VERDICT_SCHEMA",
    "StateVerdict",
    "state_grade",
    "state_grader",
    "check_goal",
    "STATE_MARKERS",
]
