"""Sample-complexity formulas for item clustering under local DP (seed 003).

Pure functions, no randomness. Every formula is from ALGORITHMS.md section A
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

__all__ = [
    "fano_min_users",
    "scarce_min_users",
    "maxsense_expected_scores",
    "maxsense_separation",
    "maxsense_success_users",
    "pairwise_preference_users",
    "adaptive_min_users",
]


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def fano_min_users(n_items: int, epsilon: float) -> int:
    """Smallest number of users not ruled out by Fano's inequality (rich regime) [D].

    ALGORITHMS.md A, "Lower bounds": with two item clusters (``2^N``
    hypotheses) any epsilon-LDP learner is unreliable when
    ``U · ε · log2(e) ≤ N/2 − 1`` (each user's messages carry at most
    ``ε log2 e`` bits about the clustering). Returns the smallest integer
    ``U`` with ``U · ε · log2(e) > N/2 − 1``; every ``U`` below it is
    provably insufficient. Reliability at this ``U`` is *not* implied.
    """
    if n_items < 1:
        raise ValueError(f"n_items must be >= 1, got {n_items!r}")
    _positive("epsilon", epsilon)
    bits_per_user = epsilon * math.log2(math.e)
    need = n_items / 2.0 - 1.0
    if need < 0:
        return 0
    return int(math.floor(need / bits_per_user)) + 1


def scarce_min_users(n_items: int, ratings_per_user: int, epsilon: float, constant: float = 1.0) -> float:
    """Information-scarce lower bound ``U = Ω(N² / (w (e^ε − 1)²))`` [D].

    ALGORITHMS.md A, "Lower bounds": for ``w = o(N^{1/3})`` and ``ε ≤ ln 2``
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
        raise ValueError(f"b must be K x L = {alpha.size} x {beta.size}, got shape {b.shape}")
    if np.any(alpha <= 0) or np.any(beta <= 0):
        raise ValueError("cluster weights must be > 0")
    return b, alpha / alpha.sum(), beta / beta.sum()


def maxsense_expected_scores(b, user_weights, item_weights, theta: float, w: int, n_items: int,
                             epsilon: float, users: float) -> np.ndarray:
    """Expected MaxSense item score ``E[c_i]`` for an item of each item cluster [D]: shape (L,).

    ALGORITHMS.md A, "MaxSense": with ``p = θ / w``,
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
    """MaxSense's separation ``Δ = min_{l≠l'} |Σ_k α_k e^{−θ m_k} (b[k,l] − b[k,l'])|`` [D].

    ALGORITHMS.md A, "MaxSense": the gap between the expected scores of two
    item clusters is ``U p tanh(ε/2) (w/N) Δ``; ``Δ = 0`` means MaxSense
    cannot tell some clusters apart (e.g. a symmetric ``b``). With a single
    item cluster there is nothing to separate and ``inf`` is returned.
    """
    b, alpha, beta = _sbm(b, user_weights, item_weights)
    _positive("theta", theta)
    m = b @ beta
    profile = (alpha * np.exp(-theta * m)) @ b  # (L,)
    if profile.size < 2:
        return math.inf
    gaps = np.abs(profile[:, None] - profile[None, :])
    return float(gaps[~np.eye(profile.size, dtype=bool)].min())


def maxsense_success_users(n_items: int, w: int, epsilon: float, theta: float, delta_sep: float,
                           fail_prob: float = 0.05, constant: float = 1.0) -> float:
    """Users sufficient for MaxSense ``U ≈ C · N² log(N/δ) / (θ w Δ² tanh²(ε/2))`` [D].

    ALGORITHMS.md A, "MaxSense": clustering succeeds with probability
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
        raise ValueError(f"fail_prob must be in (0, 1), got {fail_prob!r}")
    return constant * n_items ** 2 * math.log(n_items / fail_prob) / (
        theta * w * delta_sep ** 2 * math.tanh(epsilon / 2.0) ** 2)


def pairwise_preference_users(n_items: int, constant: float = 1.0) -> float:
    """Users sufficient for Pairwise-Preference in the rich regime, ``C · N log N`` [P, C: G].

    ALGORITHMS.md A, "Pairwise-Preference": success needs ``U ≳ C N log N``
    (Theorem 3.5; ``C`` depends on ε, the blockmodel and the eigen-gap
    conditions and is not given [G]).
    """
    if n_items < 2:
        raise ValueError(f"n_items must be >= 2, got {n_items!r}")
    return constant * n_items * math.log(n_items)


def adaptive_min_users(n_items: int) -> float:
    """Lower bound for adaptive epsilon-LDP queries (``w = 1``, two clusters): ``N log N`` [D].

    ALGORITHMS.md A, "Lower bounds" (the paper's Theorem 6.1,
    ``U = Ω(N log N)``); returned without a constant (``C = 1``), i.e. as a
    scale, not an exact count.
    """
    if n_items < 2:
        raise ValueError(f"n_items must be >= 2, got {n_items!r}")
    return n_items * math.log(n_items)
