"""The renderer thread: rows land in a tracker, frames leave as PNG bytes.

Why this shape (measured on this project's machine, see docs/design/jupyter.md §2): a background
thread that renders a matplotlib ``Figure`` (object API, Agg canvas, no pyplot) to PNG
bytes and assigns them to an ``ipywidgets.Image`` updates live in JupyterLab, Voila and
headless nbclient. ``with out: clear_output(); plt.show()`` from a thread shows NOTHING in a
browser although it passes headless, so it is never used here. Widget traits are only
ever assigned whole values, a few times a second, from this one thread.

Cost control: every frame costs CPU time that, under the GIL, the simulation's threads do
not get. The renderer measures each frame's CPU time (statistics + drawing, ~0.11 s for
a 600 x 288 px frame here) and spaces frame starts so that its CPU share stays under
``max_duty`` (default 3%), never redraws faster than ``refresh_seconds`` and never starts
frames more than ``max_wait_seconds`` apart (3 s: on an overloaded machine, a plot that
stops moving reads as a hung run, so there the frame rate wins over the duty cap). The
defaults come from ``benchmarks/bench_live.py`` (1,000 offline rows, 2 cores): at an 8%
duty the dashboard cost +20% CPU (GIL hand-offs add to the renderer's own share), at 5%
+15%, at 3% +5-6% (re-measured in the issue-8 audit: +8.7% process CPU, 1,000 rows,
load 3.8), inside the project's 10%. Reference scoring for KL gets a quarter of a
drawing's CPU time per frame (a seeded random sample of the rows when it cannot keep
up) and at most ``final_score_seconds`` more on the final frame; ``dashboard.figure()``
scores every row. Pass ``max_duty=1.0`` to the Dashboard for a frame every
``refresh_seconds`` when overhead does not matter.
"""

from __future__ import annotations

import io
import threading
import time
import traceback
from collections.abc import Callable

from toolkit.sim import ProgressPoint, ProgressTracker
from toolkit.sim.progress import FINAL_RESAMPLES

# Figure size and resolution of a live frame: 7.5 x 3.6 in at 80 dpi is 600 x 288 px, wide
# enough for two readable panels in a notebook cell and half the pixels of 110 dpi.
LIVE_DPI = 80
# zlib level 1 encodes a frame several times faster than the default 6, for PNGs ~20%
# larger; a frame lives a fraction of a second, so speed wins.
_PNG_OPTIONS = {"compress_level": 1}


def render_png(points: list[ProgressPoint], *, dpi: float = LIVE_DPI, title: str | None = None) -> bytes:
    """One live frame: :func:`toolkit.plots.live.run_progress_figure` as PNG bytes.

    Constrained layout is switched off for live frames (fixed margins): it doubled the
    drawing time of a frame here (0.14-0.23 s vs 0.07-0.15 s on a loaded 2-core box); the
    legends give way to informative titles (0.085 s vs 0.12 s CPU per frame, measured).
    """
    from toolkit.plots._style import _style
    from toolkit.plots.live import run_progress_figure

    with _style():
        figure = run_progress_figure(points, title=title, dpi=dpi, layout=None, legend=False)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi, bbox_inches=None, pil_kwargs=_PNG_OPTIONS)
    return buffer.getvalue()


class LiveRenderer:
    """Redraws from ``tracker`` on its own daemon thread until :meth:`finish` is called.

    ``on_frame(png_bytes, point, final)`` receives every frame (the dashboard assigns the
    bytes to its Image widget and refreshes its status line); it runs on the renderer
    thread and must only assign whole widget values. ``clock()`` gives seconds since the
    run started (for the point's ``elapsed``).
    """

    def __init__(self, tracker: ProgressTracker, on_frame: Callable[[bytes, ProgressPoint, bool], None], *,
                 clock: Callable[[], float], refresh_seconds: float = 0.5, max_duty: float = 0.03,
                 max_wait_seconds: float = 3.0, final_score_seconds: float | None = 2.0,
                 title: str | None = None, dpi: float = LIVE_DPI):
        if not refresh_seconds > 0:
            raise ValueError(f"refresh_seconds must be > 0; got {refresh_seconds!r}")
        if not 0 < max_duty <= 1:
            raise ValueError(f"max_duty must be in (0, 1]; got {max_duty!r}")
        self.tracker = tracker
        self.on_frame = on_frame
        self.clock = clock
        self.refresh_seconds = float(refresh_seconds)
        self.max_duty = float(max_duty)
        self.max_wait_seconds = float(max_wait_seconds)
        self.final_score_seconds = final_score_seconds
        self.title = title
        self.dpi = dpi
        self.points: list[ProgressPoint] = []
        self.frames = 0
        self.busy_seconds = 0.0  # CPU seconds of this thread, final frame included
        self.live_busy_seconds = 0.0  # the same, while the run went (final frame excluded)
        self.error: str | None = None
        self._last_draw_seconds = 0.05
        self._finish = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="toolkit-live-renderer", daemon=True)

    def start(self) -> LiveRenderer:
        self._thread.start()
        return self

    def finish(self) -> None:
        """Ask for the final frame (all rows, final-size bootstrap) and the thread's end."""
        self._finish.set()

    def join(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _frame(self, final: bool) -> None:
        started = time.thread_time()
        n_before = self.points[-1].n_rows if self.points else -1
        # Reference scoring gets a quarter of the CPU time the last drawing took (CPU, not
        # wall: wall time swells with GIL contention), so a frame costs ~1.25 draws.
        score_seconds = self.final_score_seconds if final else max(0.25 * self._last_draw_seconds, 0.01)
        point = self.tracker.point(self.clock(), n_resamples=FINAL_RESAMPLES if final else None,
                                   score_seconds=score_seconds)
        if point.n_rows != n_before or final or not self.points:
            if self.points and self.points[-1].n_rows == point.n_rows:
                self.points[-1] = point  # same rows, fresher numbers (the final bootstrap)
            else:
                self.points.append(point)
            drawing = time.thread_time()
            png = render_png(self.points, dpi=self.dpi, title=self.title)
            self._last_draw_seconds = time.thread_time() - drawing
            self.frames += 1
            self.on_frame(png, point, final)
        spent = time.thread_time() - started
        self.busy_seconds += spent
        if not final:
            self.live_busy_seconds += spent

    def _loop(self) -> None:
        try:
            wait = 0.0
            while True:
                finishing = self._finish.wait(wait)
                if not finishing and self.tracker.n_rows == 0:
                    wait = self.refresh_seconds  # nothing landed yet: nothing new to draw
                    continue
                # CPU time of this thread, not wall time: under the GIL a frame waits for
                # the simulation's threads, and only the CPU it burns is taken from them
                started, started_wall = time.thread_time(), time.monotonic()
                self._frame(final=finishing)
                if finishing:
                    return
                busy = time.thread_time() - started
                # frame starts are spaced so that busy / period <= max_duty, but never more
                # than max_wait_seconds apart (a frozen plot reads as a hung run); the
                # period counts from the frame's start, because under GIL contention a
                # frame's wall time is several times its CPU time
                period = max(self.refresh_seconds, busy / self.max_duty)
                period = min(period, max(self.max_wait_seconds, self.refresh_seconds))
                wait = max(0.05, period - (time.monotonic() - started_wall))
        except Exception:  # keep the error for the status line; the run itself goes on
            self.error = traceback.format_exc()
        finally:
            self._done.set()
