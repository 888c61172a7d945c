"""McSherry–Mironov: a differentially private recommender from noisy global effects and a noisy covariance.

Seed 002 (McSherry, Mironov, KDD 2009), docs/families/mcsherry-mironov.md. The trusted
server measures, with Laplace (pure DP) or Gaussian noise:

1. global effects: ``GSum``, ``GCount`` → ``G``; per item ``MSum``, ``MCount``
   → ``MAvg_i = (MSum_i + β_m G)/(MCount_i + β_m)``;
2. centred, clamped ratings per user (computed from the user's row and the
   published ``MAvg``): ``r̄_u = Σ_i (r_ui − MAvg_i)/(c_u + β_p)`` and
   ``r̂_ui = clamp(r_ui − MAvg_i − r̄_u, [−B, B])``;
3. the weighted item covariance ``Cov = Σ_u w_u r̂_u r̂_uᵀ`` and weight matrix
   ``Wgt = Σ_u w_u e_u e_uᵀ`` (``w_u = 1/c_u`` Laplace, ``1/sqrt(c_u)`` Gaussian),
   accumulated with sparse products (never users × items dense).

All six measurements are published; the cleaned covariance ``C̄ = (Cov + β·mean Cov)/(Wgt + β·mean Wgt)``
and its rank-k factors are post-processing. Each user predicts at its own end (``personal_output`` /
:func:`predict`): SVD (ridge user factor on the top-k eigenvectors) or kNN interpolation from ``C̄``.

Budget: the measurements get shares 0.01/0.01 (``GSum``/``GCount``: the
paper's 0.02), 0.095/0.095 (``MSum``/``MCount``: 0.19) and 0.79 split
``cov_fraction``/rest between ``Cov`` and ``Wgt`` [G]; measurement ``i`` gets
noise scale ``Δ_i/θ_i`` with ``θ_i = share_i · θ``. Laplace: ``θ = ε`` (the
accountant's ε is ``Σ θ_i = θ``, the paper's). Gaussian: each measurement is
``θ_i``-GDP, so the whole is ``θ·‖shares‖₂``-GDP and ``θ`` is chosen so the
accountant's ε at δ equals the requested ε — much less noise than the paper's
``ε = θ sqrt(2 ln(2/δ))`` (see :func:`paper_epsilon`).

Sensitivities (per rating; :func:`sensitivities`) are the larger of the paper's (one rating added: the
claim's add/remove) and a value change's (covered too: pair ``single_flip``). Deviations from the slides: the user
offset is shrunk towards 0 with ``β_p`` fictitious *centred* ratings (the slides' ``+ β_p G`` would push every ``r̂``
to −B); ``MAvg`` is also shrunk by the noise (issue 33).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Gt, Le
from scipy import sparse

from .accounting import Composition, GaussianRelease, LaplaceRelease
from .base import ParameterError, Mechanism, RoundCost, UserBatch, WorldInfo
from .matrix_completion import LowRankRows, gram, upper
from .mcsherry_mironov_large import LARGE_FROM_ITEMS, large_release, large_round_cost
from .reference import analytic_gaussian_sigma
from .mcsherry_mironov_sensitivity import (paper_epsilon, sensitivities,  # noqa: F401 (re-exported)
                                            user_level_rating_epsilon, user_sensitivities)

#: budget shares of the six measurements before the Cov/Wgt split (the paper's 0.02 / 0.19 / 0.79)
GLOBAL_SHARE, ITEM_SHARE, COVARIANCE_SHARE = 0.02, 0.19, 0.79
MEASUREMENTS = ("GSum", "GCount", "MSum", "MCount", "Cov", "Wgt")


@dataclass
class Release:
    """What the server publishes: the six noisy measurements and their post-processing."""

    measurements: dict[str, np.ndarray]  # noisy GSum, GCount (1,), MSum, MCount (n,), Cov, Wgt (upper triangles)
    G: float
    MAvg: np.ndarray
    cleaned: np.ndarray  # C̄, n x n
    factors: np.ndarray  # top-k eigenvectors of C̄ scaled by sqrt(eigenvalue): n x k


@dataclass
class McSherryMironovState:
    world: WorldInfo
    rows: list = field(default_factory=list)
    release: Release | None = None


@dataclass
class McSherryMironov(Mechanism, kind="mcsherry_mironov"):
    """The trusted server's McSherry–Mironov pipeline, re-run over the users of every round.

    One round (every present user sends its row) gives one release; a user
    answering ``a`` rounds is in ``a`` releases, and the claim composes them.
    """
    test_scenario: ClassVar[dict] = {
        "population": {"kind": "rank_one_matrix", "n_users": 30, "n_items": 40, "ratings_per_user": 20,
                       "test_fraction": 0.05},
        "panel": {},
        "mechanism": {"epsilon": 2.0, "min_rating": -1.0, "max_rating": 1.0, "rank": 2},
        "attack": [{"kind": "covariance_projection"}],
        "audit": {"design": "full_runs", "trials": 1000, "block_size": 250, "alpha": 0.05},
    }

    epsilon: Annotated[float, Gt(0)] = 1.0
    noise: Literal["laplace", "gaussian"] = "laplace"
    delta: Annotated[float, Ge(0), Le(0.1)] = 0.0
    min_rating: float = 1.0
    max_rating: float = 5.0
    clamp: Annotated[float, Gt(0)] = 1.0
    beta_m: Annotated[float, Ge(0)] = 15.0
    beta_p: Annotated[float, Gt(0)] = 20.0
    cov_fraction: Annotated[float, Gt(0), Le(0.99)] = 0.5
    clean_beta: Annotated[float, Ge(0)] = 0.1  # [G]; picked from {0, 0.1, 1, 20} on rank-one test RMSE
    rank: Annotated[int, Ge(1)] = 10
    ridge: Annotated[float, Gt(0)] = 1.0

    claim_model = "central"
    claim_unit = "rating"
    claim_neighbouring = "add_remove"  # the paper's; the noise also covers a value change (a weaker pair)
    covered_neighbouring: ClassVar[tuple] = ("replace",)

    def __post_init__(self) -> None:
        if not self.max_rating > self.min_rating:
            raise ParameterError("max_rating", f"must exceed min_rating ({self.min_rating:g})")
        if self.noise == "gaussian" and self.delta <= 0:
            raise ParameterError("delta", "Gaussian noise needs delta > 0")
        if self.noise == "laplace" and self.delta != 0:
            raise ParameterError("delta", "Laplace noise is pure DP: leave delta at 0")

    # ------------------------------------------------------------------ calibration

    @property
    def claim_delta(self) -> float:  # type: ignore[override]
        return self.delta

    @property
    def shares(self) -> dict[str, float]:
        cov = COVARIANCE_SHARE * self.cov_fraction
        return {"GSum": GLOBAL_SHARE / 2, "GCount": GLOBAL_SHARE / 2, "MSum": ITEM_SHARE / 2,
                "MCount": ITEM_SHARE / 2, "Cov": cov, "Wgt": COVARIANCE_SHARE - cov}

    @property
    def theta(self) -> float:
        """The paper's global parameter θ, chosen so the accountant's ε is ``epsilon``."""
        if self.noise == "laplace":
            return self.epsilon
        mu = 1.0 / analytic_gaussian_sigma(self.epsilon, self.delta)
        return mu / math.sqrt(sum(s * s for s in self.shares.values()))

    @property
    def sensitivity(self) -> dict[str, tuple[float, float]]:
        return sensitivities(self.min_rating, self.max_rating, self.clamp, self.beta_p)

    @property
    def spent_theta(self) -> float:
        """θ the noise is drawn with (a broken twin overrides it)."""
        return self.theta

    def noise_scales(self, theta: float | None = None) -> dict[str, float]:
        """Laplace scale or Gaussian σ of every measurement: sensitivity / θ_i."""
        theta = self.theta if theta is None else theta
        norm = 0 if self.noise == "laplace" else 1
        return {k: self.sensitivity[k][norm] / (share * theta) for k, share in self.shares.items()}

    def privacy_event(self, answers: int = 1):
        scales = self.noise_scales()
        if self.noise == "laplace":
            events = tuple(LaplaceRelease(scales[k], self.sensitivity[k][0]) for k in MEASUREMENTS)
        else:
            events = tuple(GaussianRelease(scales[k], self.sensitivity[k][1]) for k in MEASUREMENTS)
        return Composition(events, count=answers)

    # ------------------------------------------------------------------ the protocol

    def init_state(self, world: WorldInfo) -> McSherryMironovState:
        return McSherryMironovState(world)

    def make_queries(self, n_users, rng, state, rated=None) -> np.ndarray:
        return np.zeros((n_users, 0), dtype=bool)  # nothing to ask: users send their rows to the curator

    def round_cost(self, world: WorldInfo, users: float) -> RoundCost:
        """Two weighted Grams, an eigh (LAPACK: n^3 / 4 operations' time at 160-400 items), ridge solves; ~10 n x n
        arrays (a batched run: ~11, measured); a release: two noisy triangles, the cleaned matrix, its factors."""
        n, rows, k = world.n_items, users * world.ratings_per_user, self.rank
        if n > LARGE_FROM_ITEMS:
            return RoundCost(**large_round_cost(world, users, k))
        return RoundCost(operations=2 * rows * n + 3 * users * n + n ** 3 / 4 + rows * k * k + users * k ** 3,
                         state_bytes=10 * 8.0 * n * n, user_bytes=24.0 * world.ratings_per_user,
                         run_bytes=1500.0 + 88.0 * n * n + 16.0 * users * n,
                         release_bytes=8.0 * (2 * n * n + (k + 4) * n))

    def respond(self, users: UserBatch, queries, published, carried, rng):
        return sparse.csr_array(users.ratings), None  # one batch of rows, sparse (the curator is trusted)

    def aggregate(self, state: McSherryMironovState, queries, messages: np.ndarray) -> McSherryMironovState:
        state.rows.append(sparse.csr_array(messages))
        return state

    def end_round(self, state: McSherryMironovState, rng: np.random.Generator) -> McSherryMironovState:
        if state.rows:
            ratings, state.rows = sparse.vstack(state.rows, format="csr"), []  # (the batches go before the release)
            state.release = self.release(ratings, rng)
        return state

    def publish(self, state: McSherryMironovState) -> Release | None:
        return state.release

    def personal_output(self, users: UserBatch, carried, state: McSherryMironovState) -> LowRankRows | None:
        """Each user's SVD predictor ``clamp(MAvg + r̄_u + Q p_u)``, as low-rank rows.

        Coefficients ``[1, r̄_u, p_u]`` over the basis ``[MAvg; 1; Qᵀ]``, clamped
        to the rating range (as :func:`predict`): only the published release and
        the user's own row enter it.
        """
        if state.release is None:
            return None
        offset, factor = user_factors(self, state.release, users.ratings)
        return LowRankRows(np.column_stack([np.ones(len(users)), offset, factor]), output_basis(state.release),
                           (self.min_rating, self.max_rating), centring=2)

    # ------------------------------------------------------------------ measurements

    def _noise(self, shape, scale: float, rng: np.random.Generator) -> np.ndarray:
        if self.noise == "laplace":
            return rng.laplace(0.0, scale, shape)
        return rng.normal(0.0, scale, shape)

    def release(self, ratings: sparse.csr_array, rng: np.random.Generator) -> Release:
        """The noisy measurements of a ratings matrix (users x items, CSR) and their post-processing."""
        if ratings.shape[1] > LARGE_FROM_ITEMS:  # Netflix's catalogue: the same release within a few GB
            return Release(*large_release(self, ratings, rng))
        ratings, scales, n = self._clipped(ratings), self.noise_scales(self.spent_theta), ratings.shape[1]
        rated = _pattern(ratings)
        m: dict[str, np.ndarray] = {}
        m["GSum"] = np.array([ratings.sum()]) + self._noise(1, scales["GSum"], rng)
        m["GCount"] = np.array([float(ratings.nnz)]) + self._noise(1, scales["GCount"], rng)
        m["MSum"] = np.asarray(ratings.sum(axis=0)).ravel() + self._noise(n, scales["MSum"], rng)
        m["MCount"] = np.asarray(rated.sum(axis=0), float).ravel() + self._noise(n, scales["MCount"], rng)
        G, mavg = self.global_effects(m)
        centred, weight, upper = self.centred(ratings, mavg), self.weights(ratings), np.triu_indices(n)
        cov = _weighted_gram(centred, weight)[upper]
        wgt = _weighted_gram(rated.astype(float), weight)[upper]
        m["Cov"] = cov + self._noise(cov.shape, scales["Cov"], rng)
        m["Wgt"] = wgt + self._noise(wgt.shape, scales["Wgt"], rng)
        cleaned = clean(_symmetric(m["Cov"], n), _symmetric(m["Wgt"], n), self.clean_beta)
        return Release(m, G, mavg, cleaned, top_factors(cleaned, self.rank))

    # ------------------------------------------------------------------ the white box

    def statistics(self, state: McSherryMironovState) -> dict[str, np.ndarray] | None:
        """The six noisy measurements of the last release (the cleaning and factors are post-processing)."""
        return None if state.release is None else {k: v.copy() for k, v in state.release.measurements.items()}

    def statistic_noise(self) -> dict[str, tuple[str, float]]:
        return {k: (self.noise, scale) for k, scale in self.noise_scales().items()}

    def white_box_means(self, rows: UserBatch, statistics: dict, rounds=None) -> dict[str, np.ndarray]:
        """What each row adds to the per-item measurements given each run's published ``MAvg``: ``MSum``,
        ``MCount``, ``Cov`` (``w r̂ r̂ᵀ``) and ``Wgt`` (``w e eᵀ``), upper triangles. The global ``GSum`` and
        ``GCount`` are left out: every user adds to them, so their likelihood ratio needs the others' totals."""
        values, mask = (np.asarray(a, float) for a in _dense(self, rows))
        _, mavg = self._effects(statistics)
        centred = _centred_dense(self, values, mask, mavg)
        weight = self.weights(sparse.csr_array(mask))[:, None]
        return {"MSum": values + 0 * mavg, "MCount": mask + 0 * mavg,
                "Cov": weight * upper(centred[..., :, None] * centred[..., None, :]),
                "Wgt": weight * upper(mask[:, :, None] * mask[:, None, :]) + 0 * mavg[..., :1]}

    def panel_runs(self, rows: UserBatch, n_runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n_runs`` releases of the panel ``rows`` at once: their six noisy measurements (runs on axis 0).

        The draws are the engine's for one run (``release``): the same order and shapes with a runs axis."""
        values, mask = _dense(self, rows)
        scales = self.noise_scales(self.spent_theta)
        m: dict[str, np.ndarray] = {}
        m["GSum"] = values.sum() + self._noise((n_runs, 1), scales["GSum"], rng)
        m["GCount"] = mask.sum() + self._noise((n_runs, 1), scales["GCount"], rng)
        m["MSum"] = values.sum(axis=0) + self._noise((n_runs, values.shape[1]), scales["MSum"], rng)
        m["MCount"] = mask.sum(axis=0) + self._noise((n_runs, values.shape[1]), scales["MCount"], rng)
        _, mavg = self._effects(m)
        centred = _centred_dense(self, values[None], mask[None], mavg[:, None, :]) * np.sqrt(
            self.weights(sparse.csr_array(mask)))[:, None]
        cov = upper(np.swapaxes(centred, 1, 2) @ centred)
        root = mask * np.sqrt(self.weights(sparse.csr_array(mask)))[:, None]
        wgt = upper(root.T @ root)
        m["Cov"] = cov + self._noise(cov.shape, scales["Cov"], rng)
        m["Wgt"] = wgt + self._noise((n_runs, wgt.size), scales["Wgt"], rng)
        return m

    def noisy_measurements(self, release: Release) -> list[tuple[np.ndarray, str, float]]:
        """(values, noise kind, published scale) of every measurement: what an attack can model."""
        scales = self.noise_scales()
        return [(release.measurements[k], self.noise, scales[k]) for k in MEASUREMENTS]

    def global_effects(self, m: dict[str, np.ndarray]) -> tuple[float, np.ndarray]:
        """``G`` and ``MAvg`` from the noisy sums and counts (shrunk by their noise, clipped)."""
        G, mavg = self._effects(m)
        return float(G), mavg

    def _effects(self, m: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``global_effects`` of one release, or of many with runs on axis 0."""
        mid = (self.min_rating + self.max_rating) / 2
        count = np.asarray(m["GCount"])[..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            G = np.clip(np.where(count >= 1, np.asarray(m["GSum"])[..., 0] / count, mid), self.min_rating,
                        self.max_rating)
        scale = self.noise_scales()  # the centring's posterior-mean shrinkage β_m(1 + noise variance / count)
        var = (2.0 if self.noise == "laplace" else 1.0) * (scale["MSum"]**2 + G[..., None]**2 * scale["MCount"]**2)
        prior = self.beta_m * (1.0 + var / np.maximum(m["MCount"], np.sqrt(var)))  # (centring.effects, s = 1 star)
        mavg = G[..., None] + (m["MSum"] - G[..., None] * m["MCount"]) / np.maximum(m["MCount"] + prior, 1.0)
        return G, np.clip(mavg, self.min_rating, self.max_rating)

    def _clipped(self, ratings: sparse.csr_array) -> sparse.csr_array:  # (shares the index arrays)
        return sparse.csr_array((np.clip(ratings.data, self.min_rating, self.max_rating), ratings.indices,
                                 ratings.indptr), shape=ratings.shape)

    def offsets(self, ratings: sparse.csr_array, mavg: np.ndarray) -> np.ndarray:
        """``r̄_u``: each user's mean deviation from ``MAvg``, shrunk by ``β_p`` fictitious zeros."""
        dev = ratings.data - mavg[ratings.indices]
        sums = np.add.reduceat(dev, ratings.indptr[:-1]) if dev.size else np.zeros(ratings.shape[0])
        counts = np.diff(ratings.indptr)
        return np.where(counts > 0, sums, 0.0) / (counts + self.beta_p)  # reduceat repeats a value for empty rows

    def centred(self, ratings: sparse.csr_array, mavg: np.ndarray) -> sparse.csr_array:
        """``r̂``: ratings minus ``MAvg`` and the user offset, clamped to [−B, B], same sparsity."""
        ratings = self._clipped(ratings)
        offset = np.repeat(self.offsets(ratings, mavg), np.diff(ratings.indptr))
        values = np.clip(ratings.data - mavg[ratings.indices] - offset, -self.clamp, self.clamp)
        # a centred value of exactly 0 must stay an entry (it still counts as rated): keep the structure
        return sparse.csr_array((values, ratings.indices, ratings.indptr), shape=ratings.shape)

    def weights(self, ratings: sparse.csr_array) -> np.ndarray:
        counts = np.maximum(np.diff(ratings.indptr), 1).astype(float)
        return 1.0 / counts if self.noise == "laplace" else 1.0 / np.sqrt(counts)


@dataclass
class McSherryMironovPerUserClaim(McSherryMironov, kind="mcsherry_mironov_per_user_claim"):
    """Broken twin: calibrated per rating (as the paper) but claims the same ε per *user*."""
    negative_control = True
    #: the shipped scenario's world: 80 ratings per user, so replacing a user moves 160 items (violated)
    test_scenario = {**McSherryMironov.test_scenario,
                     "population": {"kind": "rank_one_matrix", "n_users": 100, "n_items": 160,
                                    "ratings_per_user": 80, "test_fraction": 0.05}}

    claim_unit, claim_neighbouring = "user", "replace"
    covered_neighbouring: ClassVar[tuple] = ()


def _dense(mech: McSherryMironov, rows: UserBatch) -> tuple[np.ndarray, np.ndarray]:
    """Clipped ratings and the rated mask of a few rows, dense (users x items)."""
    ratings = mech._clipped(sparse.csr_array(rows.ratings, dtype=float))
    return ratings.toarray(), _pattern(ratings).toarray()


def _centred_dense(mech: McSherryMironov, values: np.ndarray, mask: np.ndarray, mavg: np.ndarray) -> np.ndarray:
    """``r̂`` of dense rows against ``MAvg`` (axes broadcast: runs, users, items); 0 off the rated items."""
    deviation = (values - mavg) * mask
    offset = deviation.sum(axis=-1, keepdims=True) / (mask.sum(axis=-1, keepdims=True) + mech.beta_p)
    return np.clip(values - mavg - offset, -mech.clamp, mech.clamp) * mask


def _pattern(ratings: sparse.csr_array) -> sparse.csr_array:
    return sparse.csr_array((np.ones(ratings.nnz), ratings.indices, ratings.indptr), shape=ratings.shape)


def _weighted_gram(rows: sparse.csr_array, weight: np.ndarray) -> np.ndarray:
    """``Σ_u w_u x_u x_uᵀ`` (items x items, dense) for weights ``w ≥ 0``: the Gram matrix of the rows
    scaled by ``sqrt(w)``, through dense blocks of a few users (BLAS; far faster than sparse x sparse)."""
    scaled = sparse.csr_array(rows, dtype=float, copy=True)
    scaled.data *= np.repeat(np.sqrt(weight), np.diff(scaled.indptr))
    return gram(scaled)


def _symmetric(upper: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, n))
    out[np.triu_indices(n)] = upper
    return out + np.triu(out, 1).T


def clean(cov: np.ndarray, wgt: np.ndarray, beta: float) -> np.ndarray:
    """``C̄_ij = (Cov_ij + β mean Cov)/(Wgt_ij + β mean Wgt)``; denominators floored (noisy weights can be ≤ 0)."""
    den = wgt + beta * wgt.mean()
    floor = max(1e-3 * abs(float(wgt.mean())) * max(beta, 1.0), 1e-9)
    return (cov + beta * cov.mean()) / np.maximum(den, floor)


def output_basis(release: Release) -> np.ndarray:
    """The item vectors users' predicted rows combine: ``MAvg``, all-ones (the offset) and the factors."""
    n = release.MAvg.size
    return np.vstack([release.MAvg, np.ones(n), release.factors.T])


def top_factors(cleaned: np.ndarray, rank: int) -> np.ndarray:
    """The rank-k approximation of C̄ as factors ``V sqrt(Λ)`` (positive eigenvalues only)."""
    values, vectors = np.linalg.eigh((cleaned + cleaned.T) / 2)
    order = np.argsort(values)[::-1][:rank]
    return vectors[:, order] * np.sqrt(np.maximum(values[order], 0.0))


def user_factors(mech: McSherryMironov, release: Release, ratings: sparse.csr_array) -> tuple[np.ndarray, np.ndarray]:
    """Each user's offset ``r̄_u`` and ridge factor ``p_u = (Q_φᵀQ_φ + λI)⁻¹ Q_φᵀ r̂_uφ`` (computed locally).

    ``Q_φᵀQ_φ`` of every user at once is one sparse product: the rated pattern
    (users x items) times the items' flattened ``Q_i Q_iᵀ`` (items x k²).
    """
    ratings = mech._clipped(sparse.csr_array(ratings))
    q = release.factors
    k = q.shape[1]
    offsets = mech.offsets(ratings, release.MAvg)
    rhs = np.asarray(mech.centred(ratings, release.MAvg) @ q)
    outer = (q[:, :, None] * q[:, None, :]).reshape(q.shape[0], k * k)
    gram = np.asarray(_pattern(ratings) @ outer).reshape(-1, k, k) + mech.ridge * np.eye(k)
    return offsets, np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]


def predict(mech: McSherryMironov, release: Release, ratings: sparse.csr_array, users: np.ndarray,
            items: np.ndarray, predictor: Literal["svd", "knn"] = "svd", knn_power: float = 2.0) -> np.ndarray:
    """Predicted ratings of (user, item) pairs, each from the user's own rows and the release.

    ``svd``: ``MAvg_i + r̄_u + Q_i p_u``. ``knn``: ``MAvg_i + r̄_u`` plus the
    user's centred ratings of its rated items ``j`` averaged with weights
    ``max(ρ_ij, 0)^knn_power`` (ρ the correlation read from ``C̄``), shrunk by
    one unit of weight.
    """
    ratings = mech._clipped(sparse.csr_array(ratings))
    users, items = np.asarray(users, np.int64), np.asarray(items, np.int64)
    if predictor == "svd":
        offsets, factors = user_factors(mech, release, ratings)
        pred = release.MAvg[items] + offsets[users] + np.einsum("pk,pk->p", release.factors[items], factors[users])
    elif predictor == "knn":
        offsets = mech.offsets(ratings, release.MAvg)
        centred = mech.centred(ratings, release.MAvg)
        diag = np.sqrt(np.maximum(np.diag(release.cleaned), 1e-12))
        rho = release.cleaned / diag[:, None] / diag[None, :]
        counts = np.diff(centred.indptr)[users]
        pair = np.repeat(np.arange(users.size), counts)
        starts = np.repeat(centred.indptr[users], counts)
        pos = starts + np.arange(pair.size) - np.repeat(np.cumsum(counts) - counts, counts)
        neighbour, value = centred.indices[pos], centred.data[pos]
        w = np.maximum(rho[items[pair], neighbour], 0.0) ** knn_power
        w = np.where(neighbour == items[pair], 0.0, w)
        num = np.bincount(pair, w * value, minlength=users.size)
        den = np.bincount(pair, w, minlength=users.size) + 1.0
        pred = release.MAvg[items] + offsets[users] + num / den
    else:
        raise ParameterError("predictor", f"must be 'svd' or 'knn', got {predictor!r}")
    return np.clip(pred, mech.min_rating, mech.max_rating)


def fit_and_predict(train: sparse.csr_array, test_users: np.ndarray, test_items: np.ndarray, epsilon: float,
                    delta: float, rng: np.random.Generator, predictor: Literal["svd", "knn"] = "svd",
                    **params) -> np.ndarray:
    """One private release from ``train`` (users x items CSR) and predictions for the test pairs.

    ``delta > 0`` uses Gaussian noise (weights 1/sqrt c), ``delta = 0`` Laplace;
    ``params`` are :class:`McSherryMironov` fields (ratings range, β's, rank, …).
    """
    noise = "gaussian" if delta > 0 else "laplace"
    mech = McSherryMironov(epsilon=epsilon, noise=noise, delta=delta, **params)
    release = mech.release(sparse.csr_array(train), rng)
    return predict(mech, release, train, test_users, test_items, predictor)
