"""Calibration of the estimators on reference mechanisms: coverage and tightness.

* Coverage: many independent audits of a correct mechanism at its true ε;
  a valid bound at level alpha exceeds ε in at most a fraction alpha of them.
* Tightness: ε_LB / ε on the reference mechanisms with the optimal attack —
  how much of the true ε an audit of a given size can show.

Run ``python -m recaudit.audits.calibration`` to print the tightness table (markdown);
``--coverage`` also prints the coverage table. Every figure is a fixed
function of the seed.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy import stats

from recaudit.mechanisms.reference import GaussianCount, LaplaceCount, RandomizedResponse

from .harness import as_seed_sequence, run_audit
from .stats.estimators import ESTIMATORS

__all__ = [
    "CoverageResult",
    "coverage",
    "one_run_coverage",
    "ideal_canary_scores",
    "TightnessRow",
    "tightness_table",
    "markdown_tightness",
    "markdown_coverage",
    "default_coverage",
    "main",
]

EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0)
GAUSSIAN_DELTA = 1e-5


# --------------------------------------------------------------------------
# coverage


@dataclass(frozen=True)
class CoverageResult:
    """How often independent audits at the true ε reported ε_LB > ε."""

    name: str
    audits: int
    exceed: int
    alpha: float
    p_value: float  # one-sided binomial test of H0: exceedance rate ≤ alpha

    @property
    def fraction(self) -> float:
        return self.exceed / self.audits


def _binomial_p(exceed: int, audits: int, alpha: float) -> float:
    """``scipy.stats.binomtest(exceed, audits, p=alpha, alternative="greater")`` p-value."""
    return float(stats.binomtest(exceed, audits, p=alpha, alternative="greater").pvalue)


def coverage(mechanism, name: str = "", audits: int = 200, trials: int = 10_000, alpha: float = 0.05,
             method: str = "clopper-pearson", seed=0) -> CoverageResult:
    """``audits`` independent harness audits of ``mechanism`` against its own claim.

    Audit ``j`` uses the ``j``-th child of ``SeedSequence(seed)``; the loop is
    over audits, each of which is vectorised over its trials.
    """
    children = as_seed_sequence(seed).spawn(audits)
    exceed = sum(run_audit(mechanism, trials=trials, alpha=alpha, seed=child, method=method).violated
                 for child in children)
    return CoverageResult(name or type(mechanism).__name__, audits, int(exceed), alpha,
                          _binomial_p(int(exceed), audits, alpha))


def ideal_canary_scores(mechanism, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(scores, included) for ``m`` canaries in the ideal one-run setting.

    Each canary is included with probability ½ and its score is one output
    of ``mechanism`` on the neighbour for its bit (``neighbours[included]``),
    scored by ``mechanism.score``: the canaries are independent, each
    protected exactly as in the distinguishing game. Vectorised: both worlds
    are sampled for every canary and the right one is kept.
    """
    included = rng.integers(0, 2, m)
    out0 = mechanism.sample(mechanism.neighbours[0], m, rng)
    out1 = mechanism.sample(mechanism.neighbours[1], m, rng)
    outputs = np.where(included == 1, out1, out0)
    return np.asarray(mechanism.score(outputs), dtype=float), included


def gaussian_by_construction(mechanism) -> bool:
    """The reference Gaussian mechanism's ideal canary scores are a Gaussian shift by construction: estimators
    resting on Gaussian scores or Gaussian DP give bounds on them (``Estimate.model_holds``)."""
    return isinstance(mechanism, GaussianCount)


def one_run_coverage(mechanism, m: int = 1_000, estimator: str = "one-run", audits: int = 200,
                     alpha: float = 0.05, seed=0, name: str = "") -> CoverageResult:
    """Coverage of a one-run estimator (default settings: planned guesses) on ideal canaries at the claim."""
    claim, est = mechanism.claim, ESTIMATORS[estimator]()
    exceed = 0
    for child in as_seed_sequence(seed).spawn(audits):
        scores, included = ideal_canary_scores(mechanism, m, np.random.default_rng(child))
        exceed += est.estimate(scores, included, claim, alpha,
                               model_holds=gaussian_by_construction(mechanism)).epsilon_lb > claim.epsilon
    return CoverageResult(name or f"{estimator} {type(mechanism).__name__}", audits, int(exceed), alpha,
                          _binomial_p(int(exceed), audits, alpha))


# --------------------------------------------------------------------------
# tightness


@dataclass(frozen=True)
class TightnessRow:
    """ε_LB / ε per target ε for one audit setting."""

    setting: str
    size: str
    ratios: tuple[float, ...]
    ceilings: tuple[float, ...]


def _distinguishing_row(label: str, make, method: str, trials: int, alpha: float, seed,
                        epsilons) -> TightnessRow:
    ratios, ceilings = [], []
    for child, eps in zip(as_seed_sequence(seed).spawn(len(epsilons)), epsilons):
        mech = make(eps)
        run = run_audit(mech, trials=trials, alpha=alpha, seed=child, method=method)
        ratios.append(run.bound.epsilon_lb / run.claimed_epsilon)
        ceilings.append(run.bound.ceiling)
    return TightnessRow(label, f"{trials:,} trials/world", tuple(ratios), tuple(ceilings))


def _one_run_row(label: str, make, m: int, estimator: str, alpha: float, repeats: int, seed,
                 epsilons) -> TightnessRow:
    ratios, ceilings = [], []
    est = ESTIMATORS[estimator]()
    for child, eps in zip(as_seed_sequence(seed).spawn(len(epsilons)), epsilons):
        mech = make(eps)
        lbs = []
        for rep in child.spawn(repeats):
            scores, included = ideal_canary_scores(mech, m, np.random.default_rng(rep))
            res = est.estimate(scores, included, mech.claim, alpha, model_holds=gaussian_by_construction(mech))
            lbs.append(res.epsilon_lb)
        ratios.append(float(np.median(lbs)) / mech.claim.epsilon)
        ceilings.append(res.ceiling)
    return TightnessRow(label, f"m = {m:,}, {estimator}", tuple(ratios), tuple(ceilings))


def tightness_table(trials: int = 10**6, epsilons=EPSILONS, canaries=(10**3, 10**4), alpha: float = 0.05,
                    delta: float = GAUSSIAN_DELTA, one_run_repeats: int = 21, seed=0) -> list[TightnessRow]:
    """ε_LB / ε of the reference mechanisms at each ε, with the optimal (identity) attack.

    Distinguishing game (split half/half, ``trials`` per world, one audit per
    cell): randomized response and Laplace with Clopper–Pearson, the Gaussian
    mechanism (claim at ``delta``) with the GDP bound and, for contrast, with
    Clopper–Pearson. One-run audit on ideal canaries (:func:`ideal_canary_scores`),
    median over ``one_run_repeats`` independent runs, each estimator with its
    default settings: randomized-response canaries with ``one-run`` (the plan
    guesses every canary), Gaussian canaries with ``fdp-one-run`` (planned
    guesses, fixed before sampling) and ``gauss-fit``.
    """
    gaussian = lambda e: GaussianCount.from_epsilon(e, delta)  # noqa: E731
    seeds = as_seed_sequence(seed).spawn(4 + 3 * len(canaries))
    rows = [
        _distinguishing_row("randomized response, CP", RandomizedResponse, "clopper-pearson", trials, alpha,
                            seeds[0], epsilons),
        _distinguishing_row("Laplace, CP", LaplaceCount, "clopper-pearson", trials, alpha, seeds[1], epsilons),
        _distinguishing_row(f"Gaussian, GDP (δ = {delta:g})", gaussian, "gdp", trials, alpha, seeds[2], epsilons),
        _distinguishing_row(f"Gaussian, CP (δ = {delta:g})", gaussian, "clopper-pearson", trials, alpha,
                            seeds[3], epsilons),
    ]
    for j, m in enumerate(canaries):
        base = 4 + 3 * j
        rows.append(_one_run_row("one-run, RR canaries", RandomizedResponse, m, "one-run", alpha, one_run_repeats,
                                 seeds[base], epsilons))
        rows.append(_one_run_row(f"one-run, Gaussian canaries (δ = {delta:g})", gaussian, m, "fdp-one-run", alpha,
                                 one_run_repeats, seeds[base + 1], epsilons))
        rows.append(_one_run_row(f"one-run, Gaussian canaries (δ = {delta:g})", gaussian, m, "gauss-fit", alpha,
                                 one_run_repeats, seeds[base + 2], epsilons))
    return rows


def markdown_tightness(rows: list[TightnessRow], epsilons=EPSILONS, alpha: float = 0.05) -> str:
    """The table as markdown: ε_LB/ε per cell, ceiling in brackets."""
    head = "| setting | size | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |"
    rule = "|---|---|" + "---:|" * len(epsilons)
    body = [
        f"| {r.setting} | {r.size} | "
        + " | ".join(f"{x:.3f} ({c:.1f})" for x, c in zip(r.ratios, r.ceilings)) + " |"
        for r in rows
    ]
    note = (f"\nε_LB / ε at confidence {1 - alpha:g} (ceiling ε in brackets). "
            "One-run cells: median over independent runs.")
    return "\n".join([head, rule, *body]) + "\n" + note


def markdown_coverage(results: list[CoverageResult]) -> str:
    head = "| audit | audits | ε_LB > ε | fraction | binomial p (H0: rate ≤ α) |\n|---|---:|---:|---:|---:|"
    body = [f"| {c.name} | {c.audits} | {c.exceed} | {c.fraction:.3f} | {c.p_value:.3g} |" for c in results]
    return "\n".join([head, *body])


def default_coverage(audits: int = 200, trials: int = 10_000, alpha: float = 0.05, seed=0) -> list[CoverageResult]:
    """Coverage of each reference mechanism at ε = 1 (Gaussian: its claim at δ = 1e-5, via GDP)."""
    seeds = as_seed_sequence(seed).spawn(4)
    return [
        coverage(LaplaceCount(1.0), "Laplace ε=1, CP", audits, trials, alpha, "clopper-pearson", seeds[0]),
        coverage(GaussianCount.from_epsilon(1.0, GAUSSIAN_DELTA), "Gaussian ε=1 δ=1e-5, GDP", audits, trials,
                 alpha, "gdp", seeds[1]),
        coverage(RandomizedResponse(1.0), "randomized response ε=1, CP", audits, trials, alpha,
                 "clopper-pearson", seeds[2]),
        one_run_coverage(RandomizedResponse(1.0), m=1_000, audits=audits, alpha=alpha,
                         seed=seeds[3], name="one-run, RR canaries ε=1, m=1000"),
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10**6)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--coverage", action="store_true", help="also run the coverage audits")
    args = parser.parse_args(argv)
    started = time.time()
    rows = tightness_table(trials=args.trials, alpha=args.alpha, seed=args.seed)
    print(markdown_tightness(rows, alpha=args.alpha))
    if args.coverage:
        print()
        print(markdown_coverage(default_coverage(alpha=args.alpha, seed=args.seed)))
    print(f"\n({time.time() - started:.0f} s)")


if __name__ == "__main__":
    main()
