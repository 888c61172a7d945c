"""The validity suite's score families: numpy draws with a true ε(δ) known exactly, and the suite itself.

Every family is a pair of score laws ``(P0, P1)``: the output of a mechanism on two neighbouring worlds (the
score *is* the output, so the mechanism's ε at δ is the pair's). Drawn with numpy directly, independent of the
project's mechanisms. The truth ``ε(δ) = inf{ε ≥ 0 : δ(ε) ≤ δ}`` with
``δ(ε) = max(sup_S P1(S) − e^ε P0(S), sup_S P0(S) − e^ε P1(S))`` is computed in closed form (Gaussian,
randomized response, the rare-event mixture, null) or exactly from the laws' CDFs (Laplace, the jittered
randomized response, Cauchy: the hockey-stick sum over a grid of 2·10⁵ cells and the two tails, which is
the δ of the scores rounded to that grid, at most the true δ — so the truth used is at most the true ε and
"above the truth" is counted conservatively, against the estimator) or by exact summation (the lattice).

Run as a script for the docs' table (CPU time at the end)::

    PYTHONPATH=. python tests/validity.py [--seeds 200] [--quick]
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr

ALPHA = 0.05
ONE_RUN_SIZES = (40, 200, 1_000, 10_000)
MANY_RUN_SIZES = (1_000, 10_000, 100_000, 1_000_000)


def _gaussian_delta(eps: float, mu: float) -> float:
    """Hockey stick of N(μ,1) against N(0,1) at any real ε (μ > 0)."""
    a, b = log_ndtr(-eps / mu + mu / 2), log_ndtr(-eps / mu - mu / 2)
    return float(max(0.0, math.exp(a) - math.exp(eps + b)))


def _grid_delta(cdf0: Callable, cdf1: Callable, lo: float, hi: float, cells: int = 200_000) -> Callable:
    """δ(ε) of two continuous laws from their CDFs: the hockey stick summed over grid cells and both tails."""
    edges = np.linspace(lo, hi, cells + 1)
    c0, c1 = cdf0(edges), cdf1(edges)
    p0 = np.concatenate([[c0[0]], np.diff(c0), [1 - c0[-1]]])
    p1 = np.concatenate([[c1[0]], np.diff(c1), [1 - c1[-1]]])
    return lambda eps: float(max(np.sum(np.maximum(p1 - math.exp(eps) * p0, 0.0)),
                                 np.sum(np.maximum(p0 - math.exp(eps) * p1, 0.0))))


def epsilon_at(delta_of: Callable[[float], float], delta: float, hi: float = 60.0) -> float:
    """``inf{ε ≥ 0 : δ(ε) ≤ δ}`` (δ(ε) decreases in ε); inf when even ``hi`` is not enough."""
    if delta_of(0.0) <= delta:
        return 0.0
    if delta_of(hi) > delta:
        return math.inf
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=1e-10))


@dataclass(frozen=True)
class Family:
    """A pair of score laws with its exact ε(δ), the δ it is judged at, and fixed-in-advance test settings."""

    name: str
    draw: Callable[[np.random.Generator, np.ndarray], np.ndarray]  # (rng, bits) -> one score per bit
    delta_of: Callable[[float], float]
    delta: float = 1e-5
    cut: float = 0.0  # explicit estimators: the likelihood-ratio test's equal-prior cut (direction +1)
    score_range: tuple[float, float] = (-3.0, 4.0)  # bonferroni's grid, fixed from the laws
    note: str = ""
    gaussian: bool = False  # the scores are a Gaussian shift: Gaussian-model figures are bounds
    truth: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "truth", epsilon_at(self.delta_of, self.delta))


def _rr_bits(rng, bits, eps):
    keep = rng.random(bits.shape) < 1 / (1 + math.exp(-eps))
    return np.where(keep, bits, 1 - bits).astype(float)


def _rr_delta(eps):
    q = 1 / (1 + math.exp(-eps))  # P[output = bit]
    return lambda e: max(0.0, q - math.exp(e) * (1 - q))


def _jitter_delta(eps, scale):
    q = 1 / (1 + math.exp(-eps))
    cdf = lambda w: (lambda x: (1 - w) * stats.norm.cdf(x / scale) + w * stats.norm.cdf((x - 1) / scale))  # noqa
    return _grid_delta(cdf(1 - q), cdf(q), -12 * scale, 1 + 12 * scale)


def _lattice_delta(eps, support=200):
    k = np.arange(-support, support + 1)
    w = np.exp(-eps * np.abs(k))
    p0 = w / w.sum()
    p1 = np.exp(-eps * np.abs(k - 1)) / w.sum()
    return lambda e: float(max(np.sum(np.maximum(p1 - math.exp(e) * p0, 0)),
                               np.sum(np.maximum(p0 - math.exp(e) * p1, 0))))


def _lattice_draw(eps):
    def draw(rng, bits):
        p = 1 - math.exp(-eps)  # two-sided geometric: difference of two geometrics is discrete Laplace
        return (rng.geometric(p, bits.shape) - rng.geometric(p, bits.shape) + bits).astype(float)
    return draw


def _rare_delta(mu, p):
    """P0 = N(0,1); P1 = (1 − p)·N(μ,1) + p·(an atom far away, never drawn in world 0)."""
    return lambda e: max(p + (1 - p) * _gaussian_delta(e - math.log1p(-p), mu),
                         _gaussian_delta(e + math.log1p(-p), mu))


def _rare_draw(mu, p):
    def draw(rng, bits):
        x = rng.normal(size=bits.shape) + mu * bits
        return np.where((bits == 1) & (rng.random(bits.shape) < p), 50.0, x)
    return draw


def families() -> list[Family]:
    """The score families (built once: the grid truths cost about 1 s)."""
    mu, lap, rr, cauchy_shift, p_rare = 0.5, 1.0, 1.0, 1.0, 5e-4
    return [
        Family("Gaussian μ = 0.5", lambda rng, b: rng.normal(size=b.shape) + mu * b,
               lambda e: max(_gaussian_delta(e, mu), 0.0), cut=mu / 2, gaussian=True,
               note="closed form (Balle–Wang)"),
        Family("Laplace, shift 1 (pure 1-DP)", lambda rng, b: rng.laplace(size=b.shape) + lap * b,
               _grid_delta(stats.laplace.cdf, lambda x: stats.laplace.cdf(x - lap), -40, 41), cut=lap / 2,
               note="exact CDFs on a grid"),
        Family("randomized response ε = 1", lambda rng, b: _rr_bits(rng, b, rr), _rr_delta(rr), cut=0.5,
               score_range=(-0.5, 1.5), note="closed form"),
        *[Family(f"RR ε = 1 + N(0, {s:g}²)", lambda rng, b, s=s: _rr_bits(rng, b, rr) + s * rng.normal(size=b.shape),
                 _jitter_delta(rr, s), cut=0.5, score_range=(-3 * s, 1 + 3 * s),
                 note="exact CDFs on a grid (at most RR's ε = 1: post-processing)") for s in (0.5, 1.0, 2.0)],
        Family("lattice: discrete Laplace ε = 1", _lattice_draw(1.0), _lattice_delta(1.0), cut=0.5,
               score_range=(-6.5, 7.5), note="exact sum over the integers"),
        Family("Cauchy, shift 1 (bounded likelihood ratio)",
               lambda rng, b: rng.standard_cauchy(b.shape) + cauchy_shift * b,
               _grid_delta(stats.cauchy.cdf, lambda x: stats.cauchy.cdf(x - cauchy_shift), -2e4, 2e4,
                           cells=400_000), cut=cauchy_shift / 2, score_range=(-6.0, 7.0),
               note="exact CDFs on a grid; heavy tails"),
        Family(f"rare separating event (p = {p_rare:g}) + N(0.5, 1)", _rare_draw(mu, p_rare), _rare_delta(mu, p_rare),
               delta=1e-3, cut=mu / 2, score_range=(-3.0, 4.0),
               note="closed form; ε = ∞ below δ = p, judged at δ = 2p"),
        Family("null (identical worlds)", lambda rng, b: rng.normal(size=b.shape), lambda e: 0.0, gaussian=True,
               note="ε = 0"),
    ]


# --------------------------------------------------------------------------- the suite


def claim_for(family: Family):
    """The claim an estimator is handed: ε the truth (or 0.5 when it is 0), a Gaussian curve of that ε (so
    every estimator judges it and plans its guesses for it). The claim never enters a bound's validity."""
    from recaudit.audits.stats.gdp import gdp_mu
    from recaudit.mechanisms import PrivacyClaim

    eps = family.truth if 0 < family.truth < math.inf else 0.5
    return PrivacyClaim(eps, family.delta, model="central", gaussian_mu=gdp_mu(eps, family.delta))


def estimators_for(family: Family) -> dict:
    """Every registered estimator, its fixed-in-advance settings from the family (fdp-one-run's recursion: its
    printed bound is the same as the programme's, see docs/statistics.md)."""
    from recaudit.audits.stats.estimators import ESTIMATORS

    settings = {"bonferroni": {"score_range": family.score_range, "grid_size": 100},
                "explicit": {"threshold_value": family.cut}, "gdp-explicit": {"threshold_value": family.cut},
                "fdp-one-run": {"analysis": "recursion"}}
    return {name: cls(**settings.get(name, {})) for name, cls in ESTIMATORS.items()}


@dataclass
class Cell:
    family: str
    estimator: str
    size: int
    seeds: int
    above: int = 0  # printed bounds (ε_LB) above the truth
    above_estimate: int = 0  # the estimator's own figure above the truth, where it is an estimate
    above_model: int = 0  # the model-held figure above the truth (Gaussian families, model_holds=True)
    model_figure: bool = False  # the estimator's own figure is a model's (valid_for is not 'any mechanism')


def run_cells(family: Family, estimators: dict, size: int, seeds: int, root: int = 31) -> list[Cell]:
    """``seeds`` audits of ``size`` runs per world (pairs) or canaries (one-run) — the same draws for every
    estimator of one input kind — counting bounds above the truth."""
    from recaudit.audits.stats.estimators import ANY_MECHANISM

    claim = claim_for(family)
    cells = {name: Cell(family.name, name, size, seeds, model_figure=est.valid_for != ANY_MECHANISM)
             for name, est in estimators.items()}
    kinds = {est.input for est in estimators.values()}
    assert len(kinds) == 1, "one input kind per call"
    canaries = kinds.pop() == "canaries"
    key = [root, size, int(canaries), sum(map(ord, family.name))]
    for child in np.random.SeedSequence(key).spawn(seeds):
        rng = np.random.default_rng(child)
        if canaries:
            worlds = rng.integers(0, 2, size)
            data = (family.draw(rng, worlds), worlds)
        else:
            data = (np.stack([family.draw(rng, np.zeros(size, np.int64)), family.draw(rng, np.ones(size, np.int64))]),
                    None)
        for name, estimator in estimators.items():
            cell = cells[name]
            est = estimator.estimate(*data, claim, ALPHA)
            cell.above += est.epsilon_lb > family.truth
            if not est.is_bound:
                cell.above_estimate += est.epsilon_estimate > family.truth
            if cell.model_figure and family.gaussian:
                held = estimator.estimate(*data, claim, ALPHA, model_holds=True)
                cell.above_model += held.epsilon_lb > family.truth
    return list(cells.values())


#: many-run estimators run at 10⁶ runs per world (the others, whose selection or grid sorts 10⁶ scores per
#: call, stop at 10⁵: 200 seeds x 10 families at 10⁶ would cost about an hour of CPU)
AT_A_MILLION = ("explicit", "gdp-explicit")


def allowed(seeds: int, per_cell: float) -> int:
    """The most exceedances a valid bound (each above the truth with probability ≤ α) shows in ``seeds`` audits
    with probability ≥ 1 − per_cell."""
    return int(stats.binom.isf(per_cell, seeds, ALPHA))


def suite(fams: list[Family], sizes_one_run=ONE_RUN_SIZES, sizes_many=MANY_RUN_SIZES, seeds: int = 200,
          names: list[str] | None = None, report: Callable[[str], None] = lambda _: None) -> list[Cell]:
    """Every cell, the smaller sizes of every family first (so a partial run covers every family)."""
    cells = []
    for step in range(max(len(sizes_one_run), len(sizes_many))):
        for family in fams:
            chosen = {n: e for n, e in estimators_for(family).items() if names is None or n in names}
            for kind, sizes in (("canaries", sizes_one_run), ("pairs", sizes_many)):
                if step >= len(sizes):
                    continue
                size = sizes[step]
                here = {n: e for n, e in chosen.items()
                        if e.input == kind and (size < 10**6 or n in AT_A_MILLION)}
                if here:
                    start = time.process_time()
                    new = run_cells(family, here, size, seeds)
                    cells += new
                    report(f"{family.name} | {kind} {size:,} | {time.process_time() - start:.1f} s CPU | "
                           + ", ".join(f"{c.estimator} {c.above}" + (f" (est. {c.above_estimate})" if c.model_figure
                                                                     else "")
                                       + (f" (model {c.above_model})" if c.model_figure and family.gaussian else "")
                                       for c in new))
    return cells


def table(cells: list[Cell], fams: list[Family]) -> str:
    """Markdown: per estimator and family, exceedances of the printed bound over all sizes (and of estimates)."""
    names = list(dict.fromkeys(c.estimator for c in cells))
    lines = ["| estimator | " + " | ".join(f.name for f in fams) + " |", "|---|" + "---:|" * len(fams)]
    for name in names:
        row = []
        for f in fams:
            mine = [c for c in cells if c.estimator == name and c.family == f.name]
            bound = "/".join(str(c.above) for c in mine)
            extra = ""
            if mine and mine[0].model_figure:
                extra = " (est. " + "/".join(str(c.above_estimate) for c in mine) + ")"
                if f.gaussian:
                    extra += " (model " + "/".join(str(c.above_model) for c in mine) + ")"
            row.append(bound + extra)
        lines.append(f"| `{name}` | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="the default suite's subset")
    parser.add_argument("--estimators", nargs="*")
    parser.add_argument("--canaries", type=int, nargs="*", default=list(ONE_RUN_SIZES), help="one-run sizes")
    parser.add_argument("--runs", type=int, nargs="*", default=list(MANY_RUN_SIZES), help="runs per world")
    args = parser.parse_args(argv)
    start = time.process_time()
    fams = families()
    for f in fams:
        print(f"{f.name}: ε({f.delta:g}) = {f.truth:.4f}  [{f.note}]")
    if args.quick:
        cells = suite(fams, (200,), (1_000,), args.seeds, args.estimators, report=print)
    else:
        cells = suite(fams, args.canaries, args.runs, args.seeds, args.estimators, report=print)
    print(table(cells, fams))
    limit = allowed(args.seeds, 1e-3 / len(cells))
    worst = max(cells, key=lambda c: c.above)
    print(f"{len(cells)} cells x {args.seeds} seeds; most bounds above the truth in one cell: {worst.above} "
          f"({worst.estimator}, {worst.family}, size {worst.size}); allowed {limit} (each cell 1e-3/{len(cells)})")
    print(f"CPU {time.process_time() - start:.1f} s")


if __name__ == "__main__":
    main()
