"""The likelihood-ratio test on the white-box ``statistics`` view, under the noise law the mechanism publishes.

A central or joint mechanism's proof is about noisy statistics (``Mechanism.statistics``): FW's noisy
Gram each round, a tree counter's noisy nodes, McSherry–Mironov's noisy sums and covariance. Given a
run's published history, the audited user's contribution to each of them is known in both worlds
(``white_box_means``: ``m₀``, ``m₁``) and the noise law is public (``statistic_noise``: Gaussian σ or
Laplace scale ``b`` per statistic). The log-likelihood ratio of world 1 against world 0 is then

* Gaussian: ``Σ ((y − m₀)·d − ‖d‖²/2) / σ²`` with ``d = m₁ − m₀`` — the statistic along the pair's
  difference, ``N(−μ²/2, μ²)`` vs ``N(μ²/2, μ²)`` with ``μ = ‖d‖/σ`` (docs/statistics.md);
* Laplace: ``Σ (|y − m₀| − |y − m₁|) / b`` over the coordinates where the worlds differ.

Other users add to ``y`` too. Against Gaussian noise their part only shifts the score when it is the same
in every run (non-adaptive statistics: the tree), and it vanishes where the pair is isolated (canary items
no one else rates): either way the test is the Neyman–Pearson one. A Laplace score needs isolation to be
optimal. Any score gives a valid bound; isolation and the pair decide how close to tight it is.
``reach`` gives, per run, how far the pair's difference really goes: ``μ`` (Gaussian) or the pure ε
(Laplace) the optimal test can reach — the figure to set beside a claim whose analysis is loose.
This generalises ``differencing_noise_aware`` from the releases to the statistics the proof is about.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recaudit.core.errors import InternalError
from recaudit.mechanisms import Mechanism
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack


def answer_rounds(view: View, runs: int) -> np.ndarray:
    """The round (1, 2, ...) of each audited user's first answer: the first round at or after its arrival."""
    if view.arrival is None or not view.rounds:
        return np.ones(runs, dtype=np.int64)
    one_run = not isinstance(view.rounds[0], tuple)  # a view cut from one run, not stacked
    rounds_per_run = (view.rounds,) if one_run else view.rounds
    arrivals_per_run = (view.arrival,) if one_run else view.arrival
    ticks = [1 + sum(r.time < a for r in rounds) for rounds, arrivals in zip(rounds_per_run, arrivals_per_run)
             for a in np.atleast_1d(arrivals)]
    return np.asarray(ticks, dtype=np.int64)


@dataclass
class KnownNoiseAttack(Attack, kind="known_noise"):
    """Log-likelihood ratio of the noisy statistics under the published noise law (white box)."""

    #: the statistics the score sums (None: every one the mechanism models). One statistic alone is the
    #: Neyman–Pearson test on it: where a broken twin drops one statistic's noise, its term alone separates.
    statistics: list[str] | None = None
    views = ("statistics",)
    test_mechanism = "continual_covariance_tree"

    def refusal(self, mechanism: Mechanism | None, view) -> str | None:
        reason = super().refusal(mechanism, view)
        if reason is None and mechanism is not None and not hasattr(mechanism, "white_box_means"):
            reason = (f"{self.kind} reads white-box statistics (a mechanism with statistics, statistic_noise and "
                      f"white_box_means), and {mechanism.kind} publishes none")
        return reason

    def _parts(self, mechanism: Mechanism, pair: TargetPair, view: View) -> list:
        """Per statistic: (noise law, values, m₀, m₁). The replay is the costly part, and ``scores`` then ``reach``
        read the same two views (one per world), so the last two views' parts are kept."""
        for cached in getattr(self, "_last", ()):
            if cached[0] is mechanism and cached[1] is pair and cached[2] is view:
                return cached[3]
        parts = list(self._replay(mechanism, pair, view))
        self._last = (getattr(self, "_last", ())[-1:]) + ((mechanism, pair, view, parts),)
        return parts

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_last"}

    def _replay(self, mechanism: Mechanism, pair: TargetPair, view: View):
        self.check_view(view, mechanism)
        stats = view.statistics
        runs = len(view)
        ticks = answer_rounds(view, runs)
        means = [mechanism.white_box_means(rows, stats, ticks) for rows in (pair.rows0, pair.rows1)]
        noise = mechanism.statistic_noise()
        sampling = getattr(mechanism, "statistic_sampling", dict)()
        if self.statistics is not None and not set(self.statistics) <= set(means[0]):
            raise ValueError(f"attack {self.kind}: {mechanism.kind} models the statistics "
                             f"{', '.join(means[0])}, not {', '.join(sorted(set(self.statistics) - set(means[0])))}")
        for name, m in means[0].items():
            if self.statistics is not None and name not in self.statistics:
                continue
            yield noise[name], np.asarray(stats[name], float), m, means[1][name], sampling.get(name)

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        total = 0.0
        for (law, scale), y, m0, m1, rate in self._parts(mechanism, pair, view):
            if rate is not None and law == "gaussian":
                total = total + _sampled(y, m0, m1, scale, rate)
                continue
            if law == "gaussian":  # ((y - m0) * d - d * d / 2) / σ², d = m1 - m0, in place: the same numbers, two
                term, d = np.subtract(y, m0), np.subtract(m1, m0)  # arrays instead of six (10⁵ runs: 125 MB each)
                term *= d
                d *= d
                d /= 2.0
                term -= d
                term /= np.square(scale)
            else:
                term = (np.abs(y - m0) - np.abs(y - m1)) / scale
            total = total + _per_run(term)
        return np.asarray(total, float)

    def reach(self, mechanism: Mechanism, pair: TargetPair, view: View) -> tuple[str, np.ndarray]:
        """Per run, the pair's reach: ``("gaussian", μ)`` with ``μ² = Σ ‖d/σ‖²``, or ``("laplace", Σ |d|/b)``.

        A Poisson-sampled statistic (``statistic_sampling``) is not a Gaussian release of its total μ: its reach
        is ``("subsampled_gaussian", max_t ‖d_t/σ‖)``, the largest round's (axis 1), which with the rate and the
        rounds bounds the pair's ε (``recaudit.audits.stats.reach.pair_reach``)."""
        laws, parts, sampled = set(), [], []
        for (law, scale), _, m0, m1, rate in self._parts(mechanism, pair, view):
            laws.add(law)
            d = (m1 - m0) / scale
            if rate is not None and rate < 1.0:
                sampled.append((d * d).reshape(d.shape[0], d.shape[1], -1).sum(axis=2))
            parts.append(_per_run(d * d if law == "gaussian" else np.abs(d)))
        if len(laws) != 1 or (sampled and (laws != {"gaussian"} or len(sampled) != len(parts))):
            raise InternalError(f"{mechanism.kind}: the statistics mix noise laws {sorted(laws)} or sampled and "
                                "unsampled statistics")
        if sampled:
            return "subsampled_gaussian", np.sqrt(np.sum(sampled, axis=0).max(axis=1))
        law = laws.pop()
        total = np.sum(parts, axis=0)
        return law, np.sqrt(total) if law == "gaussian" else total


def _sampled(y: np.ndarray, m0: np.ndarray, m1: np.ndarray, scale, rate: float) -> np.ndarray:
    """The log-likelihood ratio of a Poisson-sampled statistic (axis 1: its rounds): each round the audited row
    adds its contribution ``m_b`` with probability ``rate``, else nothing, so per round
    ``log((1 − q) + q e^{ℓ₁}) − log((1 − q) + q e^{ℓ₀})`` with ``ℓ_b = (y·m_b − ‖m_b‖²/2)/σ²`` (the contribution
    against none: the rest of ``y`` cancels where the row is isolated), summed over rounds."""
    def per_round(m):
        llr = ((y * m - m * m / 2.0) / np.square(scale))
        llr = llr.reshape(llr.shape[0], llr.shape[1], -1).sum(axis=2)
        return llr if rate >= 1.0 else np.logaddexp(math.log1p(-rate), math.log(rate) + llr)

    return np.sum(per_round(m1) - per_round(m0), axis=1)


def _per_run(values: np.ndarray) -> np.ndarray:
    """Sum over every axis but the first (runs)."""
    return values.reshape(values.shape[0], -1).sum(axis=1)
