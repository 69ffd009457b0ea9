"""The package layout: no import cycles anywhere (imports inside functions included), and
``import toolkit`` stays light.

The layer order itself is an import-linter contract in ``pyproject.toml`` that ``.ci/run``
checks with ``lint-imports``; this test is the independent check that the whole graph is
acyclic, read from the source with :mod:`ast` (not from import-linter's graph).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "toolkit"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the toolkit modules it imports anywhere in its file (functions included)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                subs = [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in paths]
                targets = subs if len(subs) == len(node.names) else [name, *subs]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges.update(t for t in targets if t in paths and t != module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 50  # the walk saw the package
    assert cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_lower_layers_import_nothing_above_them() -> None:
    # the same order as the import-linter contract in pyproject.toml, low to high
    layers = ["toolkit.errors", "toolkit._util", "toolkit.rows", "toolkit.stats", "toolkit.world", "toolkit.agents",
              "toolkit.situations", "toolkit.grading", "toolkit.sim", "toolkit.plots", "toolkit.whatif", "toolkit.live"]  # fmt: skip
    siblings = {"toolkit.logprobs": "toolkit.grading", "toolkit.training": "toolkit.sim", "toolkit._version": "toolkit.errors"}

    def rank(module: str) -> int | None:
        for prefix, same in siblings.items():
            if module == prefix or module.startswith(prefix + "."):
                return layers.index(same)
        for position, layer in enumerate(layers):
            if module == layer or module.startswith(layer + "."):
                return position
        return None  # the top: toolkit itself, __main__, _demo

    offences = [
        (module, target)
        for module, targets in import_graph().items()
        for target in targets
        if rank(module) is not None and (rank(target) is None or rank(target) > rank(module))
    ]
    assert offences == []


def test_import_toolkit_loads_no_plotting_widgets_or_pydantic() -> None:
    code = (
        "import sys, toolkit as tk; "
        "print(sorted(m for m in ('matplotlib', 'ipywidgets', 'pydantic', 'openai', 'anthropic', 'dask') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_lazy_names_load_on_first_use() -> None:
    code = "import sys, toolkit as tk; tk.plots.pass_at_k_curve; tk.Dashboard; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "True"
