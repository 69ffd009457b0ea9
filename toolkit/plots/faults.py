"""Figures for the sandbox: how the pass rate falls as the world breaks more tool calls, and
what an attacker in the tool results costs.

``pass_rate_vs_fault_rate``: each point is pass@1 at one ``fault_rate`` with its 95% interval
over tasks (``tk.pass_at``'s rule: Student t below 30 tasks, the percentile bootstrap above,
Wilson when every task's value is 0 or 1; rollouts of one task are not independent, so tasks
are the units, not rows). The legend carries the number of tasks per line.

``attack_figure``: utility against attack success rate, one point per attack mode and one for
the clean runs, with the intervals :func:`toolkit.attack_report` computed (AgentDojo's plane:
a defence moves points left, a capable agent moves them up).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from toolkit.plots._style import PALETTE, legend_below, new_figure, styled
from toolkit.stats.attacks import AttackReport
from toolkit.stats.passk import pass_at

__all__ = ["pass_rate_vs_fault_rate", "attack_figure"]


@styled
def pass_rate_vs_fault_rate(
    runs: Mapping[str, Mapping[float, Sequence[Mapping[str, Any]]]],
    *,
    title: str | None = None,
    seed: int = 0,
    width: float = 5.0,
    height: float = 3.6,
) -> Figure:
    """pass@1 against fault_rate, one line per agent, each point with its interval over tasks.

    A fault rate whose rows have fewer than 3 tasks is drawn without an interval (pass_at
    returns none and says why); one with no graded row is left out. With several agents the
    points are dodged sideways by about 0.01 so their intervals do not overlap.

    Parameters
    ----------
    runs : mapping
        ``{label: {fault_rate: graded rows}}``: one line per label, one point per fault rate
        (a number in [0, 1]). Rows carry ``reward``; the task is the row's task key, see
        ``tk.pass_at``. The legend gives each line's number of tasks.
    title : str, optional
        Axes title. Default None: no title.
    seed : int
        Seed of each point's bootstrap, passed to ``tk.pass_at``. Default 0.
    width, height : float
        Figure size in inches. Default 5.0 x 3.6.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``runs`` (or one label's mapping) is not a non-empty mapping, or a fault-rate key
        is not a number in [0, 1].
    """
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must be a non-empty mapping {label: {fault_rate: rows}}")
    figure, ax = new_figure(width, height)
    colors = [PALETTE["blue"], PALETTE["vermillion"], PALETTE["green"], PALETTE["orange"], PALETTE["purple"]]
    markers = ["o", "s", "^", "D", "v"]
    for index, (label, by_rate) in enumerate(runs.items()):
        if not isinstance(by_rate, Mapping) or not by_rate:
            raise ValueError(f"runs[{label!r}] must be a non-empty mapping fault_rate -> rows")
        rates, estimates, lows, highs, tasks = [], [], [], [], []
        for rate in sorted(by_rate):
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
                raise ValueError(f"runs[{label!r}]: fault_rate keys must be numbers in [0, 1]; got {rate!r}")
            result = pass_at(list(by_rate[rate]), seed=seed)
            if result.pass_at_1 is None:
                continue
            rates.append(float(rate))
            estimates.append(result.pass_at_1)
            low, high = result.ci95 if result.ci95 else (np.nan, np.nan)
            lows.append(low if low is not None else np.nan)
            highs.append(high if high is not None else np.nan)
            tasks.append(result.n_groups)
        if not rates:
            continue
        color = colors[index % len(colors)]
        # Lines share their x values; a small sideways dodge keeps the error bars apart.
        dodge = (index - (len(runs) - 1) / 2) * 0.012
        rates = [rate + dodge for rate in rates]
        estimates_array = np.array(estimates, dtype=float)
        lower = estimates_array - np.array(lows, dtype=float)
        upper = np.array(highs, dtype=float) - estimates_array
        ax.errorbar(
            rates, estimates_array, yerr=np.vstack([np.nan_to_num(lower), np.nan_to_num(upper)]),
            fmt="-" + markers[index % len(markers)], color=color, capsize=3, markersize=4,
            label=f"{label} (n={min(tasks)}-{max(tasks)} tasks)" if min(tasks) != max(tasks) else f"{label} (n={tasks[0]} tasks)",
        )  # fmt: skip
    ax.set_xlabel("fault_rate (share of prompts whose fault plan is kept)")
    ax.set_ylabel("pass@1 (95% task bootstrap)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(-0.05, 1.05)
    if title:
        ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        # below the axes: loc="best" still lands on points once a few agents share the plot
        legend_below(figure)
    else:
        ax.text(0.5, 0.5, "no graded rows to draw", ha="center", va="center", transform=ax.transAxes)
    return figure


# One colour and marker per point kind: clean runs, then the attack modes in report order.
_ATTACK_STYLES = (("blue", "o"), ("vermillion", "s"), ("orange", "^"), ("purple", "D"), ("green", "v"))


@styled
def attack_figure(
    report: AttackReport,
    *,
    title: str | None = None,
    width: float = 4.8,
    height: float = 3.6,
) -> Figure:
    """Utility against attack success rate: the clean runs and each attack mode, with intervals.

    The clean point sits at attack success 0 with its utility interval; each attack mode's
    point is at (attack success, utility under that mode) with both intervals, exactly the
    rates and bounds of ``report`` (``utility_clean``, ``by_mode[mode]["utility"]`` and
    ``by_mode[mode]["attack_success"]``). A rate without an interval (fewer than 3 tasks) is
    drawn as a bare point; a rate with no estimate is left out and the legend says so. The
    legend gives each point's number of tasks, the title the paired drop in utility.

    Parameters
    ----------
    report : AttackReport
        From :func:`toolkit.attack_report`.
    title : str, optional
        Axes title. Default None: the paired difference (attacked minus clean) with its
        interval and task count.
    width, height : float
        Figure size in inches. Default 4.8 x 3.6.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    TypeError
        If ``report`` is not an :class:`~toolkit.stats.AttackReport`.
    """
    if not isinstance(report, AttackReport):
        raise TypeError(f"attack_figure needs the AttackReport of tk.attack_report, got {type(report).__name__}")
    figure, ax = new_figure(width, height)
    points = [("clean", report.utility_clean, None)]
    points += [(mode, rates["utility"], rates["attack_success"]) for mode, rates in report.by_mode.items()]
    for index, (name, utility, success) in enumerate(points):
        color, marker = _ATTACK_STYLES[index % len(_ATTACK_STYLES)]
        if utility.estimate is None or (success is not None and success.estimate is None):
            ax.plot([], [], linestyle="none", marker=marker, color=PALETTE[color], label=f"{name}: no graded rows")
            continue
        x = 0.0 if success is None else success.estimate
        xerr = None if success is None or success.low is None else [[x - success.low], [success.high - x]]
        yerr = None if utility.low is None else [[utility.estimate - utility.low], [utility.high - utility.estimate]]
        ax.errorbar(x, utility.estimate, xerr=xerr, yerr=yerr, fmt=marker, color=PALETTE[color], capsize=3, markersize=5,
                    label=f"{name} (n={utility.n_tasks} tasks)")
    ax.set_xlabel(f"attack success rate ({report.level:.0%} interval over tasks)")
    ax.set_ylabel("utility (goal met, nothing else broken)")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.02, 1.05)
    drop = report.difference
    if title is None and drop.estimate is not None:
        band = "" if drop.low is None else f" [{drop.low:+.2f}, {drop.high:+.2f}]"
        title = f"utility under attack minus clean\n{drop.estimate:+.2f}{band}, paired over n={drop.n_tasks} tasks"
    if title:
        ax.set_title(title)
    legend_below(figure)
    return figure
