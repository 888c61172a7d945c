"""Sample-complexity formulas for item clustering under local DP (seed 003).

Pure functions, no randomness. Every formula is from docs/families/local-clustering.md
(Banerjee, Hegde, Massoulié, "The Price of Privacy in Untrusted Recommendation
Engines"); the tag says how sure we are of it:

* **[P]** stated in the surviving paper text;
* **[D]** derived from the surviving text and checked numerically (the
  extraction lost nearly every formula of seed 003);
* **[G]** not recoverable — our choice, exposed as a parameter.

The order-of-magnitude bounds (``U ≳ C · f(N, w, ε)``) hold up to a constant
``C`` the paper does not give [G]: it is the ``constant`` parameter (default
1), to be calibrated against simulation, never read as a prediction of the
absolute number of users. Logarithms are natural unless named otherwise.
"""
from __future__ import annotations

import math

import numpy as np

from recaudit.core.errors import ParameterError

__all__ = [
    "fano_min_users",
    "scarce_min_users",
    "maxsense_expected_scores",
    "maxsense_separation",
    "maxsense_separation_exact",
    "maxsense_mean_bit",
    "score_noise_factor",
    "maxsense_users",
    "maxsense_success_users",
    "pairwise_preference_users",
    "adaptive_min_users",
]


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ParameterError(name, f"{name} must be > 0, got {value!r}")


def fano_min_users(n_items: int, epsilon: float) -> int:
    """Smallest number of users not ruled out by Fano's inequality (rich regime) [D].

    docs/families/local-clustering.md, "Lower bounds": with two item clusters (``2^N``
    hypotheses) any epsilon-LDP learner is unreliable when
    ``U · ε · log2(e) ≤ N/2 − 1`` (each user's messages carry at most
    ``ε log2 e`` bits about the clustering). Returns the smallest integer
    ``U`` with ``U · ε · log2(e) > N/2 − 1``; every ``U`` below it is
    provably insufficient. Reliability at this ``U`` is *not* implied.
    """
    if n_items < 1:
        raise ParameterError("n_items", f"n_items must be >= 1, got {n_items!r}")
    _positive("epsilon", epsilon)
    bits_per_user = epsilon * math.log2(math.e)
    need = n_items / 2.0 - 1.0
    if need < 0:
        return 0
    return int(math.floor(need / bits_per_user)) + 1


def scarce_min_users(n_items: int, ratings_per_user: int, epsilon: float, constant: float = 1.0) -> float:
    """Information-scarce lower bound ``U = Ω(N² / (w (e^ε − 1)²))`` [D].

    docs/families/local-clustering.md, "Lower bounds": for ``w = o(N^{1/3})`` and ``ε ≤ ln 2``
    each user's released bits carry ``I(T; S) ≤ 2 (e^ε − 1)² w / N`` about the
    clustering, so any non-adaptive epsilon-LDP learner needs
    ``U ≥ C · N² / (w (e^ε − 1)²)`` users. ``C`` (``constant``) is not known
    from the paper [G]. Outside ``w = o(N^{1/3})``, ``ε ≤ ln 2`` the bound is
    not claimed.
    """
    _positive("n_items", n_items)
    _positive("ratings_per_user", ratings_per_user)
    _positive("epsilon", epsilon)
    return constant * n_items ** 2 / (ratings_per_user * math.expm1(epsilon) ** 2)


def _sbm(b, user_weights, item_weights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b = np.asarray(b, dtype=float)
    alpha = np.asarray(user_weights, dtype=float)
    beta = np.asarray(item_weights, dtype=float)
    if b.shape != (alpha.size, beta.size):
        raise ParameterError("b", f"b must be K x L = {alpha.size} x {beta.size}, got shape {b.shape}")
    if np.any(alpha <= 0) or np.any(beta <= 0):
        raise ParameterError("cluster_weights", "cluster weights must be > 0")
    return b, alpha / alpha.sum(), beta / beta.sum()


def maxsense_expected_scores(b, user_weights, item_weights, theta: float, w: int, n_items: int,
                             epsilon: float, users: float) -> np.ndarray:
    """Expected MaxSense item score ``E[c_i]`` for an item of each item cluster [D]: shape (L,).

    docs/families/local-clustering.md, "MaxSense": with ``p = θ / w``,
    ``m_k = Σ_l β_l b[k, l]``, ``q_k = 1 − e^{−θ m_k}`` (the probability that a
    user of cluster ``k`` has a liked item among the sensed ones, Poisson
    approximation) and ``q = Σ_k α_k q_k``::

        E[c_i] = U p [1/(1+e^ε) + tanh(ε/2) (q + (w/N) Σ_k α_k (1 − q_k) b[k, l(i)])]

    (released bit: ``P(S_hat = 1) = 1/(1+e^ε) + tanh(ε/2) P(S = 1)``; given
    item ``i`` sensed, ``S = 1`` if another sensed item is liked, or else if
    ``i`` itself is rated (``w/N``) and liked (``b``)). The Poisson
    approximation errs by a relative amount of order ``θ / w`` (in our
    simulations with 10^6 users: about 0.6% at N = 100, w = 10 and 0.2-0.3%
    at N = 200, w = 20-40, ``b = [[.9, .3], [.6, .1]]``). ``b`` is ``K x L`` (user
    clusters by item clusters); the weights are normalised.
    """
    b, alpha, beta = _sbm(b, user_weights, item_weights)
    _positive("theta", theta)
    _positive("w", w)
    _positive("n_items", n_items)
    _positive("epsilon", epsilon)
    p = min(1.0, theta / w)
    m = b @ beta  # (K,)
    qk = 1.0 - np.exp(-theta * m)
    q = float(alpha @ qk)
    own = (w / n_items) * ((alpha * (1.0 - qk)) @ b)  # (L,)
    return users * p * (1.0 / (1.0 + math.exp(epsilon)) + math.tanh(epsilon / 2.0) * (q + own))


def maxsense_separation(b, user_weights, item_weights, theta: float) -> float:
    """MaxSense's separation ``Δ = min_{l≠l'} |Σ_k α_k e^{−θ m_k} (b[k,l] − b[k,l'])|`` [D], Poisson limit.

    docs/families/local-clustering.md, "MaxSense": the gap between the expected scores of two
    item clusters is ``U p tanh(ε/2) (w/N) Δ``; ``Δ = 0`` means MaxSense
    cannot tell some clusters apart (e.g. a symmetric ``b``). With a single
    item cluster there is nothing to separate and ``inf`` is returned.

    Range of validity: this is the limit ``w → ∞`` at fixed ``θ`` and
    ``w/N → 0`` (a user's sensed likes become Poisson). At small ``w`` it
    overstates the gap — a product over the user's ``w − 1`` other rated
    items of ``(1 − θ b[k, l(j)] / w)`` replaces ``e^{−θ m_k}``: the exact gap
    is 0.61, 0.82, 0.92, 0.96 of this one at ``w`` = 2, 4, 8, 16 (``b =
    [[.9, .2], [.7, .05]]``, ``N = 40 w``; ``tests/test_theory.py`` checks it).
    :func:`maxsense_separation_exact` is the exact value for finite ``N``
    and ``w`` (the sweeps use it).
    """
    b, alpha, beta = _sbm(b, user_weights, item_weights)
    _positive("theta", theta)
    m = b @ beta
    profile = (alpha * np.exp(-theta * m)) @ b  # (L,)
    if profile.size < 2:
        return math.inf
    gaps = np.abs(profile[:, None] - profile[None, :])
    return float(gaps[~np.eye(profile.size, dtype=bool)].min())


def _uniform_subset_mean_product(factors: np.ndarray, w: int) -> np.ndarray:
    """``E[Π_{j∈R} f_j]`` over uniform ``w``-subsets ``R`` of the items, for each row of ``factors`` (rows, N).

    Recursion on normalised elementary symmetric polynomials,
    ``E_{n,k} = (k/n) f_n E_{n−1,k−1} + ((n−k)/n) E_{n−1,k}`` (convex
    combinations: stable), vectorised over rows and ``k``; one numpy step per item.
    """
    factors = np.atleast_2d(np.asarray(factors, dtype=float))
    rows, n_items = factors.shape
    e = np.zeros((rows, w + 1))
    e[:, 0] = 1.0
    k = np.arange(1, w + 1)
    for n in range(1, n_items + 1):
        f = factors[:, n - 1][:, None]
        kk = k[k <= n]
        e[:, kk] = (kk / n) * f * e[:, kk - 1] + ((n - kk) / n) * e[:, kk]
    return e[:, w]


def maxsense_separation_exact(b, user_weights, item_weights, theta: float, w: int, n_items: int) -> float:
    """MaxSense's separation for finite ``N`` and ``w``, exact under the simulated blockmodel [D].

    Same units as :func:`maxsense_separation` (``Δ = (N/w) min |a_l − a_l'|``),
    with ``a_l = P(S = 1 | an item of cluster l is sensed)`` computed exactly
    when every user rates a uniform ``w``-subset, each item is sensed with
    probability ``p = min(1, θ/w)`` and item clusters have the sizes the
    simulator gives them (largest-remainder rounding of ``β N``)::

        1 − a_l = Σ_k α_k E_R[(1 − b[k,l] 1{i∈R}) Π_{j∈R, j≠i} (1 − p b[k, l(j)])]

    It tends to the Poisson-limit Δ as ``w → ∞`` with ``w/N → 0``.
    """
    b, alpha, beta = _sbm(b, user_weights, item_weights)
    _positive("theta", theta)
    if not 1 <= w <= n_items:
        raise ParameterError("w", f"w must be in [1, n_items], got w={w!r}, n_items={n_items!r}")
    L = beta.size
    if L < 2:
        return math.inf
    raw = beta * n_items
    sizes = np.floor(raw).astype(np.int64)
    sizes[np.argsort(-(raw - sizes), kind="stable")[: n_items - sizes.sum()]] += 1
    labels = np.repeat(np.arange(L), sizes)
    p = min(1.0, theta / w)
    miss = np.zeros(L)
    for l in range(L):
        if sizes[l] == 0:
            miss[l] = np.nan
            continue
        i = int(np.flatnonzero(labels == l)[0])  # any item of cluster l: the others are exchangeable
        f = 1.0 - p * b[:, labels]  # (K, N): an unsensed-or-disliked chance per rated item
        f[:, i] = 1.0 - b[:, l]  # item i is sensed for sure
        miss[l] = float(alpha @ _uniform_subset_mean_product(f, w))
    a = 1.0 - miss[np.isfinite(miss)]
    gaps = np.abs(a[:, None] - a[None, :])[~np.eye(a.size, dtype=bool)]
    return float(gaps.min() * n_items / w)


def maxsense_mean_bit(b, user_weights, item_weights, theta: float, epsilon: float) -> float:
    """Mean released MaxSense bit ``m̄ = 1/(1+e^ε) + tanh(ε/2) q``, ``q = Σ_k α_k (1 − e^{−θ m_k})`` [D].

    ``epsilon`` is the budget of that bit (``ε/Q`` for Multi-MaxSense);
    ``q`` is the Poisson-limit probability that a sensed block holds a like.
    """
    b, alpha, beta = _sbm(b, user_weights, item_weights)
    _positive("theta", theta)
    _positive("epsilon", epsilon)
    q = float(alpha @ (1.0 - np.exp(-theta * (b @ beta))))
    return 1.0 / (1.0 + math.exp(epsilon)) + math.tanh(epsilon / 2.0) * q


def score_noise_factor(mean_bit: float, share: float) -> float:
    """Variance of a user's raw score contribution over the centred one's: ``1 + m̄(1 − share)/(1 − m̄)`` [D].

    A user adds ``H_i Ŝ`` to item ``i``'s raw score, ``H_i`` = 1 with
    probability ``share`` (``Qθ/w`` for Q sketches) and ``Ŝ`` of mean ``m̄``:
    its variance is ``share·m̄(1 − share·m̄)``, against ``share·m̄(1 − m̄)``
    for the centred ``H_i (Ŝ − m̄)`` (exact when ``Ŝ`` given ``H_i = 1`` has
    mean ``m̄``, i.e. up to the ``O(w/N)`` signal). The raw count's noise from
    how many users sensed the item shrinks as ``share → 1``: the factor
    falls from ``1/(1 − m̄)`` to 1.
    """
    if not 0.0 < mean_bit < 1.0:
        raise ParameterError("mean_bit", f"mean_bit must be in (0, 1), got {mean_bit!r}")
    if not 0.0 <= share <= 1.0:
        raise ParameterError("share", f"share must be in [0, 1], got {share!r}")
    return 1.0 + mean_bit * (1.0 - share) / (1.0 - mean_bit)


def maxsense_users(b, user_weights, item_weights, n_items: int, w: int, epsilon: float, theta: float = 1.0,
                   sketches: int = 1, score: str = "raw", exact: bool = True, fail_prob: float = 0.05,
                   constant: float = 1.0) -> float:
    """Users sufficient for MaxSense (``sketches = 1``) or Multi-MaxSense (``Q`` sketches at ``ε/Q``) [D].

    ``U ≈ C · N² log(N/δ) · m̄(1 − m̄) F / (θ w Δ² Q tanh²(ε/2Q))``: per user,
    an item's score gains ``Qθ/w · tanh(ε/2Q) · (w/N) Δ`` of signal between
    clusters against a variance ``Qθ/w · m̄(1 − m̄) F`` (``m̄`` from
    :func:`maxsense_mean_bit` at ``ε/Q``; ``F`` = :func:`score_noise_factor`
    at share ``Qθ/w`` for the ``raw`` score, 1 for the ``centred`` one).
    ``Δ`` is exact for the finite ``N``, ``w`` (``exact``) or its Poisson
    limit. Without ``m̄(1 − m̄) F`` this is the composition formula
    ``maxsense_success_users · tanh²(ε/2)/(Q tanh²(ε/2Q))``; with it the
    ε-slope of Multi-MaxSense is steeper at small ``w`` (−1.38 instead of
    −1.16 on ε ∈ {1.5, 3, 6}, N = 40, w = 8; measured −1.46 [−1.64, −1.28]),
    and the centred score's (−1.16) is what was measured for it (−1.15).
    """
    if score not in ("raw", "centred"):
        raise ParameterError("score", f"score must be 'raw' or 'centred', got {score!r}")
    if sketches < 1:
        raise ParameterError("sketches", f"sketches must be >= 1, got {sketches!r}")
    for name, value in (("n_items", n_items), ("w", w), ("epsilon", epsilon), ("theta", theta)):
        _positive(name, value)
    q_eps = epsilon / sketches
    gap = (maxsense_separation_exact(b, user_weights, item_weights, theta, w, n_items) if exact
           else maxsense_separation(b, user_weights, item_weights, theta))
    m = maxsense_mean_bit(b, user_weights, item_weights, theta, q_eps)
    factor = score_noise_factor(m, min(1.0, sketches * theta / w)) if score == "raw" else 1.0
    return maxsense_success_users(n_items, w, q_eps, theta, gap, fail_prob, constant) * m * (1 - m) * factor / sketches


def maxsense_success_users(n_items: int, w: int, epsilon: float, theta: float, delta_sep: float,
                           fail_prob: float = 0.05, constant: float = 1.0) -> float:
    """Users sufficient for MaxSense ``U ≈ C · N² log(N/δ) / (θ w Δ² tanh²(ε/2))`` [D].

    docs/families/local-clustering.md, "MaxSense": clustering succeeds with probability
    ``≥ 1 − δ`` (``fail_prob``) above this many users, for a constant ``C``
    (``constant``) the paper does not give [G]. ``delta_sep`` is ``Δ`` from
    :func:`maxsense_separation`. Log-slopes: +2 in N (up to the log), −1 in w,
    −2 in ε for small ε (``tanh(ε/2) ≈ ε/2``), saturating for large ε — the
    saturation Multi-MaxSense removes.
    """
    for name, value in (("n_items", n_items), ("w", w), ("epsilon", epsilon), ("theta", theta),
                        ("delta_sep", delta_sep)):
        _positive(name, value)
    if not 0.0 < fail_prob < 1.0:
        raise ParameterError("fail_prob", f"fail_prob must be in (0, 1), got {fail_prob!r}")
    return constant * n_items ** 2 * math.log(n_items / fail_prob) / (
        theta * w * delta_sep ** 2 * math.tanh(epsilon / 2.0) ** 2)


def pairwise_preference_users(n_items: int, constant: float = 1.0, ratings_per_user: int | None = None) -> float:
    """Users sufficient for Pairwise-Preference, ``C · N log N`` in the rich regime [P, C: G].

    docs/families/local-clustering.md, "Pairwise-Preference": success needs ``U ≳ C N log N``
    (Theorem 3.5; ``C`` depends on ε, the blockmodel and the eigen-gap
    conditions and is not given [G]). With ``ratings_per_user`` (``w``) the
    answer is ``C N log N (N/w)²`` [D]: a user likes both items of its pair
    with probability ``∝ (w/N)²``, which gives ``N³ log N / w²`` in the scarce
    regime and a constant factor in the rich one (``w = cN``).
    """
    if n_items < 2:
        raise ParameterError("n_items", f"n_items must be >= 2, got {n_items!r}")
    scale = 1.0 if ratings_per_user is None else (n_items / ratings_per_user) ** 2
    if ratings_per_user is not None:
        _positive("ratings_per_user", ratings_per_user)
    return constant * n_items * math.log(n_items) * scale


def adaptive_min_users(n_items: int) -> float:
    """Lower bound for adaptive epsilon-LDP queries (``w = 1``, two clusters): ``N log N`` [D].

    docs/families/local-clustering.md, "Lower bounds" (the paper's Theorem 6.1,
    ``U = Ω(N log N)``); returned without a constant (``C = 1``), i.e. as a
    scale, not an exact count.
    """
    if n_items < 2:
        raise ParameterError("n_items", f"n_items must be >= 2, got {n_items!r}")
    return n_items * math.log(n_items)
