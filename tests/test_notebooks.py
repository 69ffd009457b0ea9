"""Every notebook in notebooks/ runs headless, top to bottom, and is committed clean.

Notebooks assert on what they show (a cell fails when a number is out of range), so an
execution error here is a real failure. ``TOOLKIT_SMALL=1`` asks each notebook for its
small parameters.
"""

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

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
