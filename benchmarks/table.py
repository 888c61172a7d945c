"""Benchmark: every row of issue 20's table in one command, each a ratio against a baseline timed in the same process.

``./dev bench`` (or ``python benchmarks/table.py``) runs each row in its own subprocess under
``/usr/bin/time -v`` (peak memory = that process's maximum resident set), times its baseline and
its case there in CPU seconds (``time.process_time`` plus finished children: robust when other
work shares the cores; wall seconds are printed beside), prints a markdown table and keeps it
with the machine's core count in ``benchmarks/results/table-latest.{md,json}``.

Rows (goal in brackets):

* ``ldp``: ``recaudit run`` of MaxSense (local replay, likelihood ratio) with ``--trials`` per
  world, writing included, against numpy sampling the same released bits [≥ 0.45]: each timed five times,
  alternating, the ratio of the minima (timeit's practice; the spread in the notes); also its marginal
  cost per trial (the run at trials/100 subtracted: imports, world and figures cancel);
* ``churn``: users/s of a MaxSense churn run against one bare SimPy process per user [≥ 10×];
* ``completion``: private Frank–Wolfe with its canary one-run audit (``recaudit run``) against one
  sparse ``Aᵀ(Av)`` on the same ratings [≤ 250× (issue 34), peak ≤ 1.5 GB];
* ``learned``: a black-box audit of the 4-bin Laplace histogram with the ``auto`` attack against
  sampling its outputs alone [≤ 8×], each timed three times, alternating, the ratio of the minima;
* ``trainer``: ``recaudit run`` of a trainer's one-run audit (the shipped non-private ALS, 1,000 isolated
  canaries, fold-in) against one training run of the same model on the same ratings [≤ 2×], each timed three
  times, alternating, the ratio of the minima;
* ``tight_fw``: ``recaudit run tight-private-frank-wolfe``'s CPU seconds, its workers included [≤ 300];
* ``suite``: the default test suite's CPU minutes [≤ 3], its summary line beside.

``--rows`` picks rows; ``--scale`` shrinks every size (e.g. 0.1 for a quick look).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def cpu() -> float:
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def timed(function, *args) -> tuple[object, float, float]:
    """(result, CPU seconds, wall seconds) of ``function(*args)``."""
    c, w = cpu(), time.perf_counter()
    result = function(*args)
    return result, cpu() - c, time.perf_counter() - w


#: a pause before each alternating timing: OpenMP's and BLAS's idle threads spin for a while after the work they
#: did (on an idle core: measured 0.08 s of CPU after the learned audit), which the next timing's process CPU would
#: count (the learned row's sampling read 0.194 s of CPU in 0.116 s of wall on a quiet machine)
SETTLE_SECONDS = 0.5


def alternating(case, baseline, repeats: int) -> tuple[object, list, list]:
    """timeit's practice for a small, noisy baseline: ``case(i)`` and ``baseline(i)`` timed ``repeats`` times each,
    alternating, the case first; (the case's first result, its (CPU, wall) timings, the baseline's)."""
    results, cases, bases = [], [], []
    for repeat in range(repeats):
        time.sleep(SETTLE_SECONDS)
        result, *case_times = timed(case, repeat)
        results.append(result)
        cases.append(tuple(case_times))
        time.sleep(SETTLE_SECONDS)
        bases.append(tuple(timed(baseline, repeat)[1:]))
    return results[0], cases, bases


def spread(times: list) -> str:
    return ", ".join(f"{c:.3f}" for c, _ in times)


def _scratch(prefix: str) -> Path:
    """A new folder under the temporary directory for a row's runs, removed when the row's process exits."""
    import atexit
    import shutil

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _run_cli(data: dict, folder: Path) -> dict:
    import yaml

    from recaudit.audits.cli import main

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(data))
    code = main(["run", str(folder / "scenario.yaml"), "--out", str(folder / "run"), "--quiet"])
    if code not in (0, 1):
        raise RuntimeError(f"recaudit run exited {code}")
    return json.loads((folder / "run" / "report.json").read_text())


def ldp_scenario() -> dict:
    """The LDP row's scenario: the quick start (MaxSense, likelihood ratio, local replay), a short world."""
    import yaml

    data = yaml.safe_load((ROOT / "scenarios" / "quickstart.yaml").read_text())
    data["churn"].update(horizon=5.0, release_interval=5.0)
    return data


def row_ldp(scale: float, repeats: int = 5) -> dict:
    """The row's ratio is timeit's: the baseline and the case each timed ``repeats`` times, alternating, in this
    process; the ratio of their minima (the least disturbed run of each), the spread of both in the notes."""
    import resource

    import numpy as np

    trials = int(10_000_000 * scale)
    data = ldp_scenario()
    p = 1.0 / (1.0 + np.exp(-1.0))
    folder = _scratch("recaudit-bench-ldp-")
    small = data | {"audit": data["audit"] | {"trials": max(trials // 100, 1000)}}
    big = data | {"audit": data["audit"] | {"trials": trials}}
    _run_cli(small, folder / "warm")  # imports and caches once, so every timed run pays the same
    _, fixed, _ = timed(_run_cli, small, folder / "small")
    peaks = []

    def case(repeat):
        report = _run_cli(big, folder / f"big{repeat}")
        peaks.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return report

    def baseline(repeat):
        rng = np.random.default_rng(repeat)
        return [rng.random(trials) < p for _ in (0, 1)]

    report, cases, bases = alternating(case, baseline, repeats)
    case_peak = peaks[0]  # the case runs first: the process's peak after it is the case's own
    (base, base_wall), (run, run_wall) = min(bases), min(cases)
    marginal = (run - fixed) / (trials - small["audit"]["trials"]) * trials

    medians = np.median(bases, 0)[0] / np.median(cases, 0)[0]
    return {"measure": f"LDP audit (MaxSense, {trials:,} trials per world) incl. writing vs numpy Bernoulli "
                       "sampling of the same bits", "goal": ">= 0.45", "baseline_cpu": base, "case_cpu": run,
            "ratio": base / run, "wall": run_wall, "baseline_wall": base_wall,
            "notes": f"minimum of {repeats} alternating timings each (baseline {spread(bases)} s; case "
                     f"{spread(cases)} s; ratio of medians {medians:.2f}); the process's peak after the first "
                     f"case, before any baseline, {case_peak:.0f} MB; "
                     f"marginal per-trial cost ratio {base / marginal:.2f}; fixed cost (imports done, world, "
                     f"figures) {fixed:.2f} s; timing.total_seconds {report['timing']['total_seconds']:.1f}, "
                     f"writing_seconds {report['timing']['writing_seconds']:.1f}"}


def row_churn(scale: float) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from churn import bare_simpy, maxsense_churn

    import recaudit.mechanisms, recaudit.simulator.churn, recaudit.simulator.population  # noqa: F401, E401  (imports are not the run's cost)

    users = int(1_000_000 * scale)
    bare, base, base_wall = timed(bare_simpy, users, 10_000.0, 1.0, 1)
    ours, case, wall = timed(maxsense_churn, users, 10_000.0, 1.0, 1)
    speed = ours["users"] / case / (bare["users"] / base)
    return {"measure": f"churn users/s ({users:,} users, MaxSense) vs one bare SimPy process per user",
            "goal": ">= 10x", "baseline_cpu": base, "case_cpu": case, "ratio": speed, "wall": wall,
            "baseline_wall": base_wall, "notes": f"{ours['users'] / case:,.0f} users per CPU second"}


def row_completion(scale: float) -> dict:
    import numpy as np
    import yaml

    import recaudit.audits.cli, recaudit.audits.runner  # noqa: F401, E401  (imports are not the run's cost)
    from recaudit.simulator.population import rank_one_world

    users, canaries = int(500_000 * scale), int(10_000 * scale)
    world = rank_one_world(users, 400, 80, np.random.default_rng(1))
    a, v = world.data.train, np.ones(400)
    _, base, base_wall = timed(lambda a, v: [a.T @ (a @ v) for _ in range(5)], a, v)
    base, base_wall = base / 5, base_wall / 5
    nbytes = a.data.nbytes
    del world, a  # the case's memory is its own (a closure holding ``a`` kept 0.47 GB of ratings through it)
    data = yaml.safe_load((ROOT / "scenarios" / "matrix-completion-utility.yaml").read_text())
    data["seed"] = 1
    data["population"].update(n_users=users, n_items=400, ratings_per_user=80)
    data["audit"]["trials"] = canaries
    report, case, wall = timed(_run_cli, data, _scratch("recaudit-bench-fw-"))
    return {"measure": f"private FW, {users:,} users x 400 items, <= 80 ratings each, T = 10, {canaries:,}-canary "
                       "one-run audit vs one sparse Aᵀ(Av)", "goal": "<= 250x, peak <= 1.5 GB",
            "baseline_cpu": base, "case_cpu": case, "ratio": case / base, "wall": wall, "baseline_wall": base_wall,
            "notes": f"ratings {nbytes / 1e6:.0f} MB as floats; RMSE {report['utility']['rmse']:.4f}"}


def row_learned(scale: float, repeats: int = 3) -> dict:
    """The ratio of the least of ``repeats`` alternating timings of the audit and of the sampling (as the LDP row)."""
    import numpy as np

    import sklearn.ensemble, sklearn.linear_model  # noqa: F401, E401  (imports are not the attack's cost)

    from recaudit.audits.harness import run_audit
    from recaudit.mechanisms.vector_reference import VECTOR_REFERENCE

    trials = int(1_000_000 * scale)
    mech = VECTOR_REFERENCE["vector_laplace"](1.0)
    mech.claim  # the accountant's answer is cached: not the attack's cost
    run, cases, bases = alternating(
        lambda repeat: run_audit(mech, trials=trials, alpha=0.05, seed=1),
        lambda repeat: [mech.sample(value, trials, np.random.default_rng(i))
                        for i, value in enumerate(mech.neighbours)],
        repeats)
    (base, base_wall), (case, wall) = min(bases), min(cases)
    return {"measure": f"learned attack (auto → {run.attack}), 4-bin Laplace histogram, {trials:,} samples per "
                       "world, vs sampling alone", "goal": "<= 8x", "baseline_cpu": base, "case_cpu": case,
            "ratio": case / base, "wall": wall, "baseline_wall": base_wall,
            "notes": f"minimum of {repeats} alternating timings each (baseline {spread(bases)} s; case "
                     f"{spread(cases)} s); ε_LB {run.bound.epsilon_lb:.4f} (claim 1, α = 0.05)"}


def row_trainer(scale: float, repeats: int = 3) -> dict:
    """A trainer's one-run audit (``recaudit run`` of the shipped non-private ALS, 1,000 isolated canaries, the
    fold-in attack, writing included) against one training run of the same model on the population's ratings
    (no canaries), both in this process with BLAS on one thread (as runs are); the least of ``repeats``
    alternating timings of each."""
    import numpy as np
    import yaml

    from recaudit.audits.designs.trainer_canaries import population_rows
    from recaudit.audits.language.scenario import Scenario, trainer_users
    from recaudit.mechanisms import als
    from recaudit.simulator.populations import POPULATIONS
    from recaudit.audits.language.sections import build
    from recaudit.simulator.seeds import stream

    data = yaml.safe_load((ROOT / "scenarios" / "trainer-als-isolated.yaml").read_text())
    data["audit"]["canaries"] = max(100, int(1_000 * scale))
    data["attack"] = [{"kind": "fold_in"}]
    scenario = Scenario.model_validate(data)
    population = build(scenario.population, POPULATIONS)
    root = np.random.SeedSequence(scenario.seed)
    catalogue = population.catalogue(stream(root, "catalogue"))
    ratings, _ = population_rows(population, catalogue, trainer_users(scenario, population), stream(root, "rows"))
    from threadpoolctl import threadpool_limits

    def baseline(repeat: int):
        with threadpool_limits(1, "blas"):  # as the audit runs (recaudit.audits.executors.one_blas_thread)
            return als.fit(ratings, np.random.default_rng(repeat))

    folder = _scratch("recaudit-bench-trainer-")
    report, cases, bases = alternating(lambda repeat: _run_cli(data, folder / str(repeat)), baseline, repeats)
    (base, base_wall), (case, wall) = min(bases), min(cases)
    t = report["trainer"]
    return {"measure": f"trainer one-run audit (recaudit run: ALS, {ratings.shape[0]} x {ratings.shape[1]}, "
                       f"{ratings.nnz:,} ratings, {t['canaries']['m']:,} isolated canaries, fold-in) vs one "
                       "training run on the same ratings", "goal": "<= 2x", "baseline_cpu": base, "case_cpu": case,
            "ratio": case / base, "wall": wall, "baseline_wall": base_wall,
            "notes": f"minimum of {repeats} alternating timings each (baseline {spread(bases)} s; case "
                     f"{spread(cases)} s); the audit's own training run {t['train_seconds']:.2f} s wall with its "
                     f"canaries; ε_LB {report['audit']['epsilon_lb']:.3f} (claim 1), AUC "
                     f"{t['attacks']['fold_in']['auc']:.3f}"}


def row_tight_fw(scale: float) -> dict:
    """``recaudit run tight-private-frank-wolfe`` (2·10⁶ batched runs per world, its processes executor) in this
    process: its CPU seconds, workers included, against the goal (300 s); ε_LB and tightness in the notes."""
    import yaml

    data = yaml.safe_load((ROOT / "scenarios" / "tight-private-frank-wolfe.yaml").read_text())
    data["audit"]["trials"] = max(int(data["audit"]["trials"] * scale), 2 * data["audit"]["block_size"])
    report, case, wall = timed(_run_cli, data, _scratch("recaudit-bench-tight-"))
    audit = report["audit"]
    return {"measure": f"recaudit run tight-private-frank-wolfe ({data['audit']['trials']:,} batched runs per "
                       "world, processes executor), CPU seconds", "goal": "<= 300 CPU-s", "baseline_cpu": 300.0,
            "case_cpu": case, "ratio": case / 300.0, "wall": wall, "baseline_wall": 300.0,
            "notes": f"ε_LB {audit['epsilon_lb']:.6f}, tightness {audit['tightness']:.6f}, GDP estimate "
                     f"{audit['epsilon_estimate']:.6f}; baseline column: the goal (300 s CPU)"}


def row_suite(scale: float) -> dict:
    """The default test suite (``python -m pytest``) in a child process: its CPU minutes against the goal."""
    done, case, wall = timed(lambda: subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                                                    cwd=ROOT, capture_output=True, text=True))
    summary = (done.stdout.strip().splitlines() or ["no output"])[-1]
    return {"measure": "default test suite (python -m pytest), CPU minutes", "goal": "<= 3 min CPU",
            "baseline_cpu": 180.0, "case_cpu": case, "ratio": case / 60, "wall": wall, "baseline_wall": 180.0,
            "notes": f"{summary}; baseline column: the goal (180 s CPU)"}


ROWS = {"ldp": row_ldp, "churn": row_churn, "completion": row_completion, "learned": row_learned,
        "trainer": row_trainer, "tight_fw": row_tight_fw, "suite": row_suite}


def _child(row: str, scale: float) -> None:
    print("RESULT " + json.dumps(ROWS[row](scale)), flush=True)


def _peak_mb(stderr: str) -> float | None:
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    return int(found.group(1)) / 1024 if found else None


def _with_earlier_rows(results: list[dict], scale: float) -> list[dict]:
    """``results`` plus the rows of the kept table (same scale) that were not rerun, in the table's row order."""
    try:
        kept = json.loads((RESULTS / "table-latest.json").read_text())
    except (OSError, ValueError):
        return results
    fresh = {r["row"]: r for r in results}
    if kept.get("scale") == scale:
        fresh = {r["row"]: r for r in kept.get("rows", []) if r.get("row") in ROWS} | fresh
    return [fresh[row] for row in ROWS if row in fresh]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=list(ROWS))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size (users, trials)")
    parser.add_argument("--child", choices=sorted(ROWS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.scale)
        return
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    results = []
    for row in args.rows:
        done = subprocess.run([*timer, sys.executable, __file__, "--child", row, "--scale", str(args.scale)],
                              capture_output=True, text=True, cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)})
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            print(f"{row}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
            continue
        results.append({"row": row, **json.loads(line[7:]), "peak_rss_mb": _peak_mb(done.stderr),
                        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
        print(f"{row}: done", file=sys.stderr, flush=True)
    cores = os.cpu_count()
    results = _with_earlier_rows(results, args.scale)
    lines = [f"Issue 20's table on {cores} cores (scale {args.scale:g}); CPU seconds (wall beside: other work "
             "shared the cores); a row not rerun this time keeps its earlier measurement and date", "",
             "| measure | goal | ratio | case CPU s (wall) | baseline CPU s (wall) | peak RSS MB | measured | notes |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for r in results:
        peak = "n/a" if r["peak_rss_mb"] is None else f"{r['peak_rss_mb']:,.0f}"
        lines.append(f"| {r['measure']} | {r['goal']} | {r['ratio']:.2f} | {r['case_cpu']:.2f} ({r['wall']:.1f}) | "
                     f"{r['baseline_cpu']:.3f} ({r['baseline_wall']:.2f}) | {peak} | {r.get('measured', 'n/a')} | "
                     f"{r['notes']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "table-latest.md").write_text(text)
    (RESULTS / "table-latest.json").write_text(json.dumps({"cores": cores, "scale": args.scale, "rows": results},
                                                          indent=1) + "\n")


if __name__ == "__main__":
    main()
