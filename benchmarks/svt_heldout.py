"""Held-out evaluation of the default (``auto``) attack on sparse-vector outputs (issue 31).

Run with ``python benchmarks/svt_heldout.py`` (from the repository, PYTHONPATH at it). Every
(setting, variant, seed) is one ``run_audit(mech, trials=10**6, alpha=0.05, seed=seed)`` with the default
attack; one line per audit (attack chosen, ε_LB, verdict, CPU seconds), then a summary table per
setting and variant: caught (broken) or flagged (correct) out of the seeds, the ε_LB range and CPU per audit.
The settings are ``tests/svt_heldout.py``'s (fixed before any of them was run) and, with ``--tuning``, the
tuning fixture ``tests/svt.py`` (Roth's variant, threshold 6). ``--jobs`` audits run in parallel processes.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _mechanism(setting: str, variant: str):
    from tests.svt import variants
    from tests.svt_heldout import heldout

    return variants()[variant] if setting == "tuning" else heldout(setting)[variant]


def _one(job):
    from recaudit.audits.harness import run_audit

    setting, variant, seed, trials = job
    mech = _mechanism(setting, variant)
    start = time.process_time()
    run = run_audit(mech, trials=trials, alpha=0.05, seed=seed)
    return setting, variant, seed, run.attack, float(run.bound.epsilon_lb), bool(run.violated), \
        mech.private, time.process_time() - start


def main(argv=None) -> None:
    from tests.svt_heldout import SETTINGS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10**6)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS))
    parser.add_argument("--variants", nargs="*", default=["roth", "alg7", "alg1", "alg2"])
    parser.add_argument("--tuning", action="store_true", help="also the tuning fixture's Roth variant (alg3)")
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(s, v, seed, args.trials) for s in args.settings for v in args.variants for seed in seeds]
    if args.tuning:
        jobs = [("tuning", "alg3", seed, args.trials) for seed in seeds] + jobs
    results = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for r in pool.map(_one, jobs):
            results.append(r)
            print(*r[:4], f"{r[4]:.3f}", "violated" if r[5] else "-", f"{r[7]:.1f}s", flush=True)
    print("\n| setting | variant | claim holds? | caught / flagged | ε_LB range | attack chosen | CPU per audit |")
    print("|---|---|---|---|---|---|---|")
    for key in dict.fromkeys((r[0], r[1]) for r in results):
        rows = [r for r in results if (r[0], r[1]) == key]
        lbs = [r[4] for r in rows]
        chosen = {a: sum(r[3] == a for r in rows) for a in dict.fromkeys(r[3] for r in rows)}
        print(f"| {key[0]} | {key[1]} | {'yes' if rows[0][6] else 'no'} | {sum(r[5] for r in rows)} of {len(rows)} "
              f"| {min(lbs):.3f}–{max(lbs):.3f} | {', '.join(f'{a} {n}' for a, n in chosen.items())} "
              f"| {sum(r[7] for r in rows) / len(rows):.1f} s |")


if __name__ == "__main__":
    main()
