"""Live notebooks: ``tk.Dashboard`` runs ``tk.simulate`` and draws pass@1, pass@k and the
running KL to a reference policy as rows land; ``tk.run_progress`` recomputes the same
curves from saved rows; ``tk.plots.run_progress_figure`` draws them.

Modules: :mod:`toolkit.sim.progress` (the statistics as rows arrive), ``_render`` (the renderer thread
that turns them into PNG frames within a CPU budget), ``dashboard`` (the widgets).

Where we differ from the reference notebooks (docs/design/jupyter.md, docs/design/engine.md): live frames are
PNG bytes assigned to an ``ipywidgets.Image`` from one renderer thread (the
``clear_output`` + ``plt.show()`` recipe from a thread shows nothing in a real browser);
every interval is a bootstrap over tasks, never over rollouts; a row the reference gives
probability 0 is counted and named rather than silently averaged into an infinite KL; and
when reference scoring cannot keep up, KL is computed over a seeded random sample of the
landed rows (the legend says how many), not over the first rows that landed.
"""

from toolkit.live.dashboard import Dashboard, DashboardBusy

__all__ = ["Dashboard", "DashboardBusy"]
