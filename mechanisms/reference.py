"""Reference mechanisms with exactly known privacy, and deliberately broken twins.

Negative and positive controls for the audits (docs/statistics.md,
"Verdicts"): each correct mechanism meets its claim with equality somewhere on
its privacy curve; each broken twin keeps the correct twin's claim but
violates it. Every class offers

* ``claim`` — a :class:`recaudit.mechanisms.base.PrivacyClaim`;
* ``neighbours`` — the default neighbouring pair of dataset values
  (a count of 0 vs 1; a bit 0 vs 1);
* ``sample(value, n, rng)`` — ``n`` independent outputs on one dataset value;
* ``score(outputs)`` — the optimal attack (monotone in the likelihood ratio
  of world 1 to world 0 for the default pair: the output itself);
* ``delta_of_epsilon(eps)`` — the exact privacy curve (hockey-stick
  divergence, the smallest δ for which the mechanism *as implemented* is
  (ε, δ)-DP on its neighbouring pair); for a broken twin this is the curve of
  what it really does, not of its claim.

Pure numpy/scipy, no I/O, randomness only through the ``rng`` passed in.
The Gaussian curve is implemented here independently of
``recaudit.audits.stats.gdp.gdp_delta`` so the two can check each other.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats
from scipy.special import expit

from recaudit.core.errors import ParameterError
from .accounting import GaussianRelease, LaplaceRelease, RandomizedResponseRelease, account
from .claims import PrivacyClaim

__all__ = [
    "laplace_delta",
    "analytic_gaussian_delta",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "randomized_response_delta",
    "LaplaceCount",
    "LaplaceCountWrongScale",
    "LaplaceCountNoNoise",
    "GaussianCount",
    "GaussianCountWrongScale",
    "GaussianCountNoNoise",
    "RandomizedResponse",
    "RandomizedResponseWrongEpsilon",
    "REFERENCE_MECHANISMS",
    "BROKEN_TWINS",
]


# --------------------------------------------------------------------------
# exact privacy curves


def laplace_delta(eps_prime, epsilon: float) -> float | np.ndarray:
    """Exact δ(ε') of the Laplace mechanism with sensitivity 1 and scale ``1/ε``.

    For ``P = Lap(0, b)``, ``Q = Lap(1, b)``, ``b = 1/ε`` the privacy loss is
    ε on ``x ≤ 0``, ``ε(1 − 2x)`` on ``0 < x < 1`` and −ε on ``x ≥ 1``;
    integrating ``E_P[(1 − e^{ε' − L})_+]`` gives
    ``δ(ε') = max(0, 1 − exp((ε' − ε)/2))`` for ``ε' ≥ 0`` (the same as
    the privacy-loss-distribution analysis of Koskela et al. 2021 /
    Google's ``dp_accounting.pld.LaplacePrivacyLoss``; checked by numerical
    integration in tests/test_reference.py).
    """
    e = np.asarray(eps_prime, dtype=float)
    if epsilon == math.inf:
        return _scalar(np.ones_like(e))
    return _scalar(np.maximum(0.0, -np.expm1((e - epsilon) / 2.0)))


def analytic_gaussian_delta(eps_prime, sigma: float, sensitivity: float = 1.0) -> float | np.ndarray:
    """Exact δ(ε') of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

    ``δ(ε') = Φ(Δ/(2σ) − ε'σ/Δ) − e^{ε'} Φ(−Δ/(2σ) − ε'σ/Δ)``, evaluated as
    ``sf(z₁) − exp(ε' + logsf(z₂))`` with ``scipy.stats.norm``. ``σ = 0``
    (no noise) gives 1.
    """
    e = np.asarray(eps_prime, dtype=float)
    if sigma == 0.0:
        return _scalar(np.ones_like(e))
    a = sensitivity / sigma
    first = stats.norm.cdf(a / 2.0 - e / a)
    second = np.exp(e + stats.norm.logcdf(-a / 2.0 - e / a))
    return _scalar(np.maximum(first - second, 0.0))


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """The ε with ``analytic_gaussian_delta(ε, σ) = δ`` (0 if δ ≥ δ(0)); root of a decreasing curve."""
    if not 0.0 < delta < 1.0:
        raise ParameterError("delta", "delta must be in (0, 1)")
    if sigma == 0.0:
        return math.inf
    if analytic_gaussian_delta(0.0, sigma, sensitivity) <= delta:
        return 0.0
    a = sensitivity / sigma
    hi = a * a / 2.0 + a * float(stats.norm.isf(delta)) + 1.0  # δ(hi) < Φ(−Φ⁻¹(1−δ)) = δ
    return float(optimize.brentq(lambda e: analytic_gaussian_delta(e, sigma, sensitivity) - delta,
                                 0.0, hi, xtol=1e-13, rtol=1e-13, maxiter=500))


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest σ with the Gaussian mechanism (ε, δ)-DP (Balle & Wang 2018, Algorithm 1).

    δ(ε) falls as σ grows, so this is the root of ``δ_σ(ε) = δ`` in σ.
    """
    if not (epsilon > 0 and 0.0 < delta < 1.0):
        raise ParameterError("epsilon", "need epsilon > 0 and delta in (0, 1)")

    def excess(log_sigma: float) -> float:
        return float(analytic_gaussian_delta(epsilon, math.exp(log_sigma), sensitivity)) - delta

    lo, hi = math.log(sensitivity) - 10.0, math.log(sensitivity) + 10.0
    return math.exp(optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-13, maxiter=500))


def randomized_response_delta(eps_prime, epsilon: float) -> float | np.ndarray:
    """Exact δ(ε') of binary randomized response keeping the bit w.p. ``e^ε/(1 + e^ε)``.

    Only the output equal to the input bit has likelihood ratio above one:
    ``δ(ε') = max(0, (e^ε − e^{ε'})/(1 + e^ε))`` (Warner 1965; Kairouz, Oh,
    Viswanath 2015). ``ε = inf`` (no flipping) gives ``1``.
    """
    e = np.asarray(eps_prime, dtype=float)
    if epsilon == math.inf:
        return _scalar(np.ones_like(e))
    return _scalar(np.maximum(0.0, (math.exp(epsilon) - np.exp(e)) / (1.0 + math.exp(epsilon))))


def _scalar(x: np.ndarray) -> float | np.ndarray:
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _check_n(n: int) -> int:
    n = int(n)
    if n < 0:
        raise ParameterError("n", "n must be >= 0")
    return n


# --------------------------------------------------------------------------
# Laplace on a counting query


@dataclass(frozen=True)
class LaplaceCount:
    """Counting query (sensitivity 1) plus Laplace noise of scale ``1/ε``: ε-DP (Dwork et al. 2006)."""

    epsilon: float
    neighbours: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        if not self.epsilon > 0:
            raise ParameterError("epsilon", "epsilon must be > 0")

    @property
    def claim(self) -> PrivacyClaim:
        return account(LaplaceRelease(1.0 / self.epsilon), 0.0, model="central", unit="user")

    @property
    def noise_scale(self) -> float:
        return 1.0 / self.epsilon

    @property
    def true_epsilon(self) -> float:
        """ε of the mechanism as implemented (δ = 0): sensitivity / scale."""
        return math.inf if self.noise_scale == 0 else 1.0 / self.noise_scale

    def sample(self, value, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent noisy counts of the dataset whose count is ``value``."""
        n = _check_n(n)
        if self.noise_scale == 0:
            return np.full(n, float(value))
        return float(value) + rng.laplace(0.0, self.noise_scale, n)

    def score(self, outputs) -> np.ndarray:
        """The output: the 0-vs-1 likelihood ratio ``exp(ε(|x| − |x − 1|))`` is non-decreasing in x."""
        return np.asarray(outputs, dtype=float)

    def delta_of_epsilon(self, eps_prime) -> float | np.ndarray:
        return laplace_delta(eps_prime, self.true_epsilon)


@dataclass(frozen=True)
class LaplaceCountWrongScale(LaplaceCount):
    """Broken: noise scale ``1/(2ε)`` while claiming ε, so it is only 2ε-DP."""

    @property
    def noise_scale(self) -> float:
        return 1.0 / (2.0 * self.epsilon)


@dataclass(frozen=True)
class LaplaceCountNoNoise(LaplaceCount):
    """Broken: returns the exact count while claiming ε (not DP at all: δ(ε') = 1)."""

    @property
    def noise_scale(self) -> float:
        return 0.0


# --------------------------------------------------------------------------
# Gaussian on a counting query


@dataclass(frozen=True)
class GaussianCount:
    """Counting query (sensitivity 1) plus N(0, σ²) noise: μ = 1/σ GDP (Dong, Roth, Su 2022).

    The claim is (ε, δ) with ε read off the exact Balle–Wang curve at
    ``delta``. Build from a target ε with :meth:`from_epsilon`.
    """

    sigma: float
    delta: float = 1e-5
    neighbours: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        if not self.sigma > 0:
            raise ParameterError("sigma", "sigma must be > 0")
        if not 0.0 < self.delta < 1.0:
            raise ParameterError("delta", "delta must be in (0, 1)")

    @classmethod
    def from_epsilon(cls, epsilon: float, delta: float = 1e-5) -> "GaussianCount":
        """The correct mechanism for an (ε, δ) target: σ from :func:`analytic_gaussian_sigma`."""
        return cls(sigma=analytic_gaussian_sigma(epsilon, delta), delta=delta)

    @property
    def claim(self) -> PrivacyClaim:
        return account(GaussianRelease(self.sigma), self.delta, model="central", unit="user")

    @property
    def mu(self) -> float:
        """The claimed Gaussian-DP parameter ``μ = sensitivity/σ``."""
        return 1.0 / self.sigma

    @property
    def noise_sigma(self) -> float:
        return self.sigma

    @property
    def true_epsilon(self) -> float:
        """ε at the claim's δ of the mechanism as implemented."""
        return analytic_gaussian_epsilon(self.noise_sigma, self.delta)

    def sample(self, value, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent noisy counts of the dataset whose count is ``value``."""
        n = _check_n(n)
        if self.noise_sigma == 0:
            return np.full(n, float(value))
        return float(value) + rng.normal(0.0, self.noise_sigma, n)

    def score(self, outputs) -> np.ndarray:
        """The output: the 0-vs-1 log likelihood ratio ``(2x − 1)/(2σ²)`` increases in x."""
        return np.asarray(outputs, dtype=float)

    def delta_of_epsilon(self, eps_prime) -> float | np.ndarray:
        return analytic_gaussian_delta(eps_prime, self.noise_sigma)


@dataclass(frozen=True)
class GaussianCountWrongScale(GaussianCount):
    """Broken: noise σ/2 while claiming the (ε, δ) of σ (μ doubles)."""

    @property
    def noise_sigma(self) -> float:
        return self.sigma / 2.0


@dataclass(frozen=True)
class GaussianCountNoNoise(GaussianCount):
    """Broken: returns the exact count while claiming the (ε, δ) of σ."""

    @property
    def noise_sigma(self) -> float:
        return 0.0


# --------------------------------------------------------------------------
# randomized response on one bit


@dataclass(frozen=True)
class RandomizedResponse:
    """Local randomizer: keep the bit w.p. ``e^ε/(1 + e^ε)``, else flip it: ε-LDP (Warner 1965)."""

    epsilon: float
    neighbours: tuple[int, int] = (0, 1)

    def __post_init__(self) -> None:
        if not self.epsilon > 0:
            raise ParameterError("epsilon", "epsilon must be > 0")

    @property
    def claim(self) -> PrivacyClaim:
        return account(RandomizedResponseRelease(self.epsilon), 0.0, model="local", unit="user")

    @property
    def true_epsilon(self) -> float:
        """The ε the flip probability really implements."""
        return self.epsilon

    def sample(self, value, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent reports of the bit ``value`` (0/1 as int8)."""
        n = _check_n(n)
        bit = int(value)
        if bit not in (0, 1):
            raise ParameterError("value", "value must be a bit")
        flip = rng.random(n) < float(expit(-self.true_epsilon))
        return np.where(flip, 1 - bit, bit).astype(np.int8)

    def score(self, outputs) -> np.ndarray:
        """The reported bit: likelihood ratio e^ε for 1, e^−ε for 0."""
        return np.asarray(outputs, dtype=float)

    def delta_of_epsilon(self, eps_prime) -> float | np.ndarray:
        return randomized_response_delta(eps_prime, self.true_epsilon)


@dataclass(frozen=True)
class RandomizedResponseWrongEpsilon(RandomizedResponse):
    """Broken: flips with the probability of ``factor·ε`` while claiming ε."""

    factor: float = 2.0

    @property
    def true_epsilon(self) -> float:
        return self.factor * self.epsilon


#: Correct reference mechanisms, by name, each built from a target ε (δ = 1e-5 for Gaussian).
REFERENCE_MECHANISMS = {
    "laplace": LaplaceCount,
    "gaussian": GaussianCount.from_epsilon,
    "randomized_response": RandomizedResponse,
}


def _gaussian_wrong_scale(epsilon: float, delta: float = 1e-5) -> GaussianCountWrongScale:
    return GaussianCountWrongScale(sigma=analytic_gaussian_sigma(epsilon, delta), delta=delta)


def _gaussian_no_noise(epsilon: float, delta: float = 1e-5) -> GaussianCountNoNoise:
    return GaussianCountNoNoise(sigma=analytic_gaussian_sigma(epsilon, delta), delta=delta)


#: Broken twins, by name, each built from the ε it (falsely) claims.
BROKEN_TWINS = {
    "laplace_wrong_scale": LaplaceCountWrongScale,
    "laplace_no_noise": LaplaceCountNoNoise,
    "gaussian_wrong_scale": _gaussian_wrong_scale,
    "gaussian_no_noise": _gaussian_no_noise,
    "randomized_response_wrong_epsilon": RandomizedResponseWrongEpsilon,
}
