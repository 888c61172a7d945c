"""Profile the LDP row's run: ``python benchmarks/ldp_profile.py [--trials N] [--lines K]``.

The row's scenario (``table.ldp_scenario``) runs once small (imports and caches, as in the row), then
``recaudit run`` at ``--trials`` per world under cProfile in CPU time; prints the total and the top lines
by cumulative and by own time.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from table import _run_cli, ldp_scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000_000)
    parser.add_argument("--lines", type=int, default=30)
    args = parser.parse_args()
    data, folder = ldp_scenario(), Path(tempfile.mkdtemp(prefix="recaudit-ldp-profile-"))
    _run_cli(data | {"audit": data["audit"] | {"trials": 100_000}}, folder / "warm")
    profile = cProfile.Profile(time.process_time)
    started = time.process_time()
    profile.runcall(_run_cli, data | {"audit": data["audit"] | {"trials": args.trials}}, folder / "run")
    print(f"CPU {time.process_time() - started:.3f} s under the profiler")
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(args.lines)
    stats.sort_stats("tottime").print_stats(args.lines)


if __name__ == "__main__":
    main()
