"""The dashboard notebook in a real JupyterLab, driven in headless Chromium.

This is the only layer that catches "the plot never appears in a real front-end" (a
thread doing ``clear_output`` + ``plt.show()`` passes headless and shows nothing in a
browser; docs/design/jupyter.md §2.2). The test opens ``00_dashboard.ipynb`` in the Lab that
``make lab`` starts, runs all cells (the notebook's own first run finishes), and checks what a
new user sees: no "Jupyter news?" toast, no HTML source in any output, and both panels of
the frame drawn (the notebook builds the dashboard as the README does, with no grader and
no reference). Then it types a new budget into the budget control, clicks Run, and
requires at least three distinct plot frames while the run goes and a final status saying
the run finished with that budget, its KL labelled a sample when it is one. Screenshots go
to ``tests/browser/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import hashlib
import io
import re
import time

import numpy as np
import pytest
from PIL import Image

from toolkit.plots import PALETTE

pytestmark = pytest.mark.browser

NOTEBOOK = "00_dashboard.ipynb"
NEW_BUDGET = 2000
# an opening or closing tag of the HTML the dashboard writes, shown as text
HTML_TAG = re.compile(r"</?(span|div|b|br|table|tr|td|th|small|code)\b[^>]*>", re.IGNORECASE)
# A drawn curve (pass@1 blue on the left, KL vermillion on the right) covers ~300 pixels of
# its colour in a 600 x 288 frame; an empty panel (a grey "why" note) has none. 50 leaves
# room for the browser's scaling and a curve that is still short.
MIN_CURVE_PIXELS = 50


def _run_all(page, log, attempts=3):
    """Run > Run All Cells (command id runmenu:run-all in Lab 4.6), focusing a cell first.
    A click that lands while Lab is still wiring the kernel is dropped without a trace (seen
    1 time in 4 on a loaded machine), so check that a cell started and retry if not."""
    started = page.locator(".jp-NotebookPanel .jp-InputPrompt", has_text=re.compile(r"\[(\*|\d+)\]"))
    for attempt in range(1, attempts + 1):
        page.locator(".jp-NotebookPanel .jp-Cell").first.click()
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-item[data-command='runmenu:run-all']").click()
        log(f"run all clicked (attempt {attempt})")
        try:
            started.first.wait_for(timeout=20_000)
            return
        except Exception:  # playwright TimeoutError: nothing started, try again
            page.keyboard.press("Escape")
    raise AssertionError(f"Run All started no cell in {attempts} attempts")


def _status(output):
    return output.locator(".toolkit-status").first


def _curve_pixels(png: bytes, colour: str, tolerance: int = 40) -> tuple[int, int]:
    """Pixels within ``tolerance`` (per channel) of ``colour`` in the left and right halves."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    target = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)])
    near = np.abs(pixels - target).max(axis=2) <= tolerance
    half = pixels.shape[1] // 2
    return int(near[:, :half].sum()), int(near[:, half:].sum())


def _assert_both_panels_drawn(page, image, log):
    box = image.bounding_box()
    png = page.screenshot(clip=box)
    blue, verm = _curve_pixels(png, PALETTE["blue"]), _curve_pixels(png, PALETTE["vermillion"])
    log(f"curve pixels: pass@1 blue (left, right) {blue}, KL vermillion {verm}")
    assert blue[0] >= MIN_CURVE_PIXELS, f"the pass@k panel is empty: {blue}"
    assert verm[1] >= MIN_CURVE_PIXELS, f"the KL panel is empty: {verm}"


def _assert_no_html_source_shown(page):
    texts = page.locator(".jp-NotebookPanel .jp-OutputArea-output").all_inner_texts()
    shown = [(index, HTML_TAG.search(text).group(0)) for index, text in enumerate(texts) if HTML_TAG.search(text)]
    assert texts and not shown, f"HTML source shown as text in outputs (output, first tag): {shown}"


def test_dashboard_notebook_live_in_jupyterlab(lab_server, browser_page, screenshots_dir):
    page = browser_page
    log_lines = []
    started = time.monotonic()

    def log(message):
        log_lines.append(f"[{time.monotonic() - started:6.1f}s] {message}")

    lab_server.delete_sessions()  # a stale kernel would carry an old dashboard
    try:
        page.goto(lab_server.notebook_url(NOTEBOOK))
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90_000)
        log("notebook open, kernel idle")
        _run_all(page, log)

        output = page.locator(".jp-NotebookPanel .jp-OutputArea-output").filter(
            has=page.locator("button.widget-button", has_text="Run")).first
        run_button = output.locator("button.widget-button", has_text="Run")
        run_button.wait_for(timeout=120_000)
        status = _status(output)
        # the notebook's own first run (from code) must finish before we take over
        status.filter(has_text="finished").wait_for(timeout=180_000)
        log(f"first run: {status.inner_text()!r}")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=180_000)
        log("all cells ran")

        # what a new user sees after Run All: no news toast, no HTML source printed, both
        # panels drawn with no grader= and no reference= given, and the dashboard saying
        # what it graded with and what KL is against
        assert page.get_by_text("official Jupyter news").count() == 0, "the 'Jupyter news?' toast is showing"
        _assert_no_html_source_shown(page)
        about = output.locator(".widget-html", has_text="KL measured against").first.inner_text()
        log(f"about line: {about!r}")
        assert "graded by: the conduct grader of the system prompt" in about, about
        assert "KL measured against: tk.seeded_agent(rate=0.1, seed=0)" in about, about
        first = status.inner_text()
        assert "pass@1" in first and "KL " in first, first
        image = output.locator(".widget-image").first
        image.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots_dir / "dashboard_0_after_run_all.png"), full_page=False)
        _assert_both_panels_drawn(page, image, log)

        # change a knob through the UI: the budget IntText
        budget = output.locator(".widget-inline-hbox", has=page.locator("label", has_text=re.compile(r"^budget$"))).locator("input")
        budget.scroll_into_view_if_needed()
        budget.fill(str(NEW_BUDGET))
        budget.press("Enter")
        image.scroll_into_view_if_needed()
        output.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots_dir / "dashboard_1_before_run.png"), full_page=False)

        def frame_hash():
            box = image.bounding_box()
            if not box or box["height"] < 20:
                return None
            # a clip screenshot, not an element one: an element screenshot waits for the
            # element to be 'stable' and times out while the image keeps changing
            return hashlib.sha1(page.screenshot(clip=box)).hexdigest()

        before = frame_hash()
        run_button.click()
        log("Run clicked")
        # the status still shows the first run until the kernel handles the click
        status.filter(has_text=re.compile("starting|running")).wait_for(timeout=60_000)
        frames = []
        mid_shot = False
        deadline = time.monotonic() + 420
        text = ""
        while time.monotonic() < deadline:
            text = status.inner_text()
            if "finished" in text or "failed" in text:
                break
            if "running" in text:
                current = frame_hash()
                if current and current != before and current not in frames:
                    frames.append(current)
                rows = re.search(r"rows (\d+)/", text)
                if not mid_shot and rows and int(rows.group(1)) >= NEW_BUDGET // 2:
                    page.screenshot(path=str(screenshots_dir / "dashboard_2_during_run.png"))
                    mid_shot = True
                    log(f"mid-run screenshot at {text!r}")
            time.sleep(0.2)
        time.sleep(0.8)  # let the final frame paint
        final = frame_hash()
        if final and final not in frames:
            frames.append(final)
        text = status.inner_text()
        output.scroll_into_view_if_needed()
        page.screenshot(path=str(screenshots_dir / "dashboard_3_after_run.png"), full_page=False)
        log(f"distinct frames {len(frames)}; status {text!r}")
        assert "finished" in text, text
        assert f"rows {NEW_BUDGET}" in text and f"budget={NEW_BUDGET}" in text, text
        assert "stopped_because=budget" in text, text
        # KL is over every row, or said to be a sample (of how many, and why), or names the
        # rows the reference gives probability 0
        kl = re.search(r"KL -?[\d.]+/token over (a random sample of \d+ of \d+ rows \(the reference scores|(\d+) rows)", text)
        assert kl, text
        if kl.group(2) and int(kl.group(2)) != NEW_BUDGET:
            assert "more rows have probability 0 under the reference" in text, text
        assert len(frames) >= 3, f"the plot did not update live: {len(frames)} distinct frames; {log_lines}"
        assert image.is_visible()
        _assert_both_panels_drawn(page, image, log)
        _assert_no_html_source_shown(page)

        # the Advanced section: generated knobs; a value out of bounds is refused in the
        # widget with the engine's own message and the field goes back to its last value
        output.get_by_text("Advanced", exact=True).click()
        output.get_by_text(re.compile(r"^experiment knobs")).click()
        grace = output.locator(".widget-inline-hbox", has=page.locator("label", has_text=re.compile(r"^stop_grace$"))).locator("input")
        grace.scroll_into_view_if_needed()
        grace.fill("-5")
        grace.press("Enter")
        refused = output.locator("span", has_text="refused:")
        refused.wait_for(timeout=30_000)
        message = refused.inner_text()
        log(f"refusal shown: {message!r}")
        page.screenshot(path=str(screenshots_dir / "dashboard_4_advanced_refusal.png"), full_page=False)
        assert "stop_grace" in message and "floor" in message, message
        page.wait_for_function("(el) => parseFloat(el.value) === 5", arg=grace.element_handle(), timeout=30_000)

        errors = [e for e in page.console_errors if "favicon" not in e]
        assert not errors, errors[:5]
    except Exception:
        page.screenshot(path=str(screenshots_dir / "dashboard_failure.png"), full_page=True)
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
        log_lines.append(f"cell errors: {[e[-800:] for e in errors]}")
        log_lines.append(f"lab log tail:\n{lab_server.log_tail()}")
        raise
    finally:
        print("\n".join(log_lines))
        lab_server.delete_sessions()
    assert lab_server.kernels() == [], "a kernel outlived its session"
