"""Fuzzing the scenario loader: every document, however malformed, gives exit 0 or 2 and clean lines.

Documents are mutations of every shipped scenario (values replaced by hostile
scalars and tags, lines dropped, duplicated or re-indented, control characters
inserted, text cut short) and generated ones (alias bombs, merge-key bombs,
deep nesting, random nested data). The property: ``recaudit validate`` returns
0 or 2 — never a traceback, never 3 — within 10 s, and every error line is one
line starting ``file:line: `` with no raw control character.
150 documents by default; ``-m slow`` runs 5,000 (issue 34's holdout check; ``RECAUDIT_FUZZ_DOCUMENTS=N`` for
another count): ``python -m pytest -m slow -p no:cacheprovider tests/test_fuzz_scenarios.py``.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recaudit.audits.language.scenario  # noqa: F401  (imported here, so the first document's time is not the imports')
from recaudit.audits.cli import main
from tests.conftest import SCENARIOS

SHIPPED = {path.name: path.read_text() for path in sorted(SCENARIOS.glob("*.yaml"))}
HOSTILE_SCALARS = [
    "2020-13-45", "2020-02-30T25:61:00", "!!timestamp 2020-13-45", "!!binary '@@@'", "!!int 0xZZ", "!!float abc",
    "!!python/object:os.system ls", "!!set {a, b}", "!!omap [a: 1]", "!!pairs [a: 1]", "*nowhere", "&a", "~", "[",
    "{", "]", "'", '"', ".inf", "-.inf", ".nan", "1e400", "-1e400", "1e12", "1e-400", "0", "-1",
    "99999999999999999999999",
    "100001", "1000000", '"\\x1b[31mred\\x1b[0m"', '"a\\nb"', '"\\0"', "'../../x'", "/etc/passwd", "x" * 300,
    "0x10", "0o17", "1_000", "+12", "yes", "no", "on", "null", "true", "[1, [2, [3]]]", "{a: {b: {c: 1}}}",
    "!!str", "!!null x", "!!bool maybe", "!<tag:yaml.org,2002:int> 3.5", "? [a]\n: b", "|-\n  two\n  lines",
    "tcp://256.1.1.1:99999", "\u202etxet", "\U0001f600", "\t",
]
CONTROL = ["\x00", "\x01", "\x07", "\x1b", "\x7f", "\x85", "\u2028", "\ufeff", "\r", "\t", "\x0b", "\x0c"]


def mutate(text: str, draw) -> str:
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["value", "drop", "duplicate", "indent", "control", "cut", "anchor", "merge"]))
        line = lines[i]
        if op == "value" and ":" in line:
            key = line.split(":", 1)[0]
            lines[i] = f"{key}: {draw(st.sampled_from(HOSTILE_SCALARS))}"
        elif op == "drop":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, line)
        elif op == "indent":
            lines[i] = " " * draw(st.integers(0, 7)) + line.lstrip()
        elif op == "control":
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(st.sampled_from(CONTROL)) + line[at:]
        elif op == "cut":
            lines[i] = line[: draw(st.integers(0, len(line)))]
        elif op == "anchor" and ":" in line:
            lines[i] = line.replace(":", ": &x", 1) if line.rstrip().endswith(":") else line + " # &x"
            lines.append("extra: *x")
        elif op == "merge" and line.rstrip().endswith(":"):
            lines.insert(i + 1, line[: len(line) - len(line.lstrip())] + "  <<: {seed: 1}")
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n", "\n..."]))


def alias_bomb(depth: int, width: int, merge: bool) -> str:
    if merge:
        out = ["m0: &m0 {k0: 1}"]
        out += [f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * width)}], k{i}: 1}}" for i in range(1, depth)]
    else:
        out = ["a0: &a0 [x, x]"]
        out += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, depth)]
    return "name: bomb\nseed: 1\n" + "\n".join(out) + "\n"


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
nested = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                      max_leaves=20)


@st.composite
def documents(draw) -> str:
    kind = draw(st.sampled_from(["mutation"] * 6 + ["bomb", "deep", "random", "scenario_with_random"]))
    if kind == "mutation":
        return mutate(SHIPPED[draw(st.sampled_from(sorted(SHIPPED)))], draw)
    if kind == "bomb":
        return alias_bomb(draw(st.integers(2, 30)), draw(st.integers(2, 9)), draw(st.booleans()))
    if kind == "deep":
        depth = draw(st.integers(50, 5000))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}")]))
        return "name: deep\nseed: 1\nx: " + opener * depth + "1" + closer * draw(st.sampled_from([depth, 0]))
    if kind == "random":
        return yaml.safe_dump(draw(nested), allow_unicode=draw(st.booleans()))
    data = yaml.safe_load(SHIPPED["quickstart.yaml"])
    section = draw(st.sampled_from(sorted(data)))
    data[section] = draw(nested)
    return yaml.safe_dump(data, allow_unicode=True)


LINE = re.compile(r"^[^\n]*?(:\d+)?: \S")


def check_document(text: str, folder: Path, capsys) -> None:
    path = folder / "fuzz.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    started = time.process_time()  # CPU seconds: a hang is work without end; wall time depends on the machine's load
    code = main(["validate", str(path)])
    seconds = time.process_time() - started
    captured = capsys.readouterr()
    assert code in (0, 2), (code, captured.err)
    assert seconds < 10, seconds
    if code == 2:
        lines = captured.err.splitlines()
        assert lines, "exit 2 without a message"
        for line in lines:
            assert line.startswith(f"{path}:"), line
            assert LINE.match(line), line
            assert all(c.isprintable() for c in line), line


SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


@settings(max_examples=150, **SETTINGS)
@given(documents())
def test_no_document_crashes_or_hangs_the_loader(tmp_path, capsys, text):
    check_document(text, tmp_path, capsys)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("RECAUDIT_FUZZ_DOCUMENTS", 5_000)), **SETTINGS)
@given(documents())
def test_five_thousand_documents(tmp_path, capsys, text):
    check_document(text, tmp_path, capsys)


# scenarios on a fetched data set validate once it is fetched: the -m data tests check them
@pytest.mark.parametrize("name", sorted(name for name, text in SHIPPED.items() if "dataset:" not in text))
def test_every_shipped_scenario_validates(name, capsys):
    assert main(["validate", str(SCENARIOS / name)]) == 0
