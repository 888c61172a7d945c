"""Test-suite assertions for differential privacy: ``assert_dp`` and ``assert_not_dp``.

Runs a mechanism many times on each of two neighbouring dataset values,
scores the outputs with an attack, and turns the scores into an ε lower
bound (AUDITING.md, "Distinguishing game"): :func:`audits.stats.bounds.split_epsilon_bound`
(Clopper–Pearson, any mechanism) or :func:`audits.stats.bounds.split_gdp_bound`
(Gaussian DP, for Gaussian-like mechanisms). The claim is *violated* when
ε_LB > ε_claimed; this is wrongly concluded for a mechanism that meets its
claim with probability ≤ ``alpha``. So:

* ``assert_dp`` fails falsely (on a correct mechanism) with probability ≤ alpha;
* ``assert_not_dp`` succeeds only if the trials suffice to *show* the
  violation; its failure probability on a broken mechanism is a power
  question (more trials, a better ``score``), and impossible to pass when
  the ceiling — the bound at perfect separation — is not above the claim.

A mechanism is any object with ``sample(value, n, rng) -> array`` returning
``n`` independent outputs on the dataset ``value``; optional attributes
``claim`` (a :class:`mechanisms.base.PrivacyClaim`, or anything with
``epsilon`` and ``delta``), ``neighbours`` (a pair of dataset values) and
``score(outputs) -> array`` fill in what the call leaves out. Randomness:
``np.random.SeedSequence(seed).spawn(2)``, one child per world, so a fixed
seed reproduces the audit exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .stats.bounds import BoundResult, split_epsilon_bound, split_gdp_bound

__all__ = ["METHODS", "AuditRun", "as_seed_sequence", "run_audit", "assert_dp", "assert_not_dp", "format_bound"]

METHODS = ("clopper-pearson", "gdp")


@dataclass(frozen=True)
class AuditRun:
    """One audit: the bound, the claim it was compared with, and how it was run."""

    bound: BoundResult
    claimed_epsilon: float
    claimed_delta: float
    trials: int
    seed: Any
    neighbours: tuple

    @property
    def violated(self) -> bool:
        return self.bound.epsilon_lb > self.claimed_epsilon


def _resolve_claim(mechanism, claim) -> tuple[float, float]:
    claim = claim if claim is not None else getattr(mechanism, "claim", None)
    if claim is None:
        raise ValueError("no claim: pass claim=... or give the mechanism a .claim")
    if isinstance(claim, (tuple, list)):
        epsilon, delta = (float(x) for x in claim)
    else:
        epsilon, delta = float(claim.epsilon), float(getattr(claim, "delta", 0.0))
    return epsilon, delta


def _resolve_neighbours(mechanism, neighbours) -> tuple:
    neighbours = neighbours if neighbours is not None else getattr(mechanism, "neighbours", None)
    if neighbours is None or len(neighbours) != 2:
        raise ValueError("need a neighbouring pair: pass neighbours=(d0, d1) or give the mechanism .neighbours")
    return tuple(neighbours)


def _resolve_score(mechanism, score) -> Callable:
    if score is not None:
        return score
    return getattr(mechanism, "score", None) or (lambda outputs: outputs)


def as_seed_sequence(seed) -> np.random.SeedSequence:
    """A fresh SeedSequence for ``seed`` (a copy if one is given, so reuse reproduces)."""
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
    return np.random.SeedSequence(seed)


def _scores(outputs, score: Callable, trials: int, world: int) -> np.ndarray:
    s = np.asarray(score(outputs), dtype=float).ravel()
    if s.size != trials:
        raise ValueError(f"world {world}: expected {trials} scores (one per trial), got {s.size}")
    return s


def run_audit(
    mechanism,
    claim=None,
    neighbours=None,
    trials: int = 100_000,
    alpha: float = 1e-3,
    seed=0,
    score: Callable | None = None,
    method: str = "clopper-pearson",
) -> AuditRun:
    """Sample both worlds, score them, and bound ε; no verdict is asserted.

    ``claim`` may be a PrivacyClaim-like object or an ``(epsilon, delta)``
    pair. ``trials`` runs per world; half of each choose the test, the other
    half are counted. ``seed``: anything ``np.random.SeedSequence`` accepts,
    or a SeedSequence (e.g. a spawned child).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    epsilon, delta = _resolve_claim(mechanism, claim)
    pair = _resolve_neighbours(mechanism, neighbours)
    scorer = _resolve_score(mechanism, score)
    world_seeds = as_seed_sequence(seed).spawn(2)
    outputs = [mechanism.sample(value, int(trials), np.random.default_rng(ss))
               for value, ss in zip(pair, world_seeds)]
    s0, s1 = (_scores(out, scorer, int(trials), w) for w, out in enumerate(outputs))
    if method == "gdp":
        bound = split_gdp_bound(s0, s1, alpha=alpha, delta=delta)
    else:
        bound = split_epsilon_bound(s0, s1, alpha=alpha, delta=delta)
    return AuditRun(bound, epsilon, delta, int(trials), seed, pair)


def format_bound(run: AuditRun) -> str:
    """The audit's figures, one per line, for assertion messages."""
    b = run.bound
    lines = [
        f"  ε_LB = {b.epsilon_lb:.4g} at confidence 1 − α, α = {b.alpha:g}",
        f"  ceiling = {b.ceiling:.4g} (the largest ε_LB {b.n_neg} + {b.n_pos} counted trials can show)",
        f"  claimed ε = {run.claimed_epsilon:.4g}, δ = {run.claimed_delta:g}",
        f"  counts: FP = {b.false_pos}/{b.n_neg}, FN = {b.false_neg}/{b.n_pos} "
        f"(threshold {b.threshold:.6g}, direction {b.direction:+d}, {b.strategy})",
    ]
    if b.mu_lb is not None:
        lines.append(f"  μ_LB = {b.mu_lb:.4g} (μ ceiling {b.mu_ceiling:.4g})")
    lines.append(f"  method = {b.method}, trials = {run.trials} per world, "
                 f"neighbours = {run.neighbours!r}, seed = {run.seed!r}")
    return "\n".join(lines)


def assert_dp(
    mechanism,
    claim=None,
    neighbours=None,
    trials: int = 100_000,
    alpha: float = 1e-3,
    seed=0,
    score: Callable | None = None,
    method: str = "clopper-pearson",
) -> BoundResult:
    """Fail if the audit shows the claim violated (ε_LB > ε_claimed); else return the bound.

    For a mechanism that meets its claim this fails with probability ≤ alpha
    (for ``method="gdp"``: if its trade-off curve is Gaussian). Passing never
    proves privacy: it only means these trials found no violation.
    """
    run = run_audit(mechanism, claim, neighbours, trials, alpha, seed, score, method)
    if run.violated:
        raise AssertionError(
            f"privacy claim violated: ε_LB = {run.bound.epsilon_lb:.4g} > claimed ε = "
            f"{run.claimed_epsilon:.4g}\n{format_bound(run)}"
        )
    return run.bound


def assert_not_dp(
    mechanism,
    claim=None,
    neighbours=None,
    trials: int = 100_000,
    alpha: float = 1e-3,
    seed=0,
    score: Callable | None = None,
    method: str = "clopper-pearson",
) -> BoundResult:
    """Fail unless the audit shows the claim violated; return the bound when it does.

    The violation, when shown, is wrong with probability ≤ alpha. When it is
    not shown the message says whether the ceiling was even above the claim:
    if not, no outcome of this many trials could have shown it.
    """
    run = run_audit(mechanism, claim, neighbours, trials, alpha, seed, score, method)
    if not run.violated:
        b = run.bound
        if b.ceiling <= run.claimed_epsilon:
            hint = (f"the ceiling {b.ceiling:.4g} ≤ claimed ε = {run.claimed_epsilon:.4g}: this test cannot "
                    f"succeed with {run.trials} trials per world at α = {b.alpha:g}; use more trials")
        else:
            hint = (f"the ceiling {b.ceiling:.4g} > claimed ε, so more trials or a stronger score "
                    f"might still show a violation")
        raise AssertionError(
            f"privacy claim not shown violated: ε_LB = {b.epsilon_lb:.4g} ≤ claimed ε = "
            f"{run.claimed_epsilon:.4g}; {hint}\n{format_bound(run)}"
        )
    return run.bound
