"""README promises: the two commands up front, CI running the test one, knob tables = code."""

import re
from pathlib import Path

import toolkit as tk

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code_blocks(text):
    return re.findall(r"```(?:bash)?\n(.*?)```", text, flags=re.S)


def test_readme_opens_with_the_two_commands():
    head = README.split("---", 1)[0]
    blocks = [block.strip() for block in _code_blocks(head)]
    assert len(blocks) == 2
    demo, tests = blocks
    assert demo.startswith("python3 -m venv .venv") and demo.endswith("-m toolkit demo")
    assert tests.startswith("python3 -m venv .venv") and "'.[dev]'" in tests and tests.endswith("-m pytest")


def test_ci_runs_exactly_the_readme_test_command():
    tests_command = [block.strip() for block in _code_blocks(README.split("---", 1)[0])][1]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert tests_command in ci_lines


def test_readme_knob_tables_are_the_code():
    for table in ("experiment", "engine"):
        assert tk.knob_table_markdown(table) in README, f"README's {table} knob table differs from RunKnobs"


def test_readme_example_prints_what_its_comment_says(tmp_path, monkeypatch):
    # the first python block of the README, run as written (output= into a temporary folder);
    # its pass line comment is the run's own output, so an engine change that moves it fails here
    block = re.findall(r"```python\n(.*?)```", README, flags=re.S)[0]
    comment = re.search(r"print\(data\.pass_at\)\s+# (pass@1 .*?) \| \.\.\.", block).group(1)
    code = block.replace("tk.plots.pass_at_k_curve(data.rows)", "")  # the figure is the plots tests' job
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code.replace("print(data.pass_at)", "printed = str(data.pass_at)"), "README.md", "exec"), namespace)
    assert namespace["printed"].startswith(comment), (namespace["printed"], comment)


def test_readme_whatif_block_runs_as_written(tmp_path, monkeypatch):
    # the README's what-if commands, in order, in an empty folder: init writes what the next two read
    from toolkit.__main__ import main

    block = next(b for b in re.findall(r"```bash\n(.*?)```", README, flags=re.S) if "whatif init" in b)
    commands = [line.split("#")[0].split() for line in block.splitlines() if line.startswith("python -m toolkit ")]
    assert [c[4] for c in commands] == ["init", "validate", "fork"]
    monkeypatch.chdir(tmp_path)
    assert [main(command[3:]) for command in commands] == [0, 0, 0]  # the example ships, offline
    assert (tmp_path / "verdict.md").read_text(encoding="utf-8").startswith("# What-if verdict: Ship")
