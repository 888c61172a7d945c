"""Long work is never silent: progress as log lines (logger ``recaudit``), at most one every ``PROGRESS_EVERY``
seconds per kind of work, each with done / total, the rate and the time left.

The CLI uses it when stderr is not a terminal (a log file, CI); the library (``recaudit.run``, the harness's
audits) when its ``progress`` option is on, which it is by default for work estimated over
``PROGRESS_EVERY`` seconds. A script that configured no logging still sees the lines: :func:`visible` gives
the ``recaudit`` logger a handler on stderr when neither it nor the root logger has one.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Callable, Iterator

log = logging.getLogger("recaudit")
#: seconds between two progress lines of one kind of work (and the estimate above which progress is on)
PROGRESS_EVERY = 30.0


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.1 h``."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 \
        else f"{seconds / 3600:.1f} h"


def progress_line(label: str, done: float, total: float, seconds: float, since: float = 0.0) -> str:
    """``trial blocks: 120 / 400 (30 %), 4.1 a second, about 1 min left`` (``since``: done when timing began)."""
    line = f"{label}: {_number(done)} / {_number(total)} ({100 * done / total if total else 100:.0f} %)"
    rate = (done - since) / seconds if seconds > 0 else 0.0
    if rate > 0:
        shown = (f"{rate:,.0f} a second" if rate >= 100 else f"{rate:.3g} a second" if rate >= 0.1
                 else f"{60 * rate:.3g} a minute")
        line += f", {shown}, about {duration((total - done) / rate)} left"
    return line


def _number(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:.4g}"


class ProgressLog:
    """A ``report`` for runs, grids, sweeps and studies: messages to the ``recaudit`` logger, and
    ``progress(label, done, total)`` as :func:`progress_line` lines at most every ``every`` seconds a label."""

    def __init__(self, every: float | None = None, clock: Callable[[], float] = time.monotonic,
                 emit: Callable[[str], None] | None = None, messages: Callable[[str], None] | None = None):
        self.every, self.clock = PROGRESS_EVERY if every is None else every, clock
        self.emit = emit or log.info  # progress lines
        self.messages = messages or self.emit  # everything else a run says (what it is doing, warnings)
        self.first: dict[str, tuple[float, float]] = {}  # label -> (time, done) of its first call
        self.last: dict[str, tuple[float, float]] = {}  # label -> (time, done) of its last line
        self.said = self.clock()  # when the last line (of any label) was logged
        self.latest: tuple[str, float, float] | None = None  # the last progress reported: label, done, total

    def __call__(self, message: str) -> None:
        self.messages(message)

    def progress(self, label: str, done: float, total: float) -> None:
        now = self.clock()
        self.latest = (label, done, total)
        began, since = self.first.setdefault(label, (now, done))
        last, shown = self.last.setdefault(label, (now, done))
        if done >= total:  # finished: the next work of this label starts its own clock
            self.first.pop(label, None)
            self.last.pop(label, None)
            return
        if now - last < self.every or done == shown:
            return
        self.last[label] = (now, done)
        self.said = now
        self.emit(progress_line(label, done, total, now - began, since))

    def still(self, started: float) -> None:
        """A line when none was logged for ``every`` seconds (a long step that reports no progress)."""
        now = self.clock()
        if now - self.said < self.every:
            return
        self.said = now
        where = "" if self.latest is None else (f"; last: {self.latest[0]} {_number(self.latest[1])} / "
                                                f"{_number(self.latest[2])}")
        self.emit(f"still working ({duration(now - started)} so far{where})")


@contextlib.contextmanager
def beating(report) -> Iterator[None]:
    """While the block runs, a thread logs ``still working`` when ``report`` (a :class:`ProgressLog`, or a
    reporter whose ``lines`` is one) logged nothing for its ``every`` seconds: long work is never silent."""
    lines = report if isinstance(report, ProgressLog) else getattr(report, "lines", None)
    if not isinstance(lines, ProgressLog) or getattr(report, "quiet", False) or getattr(report, "bars_on", False):
        yield
        return
    stop, started = threading.Event(), lines.clock()
    lines.said = started

    def beat() -> None:
        while not stop.wait(min(5.0, lines.every)):
            lines.still(started)

    thread = threading.Thread(target=beat, name="recaudit-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(1.0)


def visible() -> None:
    """Give the ``recaudit`` logger a stderr handler (INFO, ``[recaudit] message``) when no logging is set up."""
    if log.handlers or logging.getLogger().handlers:  # the script set logging up: its choice stands
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[recaudit] %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)


class ConsoleReporter:
    """Messages to the ``recaudit`` logger; ``progress(label, done, total)`` as tqdm bars on a terminal, and
    as a log line at most every PROGRESS_EVERY seconds per label when stderr is not one (done / total, the
    rate, the time left: ``recaudit.audits.progress_log``)."""

    def __init__(self, quiet: bool = False, stream=None, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.bars_on = not quiet and getattr(self.stream, "isatty", lambda: False)()
        self.bars: dict = {}
        self.lines = ProgressLog(PROGRESS_EVERY, clock, emit=lambda line: log.info("%s", line))

    def __call__(self, message: str) -> None:
        self.lines.said = self.lines.clock()
        log.info(message)

    def progress(self, label: str, done: float, total: float) -> None:
        if not self.bars_on:
            self._progress_line(label, done, total)
            return
        from tqdm import tqdm

        bar = self.bars.get(label)
        if bar is None:
            bar = self.bars[label] = tqdm(total=total, desc=label, file=self.stream, leave=False, dynamic_ncols=True,
                                          bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.4g}/{total:.4g} "
                                                     "[{elapsed}<{remaining}]")
        bar.update(done - bar.n)
        if done >= total:
            bar.close()
            del self.bars[label]

    def _progress_line(self, label: str, done: float, total: float) -> None:
        if not self.quiet:
            self.lines.progress(label, done, total)
