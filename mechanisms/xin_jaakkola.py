"""Xin–Jaakkola: public users train an item–item model, private users answer once with 2nd-order responses.

Seed 000 (Xin, Jaakkola, "Controlling privacy in recommender systems", NIPS
2014), docs/families/xin-jaakkola.md.

* **Model.** Ratings centred by the item means ``μ`` of the public users; a
  user's missing entries are predicted from its observed ones by Eq. 4,
  ``X̂_{φᶜ} = Σ_{φᶜ,φ}(λ'I + Σ_{φ,φ})⁻¹ Y_φ`` (:func:`complete`).
* **EM on public users.** E-step: complete every public user by Eq. 4.
  M-step: ``Σ ← (n m)^{-1/2} (Σ_i x_i x_iᵀ)^{1/2}`` (symmetric PSD square root,
  optionally truncated to rank r) (:func:`fit_em`).
* **Private users** receive ``(μ, Σ)`` (their public query), complete their own
  vector ``r`` over all ``m`` items and answer once (:func:`respond`):
  ``pmd`` (K candidate vectors, each coordinate a permutation of the K levels,
  greedy pair swaps lowering ``(1/K)Σ_j‖a_j a_jᵀ − r'r'ᵀ‖²_F``, one candidate
  released uniformly: :func:`pmd_candidates`), ``pmc`` (``±h·sign(r')``, ``h =
  Σ|r'_i|/m``: :func:`pmc_response`), the baselines ``exact`` (``±r'``, not
  private), ``sslp`` (our reading of the paper's "sampling strategy for local
  privacy": a private user contributes ``±r'`` with probability
  ``min(1, ε²/m)``, so ``n`` users count as ``n ε²/m`` effective samples — a
  utility emulation of the sample-size loss, not a randomizer with a
  guarantee), ``full_em`` (the raw row; the server re-runs EM over public and
  private users: not private), ``none`` (public users only) and
  :class:`XinJaakkolaLaplace` (Laplace noise on the completed vector).
* **Server.** Each response enters the M-step once with weight
  ``private_weight`` (½ in the paper): ``S = Σ_public x xᵀ + w Σ_private u uᵀ``,
  ``n = n_public + w n_private``; after every ``update_every`` (20) private users
  it re-completes the public users (``update_iterations`` EM steps) and
  publishes the new ``(μ, Σ)``. ``μ`` never changes: private users give no
  first-order information.

Deviations [G]: users answer with the model broadcast at the start of their
round (run the churn world with ``batch_size: 20`` and about 20 arrivals per
tick to match the paper's update-every-20); PMD applies to the completed
vector, continuous off the rated set (the candidates are discrete, the target
``r'`` need not be); ``λ'`` (``ridge``) is a parameter.

None of these responses is differentially private: they claim nothing
(:meth:`PrivacyClaim.none`); the Laplace baseline claims ε per user from the
accountant (see :class:`XinJaakkolaLaplace`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Gt, Le
from scipy import sparse

from .accounting import LaplaceRelease
from .base import ParameterError, PrivacyClaim, Mechanism, UserBatch, WorldInfo
from .costs import CALL_OPERATIONS, RoundCost
from .item_covariance import (centred, complete, fit_em, initial_sigma, item_means, m_step,  # noqa: F401
                              psd_sqrt)

Response = Literal["pmd", "pmc", "exact", "sslp", "full_em", "none"]


# ---------------------------------------------------------------------- private responses


def pmd_objective(candidates: np.ndarray, mu: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``(1/K) Σ_j ‖a_j a_jᵀ − r'r'ᵀ‖²_F`` per user (``a_j = x_j − μ``; candidates (n, K, m), target r' (n, m))."""
    a = candidates - mu
    norm2 = np.einsum("nkm,nkm->nk", a, a)
    dot = np.einsum("nkm,nm->nk", a, target)
    r2 = np.einsum("nm,nm->n", target, target)
    return np.mean(norm2 ** 2 - 2 * dot ** 2, axis=1) + r2 ** 2


def pmd_candidates(target: np.ndarray, mu: np.ndarray, levels: np.ndarray, rng: np.random.Generator,
                   sweeps: int = 2, swaps_per_coordinate: int | None = None) -> np.ndarray:
    """K candidate vectors per user (n, K, m); every coordinate holds each level exactly once.

    Starts from independent random permutations per coordinate, then sweeps the
    coordinates: at each, ``swaps_per_coordinate`` (default K) times, picks a random
    pair of candidates per user and swaps their entries when that lowers
    ``Σ_j ‖a_j‖⁴ − 2(a_j·r')²`` (the objective minus a constant). Vectorised over users.
    """
    levels = np.asarray(levels, float)
    n, m = target.shape
    k = levels.size
    swaps = k if swaps_per_coordinate is None else swaps_per_coordinate
    perm = np.argsort(rng.random((n, m, k)), axis=2)
    cand = np.ascontiguousarray(np.transpose(levels[perm], (0, 2, 1)))  # (n, K, m)
    a = cand - mu
    norm2 = np.einsum("nkm,nkm->nk", a, a)
    dot = np.einsum("nkm,nm->nk", a, target)
    users = np.arange(n)
    for _ in range(sweeps):
        for i in range(m):
            r_i = target[:, i]
            for _ in range(swaps):
                p = rng.integers(0, k, n)
                q = (p + rng.integers(1, k, n)) % k
                ap, aq = a[users, p, i], a[users, q, i]
                np_, nq = norm2[users, p], norm2[users, q]
                dp, dq = dot[users, p], dot[users, q]
                np_new, nq_new = np_ - ap * ap + aq * aq, nq - aq * aq + ap * ap
                dp_new, dq_new = dp + (aq - ap) * r_i, dq + (ap - aq) * r_i
                change = (np_new ** 2 - 2 * dp_new ** 2 + nq_new ** 2 - 2 * dq_new ** 2
                          - np_ ** 2 + 2 * dp ** 2 - nq ** 2 + 2 * dq ** 2)
                s = np.flatnonzero(change < -1e-12)
                if s.size == 0:
                    continue
                a[s, p[s], i], a[s, q[s], i] = aq[s], ap[s]
                norm2[s, p[s]], norm2[s, q[s]] = np_new[s], nq_new[s]
                dot[s, p[s]], dot[s, q[s]] = dp_new[s], dq_new[s]
    return a + mu


def pmc_response(target: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``±h·sign(r')`` with ``h = Σ_i|r'_i|/m``, the sign a fair coin per user (Theorem 4.2)."""
    h = np.mean(np.abs(target), axis=1, keepdims=True)
    coin = np.where(rng.random((target.shape[0], 1)) < 0.5, -1.0, 1.0)
    return coin * h * np.sign(target)


def pmc_rated_response(ratings: sparse.csr_array, mu: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """PMC on the rated items only: ``±h·sign(r_i − μ_i)`` there (``h`` their mean ``|r_i − μ_i|``), 0 elsewhere.

    Not the paper's (it uses the completed vector); kept to show what the zeros cost:
    the M-step reads them as "no deviation from μ".
    """
    target = centred(ratings, mu)
    counts = np.maximum(np.diff(target.indptr), 1)
    h = np.add.reduceat(np.abs(target.data), target.indptr[:-1]) if target.nnz else np.zeros(target.shape[0])
    h = np.where(np.diff(target.indptr) > 0, h, 0.0) / counts
    coin = np.where(rng.random(target.shape[0]) < 0.5, -1.0, 1.0)
    out = np.zeros(target.shape)
    rows = np.repeat(np.arange(target.shape[0]), np.diff(target.indptr))
    out[rows, target.indices] = (coin * h)[rows] * np.sign(target.data)
    return out


# ---------------------------------------------------------------------- the protocol


@dataclass(frozen=True)
class ItemModel:
    """What the server publishes: item means ``μ`` and the item–item matrix ``Σ`` (arrays never mutated)."""

    mu: np.ndarray
    sigma: np.ndarray
    private_users: float = 0.0  # weighted private users in the M-step

    def predict(self, ratings: sparse.csr_array, ridge: float, levels: np.ndarray | None = None) -> np.ndarray:
        """Completed rating vectors (users x items) of users with these rows, clipped to the level range."""
        out = complete(self.sigma, centred(ratings, self.mu), ridge) + self.mu
        return out if levels is None else np.clip(out, levels.min(), levels.max())


@dataclass
class XinJaakkolaState:
    world: WorldInfo
    model: ItemModel
    public: sparse.csr_array | None = None  # centred public rows
    moment: np.ndarray | None = None  # Σ_private w u uᵀ
    weight: float = 0.0  # Σ_private w
    pending: int = 0  # private answers since the last update
    raw_private: list = field(default_factory=list)  # full_em only: the private rows themselves


@dataclass
class XinJaakkola(Mechanism, kind="xin_jaakkola"):
    """Public users' EM, private users' one-shot 2nd-order responses (``response``), updates every 20."""
    test_scenario: ClassVar[dict] = {
        "population": {"kind": "sbm_stars", "n_items": 40, "ratings_per_user": 25, "held_out": 5,
                       "user_cluster_weights": [1, 1], "item_cluster_weights": [1, 1],
                       "star_probability": [[[0.02, 0.05, 0.13, 0.35, 0.45], [0.45, 0.35, 0.13, 0.05, 0.02]],
                                            [[0.45, 0.35, 0.13, 0.05, 0.02], [0.02, 0.05, 0.13, 0.35, 0.45]]]},
        "churn": {"arrival_rate": 40, "mean_lifetime": 1.0, "horizon": 1.0, "query_interval": 0.25,
                  "release_interval": 1.0, "batch_size": 20},
        "mechanism": {"response": "pmd", "public_users": 20},
        "attack": [{"kind": "pmd_pairwise"}],
        "audit": {"method": "one-run", "trials": 200, "view": "messages", "alpha": 0.05},
    }

    response: Response = "pmd"
    public_users: Annotated[int, Ge(0)] = 100
    levels: list[float] = field(default_factory=lambda: [1.0, 2.0, 3.0, 4.0, 5.0])
    ridge: Annotated[float, Gt(0)] = 0.01  # [G] λ'; Σ is (nm)^(-1/2) S^(1/2), so λ' is on its scale (SBM held-out pick)
    rank: Annotated[int, Ge(1)] | None = None
    em_iterations: Annotated[int, Ge(1)] = 15
    update_iterations: Annotated[int, Ge(1)] = 2
    update_every: Annotated[int, Ge(1)] = 20
    private_weight: Annotated[float, Gt(0), Le(1)] = 0.5
    pmd_sweeps: Annotated[int, Ge(1)] = 2
    sslp_epsilon: Annotated[float, Gt(0)] = 5.0
    #: PMC over the completed vector (the paper) or over the rated items only, zeros elsewhere (a variant)
    pmc_support: Literal["completed", "rated"] = "completed"

    claim_model = "none"
    audit_pair = "star_pattern"  # same rated set and values in both worlds, other pairwise structure

    def __post_init__(self) -> None:
        if len(self.levels) < 2 or len(set(self.levels)) != len(self.levels):
            raise ParameterError("levels", "needs at least two distinct rating levels")
        self.levels = sorted(float(v) for v in self.levels)

    @property
    def level_array(self) -> np.ndarray:
        return np.asarray(self.levels, float)

    # ------------------------------------------------------------------ claim: none (see the module doc)

    def privacy_event(self, answers: int = 1):
        return None

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        return PrivacyClaim.none()

    # ------------------------------------------------------------------ server side

    def init_state(self, world: WorldInfo) -> XinJaakkolaState:
        mid = float(np.mean(self.levels))
        m = world.n_items
        return XinJaakkolaState(world, ItemModel(np.full(m, mid), np.zeros((m, m))), moment=np.zeros((m, m)))

    def public_panel(self) -> int:
        return self.public_users

    def round_cost(self, world: WorldInfo, users: float) -> RoundCost:
        """Each answer completes a row (a w x w solve, w x n products), runs PMD's swaps and adds an n x n
        moment; PMD's sweeps are a Python loop per batch (~25 numpy calls per swap; a batch per update); every
        ``update_every`` answers EM re-completes the public panel (``update_iterations``, each an n^3 square
        root), the first fit takes ``em_iterations``; per user a completed row (n floats)."""
        n, w, public, k = world.n_items, world.ratings_per_user, self.public_users, len(self.levels)
        swaps = self.pmd_sweeps * n * k if self.response == "pmd" else 0
        row = w ** 3 + w * n + n * n + 30 * swaps
        em = public * (w ** 3 + w * n + n * n) + 10.0 * n ** 3
        updates = users / self.update_every
        return RoundCost(operations=users * row + max(1.0, updates) * 25 * swaps * CALL_OPERATIONS
                         + updates * self.update_iterations * em,
                         once=self.em_iterations * em, state_bytes=8.0 * (6 * n * n + public * n),
                         user_bytes=8.0 * n)

    def init_public(self, state: XinJaakkolaState, rows: UserBatch) -> XinJaakkolaState:
        """Fit ``μ`` and ``Σ`` by EM on the public panel's rows."""
        ratings = rows.ratings
        mu = item_means(ratings, state.world.n_items)
        state.public = centred(ratings, mu)
        sigma = fit_em(state.public, self.ridge, self.em_iterations, self.rank)
        state.model = ItemModel(mu, sigma)
        return state

    def broadcast(self, state: XinJaakkolaState) -> ItemModel:
        return state.model

    def make_queries(self, n_users, rng, state: XinJaakkolaState, rated=None) -> np.ndarray:
        """Each private user's public query: the item means ``μ`` it is sent (with ``Σ``, in the broadcast)."""
        return np.broadcast_to(state.model.mu, (n_users, state.model.mu.size))

    def take_queries(self, queries, index):
        return np.array(queries[index])

    def completed(self, users: UserBatch, model: ItemModel) -> np.ndarray:
        """Each user's own completed vector (done on the device), clipped to the rating range."""
        return model.predict(users.ratings, self.ridge, self.level_array)

    def respond(self, users: UserBatch, queries, published: ItemModel, carried, rng):
        return self.messages(users, published, rng), None

    def messages(self, users: UserBatch, model: ItemModel, rng: np.random.Generator) -> np.ndarray:
        """What a batch of private users sends (users x items, dense: a batch is small)."""
        if self.response == "full_em":
            return users.ratings.toarray()
        if self.response == "none":
            return np.zeros((len(users), 0))
        target = self.completed(users, model) - model.mu
        if self.response == "pmd":
            cand = pmd_candidates(target, model.mu, self.level_array, rng, self.pmd_sweeps)
            return cand[np.arange(len(users)), rng.integers(0, cand.shape[1], len(users))]
        if self.response == "pmc":
            if self.pmc_support == "rated":
                return pmc_rated_response(users.ratings, model.mu, rng)
            return pmc_response(target, rng)
        coin = np.where(rng.random((len(users), 1)) < 0.5, -1.0, 1.0)
        if self.response == "exact":
            return coin * target
        if self.response == "sslp":
            keep = rng.random((len(users), 1)) < min(1.0, self.sslp_epsilon ** 2 / target.shape[1])
            return np.where(keep, coin * target, 0.0)
        raise ParameterError("response", f"unknown response {self.response!r}")

    def contributions(self, messages: np.ndarray, model: ItemModel) -> np.ndarray:
        """Centred vectors ``u`` the M-step adds (rows of zeros contribute nothing)."""
        if self.response == "pmd":
            return messages - model.mu
        return messages

    def aggregate(self, state: XinJaakkolaState, queries, messages: np.ndarray) -> XinJaakkolaState:
        n = messages.shape[0]
        if self.response == "none" or n == 0:
            return state
        if self.response == "full_em":
            state.raw_private.append(sparse.csr_array(messages))
        else:
            u = self.contributions(messages, state.model)
            counted = np.any(u != 0, axis=1)
            state.moment = state.moment + self.private_weight * (u[counted].T @ u[counted])
            state.weight += self.private_weight * int(counted.sum())
        state.pending += n
        if state.pending >= self.update_every:
            state = self.update(state)
        return state

    def end_round(self, state: XinJaakkolaState, rng) -> XinJaakkolaState:
        return state

    def update(self, state: XinJaakkolaState) -> XinJaakkolaState:
        """Re-complete the public users with the private moments held fixed; publish the new ``Σ``."""
        state.pending = 0
        if state.public is None:
            return state
        mu = state.model.mu
        if self.response == "full_em":
            rows = sparse.vstack([state.public] + [centred(r, mu) for r in state.raw_private], format="csr")
            sigma = fit_em(rows, self.ridge, self.update_iterations, self.rank, state.model.sigma)
            state.model = ItemModel(mu, sigma, float(sum(r.shape[0] for r in state.raw_private)))
            return state
        sigma = fit_em(state.public, self.ridge, self.update_iterations, self.rank, state.model.sigma,
                       state.moment, state.weight)
        state.model = ItemModel(mu, sigma, state.weight)
        return state

    def publish(self, state: XinJaakkolaState) -> ItemModel:
        return state.model

    def personal_output(self, users: UserBatch, carried, state: XinJaakkolaState) -> np.ndarray:
        """Each user's predicted ratings over every item, from its own row and the final model."""
        return self.completed(users, state.model)


@dataclass
class XinJaakkolaLaplace(XinJaakkola, kind="xin_jaakkola_laplace"):
    """The Laplace baseline: the completed vector, clipped to the rating range, plus ``Lap(0, Δ/ε)`` per item.

    ``Δ = max(levels) − min(levels)`` (the paper's 4.5 on MovieLens' 0.5..5;
    our assumption: every released coordinate is clipped to that range, so one
    coordinate moves by at most Δ when the user is replaced). Each coordinate is
    then ε-DP and the whole vector of ``n_items`` coordinates is
    ``n_items·ε``-DP per user (L1 sensitivity ``n_items·Δ``): that is the claim,
    from the accountant. ``n_items`` must match the world's catalogue.
    """
    test_scenario = {**XinJaakkola.test_scenario, "mechanism": {"response": "laplace", "epsilon": 1.0,
                                                                "n_items": 40, "public_users": 20},
                     "attack": [{"kind": "laplace_posterior"}]}

    epsilon: Annotated[float, Gt(0)] = 1.0
    n_items: Annotated[int, Ge(1)] = 100
    response: Literal["laplace"] = "laplace"  # type: ignore[assignment]

    claim_model = "local"
    claim_unit = "user"
    claim_neighbouring = "replace"

    @property
    def span(self) -> float:
        return float(self.levels[-1] - self.levels[0])

    @property
    def scale(self) -> float:
        return self.span / self.epsilon

    def privacy_event(self, answers: int = 1):
        # n_items coordinates of sensitivity Δ each (composed: the accountant is fast on this form)
        return LaplaceRelease(self.scale, sensitivity=self.span, count=self.n_items * answers)

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        return Mechanism.claim_for(self, answers)

    def init_state(self, world: WorldInfo) -> XinJaakkolaState:
        if world.n_items != self.n_items:
            raise ParameterError("n_items", f"the claim is computed for {self.n_items} items but the world has "
                                            f"{world.n_items}")
        return super().init_state(world)

    def messages(self, users: UserBatch, model: ItemModel, rng: np.random.Generator) -> np.ndarray:
        vector = self.completed(users, model)
        return vector + rng.laplace(0.0, self.scale, vector.shape)

    def contributions(self, messages: np.ndarray, model: ItemModel) -> np.ndarray:
        return messages - model.mu

