"""Benchmark: loading a MovieLens-size ratings file (default 25 million ratings) into the sparse table.

Run with ``./dev bench ratings_load`` (or ``python benchmarks/ratings_load.py --ratings 25000000``).
Generates a ``ratings.csv``-style file (MovieLens 25M's shape: 162,541 users, 59,047 items, star
ratings from a star blockmodel) in a temporary folder, then times, each in its own subprocess so
its peak memory (max RSS) is its own:

* ``pandas_read_csv`` — the baseline: plain ``pandas.read_csv(path)``, no validation, no table;
* ``load_ratings`` — ``recaudit.simulator.ratings.load_ratings``: parse, full validation (finite, nonzero,
  no duplicates), sparse CSR train table with a 1 % held-out split;
* ``load_ratings_top400_cap80`` — the same with Jain et al.'s preparation: the 400 most rated
  items, 1 % held out, at most 80 training ratings per user.

Prints a markdown table: seconds, peak RSS and each case's time as a ratio to the baseline.
The target (issue 9): under 2 minutes and 4 GB for 25 million ratings.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pandas_read_csv(path: str) -> dict:
    import pandas as pd

    frame = pd.read_csv(path)
    return {"ratings": len(frame)}


def load_ratings(path: str) -> dict:
    from recaudit.simulator.ratings import load_ratings as load

    data = load(path, test_fraction=0.01)
    return {"ratings": data.train.nnz + data.test.nnz, "users": data.n_users, "items": data.n_items}


def load_ratings_top400_cap80(path: str) -> dict:
    from recaudit.simulator.ratings import load_ratings as load

    data = load(path, top_items=400, max_ratings_per_user=80, test_fraction=0.01)
    return {"ratings": data.train.nnz + data.test.nnz, "users": data.n_users, "items": data.n_items}


CASES = {"pandas_read_csv": pandas_read_csv, "load_ratings": load_ratings,
         "load_ratings_top400_cap80": load_ratings_top400_cap80}


def generate(path: Path, ratings: int, users: int, items: int, seed: int) -> Path:
    """A ratings.csv of ``users`` users with ``ceil(ratings / users)`` star ratings each (star blockmodel)."""
    from recaudit.simulator.population import StarSBMPopulation
    from recaudit.simulator.ratings import write_population_file

    stars = [[[0.05, 0.10, 0.20, 0.35, 0.30], [0.30, 0.30, 0.20, 0.15, 0.05]],
             [[0.20, 0.25, 0.25, 0.20, 0.10], [0.05, 0.05, 0.20, 0.30, 0.40]]]
    population = StarSBMPopulation(n_items=items, user_cluster_weights=[0.5, 0.5],
                                   item_cluster_weights=[0.5, 0.5], star_probability=stars,
                                   ratings_per_user=max(1, -(-ratings // users)))
    return write_population_file(path, population, users, seed=seed, format="ratings_csv")


def _peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM (ru_maxrss would carry the parent's over exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(case: str, path: str) -> None:
    import pandas  # noqa: F401 -- imports are not what is timed
    import recaudit.simulator.ratings  # noqa: F401

    start, cpu = time.perf_counter(), time.process_time()
    result = CASES[case](path)
    result["seconds"] = time.perf_counter() - start
    result["cpu_seconds"] = time.process_time() - cpu  # the machine may be shared: CPU time too
    result["peak_rss_mb"] = _peak_rss_mb()
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ratings", type=int, default=25_000_000)
    parser.add_argument("--users", type=int, default=162_541)
    parser.add_argument("--items", type=int, default=59_047)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--file", type=Path,
                        help="use (or create and keep) this ratings.csv instead of a temporary one")
    parser.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.path)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = args.file or Path(folder) / "ratings.csv"
        if not path.exists():
            start = time.perf_counter()
            sys.path.insert(0, str(ROOT))
            generate(path, args.ratings, args.users, args.items, args.seed)
            print(f"generated {path} ({path.stat().st_size / 2**20:.0f} MiB) in "
                  f"{time.perf_counter() - start:.0f} s\n")
        rows = {}
        for case in CASES:
            out = subprocess.run([sys.executable, __file__, "--child", case, "--path", str(path)],
                                 check=True, capture_output=True, text=True, cwd=ROOT,
                                 env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
            rows[case] = json.loads(out.stdout)
    base = rows["pandas_read_csv"]["seconds"]
    print("| case | ratings | users | items | seconds | CPU seconds | peak RSS MB | time vs pandas.read_csv |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for case, r in rows.items():
        print(f"| {case} | {r['ratings']:,} | {r.get('users', '')} | {r.get('items', '')} | {r['seconds']:.1f} | "
              f"{r['cpu_seconds']:.1f} | {r['peak_rss_mb']:.0f} | {r['seconds'] / base:.2f} |")


if __name__ == "__main__":
    main()
