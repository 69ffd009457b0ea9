"""``tk.Dashboard``: run ``tk.simulate`` from a notebook and watch pass@k and KL as rows land.

Displaying a dashboard shows the common controls (mode, budget, situations, phrasings,
repeats, fault_rate, hard_share, patience, concurrency, seed, reproducible, logprobs), an
Advanced section generated from :meth:`toolkit.RunKnobs.describe` (so a knob added to the
engine appears here with no UI code), Run and Stop buttons, a status line, the live figure
and a table of the latest rows.

How it stays responsive (docs/design/jupyter.md §2.3): the Run button's callback only starts two
daemon threads and returns, so the kernel keeps handling widget messages during a run:

* the run thread calls ``simulate(..., on_row=, stop=threading.Event())``; ``on_row``
  only appends the row to a list and a tracker (O(1)) and refreshes the status line at
  most 4 times a second;
* the renderer thread (:mod:`toolkit.live._render`) computes the statistics and assigns a
  PNG to the ``Image`` widget a few times a second at most, within a CPU duty cap.

Stop sets the engine's stop event: the engine cancels queued rollouts, keeps every row
that landed and returns with ``stopped_because == "stopped"``.

Where we differ from the reference's notebook helpers: no ``clear_output``/``plt.show()``
from threads (it shows nothing in a real browser), knob values are validated by the
engine's own ``RunKnobs.validate`` the moment they are typed (the widget reverts and shows
the engine's message), and the final figure is recomputed from the rows with the full
10,000-resample bootstrap rather than reusing the live, cheaper frames.
"""

from __future__ import annotations

import asyncio
import html
import inspect
import json
import threading
import time
import traceback
from collections import deque
from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets

from toolkit._util.datasets import dataset_path
from toolkit.agents import SeededAgent, seeded_agent
from toolkit.errors import ConfigError, DashboardBusy, KnobError, ToolkitError, unknown_name_message
from toolkit.live._render import LiveRenderer
from toolkit.sim import MODES as _ENGINE_MODES
from toolkit.sim import ProgressTracker, RunKnobs, RunProgress, SimulateConfig, run_progress, simulate
from toolkit.sim.progress import FINAL_RESAMPLES

__all__ = ["Dashboard", "DashboardBusy"]

MODES = tuple(_ENGINE_MODES)
# The dashboard owns these simulate() keywords (a caller passing them would cut the wires;
# on_progress is refused too: the engine's payload costs CPU the dashboard does not need).
_OWNED = ("on_row", "on_progress", "stop", "progress")
# Common controls that are also RunKnobs (advanced keys): shown once, above the Advanced
# section, and left out of it.
_COMMON_KNOBS = ("seed", "concurrency", "patience")
# Status line and latest-rows table refresh from on_row at most this often (4 a second:
# each is one comm message, and a faster text flicker is not readable).
_STATUS_MIN_INTERVAL = 0.25
_LATEST_ROWS = 6
_ENGINE_DECIDES = "engine decides"
# With no reference= and a seeded agent, KL is measured against the same seeded policy with
# this planted-mistake rate: the "careful reference" notebook 00 always used. Against the
# agent's default 0.35 it gives a KL of a few thousandths of a nat per token, which a
# 300-row run resolves (notebook 00: 0.0034 [0.0023..0.0045]).
DEFAULT_REFERENCE_RATE = 0.1


def _mode_k(mode: str) -> int | None:
    """The k (repeats) a mode schedules by default: the engine's ``MODES`` table
    (mode -> (n, k, repeat policy, fault_rate, unique))."""
    preset = _ENGINE_MODES.get(mode)
    return int(preset[1]) if preset else None


def _parse_text(text: str) -> Any:
    """What a Text control holds: '' is None; JSON when it parses; else the bare string."""
    text = text.strip()
    if text == "" or text.lower() == "none":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return tuple(value) if isinstance(value, list) else value


def _format_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value) if not isinstance(value, str) else value


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


class Dashboard:
    """Widgets that run :func:`toolkit.simulate` and draw pass@1, pass@k and KL live.

    Parameters
    ----------
    agent : Any, default None
        Passed to ``simulate`` (``agent=None`` is the engine's offline seeded agent).
    tools, system_prompt : Any, default None
        Keyword-only, like everything after ``agent``. Passed to ``simulate`` (None: the
        engine's defaults, the shipped airline tool set and policy when no agent is given).
    grader : callable or None, default None
        Passed to ``simulate``. None: the rows are graded by the deterministic conduct
        grader of ``system_prompt`` (``simulate(grade="conduct")``, offline), so pass@1 and
        pass@k are drawn; pass ``grade=False`` for an ungraded run (the pass@k panel then
        says so).
    reference : Any, default None
        The policy KL is measured against: a second ``tk.seeded_agent`` (offline), a
        callable ``row -> summed logprob``, a model spec (any form
        ``tk.agents.parse_model_spec`` takes, a bare server URL included; scored with
        ``tk.reference_logprobs``) or the name of a row field. None with a seeded agent (or
        no agent, the engine's offline seeded one): the same seeded policy with
        ``rate=DEFAULT_REFERENCE_RATE`` (0.1, fewer planted mistakes), and ``logprobs`` starts
        on. None with any other agent: KL is drawn only when rows carry ``ref_logprob``, and
        the dashboard says what to pass. KL needs ``logprobs`` on. An unusable reference is
        refused here (TypeError or ConfigError), not at Run.
    refresh_seconds : float, default 0.5
        Shortest time between two frames, in seconds (> 0, ConfigError otherwise).
    max_duty : float, default 0.03
        The renderer's largest share of CPU time, in (0, 1] (ConfigError otherwise), see
        :mod:`toolkit.live._render`; the trade-off is below.
    title : str or None, default None
        The dashboard's heading and the title of the live and final figures; None shows
        "toolkit simulation dashboard" as the heading and no figure title.
    threshold : float or None, default None
        A pass@1 in (0, 1) the run is asked about. The pass@1 panel then draws the
        anytime-valid bounds (dashed; :func:`toolkit.stats.confidence_sequence`, safe to
        watch, unlike the bootstrap band), the threshold, and the row at which the bounds
        first excluded it; the status line says whether and where it was decided.
    **simulate_kwargs
        Any other ``simulate`` keyword (budget, mode, fault_rate, advanced, ...). They set
        the controls' starting values (a value a control cannot show is refused, never
        clamped) and are passed on at Run; a misspelled keyword is refused here with the
        nearest name (TypeError), and ``on_row``, ``on_progress``, ``stop`` and ``progress``,
        which the dashboard sets itself, with a ConfigError.

    ``dashboard.grading`` and ``dashboard.kl_reference`` say what grades the rows and what KL
    is measured against (the widget shows both under its heading). After a run:
    ``dashboard.data`` is the ``SimulationData``, ``dashboard.figure()`` the final figure,
    ``dashboard.progress`` the live points, ``dashboard.rows`` the rows in the order they
    landed, ``dashboard.status_text`` the status line as plain text. ``dashboard.run()`` /
    ``dashboard.stop()`` / ``dashboard.wait()`` are what the buttons call; in a notebook cell
    use ``await dashboard.wait_async()``.

    Frame rate against overhead (measured with ``benchmarks/bench_live.py``, offline
    seeded agent, 2 shared cores): a frame (statistics + a 600 x 288 px PNG) costs ~0.1 s
    of CPU, taken under the GIL from the simulation's own threads. The default
    ``max_duty=0.03`` therefore spaces frames ~3 s apart (never more than 3 s while rows
    land: a frozen plot means no rows are landing, not a slow renderer) and keeps the
    dashboard within the project's 10% overhead (+5-9% process CPU on 1,000 rows; the
    renderer's own share runs above the cap because of the 3 s ceiling and the first
    frame); duty 0.05 cost +15%, 0.08 +20%. The status line (rows, elapsed, rows/s) and
    the latest-rows table do not wait for frames: they refresh from the row callback up to
    4 times a second. For a teaching demo where overhead does not matter,
    ``max_duty=1.0`` redraws every ``refresh_seconds`` (2 frames a second by default), so
    the issue's "at most a few times a second" is the ceiling, not the default. With a
    served model the rollouts wait on the network, not the CPU, so a higher duty costs
    little there.
    """

    def __init__(self, agent: Any = None, *, tools: Any = None, system_prompt: str | None = None,
                 grader: Any = None, reference: Any = None, refresh_seconds: float = 0.5,
                 max_duty: float = 0.03, title: str | None = None, threshold: float | None = None,
                 **simulate_kwargs: Any):
        parameters = inspect.signature(simulate).parameters
        for name in simulate_kwargs:
            if name in _OWNED:
                raise ConfigError(f"Dashboard sets simulate()'s {name!r} itself (it drives the live view); remove it")
            if name not in parameters:
                raise TypeError(unknown_name_message("simulate() keyword", name, [p for p in parameters if p not in _OWNED]))
        if not refresh_seconds > 0:
            raise ConfigError(f"refresh_seconds must be > 0; got {refresh_seconds!r}")
        if not 0 < max_duty <= 1:
            raise ConfigError(f"max_duty must be in (0, 1]; got {max_duty!r}")
        # a bad reference (a misspelled model spec, a number) is refused here, not at Run
        ProgressTracker(reference=reference, threshold=threshold)  # and a bad threshold
        self.threshold = threshold
        self.agent = agent
        self.tools = tools
        self.system_prompt = system_prompt
        self.grader = grader
        self.reference = reference
        self.refresh_seconds = float(refresh_seconds)
        self.max_duty = float(max_duty)
        self.title = title
        self._defaults = {name: p.default for name, p in parameters.items() if p.default is not inspect.Parameter.empty}
        self._given = dict(simulate_kwargs)
        self._advanced_given = dict(simulate_kwargs.pop("advanced", None) or {})
        self._given.pop("advanced", None)
        knobs = RunKnobs
        for name, value in self._advanced_given.items():
            knobs.validate(name, value)  # the engine's message for a bad starting value
        for name in self.controls_names():
            if self._given.get(name) is not None:
                # a starting value the control cannot show is refused, never clamped or
                # replaced (a FloatSlider would turn fault_rate=2.0 into 1.0 silently)
                self._check_common(name, self._given[name])
        self._touched: set[str] = set()
        self._run_reference = self._resolve_reference(self._start_value("seed", 0))
        self._advanced_values: dict[str, Any] = {}
        self._last_valid: dict[str, Any] = {}
        self._reverting = False

        self.data = None
        self.error: str | None = None
        self._traceback: str | None = None
        self.rows: list[dict] = []
        self.runs = 0
        self._latest: deque = deque(maxlen=_LATEST_ROWS)
        self._stop_event: threading.Event | None = None
        self._renderer: LiveRenderer | None = None
        self._run_thread: threading.Thread | None = None
        self._finished = threading.Event()
        self._finished.set()
        self._started_at = 0.0
        self._ended_at: float | None = None
        self._last_status = 0.0
        self._run_kwargs: dict = {}
        self._figure_cache = None
        self._status_text = ""

        self.controls: dict[str, widgets.Widget] = {}
        self.advanced_controls: dict[str, widgets.Widget] = {}
        self._build_widgets()

    # ------------------------------------------------------------------ widgets
    def _start_value(self, name: str, fallback: Any) -> Any:
        if name in self._given:
            return self._given[name]
        if name in self._advanced_given:
            return self._advanced_given[name]
        default = self._defaults.get(name)
        return fallback if default is None else default

    def _build_widgets(self) -> None:
        knobs = RunKnobs
        style = {"description_width": "110px"}
        layout = widgets.Layout(width="250px")
        c = self.controls

        def tooltip(text: str) -> str:
            return text

        c["mode"] = widgets.Dropdown(options=MODES, value=self._start_value("mode", "explore"), description="mode",
                                     style=style, layout=layout,
                                     tooltip=tooltip("explore | sft | rl | adaptive: sets n, k, repeat policy and fault_rate presets"))
        c["budget"] = widgets.IntText(value=int(self._start_value("budget", 1000)), description="budget",
                                      style=style, layout=layout, tooltip="row cap (>= 1)")
        c["situations"] = widgets.IntText(value=int(self._start_value("situations", 0) or 0), description="situations",
                                          style=style, layout=layout, tooltip="distinct situations N; 0 = no cap")
        c["phrasings"] = widgets.IntText(value=int(self._start_value("phrasings", 0) or 0), description="phrasings",
                                         style=style, layout=layout, tooltip="phrasings per situation n; 0 = the mode's preset")
        c["repeats"] = widgets.IntText(value=int(self._start_value("repeats", 0) or 0), description="repeats",
                                       style=style, layout=layout, tooltip="rollouts per phrasing k; 0 = the mode's preset")
        c["fault_rate"] = widgets.FloatSlider(value=float(self._start_value("fault_rate", 0.5)), min=0.0, max=1.0,
                                              step=0.05, description="fault_rate", style=style, layout=layout,
                                              readout_format=".2f",
                                              tooltip="share of fault-tagged situations whose fault is kept (mode preset unless moved)")
        c["hard_share"] = widgets.FloatSlider(value=float(self._start_value("hard_share", 0.4)), min=0.0, max=1.0,
                                              step=0.05, description="hard_share", style=style, layout=layout,
                                              readout_format=".2f",
                                              tooltip="share of situations from the hard tiers (0.40 unless moved)")
        patience = knobs.spec("patience")
        start_patience = self._start_value("patience", patience.default)
        c["patience"] = widgets.Dropdown(options=list(patience.choices), value=start_patience if start_patience in patience.choices else patience.default,
                                         description="patience", style=style, layout=layout, tooltip=patience.meaning)
        c["concurrency"] = widgets.IntText(value=int(self._start_value("concurrency", knobs.spec("concurrency").default)),
                                           description="concurrency", style=style, layout=layout,
                                           tooltip=knobs.spec("concurrency").meaning)
        c["seed"] = widgets.IntText(value=int(self._start_value("seed", knobs.spec("seed").default)), description="seed",
                                    style=style, layout=layout, tooltip=knobs.spec("seed").meaning)
        c["reproducible"] = widgets.Checkbox(value=bool(self._start_value("reproducible", False)), description="reproducible",
                                             style=style, layout=layout, indent=True,
                                             tooltip="round-synchronous scheduling: same seed, same rows at any concurrency")
        logprobs_options = [("off", False), ("on", True), ("tokens", "tokens")]
        # KL needs logprobs: on from the start when the dashboard supplies the reference
        start_logprobs = self._start_value("logprobs", self._default_reference_applies()) or False
        c["logprobs"] = widgets.Dropdown(options=logprobs_options, value=start_logprobs, description="logprobs",
                                         style=style, layout=layout,
                                         tooltip="record each agent turn's summed logprob and token count (needed for KL)")
        for name, control in c.items():
            self._last_valid[name] = control.value
            control.observe(self._on_common_change, names="value")

        self.message = widgets.HTML(value="")
        self.run_button = widgets.Button(description="Run", button_style="primary", icon="play",
                                         tooltip="start simulate() with these settings")
        self.stop_button = widgets.Button(description="Stop", button_style="warning", icon="stop", disabled=True,
                                          tooltip="stop through the engine's stop path; rows so far are kept")
        self.run_button.on_click(lambda _button: self._click_run())
        self.stop_button.on_click(lambda _button: self.stop())
        self.status = widgets.HTML()
        self._set_status("idle", rows=0, elapsed=None)
        self.about = widgets.HTML(value=self._about_html())
        from toolkit.live._render import render_png

        self.image = widgets.Image(value=render_png([]), format="png", layout=widgets.Layout(width="100%", max_width="760px"))
        self.table = widgets.HTML(value=self._table_html())
        self.advanced = self._build_advanced()
        common = widgets.GridBox(list(c.values()), layout=widgets.Layout(grid_template_columns="repeat(3, 260px)"))
        header = widgets.HTML(value=f"<b>{html.escape(self.title or 'toolkit simulation dashboard')}</b>")
        self.widget = widgets.VBox([
            header,
            self.about,
            common,
            self.advanced,
            widgets.HBox([self.run_button, self.stop_button]),
            self.message,
            self.status,
            self.image,
            self.table,
        ])

    def _build_advanced(self) -> widgets.Widget:
        knobs = RunKnobs
        sections = []
        titles = []
        for table in ("experiment", "engine"):
            items = []
            for spec in knobs.describe(table):
                if spec.name in _COMMON_KNOBS:
                    continue
                control = self._knob_control(spec)
                self.advanced_controls[spec.name] = control
                items.append(control)
            sections.append(widgets.GridBox(items, layout=widgets.Layout(
                grid_template_columns="repeat(auto-fill, minmax(380px, 1fr))")))
            titles.append(f"{table} knobs ({len(items)})")
        note = widgets.HTML(value=(
            "<small>Generated from <code>RunKnobs.describe()</code>: hover a name for what it does, "
            "its bounds, its default and why. Values are checked by the engine as you type; "
            f"{', '.join(_COMMON_KNOBS)} are set above. Greyed knobs are recorded but the offline "
            "engine has no mechanism for them.</small>"))
        inner = widgets.Accordion(children=sections, titles=tuple(titles))
        outer = widgets.Accordion(children=[widgets.VBox([note, inner])], titles=("Advanced",))
        outer.selected_index = None
        return outer

    def _knob_control(self, spec) -> widgets.Widget:
        bounds = ""
        if spec.lo is not None and spec.hi is not None:
            bounds = f"; allowed {spec.bounds}"  # "0 .. no ceiling", never 4611686018427387904
        if spec.choices:
            bounds = f"; one of {', '.join(map(str, spec.choices))}"
        unused = "\n(recorded only: the offline engine has no mechanism for it)" if not spec.used else ""
        tip = f"{spec.meaning}\ndefault: {spec.default!r}{bounds}{' or None' if spec.nullable else ''}\nwhy: {spec.reason}{unused}"
        start = self._advanced_given.get(spec.name, spec.default)
        style = {"description_width": "205px"}
        layout = widgets.Layout(width="370px")
        common = dict(description=spec.name, tooltip=tip, style=style, layout=layout, disabled=not spec.used)
        if spec.kind == "int" and not spec.nullable:
            control = widgets.IntText(value=int(start), **common)
        elif spec.kind == "float" and not spec.nullable:
            control = widgets.FloatText(value=float(start), **common)
        elif spec.kind == "bool" and not spec.nullable:
            control = widgets.Checkbox(value=bool(start), indent=True, **common)
        elif spec.kind == "bool":
            # a Dropdown whose value is None shows nothing selected, hence the sentinel
            control = widgets.Dropdown(options=[("engine decides", _ENGINE_DECIDES), ("on", True), ("off", False)],
                                       value=_ENGINE_DECIDES if start is None else start, **common)
        elif spec.kind == "choice":
            control = widgets.Dropdown(options=list(spec.choices), value=start, **common)
        else:  # band, table, nullable numbers: typed as JSON ('' = None)
            control = widgets.Text(value=_format_text(start), placeholder="None" if spec.nullable else "", continuous_update=False, **common)
        control._toolkit_knob = spec.name  # noqa: SLF001 (read back in the observer)
        self._last_valid[spec.name] = control.value
        if spec.name in self._advanced_given:
            self._advanced_values[spec.name] = knobs_validate(spec.name, start)
        control.observe(self._on_knob_change, names="value")
        return control

    # ------------------------------------------------------------------ validation
    def _revert(self, name: str, control: widgets.Widget, message: str) -> None:
        self._reverting = True
        try:
            control.value = self._last_valid[name]
        finally:
            self._reverting = False
        self.message.value = f"<span style='color:#D55E00'>refused: {html.escape(message)}</span>"

    def _on_knob_change(self, change) -> None:
        if self._reverting:
            return
        control = change["owner"]
        name = control._toolkit_knob  # noqa: SLF001
        raw = _parse_text(change["new"]) if isinstance(control, widgets.Text) else change["new"]
        if isinstance(raw, str) and raw == _ENGINE_DECIDES:
            raw = None
        try:
            value = knobs_validate(name, raw)
        except (KnobError, ConfigError, ValueError, TypeError) as error:
            self._revert(name, control, str(error))
            return
        self._last_valid[name] = change["new"]
        default = RunKnobs.spec(name).default
        if value == default and name not in self._advanced_given:
            self._advanced_values.pop(name, None)
        else:
            self._advanced_values[name] = value
        self.message.value = ""

    @staticmethod
    def controls_names() -> tuple:
        """The simulate() keywords shown as the common controls, in display order."""
        return ("mode", "budget", "situations", "phrasings", "repeats", "fault_rate", "hard_share", "patience",
                "concurrency", "seed", "reproducible", "logprobs")

    def _check_common(self, name: str, value: Any) -> Any:
        """A control's value checked by the engine's own code (RunKnobs for knobs,
        :meth:`SimulateConfig.check` for simulate() keywords), so the dashboard and simulate()
        refuse the same values with the same message."""
        if name in _COMMON_KNOBS:
            return knobs_validate(name, value)
        # a count control at 0 means "the mode's preset", which simulate() spells None
        preset = name in ("situations", "phrasings", "repeats") and value == 0 and not isinstance(value, bool)
        SimulateConfig.check(**{name: None if preset else value})
        return value

    def _on_common_change(self, change) -> None:
        if self._reverting:
            return
        control = change["owner"]
        name = next(n for n, w in self.controls.items() if w is control)
        try:
            self._check_common(name, change["new"])
        except (KnobError, ConfigError, ValueError, TypeError) as error:
            self._revert(name, control, str(error))
            return
        self._last_valid[name] = change["new"]
        self._touched.add(name)
        self.message.value = ""

    # ------------------------------------------------------------------ the run
    def simulate_kwargs(self) -> dict:
        """The keywords Run passes to ``simulate`` (without the dashboard's callbacks)."""
        kwargs = dict(self._given)
        for key, value in (("agent", self.agent), ("tools", self.tools), ("system_prompt", self.system_prompt),
                           ("grader", self.grader)):
            if value is not None:
                kwargs[key] = value
        if self.grader is None and "grade" not in self._given:
            kwargs["grade"] = "conduct"  # pass@k needs rewards; grade=False turns this off
        c = self.controls
        explicit = set(self._given) | self._touched
        kwargs["mode"] = c["mode"].value
        kwargs["budget"] = c["budget"].value
        kwargs["reproducible"] = c["reproducible"].value
        kwargs["logprobs"] = c["logprobs"].value or None
        kwargs["seed"] = c["seed"].value
        kwargs["concurrency"] = c["concurrency"].value
        kwargs["patience"] = c["patience"].value
        for name in ("situations", "phrasings", "repeats"):
            kwargs[name] = c[name].value or None
        for name in ("fault_rate", "hard_share"):
            # a slider always shows a number; pass it only when chosen, so the mode's
            # preset (fault_rate 0.8 under rl) applies otherwise
            kwargs[name] = c[name].value if name in explicit else None
        for name in ("situations", "phrasings", "repeats", "fault_rate", "hard_share"):
            if kwargs[name] is None:
                kwargs.pop(name)
        advanced = dict(self._advanced_given)
        advanced.update(self._advanced_values)
        for name in _COMMON_KNOBS:
            advanced.pop(name, None)
        if advanced:
            kwargs["advanced"] = advanced
        return kwargs

    @property
    def running(self) -> bool:
        return not self._finished.is_set()

    def _click_run(self) -> None:
        try:
            self.run()
        except ToolkitError as error:  # shown, not raised: a button has no caller to raise to
            self.message.value = f"<span style='color:#D55E00'>{html.escape(str(error))}</span>"

    def run(self, **overrides: Any) -> Dashboard:
        """Start a run with the controls' values (``overrides`` win) and return at once."""
        if self.running:
            raise DashboardBusy("a run is still going: press Stop (dashboard.stop()) or wait for it")
        kwargs = self.simulate_kwargs()
        for name in overrides:
            if name in _OWNED:
                raise ConfigError(f"Dashboard sets simulate()'s {name!r} itself; remove it")
        kwargs.update(overrides)
        self._run_kwargs = kwargs
        self.runs += 1
        self.data = None
        self.error = None
        self._traceback = None
        self.rows = []
        self._latest.clear()
        self._figure_cache = None
        self._ended_at = None
        self.message.value = ""
        k = kwargs.get("repeats") or _mode_k(kwargs.get("mode", "explore"))
        seed = kwargs.get("seed") or 0
        self._run_reference = self._resolve_reference(seed)
        self.about.value = self._about_html()
        self._tracker = ProgressTracker(k=k, reference=self._run_reference, seed=seed, threshold=self.threshold)
        self._stop_event = threading.Event()
        self._finished.clear()
        self._started_at = time.monotonic()
        self._renderer = LiveRenderer(self._tracker, self._on_frame, clock=self._elapsed,
                                      refresh_seconds=self.refresh_seconds, max_duty=self.max_duty, title=self.title)
        self.run_button.disabled = True
        self.stop_button.disabled = False
        self._set_status("starting", rows=0, elapsed=0.0)
        self._renderer.start()
        self._run_thread = threading.Thread(target=self._run_in_thread, args=(kwargs,), name="toolkit-dashboard-run", daemon=True)
        self._run_thread.start()
        return self

    def stop(self) -> None:
        """Ask the engine to stop; rows that landed are kept (``stopped_because='stopped'``)."""
        if self._stop_event is not None and self.running:
            self._stop_event.set()
            self.stop_button.disabled = True
            self._set_status("stopping", rows=len(self.rows), elapsed=self._elapsed())

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run and its final frame are done. In a notebook cell prefer
        ``await dashboard.wait_async()``, which keeps the kernel free for widget messages."""
        return self._finished.wait(timeout)

    async def wait_async(self, timeout: float | None = None) -> bool:
        started = time.monotonic()
        while not self._finished.is_set():
            if timeout is not None and time.monotonic() - started > timeout:
                return False
            await asyncio.sleep(0.05)
        return True

    def _elapsed(self) -> float:
        end = self._ended_at if self._ended_at is not None else time.monotonic()
        return end - self._started_at

    def _on_row(self, row: dict) -> None:
        # simulate()'s own thread: keep it O(1), the renderer does the work
        self.rows.append(row)
        self._latest.append(row)
        self._tracker.add(row)
        now = time.monotonic()
        if now - self._last_status >= _STATUS_MIN_INTERVAL:
            self._last_status = now
            self._set_status("running", rows=len(self.rows), elapsed=self._elapsed())
            # the table follows the rows, not the (slower, CPU-capped) figure frames:
            # building its HTML for 6 rows costs ~0.1 ms
            self.table.value = self._table_html()

    def _run_in_thread(self, kwargs: dict) -> None:
        try:
            # no on_progress: the engine builds its progress payload (coverage included) only
            # for a listener, which measured +5% CPU on an offline run; rows carry enough
            self.data = simulate(**kwargs, on_row=self._on_row, stop=self._stop_event, progress=False)
        except Exception as error:  # shown on the status line; the kernel must not die
            self.error = f"{type(error).__name__}: {error}"
            self._traceback = traceback.format_exc()
        finally:
            self._ended_at = time.monotonic()
            self._renderer.finish()
            self._renderer.join()
            if self._renderer.error:
                self.error = self.error or f"renderer failed: {self._renderer.error.strip().splitlines()[-1]}"
            self._final_status()
            self.table.value = self._table_html()
            self.run_button.disabled = False
            self.stop_button.disabled = True
            self._finished.set()

    # ------------------------------------------------------------------ frames and text
    def _on_frame(self, png: bytes, point, final: bool) -> None:
        self.image.value = png
        self.table.value = self._table_html()
        if not final:
            self._set_status("running", rows=len(self.rows), elapsed=self._elapsed(), point=point)

    def _set_status(self, state: str, *, rows: int, elapsed: float | None, point=None, extra: str = "") -> None:
        """Show the status line (HTML) and keep its plain text (``status_text``); ``extra`` is
        plain text (escaped here)."""
        parts = [f"rows {rows}"]
        budget = self._run_kwargs.get("budget") if self._run_kwargs else None
        if budget and state in ("running", "starting", "stopping"):
            parts[-1] = f"rows {rows}/{budget}"
        if elapsed is not None:
            parts.append(f"{elapsed:.1f} s")
            if elapsed > 0 and rows:
                parts.append(f"{rows / elapsed:.1f} rows/s")
        if point is not None and point.pass_at_1 is not None:
            parts.append(f"pass@1 {point.pass_at_1:.2f}")
        if extra:
            parts.append(extra)
        rest = " · ".join(parts)
        text = f"status: {state} · {rest}"
        html_value = f"<span class='toolkit-status'>status: <b>{html.escape(state)}</b> · {html.escape(rest)}</span>"
        self._status_text = text
        self.status.value = html_value

    @property
    def status_text(self) -> str:
        """The status line as plain text, for ``print`` (``dashboard.status.value`` is the
        HTML the widget renders)."""
        return self._status_text

    def _final_status(self) -> None:
        rows = len(self.rows)
        if self.error:
            self._set_status("failed", rows=rows, elapsed=self._elapsed(), extra=self.error)
            return
        report = {}
        try:
            report = self.data.report() if self.data is not None else {}
        except Exception as error:  # a report failure must not hide the rows
            report = {"report_error": str(error)}
        stopped = getattr(self.data, "stopped_because", None) or report.get("stopped_because")
        settings = []
        for key in ("mode", "budget", "fault_rate", "hard_share", "seed", "concurrency", "patience"):
            value = report.get(key, self._run_kwargs.get(key))
            if isinstance(value, Mapping):
                value = "custom"
            if value is not None:
                settings.append(f"{key}={_fmt(value)}")
        point = self._renderer.points[-1] if self._renderer and self._renderer.points else None
        extra = f"stopped_because={stopped}"
        if point is not None and point.pass_at_1 is not None:
            extra += f" · pass@1 {point.pass_at_1:.2f}"
            if point.pass_at_k is not None:
                extra += f" · pass@{point.k} {point.pass_at_k:.2f}"
        if point is not None and point.threshold is not None:
            extra += (f" · decided {point.decided} {point.threshold:g} at {point.decided_at_rows} rows (anytime-valid)"
                      if point.decided else
                      f" · {point.threshold:g} not decided by the anytime-valid bounds "
                      f"({point.n_tasks_complete} tasks complete)")
        if point is not None and point.mean_kl is not None:
            extra += f" · KL {point.mean_kl:.4f}/token over {point.kl_rows_text()}"
            if point.kl_is_sample:
                # said where the number is read: the live view caps reference scoring time
                extra += (f" (the reference scores for at most {self._renderer.final_score_seconds:g} s per final frame; "
                          "dashboard.figure() scores every row)")
            if point.n_kl_impossible:
                extra += (f"; {point.n_kl_impossible} more rows have probability 0 under the reference "
                          "(KL infinite there), left out")
        extra += " · " + " ".join(settings)
        self._set_status("finished", rows=rows, elapsed=self._elapsed(), extra=extra)

    # ------------------------------------------------------------------ grading and reference
    def _default_reference_applies(self) -> bool:
        return self.reference is None and self._run_reference is not None

    def _resolve_reference(self, seed: int) -> Any:
        """The reference KL is measured against: the one given, else a careful copy of a
        seeded agent (rate DEFAULT_REFERENCE_RATE), else None."""
        if self.reference is not None:
            return self.reference
        agent = self.agent
        if isinstance(agent, SeededAgent):
            return seeded_agent(agent.tools, rate=DEFAULT_REFERENCE_RATE, seed=agent.seed, behaviors=agent.behaviors,
                                temperature=agent.temperature)
        if agent is None and self._given.get("spec") is None:
            # simulate() builds seeded_agent(tools, seed=<the run's seed>) on these tools
            tools = self.tools if self.tools is not None else dataset_path("tools/airline_support.json")
            return seeded_agent(tools, rate=DEFAULT_REFERENCE_RATE, seed=int(seed or 0))
        return None

    @property
    def grading(self) -> str:
        """What grades the rows (the pass@k panel), in words."""
        if self.grader is not None:
            return f"grader {getattr(self.grader, '__name__', type(self.grader).__name__)!r}"
        grade = self._given.get("grade", "conduct")
        if grade:
            return "the conduct grader of the system prompt (the default; pass grader= for your own judge)"
        return "none (grade=False): no pass@k; pass grader= or drop grade=False"

    @property
    def kl_reference(self) -> str:
        """What KL is measured against (the KL panel), in words."""
        reference = self._run_reference
        if reference is None:
            return ("none: pass reference= (a model spec such as the base model, tk.seeded_agent(...), "
                    "a callable row -> logprob or a row field) and set logprobs on")
        if isinstance(reference, SeededAgent):
            name = f"tk.seeded_agent(rate={reference.rate:g}, seed={reference.seed})"
        elif isinstance(reference, str):
            name = repr(reference)
        else:
            name = getattr(reference, "__name__", None) or type(reference).__name__
        if self.reference is None:
            return f"{name}, the agent's seeded policy with fewer planted mistakes (the default; pass reference= for yours)"
        return name

    def _about_html(self) -> str:
        return (f"<small>pass@k graded by: {html.escape(self.grading)}<br>"
                f"KL measured against: {html.escape(self.kl_reference)}</small>")

    def _table_html(self) -> str:
        latest = list(self._latest)
        if not latest:
            return "<small>latest rows appear here</small>"
        head = "".join(f"<th style='text-align:left;padding:0 6px'>{h}</th>"
                       for h in ("#", "task", "prompt", "ended_by", "reward", "steps", "faults"))
        body = []
        start = len(self.rows) - len(latest)
        for offset, row in enumerate(latest):
            task = str(row.get("scenario_id") or row.get("task_id") or "")[:15]
            prompt = str(row.get("prompt", ""))
            prompt = prompt if len(prompt) <= 60 else prompt[:57] + "..."
            reward = row.get("reward")
            cells = (start + offset + 1, task, prompt, row.get("ended_by", ""),
                     "" if reward is None else _fmt(reward), len(row.get("steps") or ()), len(row.get("faults") or ()))
            body.append("<tr>" + "".join(f"<td style='padding:0 6px'>{html.escape(str(v))}</td>" for v in cells) + "</tr>")
        return f"<table style='font-size:11px'><tr>{head}</tr>{''.join(reversed(body))}</table>"

    # ------------------------------------------------------------------ results
    @property
    def progress(self) -> RunProgress:
        """The points the live figure drew (irregular spacing, live-size bootstrap)."""
        points = tuple(self._renderer.points) if self._renderer else ()
        k = self._tracker.k if self._renderer else None
        reference = self._run_reference
        return RunProgress(points=points, k=k, reference=None if reference is None else str(reference)[:80],
                           note=None if points else "no run yet")

    def figure(self, *, checkpoints: int = 40, title: str | None = None):
        """The run's final figure for a paper: pass@1 / pass@k and KL against rows landed,
        recomputed from every row (in landing order) at ``checkpoints`` evenly spaced
        prefixes with the full 10,000-resample bootstrap."""
        from toolkit.plots.live import run_progress_figure

        if not self.rows:
            raise ConfigError("no rows yet: press Run (or dashboard.run()) and wait for the run first")
        if self._figure_cache is None or self._figure_cache[0] != (len(self.rows), checkpoints):
            k = self._tracker.k
            progress = run_progress(self.rows, k=k, reference=self._run_reference, checkpoints=checkpoints,
                                    n_resamples=FINAL_RESAMPLES, seed=self._run_kwargs.get("seed") or 0)
            self._figure_cache = ((len(self.rows), checkpoints), progress)
        return run_progress_figure(self._figure_cache[1], title=title or self.title)

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        # where widgets do not render (a saved notebook on a site, nbconvert), text/plain is
        # shown: the widget tree's repr would print every child's HTML source
        bundle["text/plain"] = (f"{self!r}: the dashboard's widgets show in JupyterLab, Jupyter Notebook or Voila "
                                f"with ipywidgets; {self.status_text}")
        return bundle

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<Dashboard {state}: {len(self.rows)} rows, runs={self.runs}>"


def knobs_validate(name: str, value: Any) -> Any:
    """The engine's own check of one knob value (its KnobError message on refusal)."""
    return RunKnobs.validate(name, value)
