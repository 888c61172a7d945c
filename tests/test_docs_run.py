"""Docs that run: every Python and shell block of README.md and docs/**/*.md a reader is told to run.

A fenced block is run when its language is ``python`` (alone, in a fresh interpreter, as a reader pastes it)
or ``bash`` (with ``bash -euo pipefail``), in a temporary folder holding links to the repository's
``scenarios/`` and ``docs/``. A block without a language (or ``text``, ``yaml``) is output, a synopsis or a
diagram and never runs. An HTML comment on the line before a fence changes that (docs/architecture.md,
"Docs that run"):

* ``<!-- docs: illustrative -->`` never runs (it needs a clone, the network, or hours), and says why after
  a colon;
* ``<!-- docs: slow -->`` runs under ``-m slow``; ``<!-- docs: libs -->`` under ``-m libs`` (the DP
  libraries of the ``libs`` extra);
* ``<!-- docs: elsewhere -->``: run by another test (docs/api.md's blocks, in order, by tests/test_api.py).

The default rows (docs/architecture.md's central-DP mechanism, the quick start's printed line, the checks
of the marks) cost about 7 s of CPU, most of it three interpreters starting; the blocks that run the quick
start again (200,000 trials a world, ~4 s of CPU each) or a learned attack over 7 pairs are slow rows.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(\s*)```(\S*)[^\n]*$")
MARK = re.compile(r"<!--\s*docs:\s*(illustrative|slow|libs|elsewhere)\b")
RUNS = {"python": "python", "bash": "bash"}
#: seconds one block may take before it is a failure (slow and libs ones: 10 min)
TIMEOUT = {"fast": 120, "slow": 600, "libs": 600}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    mark: str | None
    text: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, language = m.group(1), m.group(2)
        end = i + 1
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark = MARK.search(before)
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines[i + 1:end])
        found.append(Block(page, i + 1, language, mark.group(1) if mark else None, body))
        i = end + 1
    return found


ALL = [b for page in PAGES for b in blocks(page)]
RUNNABLE = [b for b in ALL if b.language in RUNS]


def _params(kind: str):
    rows = []
    for b in RUNNABLE:
        if b.mark in ("illustrative", "elsewhere"):
            continue
        want = {"slow": "slow", "libs": "libs"}.get(b.mark, "fast")
        if want != kind:
            continue
        marks = [getattr(pytest.mark, kind)] if kind != "fast" else []
        rows.append(pytest.param(b, id=b.id, marks=marks))
    return rows


def run_block(block: Block, timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as folder:
        for name in ("scenarios", "docs"):
            os.symlink(ROOT / name, Path(folder) / name)
        env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                            "MPLBACKEND": "Agg", "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                                                           os.environ.get("PATH", "")])}
        command = ([sys.executable, "-c", block.text] if block.language == "python"
                   else ["bash", "-euo", "pipefail", "-c", block.text])
        return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


def _check(block: Block, kind: str) -> None:
    done = run_block(block, TIMEOUT[kind])
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    if block.language == "python":
        assert done.stdout.strip(), f"{block.id} prints nothing: a reader sees no result"


@pytest.mark.parametrize("block", _params("fast"))
def test_block_runs(block):
    _check(block, "fast")


@pytest.mark.parametrize("block", _params("slow"))
def test_slow_block_runs(block):
    _check(block, "slow")


@pytest.mark.parametrize("block", _params("libs"))
def test_libs_block_runs(block):
    _check(block, "libs")


def test_every_command_block_says_what_it_is():
    """A fence without a language holding a command (``recaudit``, ``pip``, ``python``, ``./dev``) is a block a
    reader is told to run: it must be ``bash`` (run, or marked), or ``text`` for a synopsis with placeholders,
    so no command escapes the test."""
    command = re.compile(r"^\s*(\$ )?(recaudit|pip|python|\./dev|cat|cd|export) ")
    unlabelled = [b.id for b in ALL if b.language == "" and any(command.match(line) for line in b.text.splitlines())]
    assert unlabelled == [], f"command blocks without a language: {unlabelled}"


def test_marks_are_known_and_illustrative_ones_say_why():
    for b in RUNNABLE:
        if b.mark == "illustrative":
            before = b.page.read_text(encoding="utf-8").split("\n")[:b.line - 1]
            comment = next(line for line in reversed(before) if line.strip())
            assert re.search(r"illustrative:\s*\S", comment), f"{b.id}: say why it does not run"


def test_the_quickstart_line_is_what_run_prints(tmp_path):
    """README.md and getting-started.md show the one line `recaudit run quickstart` prints, as it prints it."""
    done = subprocess.run([sys.executable, "-m", "recaudit", "run", "quickstart", "--out", str(tmp_path / "q"),
                           "--quiet"], capture_output=True, text=True, timeout=TIMEOUT["fast"])
    assert done.returncode == 0, done.stderr
    line = next(text for text in done.stdout.splitlines() if text.startswith("quickstart: claim"))
    for page in ("README.md", "docs/getting-started.md"):
        assert line in (ROOT / page).read_text(encoding="utf-8"), f"{page} shows another line than: {line}"
