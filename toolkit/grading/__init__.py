"""Grading rows: the conduct grader, model judges and judge trust, and the reward-hack scan.
"""

from toolkit.grading.conduct import ConductVerdict, conduct_grade, conduct_grader, CONDUCT_CHECKS
from toolkit.grading.judge import (
    JudgeError,
    JudgeTrustError,
    GradeReport,
    JudgeTrust,
    RefusalReport,
    TraceFlagReport,
    grade,
    judge_trust,
    refusal_report,
    trace_flag_report,
    rank,
    model_judge,
    resolvable_rate,
    JUDGE_STATUSES,
    PROBES,
)
from toolkit.grading.hackscan import HackScan, HackScanError, hack_scan, REGIMES

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
]
