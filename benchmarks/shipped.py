"""Benchmark: every shipped scenario, grid, sweep and study as a user runs it — the estimate it prints first, and
the time it then takes.

Run with ``./dev bench shipped [--measured FILE] [--skip NAME ...] [NAME ...]`` (default: every shipped scenario,
``recaudit scenarios``; those on MovieLens-100K need ``recaudit data fetch movielens-100k`` first). Each runs
alone, as ``/usr/bin/time -v recaudit run|grid|sweep NAME --out TMP`` (the command ``recaudit scenarios`` gives
it, in a fresh process, stderr off a terminal) holding ``/tmp/recaudit-bench.lock`` (``flock``: timed runs of
several users of one machine do not overlap; taken for ``--batch`` seconds of runs at a time). The table gives
the estimate the command printed (its first ``estimated`` line, on stderr or stdout), the estimate's seconds
(``recaudit.audits.language.limits``, or the study's own ``estimate``), the measured wall time and CPU seconds
(user + system, workers included), their ratios, the exit status and the load average when the run started.
An estimate is of CPU seconds on 2 cores: on a shared machine the wall time also counts the others' work, so
the CPU ratio is the one to judge it by; rows outside ``[1/2, 2]`` are marked. ``--measured FILE`` keeps each
measurement (JSON) and reuses it (``--table``: run nothing); ``--cap F`` stops a run after F x its estimate
(default 4, at least 120 s) and records it as over. Scenarios run quickest estimate first.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recaudit.audits.language.shipped import command, shipped_scenarios  # noqa: E402
from recaudit.audits.language.studies import StudyScenario  # noqa: E402

LOCK = "/tmp/recaudit-bench.lock"
#: the estimate line a command prints first: ``[recaudit] estimated 5 min on 2 cores`` or a study's
#: ``NAME: estimated 12 min of CPU on 2 cores``
PRINTED = re.compile(r"estimated (\d+(?:\.\d+)?) (s|min|h)\b")


def estimated_seconds(path: Path) -> float:
    """The estimate of ``recaudit COMMAND path`` in seconds (what the command rounds when it prints it)."""
    from benchmarks.estimate import estimate
    from recaudit.audits.language.scenario import load_scenario

    scenario = load_scenario(path)
    if isinstance(scenario, StudyScenario):
        return float(scenario.build().estimate(scenario.seed, scenario.limits)["seconds"])
    return float(estimate(path)[1])


def printed_seconds(text: str) -> float | None:
    """The first estimate printed in ``text`` (None: none printed)."""
    found = PRINTED.search(text)
    if found is None:
        return None
    return float(found[1]) * {"s": 1, "min": 60, "h": 3600}[found[2]]


@contextlib.contextmanager
def bench_lock():
    """Hold the bench lock (``flock LOCK``, as the other timed runs on this machine take it)."""
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def measure(name: str, verb: str, cap: float) -> dict:
    """Run ``recaudit VERB NAME`` (the caller holds the bench lock); wall, CPU, peak RSS, exit, load, the printed
    estimate."""
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.TemporaryFile("w+") as stdout:
        argv = ["/usr/bin/time", "-v", sys.executable, "-m", "recaudit", verb, name, "--out", f"{out}/run"]
        load, started, over = os.getloadavg()[0], time.monotonic(), False
        child = subprocess.Popen(argv, stdout=stdout, stderr=err, stdin=subprocess.DEVNULL, cwd=out,
                                 env=os.environ | {"PYTHONPATH": str(ROOT)}, start_new_session=True)
        while child.poll() is None:
            if time.monotonic() - started > cap:
                os.killpg(child.pid, 15)
                over = True
                child.wait()
                break
            time.sleep(0.5)
        err.seek(0)
        stdout.seek(0)
        text, output = err.read(), stdout.read()
    fields = dict(re.findall(r"^\s*(User time \(seconds\)|System time \(seconds\)|Maximum resident set size "
                             r"\(kbytes\)|Exit status|Elapsed \(wall clock\) time \(h:mm:ss or m:ss\)): (\S+)$",
                             text, re.M))
    wall = fields.get("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    seconds = sum(float(part) * 60 ** i for i, part in enumerate(reversed(wall.split(":")))) if wall else None
    lines = [line for line in (text + "\n" + output).splitlines() if PRINTED.search(line)]
    return {"wall": seconds if not over else cap, "over": over,
            "cpu": float(fields.get("User time (seconds)", "nan")) + float(fields.get("System time (seconds)", "nan")),
            "peak_mb": float(fields.get("Maximum resident set size (kbytes)", "nan")) / 1024,
            "exit": int(fields["Exit status"]) if "Exit status" in fields else None, "load": load,
            "printed": lines[0] if lines else None,
            "tail": [line for line in text.splitlines() if not line.startswith("\t")][-2:]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="shipped scenarios (default: all)")
    parser.add_argument("--skip", nargs="*", default=[], help="shipped scenarios not to run")
    parser.add_argument("--measured", type=Path, help="a JSON file of measurements, reused and added to")
    parser.add_argument("--table", action="store_true", help="table the --measured file only, running nothing")
    parser.add_argument("--cap", type=float, default=4.0, help="stop a run after CAP x its estimate (min 120 s)")
    parser.add_argument("--batch", type=float, default=120.0,
                        help="hold the bench lock for runs of about this many seconds at a time (default 120)")
    parser.add_argument("--max-estimate", type=float, default=float("inf"),
                        help="run only scenarios estimated at most this many seconds")
    args = parser.parse_args(argv)
    shipped = shipped_scenarios()
    names = [n for n in (args.names or list(shipped)) if n not in args.skip]
    measured = json.loads(args.measured.read_text()) if args.measured and args.measured.exists() else {}
    plan = sorted((estimated_seconds(shipped[n]), n) for n in names)
    print("| scenario | command | printed estimate | estimated s | wall s | CPU s | est / wall | est / CPU | peak MB "
          "| exit | load |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    held, batch = contextlib.ExitStack(), 0.0
    for seconds, name in plan:
        verb = command(shipped[name])
        if name not in measured and (args.table or seconds > args.max_estimate):
            print(f"| {name} | {verb} | | {seconds:.0f} | not measured | | | | | | |", flush=True)
            continue
        if name not in measured:
            if batch <= 0:  # the lock is taken for a batch of about --batch estimated seconds, then let go
                held.close()
                held.enter_context(bench_lock())
                batch = args.batch
            measured[name] = measure(name, verb, max(120.0, args.cap * seconds)) | {"estimate": seconds}
            batch -= measured[name]["wall"] or seconds
            if args.measured:
                args.measured.write_text(json.dumps(measured, indent=1))
        m = measured[name]
        printed = "**none**" if m["printed"] is None else f"{printed_seconds(m['printed']):.0f} s"
        wall = f">{m['wall']:.0f} (stopped)" if m["over"] else f"{m['wall']:.0f}"
        ratios = [seconds / m["wall"], seconds / m["cpu"] if m["cpu"] == m["cpu"] else float("nan")]
        marks = ["" if 0.5 <= r <= 2 else " **!**" for r in ratios]
        load = "" if m["load"] is None else f"{m['load']:.1f}"
        print(f"| {name} | {verb} | {printed} | {seconds:.0f} | {wall} | {m['cpu']:.0f} | {ratios[0]:.2f}{marks[0]} | "
              f"{ratios[1]:.2f}{marks[1]} | {m['peak_mb']:.0f} | {m['exit']} | {load} |", flush=True)


if __name__ == "__main__":
    main()
