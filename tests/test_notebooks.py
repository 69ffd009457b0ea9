"""Every notebook in notebooks/ runs headless, top to bottom, and is committed clean.

Notebooks assert on what they show (a cell fails when a number is out of range), so an
execution error here is a real failure. ``TOOLKIT_SMALL=1`` asks each notebook for its
small parameters.
"""

import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

# what a reader must never see printed: raw markup (the status line once printed its HTML) and
# the engine's "no ceiling" sentinel 2**62 in either spelling
_RAW_MARKUP = re.compile(r"</?(span|div|table|small|b|br)\b", re.IGNORECASE)
_SENTINELS = ("4611686018427387904", "4.611686018427388e+18", "e+18")

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    # saved widget views (the dashboard's PNG frames among them) are outputs too
    assert "widgets" not in notebook.metadata, f"{path.name} has saved widget state in its metadata"
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{path.name} cell {index} has saved outputs"
            assert cell.get("execution_count") is None, f"{path.name} cell {index} has an execution count"
            # JupyterLab's "record timing" and nbclient store run times in cell metadata
            assert "execution" not in cell.metadata and "ExecuteTime" not in cell.metadata, (
                f"{path.name} cell {index} has saved execution timing")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_headless(path, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    started = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - started
    # the limit (each notebook under 60 s headless); measured 4-12 s each on a loaded
    # 2-core box, so the limit leaves 5x headroom for a slower machine
    assert elapsed < 60, f"{path.name} took {elapsed:.0f} s; notebooks must stay small under TOOLKIT_SMALL=1"
    images = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {}) or "image/svg+xml" in output.get("data", {})
    ]
    assert images, f"{path.name} showed no figure"
    _check_printed(path, notebook)


def _printed_text(notebook) -> list[tuple[int, str]]:
    """(cell index, text) of every printed or plain-text output; text/html is left out,
    since a DataFrame's HTML view is meant to be markup."""
    texts = []
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "stream":
                texts.append((index, output.get("text", "")))
            elif "text/plain" in output.get("data", {}):
                texts.append((index, output["data"]["text/plain"]))
            elif output.get("output_type") == "error":
                texts.append((index, "\n".join(output.get("traceback", []))))
    return texts


def _check_printed(path, notebook) -> None:
    for index, text in _printed_text(notebook):
        match = _RAW_MARKUP.search(text)
        assert match is None, f"{path.name} cell {index} prints raw markup {match.group(0)!r}: {text[:300]!r}"
        for sentinel in _SENTINELS:
            assert sentinel not in text, f"{path.name} cell {index} prints {sentinel!r}: {text[:300]!r}"


def test_printed_check_catches_markup_and_sentinels():
    """The check above can fail: a status line printed as HTML, and a bound printed as 2**62."""
    for text in ('<span style="color:red">running</span>', "max_turns: 4.611686018427388e+18"):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
            "x", outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)])])
        with pytest.raises(AssertionError):
            _check_printed(Path("probe.ipynb"), notebook)
    clean = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "x", outputs=[nbformat.v4.new_output("stream", name="stdout", text="pass@1 0.67 [0.61..0.72]")])])
    _check_printed(Path("probe.ipynb"), clean)
