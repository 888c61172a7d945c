"""Privacy claims computed by an accountant, never typed in by hand.

A mechanism declares the *privacy events* it publishes (a Gaussian or Laplace
release, binary randomized response, their compositions and Poisson
subsamples) and :func:`account` turns them into a
:class:`recaudit.mechanisms.claims.PrivacyClaim` with Google's ``dp_accounting``:

* every leaf event is a pair of output distributions on two neighbouring
  inputs — ``N(0, σ²)`` vs ``N(Δ, σ²)``, ``Lap(0, b)`` vs ``Lap(Δ, b)``, or
  randomized response on bit 0 vs bit 1 — so the claim holds for whatever
  neighbouring relation makes ``Δ`` the sensitivity (the claim's
  ``neighbouring`` says which);
* ε(δ) comes from dp-accounting's privacy-loss distributions (PLDs), built
  directly (``from_gaussian_mechanism`` / ``from_laplace_mechanism`` /
  ``from_randomized_response``) and composed with pessimistic rounding, so the
  result is an upper bound (up to floating-point rounding of the last bit);
* events whose leaves are all un-sampled Gaussian releases compose exactly to
  one Gaussian with ``μ = sqrt(Σ count·(Δ/σ)²)`` (Dong, Roth, Su 2022); their ε
  is dp-accounting's analytic Gaussian ε (Balle & Wang 2018,
  ``dp_accounting.get_epsilon_gaussian``) — exact, and seconds faster than a
  discretized Gaussian PLD, whose grid over ±10σ of privacy loss has millions
  of points at the default discretization.

Why PLDs are built here rather than with ``dp_accounting.pld.PLDAccountant``:
that accountant refuses randomized response under add/remove and Laplace
under replace-one, and composes with a tail-mass truncation that puts mass at
+∞, so a composition of pure-DP events gets ε = ∞ at δ = 0. Here pure-DP
compositions use ``tail_mass_truncation=0``; their ε at δ = 0 is the sum of
the leaves' largest (grid-rounded) privacy losses, computed leaf by leaf,
because FFT composition loses the tiny masses at the top of the range.
Laplace PLDs use the privacy-buckets construction (``use_connect_dots=False``):
connect-the-dots leaves ~6e-17 of floating-point dust at +∞ for most scales,
which would make ε(δ = 0) infinite.

Poisson-subsampled events are analysed as dp-accounting does, under
add/remove neighbouring (the worse of its REMOVE and ADD pairs);
:func:`account` refuses them for a replace-neighbouring claim.

Pure numpy/scipy/dp_accounting, no I/O.
"""
from __future__ import annotations

import functools
import math

import dp_accounting
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as _pld_lib
from scipy.special import expit

# PrivacyClaim lives in .claims (re-exported by .base, which imports this module at load time)
from recaudit.core.errors import ParameterError
from .claims import Model, Neighbouring, PrivacyClaim, Unit
from recaudit.core.errors import InternalError
from .privacy_events import (RR_EPSILON_RANGE, Composition, Event, GaussianRelease, LaplaceRelease,  # noqa: F401
                             PoissonSampled, RandomizedResponseRelease, _check_event, _count, _positive_finite,
                             to_dp_event)

__all__ = [
    "GaussianRelease",
    "LaplaceRelease",
    "RandomizedResponseRelease",
    "Composition",
    "PoissonSampled",
    "Event",
    "DEFAULT_VALUE_DISCRETIZATION",
    "to_dp_event",
    "epsilon_for",
    "gaussian_mu",
    "gaussian_sigma_for",
    "account",
]

#: Width of the privacy-loss grid of the PLDs (2^-17 ≈ 7.6e-6). Pessimistic
#: rounding moves every loss up by less than this, so ε of a composition of k
#: leaf events is overstated by at most about k times this. A power of two, so
#: grid points (the δ = 0 values) are exact binary fractions; on a 1e-5 grid
#: Laplace(2) at δ = 0 came out 0.4999999999999999, below its exact ε.
DEFAULT_VALUE_DISCRETIZATION = 2.0**-17

#: Finest grid for randomized response: its PLD has two atoms, so building it
#: on any grid is free; only composing it densifies (see _pure_discretization).
_RR_FINEST_DISCRETIZATION = 2.0**-33
#: Most grid points a dense composed pure-DP PLD may span (32 MB of float64).
_MAX_GRID_POINTS = 2**22

#: Tail mass dp-accounting may truncate (pessimistically, onto +∞) per
#: composition when a Gaussian is involved; such PLDs already carry ~e^-50 of
#: mass at +∞, so ε(δ = 0) is ∞ either way. Pure-DP compositions use 0.
_GAUSSIAN_TAIL_TRUNCATION = 1e-15


# --------------------------------------------------------------------------
# Gaussian DP


def gaussian_mu(event: Event) -> float | None:
    """Exact μ-GDP parameter ``sqrt(Σ count·(Δ/σ)²)`` if every leaf is an un-sampled Gaussian, else None."""
    _check_event(event)
    mu2 = _gaussian_mu2(event)
    return None if mu2 is None else math.sqrt(mu2)


def _gaussian_mu2(event: Event) -> float | None:
    if isinstance(event, GaussianRelease):
        return event.count * (event.sensitivity / event.sigma) ** 2
    if isinstance(event, Composition):
        parts = [_gaussian_mu2(e) for e in event.events]
        return None if any(p is None for p in parts) else event.count * math.fsum(parts)
    if isinstance(event, PoissonSampled) and event.probability == 1.0:
        inner = _gaussian_mu2(event.event)
        return None if inner is None else event.count * inner
    return None


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """ε at δ of μ-GDP (Balle–Wang analytic Gaussian via dp-accounting), nudged up past the root tolerance."""
    if delta == 0.0:
        return math.inf
    with np.errstate(divide="ignore", over="ignore"):  # its log1p(-exp(..)) is -inf at the extremes, as it expects
        eps = float(dp_accounting.get_epsilon_gaussian(1.0 / mu, delta, tol=1e-12))
    # brentq stops within ~1e-12 of the root on either side; the margin makes it an upper bound
    return 0.0 if eps == 0.0 else eps + 1e-10 * (1.0 + eps)


@functools.lru_cache(maxsize=4096)
def gaussian_sigma_for(epsilon: float, delta: float, sensitivity: float = 1.0, count: int = 1) -> float:
    """The smallest σ (to 1e-9 relative) with ``count`` Gaussian releases of L2 ``sensitivity`` (ε, δ)-DP.

    dp-accounting's analytic-Gaussian inversion (``get_sigma_gaussian``, one root search) gives σ
    for one release of sensitivity 1; it is then raised (steps doubling from 1e-9 relative, then
    bisection) until the accountant's ε (:func:`_gaussian_epsilon`) for it is at most ``epsilon``,
    and scaled to Δ·sqrt(count). Cached: validating a grid builds the same mechanism several times per point.
    """
    epsilon, delta = _positive_finite("epsilon", epsilon), float(delta)
    if not 0.0 < delta < 1.0:
        raise ParameterError("delta", f"delta must be in (0, 1) for a Gaussian mechanism, got {delta}")
    start = max(float(dp_accounting.get_sigma_gaussian(epsilon, delta, tol=1e-12)), 1e-300)
    fails = lambda s: _gaussian_epsilon(1.0 / s, delta) > epsilon  # noqa: E731
    low, high, step = None, start, 1e-9
    while fails(high):  # steps doubling from 1e-9, then bisection back to 1e-9
        low, high, step = high, start * (1.0 + step), 2.0 * step
    while low is not None and high - low > 1e-9 * high:
        mid = 0.5 * (low + high)
        low, high = (mid, high) if fails(mid) else (low, mid)
    return _positive_finite("sensitivity", sensitivity) * math.sqrt(_count(count)) * high


# --------------------------------------------------------------------------
# privacy-loss distributions


def _canonical(event: Event) -> tuple[float, tuple]:
    """(total μ² of un-sampled Gaussians, sorted ((leaf kind, parameters…), count) pairs).

    Composition is commutative, so identical leaves are counted together and
    self-composed once; un-sampled Gaussians merge into one exact Gaussian.
    """
    mu2: list[float] = []
    counts: dict[tuple, int] = {}

    def walk(e: Event, times: int) -> None:
        if isinstance(e, GaussianRelease):
            mu2.append(times * e.count * (e.sensitivity / e.sigma) ** 2)
        elif isinstance(e, LaplaceRelease):
            key = ("laplace", e.scale, e.sensitivity)
            counts[key] = counts.get(key, 0) + times * e.count
        elif isinstance(e, RandomizedResponseRelease):
            key = ("randomized_response", e.epsilon)
            counts[key] = counts.get(key, 0) + times * e.count
        elif isinstance(e, Composition):
            for child in e.events:
                walk(child, times * e.count)
        elif e.probability == 1.0:  # PoissonSampled that keeps everyone
            walk(e.event, times * e.count)
        else:
            inner = e.event
            if isinstance(inner, GaussianRelease):
                sigma = inner.sigma if inner.count == 1 else inner.sigma / math.sqrt(inner.count)
                key = ("sampled_gaussian", sigma, inner.sensitivity, e.probability)
            else:
                key = ("sampled_laplace", inner.scale, inner.sensitivity, e.probability)
            counts[key] = counts.get(key, 0) + times * e.count

    walk(event, 1)
    return math.fsum(mu2), tuple(sorted(counts.items()))


@functools.lru_cache(maxsize=64)
def _leaf_pld(key: tuple, vd: float) -> _pld_lib.PrivacyLossDistribution:
    kind = key[0]
    if kind == "laplace":
        return _pld_lib.from_laplace_mechanism(key[1], sensitivity=key[2], value_discretization_interval=vd,
                                               use_connect_dots=False)
    if kind == "randomized_response":
        return _pld_lib.from_randomized_response(2.0 * float(expit(-key[1])), 2,
                                                 value_discretization_interval=vd)
    if kind == "sampled_gaussian":
        return _pld_lib.from_gaussian_mechanism(key[1], sensitivity=key[2], value_discretization_interval=vd,
                                                sampling_prob=key[3])
    if kind == "sampled_laplace":
        return _pld_lib.from_laplace_mechanism(key[1], sensitivity=key[2], value_discretization_interval=vd,
                                               sampling_prob=key[3], use_connect_dots=False)
    raise InternalError(f"no privacy loss distribution for event kind {kind!r}")


@functools.lru_cache(maxsize=32)
def _pld_canonical(mu2: float, leaves: tuple, vd: float) -> _pld_lib.PrivacyLossDistribution:
    has_gaussian = mu2 > 0.0 or any(key[0] == "sampled_gaussian" for key, _ in leaves)
    truncation = _GAUSSIAN_TAIL_TRUNCATION if has_gaussian else 0.0
    parts = []
    if mu2 > 0.0:
        parts.append(_pld_lib.from_gaussian_mechanism(1.0 / math.sqrt(mu2), sensitivity=1.0,
                                                      value_discretization_interval=vd))
    for key, count in leaves:
        p = _leaf_pld(key, vd)
        parts.append(p if count == 1 else p.self_compose(count, tail_mass_truncation=truncation))
    result = parts[0]
    for p in parts[1:]:
        result = result.compose(p, tail_mass_truncation=truncation)
    return result


def _pld(event: Event, value_discretization: float = DEFAULT_VALUE_DISCRETIZATION):
    """The (pessimistic) dp-accounting PLD of ``event``, cached; for tests and diagnostics."""
    _check_event(event)
    mu2, leaves = _canonical(event)
    return _pld_canonical(mu2, leaves, float(value_discretization))


# --------------------------------------------------------------------------
# public accounting


def epsilon_for(event: Event, delta: float, value_discretization: float = DEFAULT_VALUE_DISCRETIZATION) -> float:
    """Smallest ε (an upper bound) with ``event`` (ε, δ)-DP, from dp-accounting.

    * Only un-sampled Gaussians: dp-accounting's analytic Gaussian ε of the
      composed μ (exact; ∞ at δ = 0).
    * Anything else with a Gaussian at δ = 0: ∞.
    * Pure-DP events (randomized response, Laplace, sampled Laplace, their
      compositions) at δ = 0: the largest privacy loss adds up under
      composition, so ε is the sum over leaves of count × the leaf PLD's ε at
      δ = 0 (each a grid point at or above the leaf's exact ε). This is
      computed leaf by leaf because dp-accounting's FFT composition drops the
      tiny top masses (RR(0.1) composed 100 times gives 9.92 at δ = 0, not 10).
    * Otherwise (δ > 0): ε of the composed pessimistic PLD on a grid of
      ``value_discretization``, capped for pure-DP events by their ε at δ = 0.
      For pure-DP compositions the grid is a power of two chosen by
      ``_pure_discretization``: finer for randomized response alone, coarser
      when a dense PLD of the whole composition would exceed 2^22 points.
    """
    _check_event(event)
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ParameterError("delta", f"delta must be in [0, 1), got {delta}")
    value_discretization = _positive_finite("value_discretization", value_discretization)
    return _epsilon_cached(event, delta, value_discretization)


@functools.lru_cache(maxsize=4096)
def _epsilon_cached(event: Event, delta: float, vd: float) -> float:
    mu2 = _gaussian_mu2(event)
    if mu2 is not None:
        return _gaussian_epsilon(math.sqrt(mu2), delta)
    gaussian_mu2, leaves = _canonical(event)
    pure = gaussian_mu2 == 0.0 and not any(key[0] == "sampled_gaussian" for key, _ in leaves)
    if not pure:
        if delta == 0.0:
            return math.inf
        return float(_pld_canonical(gaussian_mu2, leaves, vd).get_epsilon_for_delta(delta))
    eps0 = math.fsum(count * _leaf_epsilon_at_zero(key, vd) for key, count in leaves)
    if delta == 0.0:
        return eps0
    pld = _pld_canonical(0.0, leaves, _pure_discretization(leaves, vd))
    return min(eps0, float(pld.get_epsilon_for_delta(delta)))


@functools.lru_cache(maxsize=1024)
def _leaf_epsilon_at_zero(key: tuple, vd: float) -> float:
    """ε at δ = 0 of one pure-DP leaf: its largest privacy loss, rounded up to the grid by the PLD.

    dp-accounting returns it as a log of a mass ratio, a few ulps off the grid
    point; snapping back to the (power-of-two) grid makes it that grid point
    exactly. Randomized response uses the 2^-33 grid (its PLD has two atoms).
    """
    if key[0] == "randomized_response":
        vd = min(vd, _RR_FINEST_DISCRETIZATION)
    elif key[0] in ("laplace", "sampled_laplace"):
        # a Laplace leaf's loss spans ±sensitivity/scale: a grid that keeps its dense PLD to at most
        # _MAX_GRID_POINTS points (a power of two; coarser is still an upper bound). ε = 700 on 2^-17 was
        # 10^8 points, 15 GB and twenty minutes in `recaudit validate`.
        span = 2.0 * key[2] / key[1]
        while span / vd > _MAX_GRID_POINTS:
            vd *= 2.0
    eps = float(_leaf_pld(key, vd).get_epsilon_for_delta(0.0))
    return round(eps / vd) * vd


def _pure_discretization(leaves: tuple, vd: float) -> float:
    """Grid for composing pure-DP leaves at δ > 0.

    A dense composed PLD spans about Σ count × 2ε_leaf of privacy loss; the grid
    keeps that to at most ``_MAX_GRID_POINTS`` points (a power of two, coarser
    than ``vd`` only when it must: still an upper bound, looser by at most
    about count × grid). Compositions of randomized response alone go as fine
    as that allows, since their leaf PLDs cost nothing to build on any grid.
    """
    span = math.fsum(2.0 * count * _leaf_epsilon_at_zero(key, vd) for key, count in leaves)
    needed = 2.0 ** math.ceil(math.log2(span / _MAX_GRID_POINTS))
    if all(key[0] == "randomized_response" for key, _ in leaves):
        return max(_RR_FINEST_DISCRETIZATION, needed)
    return max(vd, needed)


def _has_sampling(event: Event) -> bool:
    if isinstance(event, PoissonSampled):
        return event.probability < 1.0
    if isinstance(event, Composition):
        return any(_has_sampling(e) for e in event.events)
    return False


def account(event: Event, delta: float = 0.0, *, model: Model = "local", unit: Unit = "user",
            neighbouring: Neighbouring = "replace",
            value_discretization: float = DEFAULT_VALUE_DISCRETIZATION) -> PrivacyClaim:
    """The :class:`PrivacyClaim` of publishing ``event``: ε at ``delta`` from :func:`epsilon_for`.

    ``model``, ``unit`` and ``neighbouring`` describe the claim and pass
    through; ``gaussian_mu`` is set when the event is exactly μ-GDP. ``value_discretization``: the PLDs'
    grid (a mechanism's ``accounting_grid``; coarser is faster and still an upper bound).
    Raises ValueError when ε would be infinite (a Gaussian needs δ > 0) and
    for Poisson-subsampled events under replace neighbouring (the sampled
    analysis is add/remove's).
    """
    _check_event(event)
    if _has_sampling(event) and neighbouring != "add_remove":
        raise ParameterError("neighbouring", "Poisson-subsampled events are accounted under add/remove neighbouring; "
                         f"a claim with neighbouring={neighbouring!r} is not supported")
    epsilon = epsilon_for(event, delta, value_discretization)
    if math.isinf(epsilon):
        if float(delta) == 0.0:
            raise ParameterError("delta", "epsilon is infinite at delta = 0: a Gaussian mechanism has no pure-DP "
                             "guarantee, give delta > 0")
        raise ParameterError("delta", f"epsilon is infinite at delta = {delta}: delta is below the mass the accountant "
                         "puts at infinite privacy loss; give a larger delta")
    return PrivacyClaim(epsilon=epsilon, delta=float(delta), model=model, unit=unit,
                        neighbouring=neighbouring, gaussian_mu=gaussian_mu(event))
