"""Benchmark: black-box audits — learned-attack time and ε_LB at 10⁶ samples per world, and one-run tightness.

Run with ``./dev bench blackbox`` (or ``python benchmarks/blackbox.py --trials 1000000``).

Part 1 audits each reference mechanism with its exact likelihood-ratio score
(the baseline, timed in the same run) and with the harness's learned attacks
(no score given), and prints a markdown table: seconds, the time ratio to the
exact-score audit, ε_LB (at α = 0.05, with the ceiling) and ε_LB relative to
the exact attack's. Vector mechanisms (no exact score here) report the learned
audit alone, correct and broken twin.

Part 2 (``--one-run-runs``, default 20): Gaussian canaries, m = 10⁴, the
median ε_LB/ε of the f-DP one-run audit (Mahloujifar, Melis, Chaudhuri 2025)
beside Steinke–Nasr–Jagielski's, from the same guesses (10 % in, 10 % out).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recaudit.audits.harness import run_audit  # noqa: E402
from recaudit.audits.stats.one_run import fdp_one_run_audit, one_run_audit  # noqa: E402
from recaudit.mechanisms.reference import GaussianCount, LaplaceCount, RandomizedResponse, analytic_gaussian_sigma  # noqa: E402
from recaudit.mechanisms.vector_reference import VECTOR_BROKEN, VECTOR_REFERENCE  # noqa: E402


class WithoutScore:
    """The mechanism with its score hidden: the harness must learn one."""

    def __init__(self, mechanism):
        self.mechanism, self.claim, self.neighbours = mechanism, mechanism.claim, mechanism.neighbours

    def sample(self, value, n, rng):
        return self.mechanism.sample(value, n, rng)


def _timed(mech, **kwargs):
    start = time.perf_counter()
    run = run_audit(mech, alpha=0.05, seed=1, **kwargs)
    return run, time.perf_counter() - start


def scalar_part(trials: int) -> None:
    print("| mechanism | attack | seconds | time / exact | ε_LB (ceiling) | ε_LB / exact |")
    print("|---|---|---|---|---|---|")
    cases = [("Laplace ε=1", LaplaceCount(1.0), "clopper-pearson", ("logistic", "boosted")),
             ("Gaussian ε=1 (GDP)", GaussianCount.from_epsilon(1.0), "gdp", ("logistic", "boosted")),
             ("randomized response ε=1", RandomizedResponse(1.0), "clopper-pearson", ("histogram",))]
    for label, mech, method, attacks in cases:
        exact, t_exact = _timed(mech, trials=trials, method=method)
        print(f"| {label} | exact likelihood ratio | {t_exact:.1f} | 1 | {exact.bound.epsilon_lb:.4f} "
              f"({exact.bound.ceiling:.2f}) | 1 |", flush=True)
        for attack in attacks:
            run, t = _timed(WithoutScore(mech), trials=trials, method=method, attack=attack)
            print(f"| {label} | {attack} | {t:.1f} | {t / t_exact:.1f} | {run.bound.epsilon_lb:.4f} "
                  f"({run.bound.ceiling:.2f}) | {run.bound.epsilon_lb / exact.bound.epsilon_lb:.4f} |", flush=True)


def vector_part(trials: int) -> None:
    print("\n| vector mechanism (claimed ε) | twin | attack (auto) | seconds | ε_LB (ceiling) |")
    print("|---|---|---|---|---|")
    for name, eps, method in (("vector_laplace", 1.0, "clopper-pearson"), ("gaussian_histogram", 2.0, "gdp"),
                              ("report_noisy_max_index", 0.5, "clopper-pearson"),
                              ("report_noisy_max_value", 0.5, "clopper-pearson"),
                              ("sparse_vector", 1.0, "clopper-pearson")):
        for twin, registry in (("correct", VECTOR_REFERENCE), ("broken", VECTOR_BROKEN)):
            run, t = _timed(registry[name](eps), trials=trials, method=method)
            print(f"| {name} ({eps:g}) | {twin} | {run.attack} | {t:.1f} | {run.bound.epsilon_lb:.4f} "
                  f"({run.bound.ceiling:.2f}) |", flush=True)


def one_run_part(runs: int, m: int = 10_000) -> None:
    print(f"\n| Gaussian canaries, m = {m} | f-DP one-run ε_LB/ε (median of {runs}) | "
          f"Steinke–Nasr–Jagielski ε_LB/ε (median) |")
    print("|---|---|---|")
    k = m // 10
    for eps in (1.0, 2.0, 4.0, 8.0):
        sigma = analytic_gaussian_sigma(eps, 1e-5)
        rng = np.random.default_rng(int(eps * 1000))
        fdp, snj = [], []
        for _ in range(runs):
            included = rng.integers(0, 2, m)
            scores = included + rng.normal(0.0, sigma, m)
            fdp.append(fdp_one_run_audit(scores, included, k, k, 0.05, 1e-5).epsilon_lb / eps)
            snj.append(one_run_audit(scores, included, k, k, 0.05, 1e-5).epsilon_lb / eps)
        print(f"| ε = {eps:g}, δ = 1e-5 | {np.median(fdp):.3f} | {np.median(snj):.3f} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000_000, help="samples per world")
    parser.add_argument("--one-run-runs", type=int, default=20)
    parser.add_argument("--skip-vector", action="store_true")
    args = parser.parse_args(argv)
    scalar_part(args.trials)
    if not args.skip_vector:
        vector_part(args.trials)
    if args.one_run_runs:
        one_run_part(args.one_run_runs)


if __name__ == "__main__":
    main()
