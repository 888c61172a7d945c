"""Privacy events: what one user's participation releases, in the accountant's vocabulary.

Each event is a frozen dataclass (a Gaussian, Laplace or randomized-response
release, a composition, a Poisson-sampled event), validated on construction;
``to_dp_event`` gives the same event as a ``dp_accounting.DpEvent``.
``recaudit.mechanisms.accounting`` turns events into ε (and claims).
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Union

import dp_accounting
from scipy.special import expit

from recaudit.core.errors import ParameterError



# --------------------------------------------------------------------------
# validation helpers


#: randomized response's ε the accountant can take: beyond it dp-accounting's flip probability
#: 2 / (1 + e^ε) is 0 (above) or 1 (below) in double precision
RR_EPSILON_RANGE = (1e-15, 700.0)


def _positive_finite(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, f"{name} must be a positive finite number, got {value!r}") from None
    if not (v > 0.0 and math.isfinite(v)):
        raise ParameterError(name, f"{name} must be a positive finite number, got {value!r}")
    return v


def _count(value) -> int:
    if isinstance(value, bool):
        raise ParameterError("count", f"count must be an integer >= 1, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise ParameterError("count", f"count must be an integer >= 1, got {value!r}") from None
    if n < 1:
        raise ParameterError("count", f"count must be an integer >= 1, got {value!r}")
    return int(n)


# --------------------------------------------------------------------------
# events


@dataclass(frozen=True)
class GaussianRelease:
    """Additive N(0, σ²) noise on a query of L2 sensitivity Δ, released ``count`` times.

    One release is the pair ``N(0, σ²)`` vs ``N(Δ, σ²)``: ``(Δ/σ)``-GDP.
    """

    sigma: float
    sensitivity: float = 1.0
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _positive_finite("sigma", self.sigma))
        object.__setattr__(self, "sensitivity", _positive_finite("sensitivity", self.sensitivity))
        object.__setattr__(self, "count", _count(self.count))


@dataclass(frozen=True)
class LaplaceRelease:
    """Additive Laplace(scale) noise on a query of L1 sensitivity Δ, released ``count`` times.

    One release is the pair ``Lap(0, b)`` vs ``Lap(Δ, b)``: ``(Δ/b)``-DP.
    """

    scale: float
    sensitivity: float = 1.0
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive_finite("scale", self.scale))
        object.__setattr__(self, "sensitivity", _positive_finite("sensitivity", self.sensitivity))
        object.__setattr__(self, "count", _count(self.count))


@dataclass(frozen=True)
class RandomizedResponseRelease:
    """Binary randomized response keeping the bit w.p. ``e^ε/(1 + e^ε)``, ``count`` bits: ε-DP each."""

    epsilon: float
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _positive_finite("epsilon", self.epsilon))
        object.__setattr__(self, "count", _count(self.count))
        low, high = RR_EPSILON_RANGE
        if not low <= self.epsilon <= high:
            raise ParameterError("epsilon", f"{self.epsilon:g} per randomized-response bit is outside what the "
                                             f"accountant can take ({low:g} to {high:g}: beyond, the bit's flip "
                                             "probability is 0 or 1 in double precision)")

    @property
    def noise_parameter(self) -> float:
        """dp-accounting's parameter: probability ``2/(1 + e^ε)`` of answering a uniform random bit."""
        return 2.0 * float(expit(-self.epsilon))


@dataclass(frozen=True)
class Composition:
    """Sequential (possibly adaptive) composition of ``events``, the whole repeated ``count`` times."""

    events: tuple
    count: int = 1

    def __post_init__(self) -> None:
        try:
            events = tuple(self.events)
        except TypeError:
            raise ParameterError("events", f"Composition needs a sequence of events, got {self.events!r}") from None
        if not events:
            raise ParameterError("events", "Composition needs at least one event")
        for e in events:
            if not isinstance(e, _EVENT_TYPES):
                raise ParameterError("events", f"Composition may only hold privacy events, got {e!r}")
        object.__setattr__(self, "events", events)
        object.__setattr__(self, "count", _count(self.count))


@dataclass(frozen=True)
class PoissonSampled:
    """``event`` run on a Poisson subsample (each record kept w.p. ``probability``), ``count`` times.

    Only a :class:`GaussianRelease` (any ``count``: the releases share the
    subsample, so they act as one Gaussian with ``σ/sqrt(count)``) or a single
    :class:`LaplaceRelease` may be sampled; dp-accounting has no PLD for other
    sampled events. Analysed under add/remove neighbouring.
    """

    event: "Event"
    probability: float
    count: int = 1

    def __post_init__(self) -> None:
        inner = self.event
        if isinstance(inner, GaussianRelease):
            pass
        elif isinstance(inner, LaplaceRelease):
            if inner.count != 1:
                raise ParameterError("event",
                                     "PoissonSampled(LaplaceRelease) needs count=1 inside (several Laplace releases "
                                 "on one subsample are not a Laplace mechanism); put count on PoissonSampled "
                                 "for independent subsamples")
        else:
            raise ParameterError("event", "PoissonSampled supports only a GaussianRelease or a LaplaceRelease inside "
                             f"(dp-accounting has no sampled PLD for anything else), got {type(inner).__name__}")
        try:
            q = float(self.probability)
        except (TypeError, ValueError):
            q = math.nan
        if not 0.0 < q <= 1.0:
            raise ParameterError("probability", f"probability must be in (0, 1], got {self.probability!r}")
        object.__setattr__(self, "probability", q)
        object.__setattr__(self, "count", _count(self.count))


_EVENT_TYPES = (GaussianRelease, LaplaceRelease, RandomizedResponseRelease, Composition, PoissonSampled)

#: Any privacy event the accountant understands.
Event = Union[GaussianRelease, LaplaceRelease, RandomizedResponseRelease, Composition, PoissonSampled]


def _check_event(event) -> None:
    if not isinstance(event, _EVENT_TYPES):
        raise ParameterError("event", f"not a privacy event: {event!r}")


# --------------------------------------------------------------------------
# dp-accounting's vocabulary


def _self_composed(event: dp_accounting.DpEvent, count: int) -> dp_accounting.DpEvent:
    return event if count == 1 else dp_accounting.SelfComposedDpEvent(event, count)


def to_dp_event(event: Event) -> dp_accounting.DpEvent:
    """The same event as a ``dp_accounting.DpEvent`` (for reports and cross-checks with other accountants).

    Noise multipliers are ``σ/Δ`` and ``b/Δ``; randomized response has
    ``noise_parameter = 2/(1 + e^ε)`` over 2 buckets. A sampled Gaussian with
    ``count = m`` inside becomes one Gaussian of multiplier ``σ/(Δ·sqrt(m))``
    (exactly equivalent; dp-accounting only samples bare Gaussian/Laplace events).
    """
    _check_event(event)
    if isinstance(event, GaussianRelease):
        return _self_composed(dp_accounting.GaussianDpEvent(event.sigma / event.sensitivity), event.count)
    if isinstance(event, LaplaceRelease):
        return _self_composed(dp_accounting.LaplaceDpEvent(event.scale / event.sensitivity), event.count)
    if isinstance(event, RandomizedResponseRelease):
        return _self_composed(dp_accounting.RandomizedResponseDpEvent(event.noise_parameter, 2), event.count)
    if isinstance(event, Composition):
        return _self_composed(dp_accounting.ComposedDpEvent([to_dp_event(e) for e in event.events]),
                              event.count)
    inner = event.event
    if isinstance(inner, GaussianRelease):
        inner_dp = dp_accounting.GaussianDpEvent(inner.sigma / (inner.sensitivity * math.sqrt(inner.count)))
    else:
        inner_dp = dp_accounting.LaplaceDpEvent(inner.scale / inner.sensitivity)
    return _self_composed(dp_accounting.PoissonSampledDpEvent(event.probability, inner_dp), event.count)
