"""Benchmark helper: where a table row's memory peaks, or where its CPU time goes. Runs a row of
``benchmarks/table.py`` in this process while a thread reads its resident set (``/proc/self/statm``) every 20 ms
with the innermost frames of the project's code.

``./dev bench rss_trace completion --scale 1`` prints the peak and where it was, a timeline (one line every
``--every`` seconds) and the largest resident set seen in each innermost frame. Linux only (``/proc``); the
peak can miss a spike shorter than the period, so ``/usr/bin/time -v`` (the table's column) stays the reference.
``--cprofile`` profiles the row in CPU time instead (cProfile with ``time.process_time``; the row's case is
``_run_cli``'s line) and prints the top lines by cumulative and by own time.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = os.sysconf("SC_PAGE_SIZE")


def _frames(main: int, depth: int = 4) -> list[str]:
    """The innermost ``depth`` frames of the main thread that belong to the project (not its libraries)."""
    frame, out = sys._current_frames().get(main), []
    while frame is not None and len(out) < depth:
        name = frame.f_code.co_filename
        if name.startswith(str(ROOT)) and "site-packages" not in name and not name.endswith("rss_trace.py"):
            out.append(f"{Path(name).name}:{frame.f_code.co_name}:{frame.f_lineno}")
        frame = frame.f_back
    return out


def trace(function, period: float = 0.02) -> tuple[object, list[tuple[float, int, list[str]]]]:
    """``function()``'s result and the samples (seconds, resident bytes, innermost frames) taken while it ran."""
    samples, done, main = [], threading.Event(), threading.main_thread().ident
    start = time.perf_counter()

    def sample():
        while not done.is_set():
            with open("/proc/self/statm") as statm:
                rss = int(statm.read().split()[1]) * PAGE
            samples.append((time.perf_counter() - start, rss, _frames(main)))
            done.wait(period)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = function()
    finally:
        done.set()
        sampler.join()
    return result, samples


def main(argv: list[str] | None = None) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from table import ROWS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("row", choices=sorted(ROWS))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between timeline lines")
    parser.add_argument("--top", type=int, default=12, help="frames listed by their largest resident set")
    parser.add_argument("--cprofile", action="store_true", help="profile the row's CPU time instead")
    args = parser.parse_args(argv)
    if args.cprofile:
        import cProfile
        import pstats

        profile = cProfile.Profile(time.process_time)
        profile.runcall(ROWS[args.row], args.scale)
        for order in ("cumulative", "tottime"):
            pstats.Stats(profile).sort_stats(order).print_stats(30)
        return
    result, samples = trace(lambda: ROWS[args.row](args.scale))
    peak = max(samples, key=lambda s: s[1])
    print(f"{args.row} at scale {args.scale:g}: {result['notes']}")
    print(f"peak {peak[1] / 1e6:,.0f} MB at {peak[0]:.1f} s in {' < '.join(peak[2])}\n\ntimeline (s, MB, frames):")
    last = -args.every
    for seconds, rss, frames in samples:
        if seconds - last >= args.every:
            last = seconds
            print(f"{seconds:7.1f} {rss / 1e6:7,.0f}  {' < '.join(frames)}")
    largest: dict[str, tuple[int, float, list[str]]] = {}
    for seconds, rss, frames in samples:
        key = frames[0] if frames else "(outside the project)"
        if rss > largest.get(key, (0,))[0]:
            largest[key] = (rss, seconds, frames)
    print("\nlargest resident set by innermost frame (MB, s, frames):")
    for rss, seconds, frames in sorted(largest.values(), key=lambda v: -v[0])[:args.top]:
        print(f"{rss / 1e6:7,.0f} {seconds:7.1f}  {' < '.join(frames)}")


if __name__ == "__main__":
    main()
