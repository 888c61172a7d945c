"""Issue 34.7: long work is never silent. Progress lines (done / total, rate, time left) at most every 30 s
through logging, from the CLI off a terminal and from the library: ``recaudit.run`` and the harness's audits
log them by default when the work is estimated over 30 s, to stderr even when a script set up no logging.
"""
from __future__ import annotations

import logging
import re
import subprocess
import sys

import pytest

import recaudit.audits.progress_log as progress_log
from recaudit.audits.progress_log import ProgressLog, progress_line
from tests.conftest import small_world

LINE = re.compile(r"trial blocks: [\d,]+ / [\d,]+ \(\d+ %\), [\d.,]+ a (second|minute), about \d+ (s|min) left")


@pytest.fixture
def records(monkeypatch, caplog):
    """The ``recaudit`` logger's INFO records (the CLI may have detached it from the root logger)."""
    logger = logging.getLogger("recaudit")
    monkeypatch.setattr(logger, "propagate", True)
    monkeypatch.setattr(logger, "handlers", [])
    caplog.set_level(logging.INFO, logger="recaudit")
    return caplog


def test_a_progress_line_says_done_total_rate_and_time_left():
    assert progress_line("sweep runs", 30, 120, 60.0) == "sweep runs: 30 / 120 (25 %), 0.5 a second, about 3 min left"
    assert progress_line("x", 3, 100, 600.0) == "x: 3 / 100 (3 %), 0.3 a minute, about 5.4 h left"
    assert progress_line("y", 5000, 10000, 2.0) == "y: 5,000 / 10,000 (50 %), 2,500 a second, about 2 s left"
    lines, now = [], [0.0]
    log = ProgressLog(clock=lambda: now[0], emit=lines.append)
    for second in range(0, 100):
        now[0] = float(second)
        log.progress("a", second, 1000)
    assert [line.split(":")[1].split("(")[0].strip() for line in lines] == ["30 / 1,000", "60 / 1,000", "90 / 1,000"]


def test_library_runs_log_progress_when_asked_and_stay_quiet_when_short(records, monkeypatch, quickstart_data):
    import recaudit as ra

    data = small_world(quickstart_data, 8_000)
    data["audit"]["block_size"] = 500
    monkeypatch.setattr(progress_log, "PROGRESS_EVERY", 0.0)  # a line at every block
    ra.run(data, progress=True)
    lines = [r.getMessage() for r in records.records]
    assert any(line.startswith("quickstart: estimated ") for line in lines)
    assert sum(bool(LINE.fullmatch(line)) for line in lines) >= 10, lines
    records.clear()
    monkeypatch.setattr(progress_log, "PROGRESS_EVERY", 30.0)
    ra.run(data)  # estimated well under 30 s: nothing
    assert [r.getMessage() for r in records.records] == []


def test_harness_audits_log_their_steps(records):
    from recaudit.audits.harness import run_audit
    from tests.test_harness_inputs import Laplace

    run_audit(Laplace(), trials=2_000, seed=1, progress=True)
    lines = [r.getMessage() for r in records.records]
    assert lines[0].startswith("the audit will take about ")
    assert [line.split(":")[0] for line in lines[1:]] == ["world 0", "world 1", "scored (identity) and bounded"]
    records.clear()
    run_audit(Laplace(), trials=2_000, seed=1)  # a fraction of a second: silent
    assert records.records == []


def test_a_script_without_logging_sees_the_lines():
    script = ("import recaudit as ra\n"
              "from recaudit.audits.harness import run_audit\n"
              "from tests.test_harness_inputs import Laplace\n"
              "run_audit(Laplace(), trials=2_000, seed=1, progress=True)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert [line.split(":")[0] for line in done.stderr.splitlines()] == [
        "[recaudit] the audit will take about 0 s (2,000 draws per world at the probe's pace)".split(":")[0],
        "[recaudit] world 0", "[recaudit] world 1", "[recaudit] scored (identity) and bounded"]


def test_a_long_step_without_progress_still_says_it_is_working():
    import time

    from recaudit.audits.progress_log import beating

    lines = []
    log = ProgressLog(every=0.2, emit=lines.append)
    with beating(log):
        log.progress("simulation (clock)", 1, 10)
        time.sleep(1.0)  # a step that reports nothing: a line about every 0.2 s
    during = len(lines)
    assert during >= 2 and all(line.startswith("still working (") for line in lines)
    assert lines[0].endswith("; last: simulation (clock) 1 / 10)")
    time.sleep(0.5)
    assert len(lines) == during  # stopped with the work
