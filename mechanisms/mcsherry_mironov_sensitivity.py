"""McSherry and Mironov's sensitivities: per rating (the paper's claim) and per user (a user's whole row),
the user-level ε of the per-rating calibration, and the paper's own ε formula."""
from __future__ import annotations

import math

from .reference import analytic_gaussian_sigma


def sensitivities(min_rating: float, max_rating: float, clamp: float, beta_p: float) -> dict[str, tuple[float, float]]:
    """Per-rating (L1, L2) sensitivity of each measurement.

    ``α = max − min``, ``R = max |rating|``, ``B = clamp``. Sums: a rating added
    moves them by at most ``R``, a changed value by ``α``. Counts: 1. ``Cov``
    (L1 with ``w = 1/c``, L2 with ``w = 1/sqrt c``): the paper's
    ``2Bα + 3B²`` and ``2B·sqrt(α²/(4β_p) + B²) + B²`` for a rating added; a
    value change moves the changed entry by up to 2B and the others by at
    most ``α/(c + β_p)`` each, so ``‖ΔCov‖₁ ≤ 2B(α + 2B)`` and
    ``‖ΔCov‖_F ≤ 2B·sqrt(α²/(4β_p) + 4B²)``; the larger is used. ``Wgt``: the
    paper's 3 and √2 (a value change leaves it unchanged).
    """
    alpha, r, b = max_rating - min_rating, max(abs(min_rating), abs(max_rating)), clamp
    sums = max(alpha, r)
    spread = alpha * alpha / (4.0 * beta_p)
    cov_l1 = max(2 * b * alpha + 3 * b * b, 2 * b * (alpha + 2 * b))
    cov_l2 = max(2 * b * math.sqrt(spread + b * b) + b * b, 2 * b * math.sqrt(spread + 4 * b * b))
    return {"GSum": (sums, sums), "GCount": (1.0, 1.0), "MSum": (sums, sums), "MCount": (1.0, 1.0),
            "Cov": (cov_l1, cov_l2), "Wgt": (3.0, math.sqrt(2.0))}


def user_sensitivities(min_rating: float, max_rating: float, clamp: float, max_ratings: int,
                       ) -> dict[str, tuple[float, float]]:
    """(L1, L2) sensitivity of each measurement when one user's whole row (≤ ξ ratings) is replaced.

    ``W = max(max, 0) − min(min, 0)`` bounds a row's sum over any ≤ ξ ratings to
    an interval of width ``ξW``; ``R = max |rating|``, ``B = clamp``. A user adds
    ``w r̂ r̂ᵀ`` to ``Cov`` and ``w e eᵀ`` to ``Wgt``: with ``w = 1/c`` (Laplace)
    their L1 norms are ``(Σ|r̂|)²/c ≤ cB²`` and ``c``, with ``w = 1/sqrt c``
    (Gaussian) their Frobenius norms ``‖r̂‖²/sqrt c ≤ sqrt(c) B²`` and ``sqrt c``;
    a replacement removes one and adds another (given the published ``MAvg``,
    as the per-rating analysis; other users' terms do not change).
    """
    xi, r, b = max_ratings, max(abs(min_rating), abs(max_rating)), clamp
    width = max(max_rating, 0.0) - min(min_rating, 0.0)
    root = math.sqrt(xi)
    return {"GSum": (xi * width, xi * width), "GCount": (float(xi), float(xi)),
            "MSum": (2 * xi * r, 2 * root * r), "MCount": (2.0 * xi, math.sqrt(2.0 * xi)),
            "Cov": (2 * xi * b * b, 2 * root * b * b), "Wgt": (2.0 * xi, 2 * root)}


def user_level_rating_epsilon(mech: "McSherryMironov", max_ratings: int) -> float:  # noqa: F821 (no import cycle)
    """The per-rating ε that makes ``mech``'s noise (ε, δ)-DP per *user* (≤ ξ ratings, replace one row).

    Measurement ``k`` with per-rating sensitivity ``Δ_k`` and share ``s_k`` has
    noise ``Δ_k/(s_k θ)``; per user it moves by ``U_k``. Laplace: the user's
    pure ε is ``θ Σ s_k U_k/Δ_k`` (ε per rating is ``θ Σ s_k``). Gaussian: the
    user's GDP μ is ``θ sqrt(Σ (s_k U_k/Δ_k)²)``; the per-rating ε is the one
    whose θ gives that μ the requested user-level ε at δ.
    """
    per_rating = mech.sensitivity
    user = user_sensitivities(mech.min_rating, mech.max_rating, mech.clamp, max_ratings)
    shares = mech.shares
    if mech.noise == "laplace":
        ratio = sum(s * user[k][0] / per_rating[k][0] for k, s in shares.items()) / sum(shares.values())
        return mech.epsilon / ratio
    from .reference import analytic_gaussian_epsilon

    ratio = math.sqrt(sum((s * user[k][1] / per_rating[k][1]) ** 2 for k, s in shares.items())
                      / sum(s * s for s in shares.values()))
    return analytic_gaussian_epsilon(ratio * analytic_gaussian_sigma(mech.epsilon, mech.delta), mech.delta)


def paper_epsilon(theta: float, noise: str, delta: float) -> float:
    """The paper's ε for the global parameter θ: θ (Laplace) or θ·sqrt(2 ln(2/δ)) (Gaussian)."""
    return theta if noise == "laplace" else theta * math.sqrt(2.0 * math.log(2.0 / delta))
