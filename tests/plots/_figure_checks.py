"""Layout checks a reviewer makes by eye, done on the drawn figure (issue 22).

Every check draws the figure on an Agg canvas at its own dpi (constrained layout runs then)
and works in display coordinates (pixels), so it sees what a reader sees:

- :func:`legend_overlaps`: no legend box covers a data point, bar, band, error bar, line or
  annotation of the axes it describes (a figure-level legend: of any axes), nor any tick
  label or axis label;
- :func:`title_problems`: every title and suptitle lies inside the figure, clears the top of
  its axes by :data:`TITLE_GAP_PT`, and overlaps no other panel or title;
- :func:`unreadable_labels`: no tick label, legend entry or title is a hex hash or a colour
  code, no tick of a categorical axis is blank, tick labels of one axis do not overlap, and
  no text is cut off by the figure's edge;
- :func:`subset_problems`: when fewer items are drawn than were given, the figure says
  "<shown> of <total>".

Each returns a list of readable problems (empty when the figure passes), so a failing test
names what it saw.
"""

from __future__ import annotations

import math
import re

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FixedLocator, FuncFormatter
from matplotlib.transforms import Bbox

# A 10 pt title's descenders sit about 3 pt under its baseline; the reader sees the title
# touch the plot when less than about 4 pt of air is left between them and the frame
# (matplotlib's default 6 pt pad leaves 3.1 pt: the defect of issue 22).
TITLE_GAP_PT = 4.0

# Line segments are sampled every 2 px: finer than a legend's text height (~10 px at 8 pt
# and 110 dpi), so a line passing under a legend box always leaves a sample inside it.
_SAMPLE_PX = 2.0

# A hash: 8 or more hex digits mixing letters and digits, standing alone or after a prefix
# ("sc-5bac5cc761c6"); 8 is the shortest digest the toolkit writes. Digit-only runs are
# numbers (1594323), letter-only runs are words ("facade").
_HASH = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{8,}(?![0-9A-Za-z])")
_COLOUR_CODE = re.compile(r"#[0-9A-Fa-f]{6}(?![0-9A-Za-z])")


def draw(figure):
    """Draw ``figure`` on an Agg canvas (layout engines run) and return the renderer."""
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def _visible_text(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _overlap(a: Bbox, b: Bbox, tolerance: float = 0.5) -> bool:
    """Overlap by more than ``tolerance`` px in both directions (touching is not covering)."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tolerance) and (min(a.y1, b.y1) - max(a.y0, b.y0) > tolerance)


def _densify(points: np.ndarray) -> np.ndarray:
    """The vertices of a polyline plus samples every ``_SAMPLE_PX`` along each segment."""
    points = points[np.isfinite(points).all(axis=1)]
    if len(points) < 2:
        return points
    out = [points]
    for start, end in zip(points[:-1], points[1:]):
        steps = int(math.hypot(*(end - start)) // _SAMPLE_PX)
        if steps > 1:
            fractions = np.linspace(0.0, 1.0, steps + 1)[1:-1, None]
            out.append(start + fractions * (end - start))
    return np.vstack(out)


def _inside(points: np.ndarray, box: Bbox) -> np.ndarray:
    if not len(points):
        return np.zeros(0, dtype=bool)
    return (points[:, 0] > box.x0) & (points[:, 0] < box.x1) & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)


def _clipped(points: np.ndarray, ax) -> np.ndarray:
    # data outside the axes is clipped away on screen; only what is drawn can be covered
    return points[_inside(points, ax.bbox)] if len(points) else points


def data_marks(ax, renderer) -> list[tuple[str, object]]:
    """What the reader reads in ``ax``: ``(description, geometry)`` pairs in display pixels.

    Geometry is an ``(n, 2)`` array of points (line vertices and samples along their
    segments, scatter offsets, error-bar segments) or a ``Bbox`` (bars, spans, annotations)
    or a ``Path`` (shaded bands).
    """
    marks: list[tuple[str, object]] = []
    for line in ax.get_lines():
        if not line.get_visible() or not len(line.get_xydata()):
            continue
        points = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        if line.get_linestyle() not in ("None", "none", " ", ""):
            points = _densify(points)
        marks.append((f"line {line.get_label()!r}", _clipped(points, ax)))
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):
            offsets = np.asarray(collection.get_offsets(), dtype=float)
            points = collection.get_offset_transform().transform(offsets) if len(offsets) else offsets
            marks.append((f"points {collection.get_label()!r}", _clipped(points, ax)))
        elif isinstance(collection, LineCollection):
            transform = collection.get_transform()
            for segment in collection.get_segments():
                if len(segment):
                    points = _densify(transform.transform(np.asarray(segment, dtype=float)))
                    marks.append(("error bar / segment", _clipped(points, ax)))
        elif isinstance(collection, PolyCollection):
            transform = collection.get_transform()
            for path in collection.get_paths():
                marks.append((f"band {collection.get_label()!r}", path.transformed(transform)))
    for patch in ax.patches:
        if not patch.get_visible():
            continue
        if isinstance(patch, Rectangle):
            box = patch.get_window_extent(renderer)
            if box.width > 0 and box.height > 0 and math.isfinite(box.width + box.height):
                marks.append((f"bar/span {patch.get_label()!r}", Bbox.intersection(box, ax.bbox) or Bbox.null()))
        else:
            marks.append((f"patch {patch.get_label()!r}", patch.get_path().transformed(patch.get_transform())))
    for text in ax.texts:
        if _visible_text(text):
            marks.append((f"annotation {text.get_text()!r}", text.get_window_extent(renderer)))
    return marks


def _covers(box: Bbox, geometry) -> bool:
    if isinstance(geometry, Bbox):
        return _overlap(box, geometry)
    if isinstance(geometry, np.ndarray):
        return bool(_inside(geometry, box).any())
    # a shaded band: covered when the legend box and the filled polygon meet
    return bool(geometry.intersects_bbox(box, filled=True))


def _axis_texts(ax, renderer) -> list[tuple[str, Bbox]]:
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        for label in _ticklabels(axis):
            out.append((f"tick label {label.get_text()!r}", label.get_window_extent(renderer)))
        if _visible_text(axis.label):
            out.append((f"axis label {axis.label.get_text()!r}", axis.label.get_window_extent(renderer)))
    return out


def legend_overlaps(figure) -> list[str]:
    """Legends that cover data, annotations or axis text; empty when none does."""
    renderer = draw(figure)
    problems = []
    owned = [(legend, [legend.axes]) for ax in figure.axes if (legend := ax.get_legend()) is not None]
    owned += [(legend, list(figure.axes)) for legend in figure.legends]
    for legend, axes in owned:
        if not legend.get_visible():
            continue
        # 1 px inside the frame: a mark that only grazes the legend's border is not covered
        box = legend.get_window_extent(renderer).padded(-1.0)
        for ax in axes:
            for what, geometry in data_marks(ax, renderer):
                if _covers(box, geometry):
                    problems.append(f"legend {_legend_words(legend)!r} covers {what}")
        for ax in figure.axes:
            for what, text_box in _axis_texts(ax, renderer):
                if _overlap(box, text_box):
                    problems.append(f"legend {_legend_words(legend)!r} covers {what}")
    return problems


def _legend_words(legend) -> str:
    return "; ".join(t.get_text() for t in legend.get_texts())[:60]


def _titles(ax) -> list[Text]:
    return [t for t in (ax.title, ax._left_title, ax._right_title) if _visible_text(t)]


def title_problems(figure) -> list[str]:
    """Titles that leave the figure, touch their axes, or overlap another panel or title."""
    renderer = draw(figure)
    problems = []
    frame = figure.bbox.padded(0.5)
    gap_px = TITLE_GAP_PT * figure.dpi / 72.0
    boxes = []
    for ax in figure.axes:
        for title in _titles(ax):
            box = title.get_window_extent(renderer)
            words = title.get_text()[:50]
            boxes.append((words, box, ax))
            if not frame.containsx(box.x0) or not frame.containsx(box.x1) or not frame.containsy(box.y1):
                problems.append(f"title {words!r} runs outside the figure ({box} vs {figure.bbox.bounds})")
            if box.y0 - ax.bbox.y1 < gap_px:
                problems.append(
                    f"title {words!r} sits {(box.y0 - ax.bbox.y1) * 72 / figure.dpi:.1f} pt above its axes; "
                    f"it needs {TITLE_GAP_PT} pt to read as apart from the plot"
                )
            for other in figure.axes:
                if other is not ax and _overlap(box, other.bbox):
                    problems.append(f"title {words!r} overlaps another panel")
    for index, (words, box, _) in enumerate(boxes):
        for other_words, other_box, _ in boxes[index + 1:]:
            if _overlap(box, other_box):
                problems.append(f"titles {words!r} and {other_words!r} overlap")
    suptitle = figure._suptitle
    if suptitle is not None and _visible_text(suptitle):
        box = suptitle.get_window_extent(renderer)
        words = suptitle.get_text()[:50]
        if not (frame.containsx(box.x0) and frame.containsx(box.x1) and frame.containsy(box.y1)):
            problems.append(f"suptitle {words!r} runs outside the figure")
        for ax in figure.axes:
            if _overlap(box, ax.get_tightbbox(renderer)):
                problems.append(f"suptitle {words!r} overlaps a panel or its title")
    return problems


def _ticklabels(axis) -> list[Text]:
    """The tick labels the reader sees: visible, non-blank, at a tick inside the view."""
    low, high = sorted(axis.get_view_interval())
    span = (high - low) or 1.0
    out = []
    for locs, labels in ((axis.get_majorticklocs(), axis.get_majorticklabels()),
                         (axis.get_minorticklocs(), axis.get_minorticklabels())):
        for loc, label in zip(locs, labels):
            if low - 1e-9 * span <= loc <= high + 1e-9 * span and _visible_text(label):
                out.append(label)
    return out


def _drawn_texts(figure) -> list[Text]:
    """Every text the reader sees: titles, axis and tick labels in view, legends, annotations."""
    texts = list(figure.texts) + ([figure._suptitle] if figure._suptitle is not None else [])
    for ax in figure.axes:
        texts += _titles(ax) + list(ax.texts)
        for axis in (ax.xaxis, ax.yaxis):
            texts += _ticklabels(axis) + [axis.label]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
    for legend in figure.legends:
        texts += legend.get_texts()
    return [t for t in texts if _visible_text(t)]


def _categorical(axis) -> bool:
    """Ticks placed and named by hand (``set_yticks(positions, labels)``), not numbers."""
    return isinstance(axis.get_major_locator(), FixedLocator) and isinstance(
        axis.get_major_formatter(), (FixedFormatter, FuncFormatter))


def unreadable_labels(figure) -> list[str]:
    """Hashes or colour codes where a name belongs, blank categorical ticks, colliding ticks."""
    renderer = draw(figure)
    problems = []
    texts: list[tuple[str, str]] = []
    for ax in figure.axes:
        texts += [("title", t.get_text()) for t in _titles(ax)]
        for axis in (ax.xaxis, ax.yaxis):
            labels = _ticklabels(axis)
            texts += [("tick label", label.get_text()) for label in labels]
            if _categorical(axis):
                # each tick stands for an item, and an item has a name
                low, high = sorted(axis.get_view_interval())
                for loc, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels()):
                    if low <= loc <= high and label.get_visible() and not label.get_text().strip():
                        problems.append(f"blank tick label at {loc:g} on a categorical axis")
            boxes = [(label.get_text(), label.get_window_extent(renderer)) for label in labels]
            for index, (words, box) in enumerate(boxes):
                for other_words, other_box in boxes[index + 1:]:
                    if _overlap(box, other_box):
                        problems.append(f"tick labels {words!r} and {other_words!r} overlap")
        legend = ax.get_legend()
        if legend is not None:
            texts += [("legend entry", t.get_text()) for t in legend.get_texts()]
    for legend in figure.legends:
        texts += [("legend entry", t.get_text()) for t in legend.get_texts()]
    frame = figure.bbox.padded(0.5)
    for text in _drawn_texts(figure):
        box = text.get_window_extent(renderer)
        if box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1:
            problems.append(f"text {text.get_text()[:50]!r} is cut off by the figure's edge")
    if figure._suptitle is not None and _visible_text(figure._suptitle):
        texts.append(("suptitle", figure._suptitle.get_text()))
    for kind, words in texts:
        if not words.strip() and kind == "legend entry":
            problems.append("blank legend entry")
        if _HASH.search(words):
            problems.append(f"{kind} {words!r} shows a hash where a name belongs")
        if _COLOUR_CODE.search(words):
            problems.append(f"{kind} {words!r} shows a colour code")
    return problems


def figure_words(figure) -> str:
    """Every visible text of the figure, joined (titles, labels, legends, annotations)."""
    draw(figure)
    texts = figure.findobj(lambda a: isinstance(a, Text))
    return " ".join(t.get_text() for t in texts if _visible_text(t))


def subset_problems(figure, shown: int, total: int) -> list[str]:
    """When ``shown < total`` the figure must say "<shown> of <total>"; never more than given."""
    if shown > total:
        return [f"{shown} items drawn from {total} given"]
    if shown == total:
        return []
    words = figure_words(figure)
    if not re.search(rf"(?<!\d){shown} of {total}(?!\d)", words):
        return [f"shows {shown} of {total} items without saying so: {words[:200]!r}"]
    return []
