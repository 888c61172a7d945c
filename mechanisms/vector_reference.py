"""Reference mechanisms with vector, index and mixed outputs, each with a broken twin.

Controls for the black-box audits (docs/statistics.md, "Verdicts"):
the harness must pass every correct mechanism and flag every broken twin
without a hand-written score. Each class has ``claim``, ``neighbours`` and
``sample(value, n, rng)`` (vectorised over the ``n`` runs); none has a
``score``, on purpose. Dataset values are vectors of counts (a histogram or
a list of query answers); neighbours differ as their docstrings say.

Claims of the Laplace and Gaussian releases come from the accountant
(:func:`recaudit.mechanisms.accounting.account`); the selection mechanisms (report
noisy max, sparse vector) have no event there, so their claims cite the
theorem that gives them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recaudit.core.errors import ParameterError
from .accounting import GaussianRelease, LaplaceRelease, account
from .claims import PrivacyClaim
from .reference import analytic_gaussian_sigma

__all__ = [
    "VectorLaplace", "VectorLaplaceWrongSensitivity",
    "GaussianHistogram", "GaussianHistogramWrongSensitivity",
    "ReportNoisyMax", "ReportNoisyMaxScaleIsEpsilon",
    "SparseVector", "SparseVectorScaleIsEpsilon",
    "VECTOR_REFERENCE", "VECTOR_BROKEN",
]

#: A histogram and its replace-one neighbour: one record moved from bin 0 to bin 1 (L1 = 2, L2 = √2).
HISTOGRAM_PAIR = ((5.0, 3.0, 2.0, 0.0), (4.0, 4.0, 2.0, 0.0))


def _counts(value) -> np.ndarray:
    v = np.asarray(value, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ParameterError("value", f"the dataset value must be a non-empty vector of counts, got shape {v.shape}")
    return v


@dataclass(frozen=True)
class VectorLaplace:
    """A histogram plus Laplace(2/ε) noise per bin: ε-DP under replace-one (L1 sensitivity 2; Dwork et al. 2006)."""

    epsilon: float
    neighbours: tuple = HISTOGRAM_PAIR

    @property
    def sensitivity(self) -> float:
        """The L1 sensitivity the noise is calibrated to (2: one record leaves a bin and joins another)."""
        return 2.0

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    @property
    def claim(self) -> PrivacyClaim:
        return account(LaplaceRelease(2.0 / self.epsilon, sensitivity=2.0), 0.0, model="central")

    def sample(self, value, n: int, rng: np.random.Generator) -> np.ndarray:
        counts = _counts(value)
        return counts + rng.laplace(0.0, self.scale, (int(n), counts.size))


@dataclass(frozen=True)
class VectorLaplaceWrongSensitivity(VectorLaplace):
    """Broken: noise calibrated to sensitivity 1 (add/remove) while neighbours replace a record: 2ε-DP."""

    @property
    def sensitivity(self) -> float:
        return 1.0


@dataclass(frozen=True)
class GaussianHistogram:
    """A histogram plus N(0, σ²) per bin, σ for (ε, δ) at L2 sensitivity √2 (Balle & Wang 2018)."""

    epsilon: float
    delta: float = 1e-5
    neighbours: tuple = HISTOGRAM_PAIR

    @property
    def sensitivity(self) -> float:
        return math.sqrt(2.0)

    @property
    def sigma(self) -> float:
        return analytic_gaussian_sigma(self.epsilon, self.delta, self.sensitivity)

    @property
    def claim(self) -> PrivacyClaim:
        sigma = analytic_gaussian_sigma(self.epsilon, self.delta, math.sqrt(2.0))
        return account(GaussianRelease(sigma, sensitivity=math.sqrt(2.0)), self.delta, model="central")

    def sample(self, value, n: int, rng: np.random.Generator) -> np.ndarray:
        counts = _counts(value)
        return counts + rng.normal(0.0, self.sigma, (int(n), counts.size))


@dataclass(frozen=True)
class GaussianHistogramWrongSensitivity(GaussianHistogram):
    """Broken: σ calibrated to L2 sensitivity 1 while a replaced record moves √2: μ is √2 times the claim's."""

    @property
    def sensitivity(self) -> float:
        return 1.0


@dataclass(frozen=True)
class ReportNoisyMax:
    """Index of the largest count plus Laplace noise, optionally with a fresh noisy value of it.

    ``output="index"``: ``argmax(c + Lap(2/ε))``, ε-DP for counts whose
    neighbours differ by ≤ 1 in every entry (Dwork & Roth 2014, Claim 3.9,
    with scale 2Δ/ε for non-monotone neighbours). ``output="value"``: the
    index at ε/2 and ``c[index] + Lap(2/ε)`` at ε/2, returned as a tuple
    ``(index, value)``: ε-DP by basic composition. Neighbours: one count up,
    the rest down (the hardest pattern for noisy max).
    """

    epsilon: float
    output: str = "index"
    neighbours: tuple = ((3.0, 3.0, 3.0, 3.0), (4.0, 2.0, 2.0, 2.0))

    def __post_init__(self) -> None:
        if self.output not in ("index", "value"):
            raise ParameterError("output", f"output must be 'index' or 'value', got {self.output!r}")
        if not self.epsilon > 0:
            raise ParameterError("epsilon", "epsilon must be > 0")

    @property
    def claim(self) -> PrivacyClaim:
        return PrivacyClaim(epsilon=self.epsilon, delta=0.0, model="central")

    def _scale(self, budget: float) -> float:
        return 2.0 / budget

    def sample(self, value, n: int, rng: np.random.Generator):
        counts = _counts(value)
        n = int(n)
        select_budget = self.epsilon if self.output == "index" else self.epsilon / 2
        index = np.argmax(counts + rng.laplace(0.0, self._scale(select_budget), (n, counts.size)), axis=1)
        if self.output == "index":
            return index
        return index, counts[index] + rng.laplace(0.0, self._scale(self.epsilon / 2), n)


@dataclass(frozen=True)
class ReportNoisyMaxScaleIsEpsilon(ReportNoisyMax):
    """Broken: the noise scale is set to the budget itself (``scale=epsilon``) instead of 2/budget."""

    def _scale(self, budget: float) -> float:
        return budget


@dataclass(frozen=True)
class SparseVector:
    """Sparse vector (AboveThreshold with cutoff ``c``): which queries exceed a noisy threshold, until c do.

    Lyu, Su, Li (2017), Algorithm 1: ``ρ = Lap(2/ε)``, each query gets
    ``ν = Lap(4c/ε)``; answer 1 if ``q + ν ≥ T + ρ`` else 0, stop after ``c``
    ones (later queries: −1). ε-DP for queries of sensitivity 1. Output: an
    int8 vector per run. Neighbours: every answer one higher (all up).
    """

    epsilon: float
    threshold: float = 0.0
    cutoff: int = 1
    neighbours: tuple = ((0.0,) * 8, (1.0,) * 8)

    @property
    def claim(self) -> PrivacyClaim:
        return PrivacyClaim(epsilon=self.epsilon, delta=0.0, model="central")

    def _scale(self, sensitivity: float, budget: float) -> float:
        return sensitivity / budget

    def sample(self, value, n: int, rng: np.random.Generator) -> np.ndarray:
        queries = _counts(value)
        n = int(n)
        rho = rng.laplace(0.0, self._scale(1.0, self.epsilon / 2), (n, 1))
        nu = rng.laplace(0.0, self._scale(2.0 * self.cutoff, self.epsilon / 2), (n, queries.size))
        above = (queries + nu >= self.threshold + rho).astype(np.int8)
        seen_before = np.cumsum(above, axis=1) - above  # ones among earlier queries
        return np.where(seen_before >= self.cutoff, np.int8(-1), above)


@dataclass(frozen=True)
class SparseVectorScaleIsEpsilon(SparseVector):
    """Broken: each noise scale is set to its budget (``scale=epsilon``) instead of sensitivity/budget."""

    def _scale(self, sensitivity: float, budget: float) -> float:
        return budget


#: Correct vector-output references, each built from a target ε.
VECTOR_REFERENCE = {
    "vector_laplace": VectorLaplace,
    "gaussian_histogram": GaussianHistogram,
    "report_noisy_max_index": lambda eps: ReportNoisyMax(eps, "index"),
    "report_noisy_max_value": lambda eps: ReportNoisyMax(eps, "value"),
    "sparse_vector": SparseVector,
}

#: Their broken twins, by the same names, each built from the ε it (falsely) claims.
VECTOR_BROKEN = {
    "vector_laplace": VectorLaplaceWrongSensitivity,
    "gaussian_histogram": GaussianHistogramWrongSensitivity,
    "report_noisy_max_index": lambda eps: ReportNoisyMaxScaleIsEpsilon(eps, "index"),
    "report_noisy_max_value": lambda eps: ReportNoisyMaxScaleIsEpsilon(eps, "value"),
    "sparse_vector": SparseVectorScaleIsEpsilon,
}
