"""README promises: every runnable block runs as written and prints what the README shows.

How a block is checked, by its fence:

* ```python: run in order with the other python blocks of its ``##`` section, in one
  namespace, in a temporary folder (so ``output="run.jsonl"`` lands there). A ``print(...)``
  line with a trailing ``# comment`` must print the comment (a comment ending in ``...`` is
  a prefix of the printed line), and a ```text block right after the python block is the
  block's whole printed output.
* ```bash whose lines are ``python -m toolkit ...`` commands: run in order through
  ``toolkit.__main__.main`` in a temporary folder; each must exit 0, and a ```text block
  right after is their printed output.
* The two install commands above the ``---`` are not run here: CI (``.ci/run``) runs the
  test command from a clean checkout, and ``tests/test_cli.py`` runs the demo the first one
  ends with. A test below checks that they stay the two commands the README opens with.
* ```text: never runnable on its own (checked as the output of the block before it).
* a fence with no language: the project layout tree, whose paths must exist.

Any other block fails the collection test, so a new kind of block needs a rule here first.
When the code changes what a block prints, the failure shows the real output: paste it.
"""

import builtins
import io
import re
import shlex
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

import toolkit as tk

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
HEAD, BODY = README.split("\n---\n", 1)
BODY_OFFSET = HEAD.count("\n") + 2  # README line number of BODY's first line, less one

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", flags=re.S | re.M)


@dataclass
class Block:
    language: str
    code: str
    line: int  # README line number of the block's first code line
    section: str  # the ``##`` heading it is under
    output: str | None = None  # the ```text block right after it, if any


def _blocks(text: str, offset: int) -> list[Block]:
    blocks: list[Block] = []
    previous_end = None
    for match in _FENCE.finditer(text):
        before = text[: match.start()]
        if match.group(1) == "text" and blocks and not text[previous_end : match.start()].strip():
            blocks[-1].output = match.group(2)  # only blank lines between: the output of the block above
        else:
            headings = re.findall(r"^## (.+)$", before, flags=re.M)
            blocks.append(Block(match.group(1), match.group(2), offset + before.count("\n") + 2, headings[-1] if headings else ""))
        previous_end = match.end()
    return blocks


BLOCKS = _blocks(BODY, BODY_OFFSET)
PYTHON_SECTIONS = sorted({b.section for b in BLOCKS if b.language == "python"}, key=lambda s: BODY.index(f"## {s}\n"))
BASH_BLOCKS = [b for b in BLOCKS if b.language == "bash"]


def _head_commands():
    return [match.group(2).strip() for match in _FENCE.finditer(HEAD)]


def _lines(text: str) -> list[str]:
    # trailing spaces and blank lines at the end are not part of what a reader compares
    return [line.rstrip() for line in text.rstrip().splitlines()]


# ---- the blocks this file knows how to check ------------------------------------------------


def test_every_block_is_one_this_file_checks():
    known = {"python", "bash", "", "console"}
    consoles = [b for b in BLOCKS if b.language == "console"]
    # console blocks start servers, which this file cannot run: one, in one section, and it
    # must start the server exactly as the real-model tests do (tests/real/conftest.py)
    assert [b.section for b in consoles] == ["Bring your own model"]
    fixture = (ROOT / "tests" / "real" / "conftest.py").read_text()
    for flag in ("llama_cpp.server", "--chat_format", "chatml-function-calling", "--logits_all", "--n_ctx", "2048", "SmolLM2-135M-Instruct.Q4_1.gguf"):
        assert flag in consoles[0].code and flag in fixture, flag
    unknown = [(b.line, b.language) for b in BLOCKS if b.language not in known]
    assert not unknown, f"README blocks (line, language) with no rule in tests/test_readme.py: {unknown}"
    trees = [b.line for b in BLOCKS if b.language == "" and b.section != "Project layout"]
    assert not trees, f"README blocks with no language outside the project layout (lines {trees}): name their language"
    for block in BASH_BLOCKS:
        commands = [line for line in block.code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert commands and all(line.startswith("python -m toolkit ") for line in commands), (
            f"README line {block.line}: a bash block this file cannot run offline: {commands}"
        )
    assert len(PYTHON_SECTIONS) >= 2 and BASH_BLOCKS  # the parser found the blocks (a broken regex finds none)
    assert any(b.output for b in BLOCKS)  # and at least one pasted output to compare
    readme_lines = README.splitlines()
    for block in BLOCKS:  # the line numbers the failures name are the README's
        assert readme_lines[block.line - 1] == block.code.splitlines()[0], block.line


def test_readme_opens_with_the_two_commands():
    blocks = _head_commands()
    assert len(blocks) == 2
    demo, tests = blocks
    assert demo.startswith("python3 -m venv .venv") and demo.endswith("-m toolkit demo")
    assert tests.startswith("python3 -m venv .venv") and "'.[dev]'" in tests and tests.endswith("-m pytest")


def test_ci_runs_exactly_the_readme_test_command():
    tests_command = _head_commands()[1]
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert tests_command in ci_lines


def test_readme_knob_tables_are_the_code():
    for table in ("experiment", "engine"):
        assert tk.knob_table_markdown(table) in README, f"README's {table} knob table differs from RunKnobs"


# ---- python blocks ---------------------------------------------------------------------------


def _print_comments(block: Block) -> dict[int, str]:
    """README line -> the comment after a ``print(...)`` on that line (what it must print)."""
    out = {}
    tokens = tokenize.generate_tokens(io.StringIO(block.code).readline)
    lines = block.code.splitlines()
    for token in tokens:
        if token.type == tokenize.COMMENT:
            row, column = token.start
            code = lines[row - 1][:column].strip()
            if code.startswith("print(") and code.endswith(")"):
                out[block.line + row - 1] = token.string[1:].strip()
    return out


def _run_python(block: Block, namespace: dict) -> tuple[str, dict[int, list[str]]]:
    """Run one block; return everything it printed and what each README line printed."""
    printed = io.StringIO()
    by_line: dict[int, list[str]] = {}

    def readme_print(*args, file=None, **kwargs):
        if file is not None:  # printing elsewhere (stderr) is not the block's output
            return builtins.print(*args, file=file, **kwargs)
        one = io.StringIO()
        builtins.print(*args, file=one, **kwargs)
        printed.write(one.getvalue())
        caller = sys._getframe(1)
        if caller.f_code.co_filename == "README.md":
            by_line.setdefault(caller.f_lineno, []).append(one.getvalue())

    namespace["print"] = readme_print
    # compiled at its README line, so a traceback and the print comments name README lines
    code = compile("\n" * (block.line - 1) + block.code, "README.md", "exec")
    exec(code, namespace)
    return printed.getvalue(), by_line


def _check_comment(line: int, comment: str, outputs: list[str]) -> None:
    assert outputs, f"README line {line}: the print never ran"
    got = outputs[0].rstrip("\n")
    if comment.endswith("..."):
        prefix = comment[:-3].rstrip()
        assert got.startswith(prefix), f"README line {line} says it prints\n  {comment}\nit printed\n  {got}"
    else:
        assert got == comment, f"README line {line} says it prints\n  {comment}\nit printed\n  {got}"


@pytest.mark.parametrize("section", PYTHON_SECTIONS)
def test_python_blocks_run_and_print_what_the_readme_shows(section, tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    try:
        for block in (b for b in BLOCKS if b.language == "python" and b.section == section):
            printed, by_line = _run_python(block, namespace)
            for line, comment in _print_comments(block).items():
                _check_comment(line, comment, by_line.get(line, []))
            if block.output is not None:
                assert _lines(printed) == _lines(block.output), (
                    f"README block at line {block.line} printed something else than the text block under it; "
                    f"it printed:\n{printed}"
                )
    finally:
        plt.close("all")  # the blocks draw figures as a notebook would; the plots tests check them


def test_a_drifted_print_comment_fails():
    # the checker itself: a wrong pasted number is caught, a right one and a '...' prefix pass
    block = Block("python", "print('pass@1 0.67 [0.61..0.72]')  # pass@1 0.29 ...\nprint(1)  # 1\n", 10, "s")
    _, by_line = _run_python(block, {})
    comments = _print_comments(block)
    assert comments == {10: "pass@1 0.29 ...", 11: "1"}
    _check_comment(11, comments[11], by_line[11])
    _check_comment(10, "pass@1 0.67 ...", by_line[10])
    with pytest.raises(AssertionError, match="it printed"):
        _check_comment(10, comments[10], by_line[10])


# ---- bash blocks -----------------------------------------------------------------------------


@pytest.mark.parametrize("block", BASH_BLOCKS, ids=[f"line{b.line}" for b in BASH_BLOCKS])
def test_bash_blocks_run_as_written(block, tmp_path, monkeypatch, capsys):
    # in order, in an empty folder: `whatif init` writes what `validate` and `fork` read
    from toolkit.__main__ import main

    commands = [shlex.split(line, comments=True) for line in block.code.splitlines() if line.startswith("python -m toolkit ")]
    monkeypatch.chdir(tmp_path)
    codes = [main(command[3:]) for command in commands]
    assert codes == [0] * len(commands), list(zip([" ".join(c) for c in commands], codes))
    if block.output is not None:
        assert _lines(capsys.readouterr().out) == _lines(block.output)


# ---- the layout tree ------------------------------------------------------------------------


def test_the_layout_tree_names_paths_that_exist():
    tree = next(b for b in BLOCKS if b.language == "" and b.section == "Project layout")
    parents: list[str] = []
    checked = 0
    for line in tree.code.splitlines():
        name = line.split()[0] if line.strip() else ""
        if not name:
            continue
        depth = (len(line) - len(line.lstrip())) // 2
        parents = parents[:depth]
        path = "/".join(parents + [name.rstrip("/")])
        assert (ROOT / path).exists(), f"README's project layout names {path}, which does not exist"
        checked += 1
        if name.endswith("/"):
            parents.append(name.rstrip("/"))
    assert checked > 20
