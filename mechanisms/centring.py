"""Centring star ratings before matrix completion: global mean, item averages and user offsets, as
McSherry–Mironov do (docs/families/mcsherry-mironov.md), for the Gram protocols (Frank–Wolfe, PGD, Oja).

Together they are the bias model ``μ + b_i + b_u`` (Koren's baseline predictor, ``recaudit.mechanisms.baselines``):
``MAvg_i = G + (S_i + β_m·0)/(N_i + β_m)`` shrinks each item's mean deviation towards the global
mean ``G`` with ``β_m`` fictitious ratings; a user's offset ``r̄_u = Σ_i (r_ui − MAvg_i)/(c_u + β_p)``
is computed on the user's device and never sent. The protocols complete ``r − MAvg − r̄_u`` and
each user predicts ``MAvg + r̄_u + (completed row)``, clamped to the star scale: ``MAvg + r̄_u`` alone is the
run's *private bias model*, which reports score beside the whole prediction.

Private sums are *weighted* (``w_u ≤ 1``, below): the weighted count ``N_i`` of an item is about ``w̄`` times its
number of ratings, so ``β_m`` fictitious ratings are ``β_m·w̄`` in its units — ``w̄ = weights(c̄)`` of a user with
the world's mean activity ``c̄`` (``WorldInfo.ratings_per_user``, the catalogue's, public). Shrinking by ``β_m``
weighted units instead (before issue 33) shrank MovieLens-100K's items ~10x too hard: the noiseless private
centring gave 0.991 against the exact centring's 0.952 and the bias model's 0.947 (benchmarks/fw_diagnosis.py).

Where the item statistics come from (``centre``):

* ``user``: no item statistics (``MAvg`` = the scale's midpoint): only the free local offset;
* ``public``: exact sums over a public panel of users whose rows the server sees in the clear;
* ``private``: two leading rounds in which every user sends ``w_u e_u`` (its rated pattern) and
  ``w_u (r_u − mid)/h`` (``h`` the scale's half-width), ``w_u = min(1, C/sqrt(c_u))`` so each
  message has L2 norm ≤ C; the server publishes both sums with Gaussian noise. Replacing one
  user moves each by at most ``2C``: two Gaussian releases the accountant composes with the
  protocol's own.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

#: the leading rounds of private centring: the rated pattern's sums, then the ratings' sums
COUNTS, SUMS = 0, 1


@dataclass(frozen=True)
class GlobalEffects:
    """What the server publishes for centring: the global mean and each item's average."""

    G: float
    MAvg: np.ndarray


def weights(counts: np.ndarray, bound: float) -> np.ndarray:
    """``w_u = min(1, C/sqrt(c_u))``: a user's centring message has L2 norm at most ``C``."""
    return np.minimum(1.0, bound / np.sqrt(np.maximum(counts, 1)))


def message(ratings: sparse.csr_array, phase: int, scale: tuple[float, float], bound: float) -> sparse.csr_array:
    """A user's centring message in round ``phase``: ``w_u e_u`` (COUNTS) or ``w_u (r_u − mid)/h`` (SUMS)."""
    lo, hi = scale
    counts = np.diff(ratings.indptr)
    w = np.repeat(weights(counts, bound), counts)
    values = (np.ones(ratings.nnz) if phase == COUNTS
              else (np.clip(ratings.data, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2))
    return sparse.csr_array((w * values, ratings.indices, ratings.indptr), shape=ratings.shape)


def effects(counts: np.ndarray, sums: np.ndarray, scale: tuple[float, float], beta_m: float,
            sigma: float = 0.0, weight: float = 1.0) -> GlobalEffects:
    """``G`` and ``MAvg`` from (noisy) weighted counts and scaled sums of deviations from the midpoint.

    ``weight``: a typical rating's weight in the sums (``w̄``), so ``β_m`` fictitious ratings count ``β_m·w̄``.
    With noise of standard deviation ``sigma`` on both, each item is shrunk as a posterior mean would (post-processing):
    a sum ``S_i = b_i N_i + e`` with sampling variance ``N_i w̄ s²`` and the noise's ``(hσ)²`` (``h`` the scale's
    half-width), under a prior ``b_i ~ N(0, s²/β_m)``, gives ``b̂_i = S_i/(N_i + β_m (w̄ + (hσ)²/(s² N_i)))`` with
    ``s`` = 1 star (``N_i`` floored at σ). An item whose noisy count is small next to the noise keeps about ``G``.
    On MovieLens-100K (split 0, mean of 3 noise draws) this gives 1.044 / 1.014 / 0.989 at ε = 1 / 8 / 27 against
    1.103 / 1.019 / 0.985 with the former ``β_m w̄ + 4σ`` (benchmarks/fw_diagnosis.py documents the commands).
    """
    lo, hi = scale
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    total = counts.sum()
    G = float(np.clip(mid + half * sums.sum() / total, lo, hi)) if total >= 1 else mid
    counts = np.maximum(counts, 0.0)
    prior = beta_m * (weight + (half * sigma) ** 2 / np.maximum(counts, max(sigma, 1e-12)))
    mavg = G + (half * sums - (G - mid) * counts) / (counts + prior)
    return GlobalEffects(G, np.clip(mavg, lo, hi))


def exact(ratings: sparse.csr_array, scale: tuple[float, float], beta_m: float) -> GlobalEffects:
    """The effects of ``ratings`` without noise or weights (a public panel's)."""
    lo, hi = scale
    counts = np.bincount(ratings.indices, minlength=ratings.shape[1]).astype(float)
    sums = np.bincount(ratings.indices, (np.clip(ratings.data, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2),
                       minlength=ratings.shape[1])
    return effects(counts, sums, scale, beta_m)


def midpoint(n_items: int, scale: tuple[float, float]) -> GlobalEffects:
    """No item statistics: every item's average is the scale's midpoint."""
    mid = (scale[0] + scale[1]) / 2
    return GlobalEffects(mid, np.full(n_items, mid))


def offsets(ratings: sparse.csr_array, mavg: np.ndarray, beta_p: float) -> np.ndarray:
    """``r̄_u``: each user's mean deviation from ``MAvg``, shrunk by ``β_p`` fictitious zeros (local)."""
    counts = np.diff(ratings.indptr)
    rows = np.repeat(np.arange(ratings.shape[0]), counts)
    return np.bincount(rows, ratings.data - mavg[ratings.indices], minlength=ratings.shape[0]) / (counts + beta_p)


def centred(ratings: sparse.csr_array, mavg: np.ndarray, offset: np.ndarray) -> sparse.csr_array:
    """``r − MAvg − r̄_u`` on the same entries (a centred 0 stays an entry)."""
    values = ratings.data - mavg[ratings.indices] - np.repeat(offset, np.diff(ratings.indptr))
    return sparse.csr_array((values, ratings.indices, ratings.indptr), shape=ratings.shape)
