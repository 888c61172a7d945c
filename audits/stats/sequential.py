"""Sequential audits: runs drawn in batches, stopped as soon as an anytime-valid test decides.

The game is the distinguishing game of :mod:`.rates`; what changes is that the number of runs is not
fixed in advance. Under (ε, δ)-DP every threshold test's error rates obey

    FPR + e^ε·FNR ≥ 1 − δ    and    FNR + e^ε·FPR ≥ 1 − δ

(Kairouz, Oh, Viswanath 2015). Pair the i-th run of world 0 with the i-th run of world 1 and let
``X_i`` say the world-0 run was called world 1 (a false positive) and ``Y_i`` that the world-1 run was
called world 0 (a false negative) by a cut fixed before the pair is seen. Then ``Z_i = X_i + E·Y_i``
(or ``Y_i + E·X_i`` for the other constraint), ``E = e^ε``, lies in ``[0, 1 + E]`` and, under the claim,
has conditional mean ≥ ``m = 1 − δ`` whatever cut the past chose. So for any bet ``λ ∈ [0, 1/(1 + E − m)]``
the wealth ``K_t = Π_i (1 + λ (m − Z_i))`` is a non-negative supermartingale with ``K_0 = 1``
under the claim — a test supermartingale, the betting construction of Waudby-Smith & Ramdas (2024,
"Estimating means of bounded random variables by betting", JRSS B 86(1)) for the null "the mean of ``Z``
is at least ``m``" — and so is the average of such wealths over a fixed grid of bets. Ville's inequality
(1939) gives ``P(∃ t: K_t ≥ 1/α) ≤ α`` under the claim: the test may stop at any time, for any reason,
and a violation is shown falsely with probability ≤ α.

What is predictable (chosen on runs already seen) may change from batch to batch: each batch's cut
(direction and threshold) is chosen on every run before it (the first batch only selects), and so is
which of the two constraints it bets on. No run is ever counted by a test chosen on it.

The figure ε_LB is anytime-valid too: the wealth is run for every ε′ of a grid (containing the claim),
with the same cuts, and ε_LB is the largest grid point ``g`` such that the claim "ε′-DP" was rejected at
every grid point ``ε′ ≤ g``. If ε_LB exceeds the true ε, then the smallest grid point at or above the
true ε (a claim the mechanism meets) was rejected, which happens with probability ≤ α at any time.

It stops for one of four reasons (``STOP_REASONS``):

* ``violation``: the claim's wealth reached ``1/α`` (and every smaller grid claim's did): the mechanism
  is not ε-DP, at confidence 1 − α;
* ``cannot_reach``: even if every run left in the budget went the test's way, the wealth could not reach
  ``1/α`` — the claim's ε_LB cannot exceed it at the budget left (certain, no error probability);
* ``inside``: the reverse test — wealth ``Π(1 + λ (Z_i − m))`` of the null "the chosen cuts sit on or
  beyond the claim's boundary" — reached ``1/α``: at confidence 1 − α this attack's tests lie inside the
  claim's privacy region, so more runs of it would not show a violation (a statement about the attack,
  never that the mechanism is private);
* ``budget``: every run of the budget was drawn.

Stopping for futility never makes a violation, so it costs no validity. Everything here is a function of
the counts of each batch's four outcomes ``(X, Y)``: a batch of any size costs O(grid) after counting.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy.special import logsumexp

from recaudit.core.errors import ParameterError
from .estimators import Estimate, Estimator
from .rates import BoundResult, _check_alpha, _check_delta
from .thresholds import select_threshold

__all__ = ["STOP_REASONS", "SequentialResult", "SequentialTest", "sequential_audit", "next_batch", "BET_FRACTIONS",
           "SequentialRule", "SequentialEstimator"]

#: why a sequential audit stopped, with the sentence a report prints
STOP_REASONS = {
    "violation": "violation shown: the claim's e-process reached 1/α",
    "cannot_reach": "futile: even if every run left in the budget went the test's way, ε_LB could not exceed "
                    "the claim",
    "inside": "futile: at confidence 1 − α the attack's tests lie inside the claim's privacy region (more runs of "
              "this attack would not show a violation)",
    "budget": "the budget of runs was spent without a decision",
}

#: the bets mixed: fractions of the largest bet 1/(1 + e^ε − (1 − δ)) that keeps the wealth non-negative
BET_FRACTIONS = np.geomspace(1e-3, 0.99, 24)
#: grid points of ε′ (besides the claim) on which ε_LB is read, up to ``EPSILON_TOP``
GRID_POINTS = 241
EPSILON_TOP = 24.0


@dataclass(frozen=True)
class SequentialResult(BoundResult):
    """A sequential audit's bound (``method`` "e-process", ``threshold_rule`` "sequential") and how it stopped.

    The counts are the totals over the runs that were bet on (each batch counted by its own cut; the
    first batch only selects); ``threshold``/``direction`` are the last batch's cut. ``runs`` runs per
    world were drawn of a ``budget``, the first batch of ``batch``; ``e_value`` is the claim's wealth at
    the stop (its largest over time gives ``p_value = min(1, 1/max wealth)``, anytime-valid).
    """

    runs: int = 0
    budget: int = 0
    batch: int = 0
    reason: str = "budget"
    e_value: float = 1.0
    max_e_value: float = 1.0
    inside_e_value: float = 1.0

    @property
    def violated(self) -> bool:
        return self.reason == "violation"

    @property
    def p_value(self) -> float:
        return float(min(1.0, 1.0 / self.max_e_value))

    @property
    def explanation(self) -> str:
        return STOP_REASONS[self.reason]

    def to_dict(self) -> dict:
        d = super().to_dict()
        for key in ("runs", "budget", "batch"):
            d[key] = int(d[key])
        for key in ("e_value", "max_e_value", "inside_e_value"):
            d[key] = float(d[key])
        d["reason"] = str(self.reason)
        return d


def _grid(epsilon: float) -> np.ndarray:
    """ε′ grid: 0 .. EPSILON_TOP evenly, the claim's ε added (and kept sorted)."""
    points = np.linspace(0.0, EPSILON_TOP, GRID_POINTS)
    if math.isfinite(epsilon):
        points = np.union1d(points, [epsilon])
    return points


@dataclass
class SequentialTest:
    """The anytime-valid test of "the mechanism is (ε, δ)-DP" fed batch by batch (``update``).

    ``budget``: runs per world the audit may draw in all (for the ``cannot_reach`` rule); ``inside``: also
    stop when the reverse test shows the attack's cuts inside the privacy region.
    """

    epsilon: float
    delta: float
    alpha: float
    budget: int
    inside: bool = True
    _past: list = field(default_factory=list, repr=False)
    _log_k: np.ndarray = field(init=False, repr=False)  # (grid, bets): log wealth of each bet, each ε′
    _log_in: np.ndarray = field(init=False, repr=False)  # (bets,): the reverse test's log wealth
    _grid: np.ndarray = field(init=False, repr=False)
    _claim: int = field(init=False, repr=False)
    reason: str | None = None

    def __post_init__(self) -> None:
        _check_alpha(self.alpha)
        _check_delta(self.delta)
        if self.budget < 2:
            raise ParameterError("trials", "a sequential audit needs a budget of at least 2 runs per world")
        self._grid = _grid(self.epsilon)
        self._claim = int(np.searchsorted(self._grid, self.epsilon)) if math.isfinite(self.epsilon) else -1
        self._log_k = np.zeros((self._grid.size, BET_FRACTIONS.size))
        self._log_in = np.zeros(BET_FRACTIONS.size)
        self._max_log_k = 0.0
        self._counts = np.zeros(4, np.int64)  # fp, negatives counted, fn, positives counted
        self._cut = (math.inf, 1)
        self.runs = 0
        self.batch = 0

    # ---------------------------------------------------------------- the state

    @property
    def m(self) -> float:
        return 1.0 - self.delta

    def _bets(self, grid: np.ndarray) -> np.ndarray:
        """(grid, bets): the bets λ = c / (1 + e^ε′ − m) of each ε′."""
        return BET_FRACTIONS[None, :] / (1.0 + np.exp(grid)[:, None] - self.m)

    def _log_wealth(self) -> np.ndarray:
        """Per ε′ of the grid, the log of the mixture's wealth (the mean over bets)."""
        return logsumexp(self._log_k, axis=1) - math.log(BET_FRACTIONS.size)

    def epsilon_lb(self) -> float:
        """The largest grid ε′ with every claim ε″ ≤ ε′ rejected (0 when none is)."""
        rejected = self._log_wealth() >= math.log(1.0 / self.alpha)
        if not rejected[0]:
            return 0.0
        first_kept = int(np.argmin(rejected)) if not rejected.all() else rejected.size
        return float(self._grid[first_kept - 1])

    # ---------------------------------------------------------------- one batch

    def update(self, scores0, scores1, rng: np.random.Generator | None = None) -> str | None:
        """Take one batch (runs of world 0 and world 1, as many each); return why to stop, or None.

        The batch is counted by the cut chosen on every earlier batch (the first batch only chooses);
        ``rng`` permutes each world's batch before the runs are paired (pass one when a sampler may
        return its runs in an order that depends on them).
        """
        if self.reason is not None:
            raise ParameterError("batch", f"the test already stopped ({self.reason})")
        s0 = np.asarray(scores0, dtype=float).ravel()
        s1 = np.asarray(scores1, dtype=float).ravel()
        if s0.size != s1.size or s0.size == 0:
            raise ParameterError("scores",
                                 f"a batch needs as many runs of each world, at least one (got {s0.size}, {s1.size})")
        if np.isnan(s0).any() or np.isnan(s1).any():
            raise ParameterError("scores", "scores contain NaN")
        if rng is not None:
            s0, s1 = s0[rng.permutation(s0.size)], s1[rng.permutation(s1.size)]
        if self._past:
            self._bet(s0, s1)
        self._past.append((s0, s1))
        self.runs += s0.size
        self.batch = self.batch or s0.size
        self.reason = self._decide()
        return self.reason

    def _choose(self) -> tuple[float, int, bool]:
        """Cut and constraint chosen on every run seen so far: (threshold, direction, swap)."""
        past0 = np.concatenate([p[0] for p in self._past])
        past1 = np.concatenate([p[1] for p in self._past])
        threshold, direction = select_threshold(past0, past1, self.delta, alpha=self.alpha, candidates="rare-event")
        fp, fn = _errors(past0, past1, threshold, direction)
        p = (fp.sum() + 0.5) / (past0.size + 1.0)
        q = (fn.sum() + 0.5) / (past1.size + 1.0)
        e = math.exp(min(self.epsilon, 700.0)) if math.isfinite(self.epsilon) else math.inf
        # bet on the constraint the past shows most broken: FPR + E·FNR ≥ m (Z = X + E·Y) or FNR + E·FPR ≥ m
        return threshold, direction, bool(q + e * p < p + e * q)

    def _bet(self, s0: np.ndarray, s1: np.ndarray) -> None:
        threshold, direction, swap = self._choose()
        self._cut = (threshold, direction)
        x, y = _errors(s0, s1, threshold, direction)
        self._counts += [int(x.sum()), x.size, int(y.sum()), y.size]
        if swap:
            x, y = y, x
        # counts of the four outcomes (x, y) of the paired runs: 00, 10, 01, 11
        n = np.bincount(x.astype(np.int64) + 2 * y.astype(np.int64), minlength=4).astype(float)
        e = np.exp(self._grid)[:, None]
        lam = self._bets(self._grid)
        m = self.m
        z = (0.0, 1.0, e, 1.0 + e)  # Z of each outcome
        log_f = [np.log1p(lam * (m - zc)) for zc in z]
        self._log_k += sum(nc * lf for nc, lf in zip(n, log_f) if nc)
        wealth = self._log_wealth()
        if self._claim >= 0:
            self._max_log_k = max(self._max_log_k, float(wealth[self._claim]))
        if self._claim >= 0:  # the reverse test: bets on Z above m (λ ≤ 1/m keeps it non-negative)
            ec = math.exp(self.epsilon)
            lam_in = BET_FRACTIONS / m
            self._log_in += sum(nc * np.log1p(lam_in * (zc - m)) for nc, zc in zip(n, (0.0, 1.0, ec, 1.0 + ec)) if nc)

    def _claim_log_wealth(self) -> float:
        return float(self._log_wealth()[self._claim]) if self._claim >= 0 else -math.inf

    def _decide(self) -> str | None:
        level = math.log(1.0 / self.alpha)
        if self._claim >= 0 and self.epsilon_lb() >= self.epsilon and self._claim_log_wealth() >= level:
            return "violation"
        left = self.budget - self.runs
        if left <= 0:
            return "budget"
        if self._claim >= 0:
            # the most the claim's wealth can grow: every pair left calls both runs right (outcome 00)
            lam = self._bets(self._grid[[self._claim]])[0]
            best = self._log_k[self._claim] + left * np.log1p(lam * self.m)
            if logsumexp(best) - math.log(BET_FRACTIONS.size) < level:
                return "cannot_reach"
            if self.inside and logsumexp(self._log_in) - math.log(BET_FRACTIONS.size) >= level:
                return "inside"
        return None

    # ---------------------------------------------------------------- the result

    def ceiling(self) -> float:
        """The largest ε_LB this budget could show: every bet pair right, from the second batch on."""
        pairs = max(0, self.budget - (len(self._past[0][0]) if self._past else self.batch or 1))
        if pairs == 0:
            return 0.0
        best = logsumexp(pairs * np.log1p(self._bets(self._grid) * self.m), axis=1) - math.log(BET_FRACTIONS.size)
        shown = best >= math.log(1.0 / self.alpha)
        if not shown[0]:
            return 0.0
        return float(self._grid[(int(np.argmin(shown)) if not shown.all() else shown.size) - 1])

    def result(self) -> SequentialResult:
        fp, n_neg, fn, n_pos = (int(c) for c in self._counts)
        wealth = self._claim_log_wealth()
        return SequentialResult(
            epsilon_lb=self.epsilon_lb(), ceiling=self.ceiling(), alpha=float(self.alpha), delta=float(self.delta),
            method="e-process", threshold=float(self._cut[0]), direction=int(self._cut[1]), false_pos=fp,
            n_neg=n_neg, false_neg=fn, n_pos=n_pos, threshold_rule="sequential", runs=int(self.runs),
            budget=int(self.budget), batch=int(self.batch), reason=self.reason or "budget",
            e_value=float(math.exp(min(wealth, 700.0))) if math.isfinite(wealth) else 0.0,
            max_e_value=float(math.exp(min(self._max_log_k, 700.0))),
            inside_e_value=float(math.exp(min(logsumexp(self._log_in) - math.log(BET_FRACTIONS.size), 700.0))))


def next_batch(runs: int, batch: int) -> int:
    """The next batch's runs per world after ``runs``: ``batch``, or a quarter of the runs so far when more.

    Batches grow with the sample, so a budget of 10⁶ runs is checked some 40 times, not 10⁴ times (each
    check chooses its cut on every earlier run), while the first thousand runs are checked every ``batch``.
    The schedule depends on nothing random, so any stopping rule on it stays valid.
    """
    return max(int(batch), int(runs) // 4)


def _errors(s0: np.ndarray, s1: np.ndarray, threshold: float, direction: int) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the world-0 runs called world 1 (false positives), the world-1 runs called world 0."""
    if direction == 1:
        return s0 >= threshold, s1 < threshold
    return s0 <= threshold, s1 > threshold


def sequential_audit(scores, epsilon: float, delta: float, alpha: float, batch: int, budget: int | None = None,
                     inside: bool = True, grow: bool = True, rng: np.random.Generator | None = None
                     ) -> SequentialResult:
    """The sequential audit replayed on stored runs ``scores`` (2, n), in run order: batches of ``batch``
    runs per world (growing as :func:`next_batch` says when ``grow``; else all of ``batch``).

    Stops where :class:`SequentialTest` stops (``budget``: n by default), so an audit that drew its runs
    batch by batch and stopped gives the same result from the runs it saved.
    """
    s0, s1 = np.asarray(scores[0], dtype=float), np.asarray(scores[1], dtype=float)
    batch = int(batch)
    if batch < 1:
        raise ParameterError("batch", "batch must be at least 1")
    test = SequentialTest(float(epsilon), float(delta), float(alpha), int(budget or s0.size), inside)
    start = 0
    while start < s0.size:
        size = next_batch(start, batch) if grow else batch
        if test.update(s0[start:start + size], s1[start:start + size], rng) is not None:
            break
        start += size
    return test.result()


# ---------------------------------------------------------------- scenarios: the rule a design's blocks follow


@dataclass(frozen=True)
class SequentialRule:
    """What a scenario's sequential audit needs while its blocks arrive (picklable, it rides in the job).

    Every test (target × attack) runs its own :class:`SequentialTest` at ``alpha`` (the family's α over
    the tests: the e-values are Bonferroni-corrected, as the fixed design's bounds are); the audit stops
    when some test shows a violation or every test has stopped. Batches are the design's blocks
    (``batch`` runs per world, in block order).
    """

    epsilon: float
    delta: float
    alpha: float
    budget: int
    batch: int

    def test(self) -> SequentialTest:
        return SequentialTest(self.epsilon, self.delta, self.alpha, self.budget)


@dataclass(frozen=True)
class SequentialEstimator(Estimator):
    """``audit.sequential``: the e-process over a test's runs in blocks of ``batch`` — where the run stopped.

    Not registered (``audit.method`` does not name it): ``audit.sequential: true`` selects it, with the
    audit's ``block_size`` as ``batch`` and ``trials`` as ``budget``; replaying the saved blocks gives the
    stop the run made.
    """

    method: ClassVar[str] = "e-process"
    threshold_rule: ClassVar[str] = "sequential"
    batch: int = 50_000
    budget: int = 200_000

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        epsilon = claim.epsilon if claim.promises else 0.0
        bound = sequential_audit(np.asarray(scores, dtype=float), epsilon, claim.delta, alpha, self.batch,
                                 self.budget, grow=False)
        called_one = bound.false_pos + bound.n_pos - bound.false_neg
        counted = bound.n_neg + bound.n_pos
        return Estimate(bound, bound.p_value, None, counted > 0 and called_one in (0, counted),
                        claim_epsilon=epsilon)
