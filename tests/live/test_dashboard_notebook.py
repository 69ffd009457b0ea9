"""notebooks/00_dashboard.ipynb headless: what it shows a reader is text or rendered HTML, never
HTML source printed as text (``<span class='toolkit-status'>`` in a print, or the widget
tree's repr where widgets do not render)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "00_dashboard.ipynb"
# an opening or closing tag of the HTML the dashboard writes (span, div, b, table, small, ...)
HTML_TAG = re.compile(r"</?(span|div|b|br|table|tr|td|th|small|code)\b[^>]*>", re.IGNORECASE)


def _texts(notebook):
    """(cell index, where, text) of every output a reader sees as text."""
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                yield index, output.get("name"), output.get("text", "")
            elif output.get("output_type") == "error":
                yield index, "error", "\n".join(output.get("traceback", []))
            else:
                plain = output.get("data", {}).get("text/plain")
                if plain is not None:
                    yield index, "text/plain", plain if isinstance(plain, str) else "".join(plain)


def test_dashboard_notebook_prints_no_html_source(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = list(_texts(notebook))
    raw = [(index, where, HTML_TAG.search(text).group(0)) for index, where, text in texts if HTML_TAG.search(text)]
    assert raw == [], f"HTML source shown as text (cell, output, first tag): {raw}"
    printed = "".join(text for _, where, text in texts if where == "stdout")
    # the cell that used to print the status widget's HTML now prints its plain text ...
    assert "status: finished · rows 60 " in printed, printed
    # ... and says what graded the rows and what KL was measured against
    assert "graded by: the conduct grader of the system prompt" in printed, printed
    assert "KL against: tk.seeded_agent(rate=0.1, seed=0)" in printed, printed
    # the dashboard's own display has a plain-text form for viewers without widgets
    display = next(text for _, where, text in texts if where == "text/plain" and "Dashboard" in text)
    assert "widgets show in JupyterLab" in display, display
