"""SP2: selective privacy on the device (seed 001, docs/families/sp2.md).

Every rating is public or private. The server trains a biased matrix
factorisation ``r̂ = μ + b_u + b_i + q_iᵀp_u`` by SGD on the public ratings
only (:func:`fit_biased_mf`, Surprise-SVD defaults); each user downloads
auxiliary model data and fine-tunes its own user factor on its private
ratings on the device (:func:`fine_tune`), which never leave it:

* ``naive`` — all item factors and biases;
* ``clustering`` — k-means++ centroids of the item factors, cluster biases and
  the item→cluster map; the device's updates to centroid terms are divided by
  the cluster size (the paper's Algorithm 2);
* ``joint`` — the server learns ``r̂ = μ + b_u + b_i + w_iᵀCᵀp_u`` with
  non-negative weights by projected gradient (:func:`fit_joint_mf`) and sends
  the top-R weights of every item; the device approximates ``q_i ≈ C w_i``.

Which ratings are private comes from the allocation (:func:`allocate_private`):
H1 draws a privacy ratio per user, H2 per item, from a Beta distribution.

As a :class:`Mechanism`, a user's one message is what the server sees of it:
its public ratings and its fetch request (which item factors it downloads:
the server's fetch log). :class:`SP2` fetches everything, so its message does
not depend on its private ratings at all: the claim is ε = 0 for neighbours
that change only private ratings (``replace_private``). Its negative control
:class:`SP2LeakyDownload` fetches only the factors of the items it rated
privately — the shortcut the paper warns about — and must be caught.

SGD is vectorised: the server's passes update minibatches of ratings at once
(``batch_size=1`` is Surprise's per-rating SGD exactly); the device's passes
update every user's ``j``-th private rating at once, which equals each user's
sequential loop because users share nothing on the device.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Gt
from scipy import sparse

from .base import ParameterError, Mechanism, UserBatch, WorldInfo
from .claims import PrivacyClaim
from .costs import CALL_OPERATIONS, RoundCost
from .matrix_factorization import (JointModel, MFModel, _check_ratings, fit_biased_mf, fit_joint_mf,  # noqa: F401
                                   rating_gradients, truncate_weights)

Method = Literal["naive", "clustering", "joint"]


# ---------------------------------------------------------------- what the device downloads


@dataclass(frozen=True)
class AuxData:
    """Auxiliary model data the server publishes: per item, the (approximate) factor and bias the device uses.

    ``slot_of_item`` maps items to the terms the device keeps a copy of
    (itself for naive and joint, its cluster for clustering); ``slot_size`` is
    the number of items sharing a slot (device updates to a slot are divided by it).
    """

    method: str
    mu: float
    slot_factors: np.ndarray  # (slots, factors)
    slot_bias: np.ndarray  # (slots,)
    slot_of_item: np.ndarray  # (items,)

    @property
    def slot_size(self) -> np.ndarray:
        return np.bincount(self.slot_of_item, minlength=self.slot_bias.size)

    @property
    def n_items(self) -> int:
        return self.slot_of_item.size


def naive_aux(model: MFModel) -> AuxData:
    return AuxData("naive", model.mu, model.item_factors, model.item_bias, np.arange(model.item_bias.size))


def clustering_aux(model: MFModel, clusters: int, rng: np.random.Generator) -> AuxData:
    """k-means++ (scikit-learn) on the item factors: centroids, mean item bias per cluster, item→cluster map."""
    from sklearn.cluster import KMeans

    n_items = model.item_bias.size
    k = min(clusters, n_items)
    km = KMeans(n_clusters=k, init="k-means++", n_init=1, random_state=int(rng.integers(2**31 - 1)))
    labels = km.fit_predict(model.item_factors)
    sizes = np.bincount(labels, minlength=k)
    bias = np.bincount(labels, weights=model.item_bias, minlength=k) / np.maximum(sizes, 1)
    return AuxData("clustering", model.mu, km.cluster_centers_, bias, labels.astype(np.int64))


def joint_aux(model: JointModel, top_r: int) -> AuxData:
    return AuxData("joint", model.mu, model.item_factors(top_r), model.item_bias, np.arange(model.item_bias.size))


# ---------------------------------------------------------------- on the device


@dataclass(frozen=True)
class DeviceModel:
    """Every device's fine-tuned terms: user factors and biases, and its local copies of slot terms."""

    user_factors: np.ndarray
    user_bias: np.ndarray
    copy_user: np.ndarray  # per local copy: its user and slot
    copy_slot: np.ndarray
    copy_factors: np.ndarray
    copy_bias: np.ndarray

    def predict(self, aux: AuxData, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predictions with each user's own copy of a slot's terms when it has one, else the downloaded ones."""
        slots = aux.slot_of_item[items]
        factors, bias = aux.slot_factors[slots], aux.slot_bias[slots]
        if self.copy_user.size:
            n_slots = aux.slot_bias.size
            keys = self.copy_user * n_slots + self.copy_slot
            order = np.argsort(keys)
            want = users * n_slots + slots
            at = np.minimum(np.searchsorted(keys[order], want), keys.size - 1)
            has = keys[order][at] == want
            factors = np.where(has[:, None], self.copy_factors[order][at], factors)
            bias = np.where(has, self.copy_bias[order][at], bias)
        return aux.mu + self.user_bias[users] + bias + np.einsum("ij,ij->i", self.user_factors[users], factors)


@dataclass(frozen=True)
class DeviceRows:
    """Devices' personal outputs: each user's fine-tuned bias and factor, and the auxiliary data it downloaded.

    Behaves as an array of rows for the recorder (``len``, indexing on axis 0,
    :meth:`concat`); ``at`` predicts entries the way the device ranks items
    (its terms with the downloaded item terms; ``aux`` None predicts ``0``).
    """

    user_bias: np.ndarray  # (n,)
    user_factors: np.ndarray  # (n, k)
    aux: tuple  # distinct AuxData (or None) the rows used
    aux_of_row: np.ndarray  # (n,) index into ``aux``

    def __len__(self) -> int:
        return self.user_bias.shape[0]

    def __getitem__(self, index) -> "DeviceRows":
        return DeviceRows(self.user_bias[index], self.user_factors[index], self.aux, self.aux_of_row[index])

    @property
    def shape(self) -> tuple[int, int]:
        return self.terms.shape

    @property
    def terms(self) -> np.ndarray:
        """``[user bias, user factor]`` per row (what the device keeps)."""
        return np.hstack([self.user_bias[:, None], self.user_factors])

    @classmethod
    def concat(cls, parts: "list[DeviceRows]") -> "DeviceRows":
        auxes: list = []
        index = []
        for part in parts:
            remap = np.empty(len(part.aux), np.int64)
            for j, aux in enumerate(part.aux):
                found = next((i for i, a in enumerate(auxes) if a is aux), None)
                if found is None:
                    auxes.append(aux)
                    found = len(auxes) - 1
                remap[j] = found
            index.append(remap[part.aux_of_row])
        return cls(np.concatenate([p.user_bias for p in parts]), np.concatenate([p.user_factors for p in parts]),
                   tuple(auxes), np.concatenate(index))

    def at(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predicted ratings ``(rows[e], items[e])``: ``μ + b_u + b_i + p_u·q_i`` with the row's downloaded terms."""
        out = np.zeros(rows.size)
        which = self.aux_of_row[rows]
        for j, aux in enumerate(self.aux):
            pick = np.flatnonzero(which == j)
            if aux is None or pick.size == 0:
                continue
            u, slots = rows[pick], aux.slot_of_item[items[pick]]
            out[pick] = (aux.mu + self.user_bias[u] + aux.slot_bias[slots]
                         + np.einsum("ij,ij->i", self.user_factors[u], aux.slot_factors[slots]))
        return out


def _rank_within(groups: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """A uniformly random order within each group: 0, 1, ... per group (input order when ``rng`` is None)."""
    keys = np.arange(groups.size) if rng is None else rng.random(groups.size)
    order = np.lexsort((keys, groups))
    sorted_groups = groups[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_groups)) + 1]
    rank = np.empty(groups.size, np.int64)
    rank[order] = np.arange(groups.size) - np.repeat(starts, np.diff(np.r_[starts, groups.size]))
    return rank


def fine_tune(aux: AuxData, user_factors: np.ndarray, user_bias: np.ndarray, users, items, ratings,
              rng: np.random.Generator | None, *, epochs: int = 20, lr: float = 0.005, reg: float = 0.02,
              shuffle: bool = True) -> DeviceModel:
    """Every user's on-device SGD over its own (private) ratings, batched over users (Algorithms 1 and 2).

    Starting from ``user_factors``/``user_bias`` (the public user model),
    each user visits its ratings in a fresh random order per epoch and
    updates its factor, its bias and its own copy of the rated items' slot
    terms (divided by the slot's size). Step ``j`` of an epoch updates every
    user's ``j``-th rating at once: users share nothing, so this is each
    user's sequential loop. ``shuffle=False`` visits each user's ratings in input order.
    """
    n_users = user_factors.shape[0]
    users, items, ratings = _check_ratings(users, items, ratings, (n_users, aux.n_items))
    pu, bu = user_factors.copy(), user_bias.copy()
    slots = aux.slot_of_item[items]
    copy_key, copy_of = np.unique(users * aux.slot_bias.size + slots, return_inverse=True)
    copy_user, copy_slot = copy_key // aux.slot_bias.size, copy_key % aux.slot_bias.size
    cf, cb = aux.slot_factors[copy_slot].copy(), aux.slot_bias[copy_slot].copy()
    scale = 1.0 / aux.slot_size[slots]
    for _ in range(epochs):
        rank = _rank_within(users, rng if shuffle else None)
        by_rank = np.argsort(rank, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(rank))]
        for j in range(bounds.size - 1):
            k = by_rank[bounds[j]:bounds[j + 1]]
            u, c, s = users[k], copy_of[k], scale[k]
            err = ratings[k] - (aux.mu + bu[u] + cb[c] + np.einsum("ij,ij->i", pu[u], cf[c]))
            gbu, gcb, gpu, gcf = rating_gradients(err, bu[u], cb[c], pu[u], cf[c], reg)
            bu[u] += lr * gbu
            cb[c] += lr * gcb * s
            pu[u] += lr * gpu
            cf[c] += lr * gcf * s[:, None]
    return DeviceModel(pu, bu, copy_user, copy_slot, cf, cb)


# ---------------------------------------------------------------- which ratings are private


def _mark_fraction(groups: np.ndarray, ratios: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per group, ``floor(γ n + U)`` of its entries chosen uniformly (unbiased: ``γ n`` on average)."""
    counts = np.bincount(groups, minlength=ratios.size)
    chosen = np.floor(ratios * counts + rng.random(ratios.size)).astype(np.int64)
    return _rank_within(groups, rng) < chosen[groups]


def privacy_ratios(n: int, beta: tuple[float, float], rng: np.random.Generator) -> np.ndarray:
    return rng.beta(beta[0], beta[1], n)


def allocate_private(ratings: sparse.csr_array, scheme: Literal["H1", "H2"], beta: tuple[float, float],
                     rng: np.random.Generator, item_ratios: np.ndarray | None = None) -> sparse.csr_array:
    """Which ratings are private: H1 a ratio ``γ_u ~ Beta`` per user, H2 ``γ_i ~ Beta`` per item.

    A group with ratio ``γ`` and ``n`` ratings has ``floor(γ n + U)`` of them,
    chosen uniformly, private. H2 takes the world's fixed ``item_ratios`` when
    given (every user of a world sees the same item ratios), else draws them.
    """
    coo = sparse.coo_array(ratings)
    users, items = coo.row.astype(np.int64), coo.col.astype(np.int64)
    if scheme == "H1":
        private = _mark_fraction(users, privacy_ratios(ratings.shape[0], beta, rng), rng)
    elif scheme == "H2":
        ratios = privacy_ratios(ratings.shape[1], beta, rng) if item_ratios is None else item_ratios
        private = _mark_fraction(items, ratios, rng)
    else:
        raise ParameterError("allocation", f"must be H1 or H2, got {scheme!r}")
    return sparse.csr_array((np.ones(int(private.sum()), bool), (users[private], items[private])),
                            shape=ratings.shape)


def split_public_private(rows: UserBatch) -> tuple[sparse.csr_array, sparse.csr_array]:
    """(public ratings, private ratings) of a batch, sparse with values."""
    ratings = sparse.csr_array(rows.ratings)
    private = ratings.multiply(rows.private_mask.astype(float))
    public = ratings - private
    public.eliminate_zeros()
    return sparse.csr_array(public), sparse.csr_array(private)


# ---------------------------------------------------------------- the protocol


@dataclass
class SP2State:
    """The server: public ratings received (user ids in arrival order) and the model trained on them."""

    n_items: int
    users: np.ndarray
    items: np.ndarray
    values: np.ndarray
    n_users: int = 0
    aux: AuxData | None = None
    trained_on: int = 0


@dataclass
class SP2(Mechanism, kind="sp2"):
    """SP2 with the full download: every device fetches all auxiliary data (ε = 0 on private ratings).

    ``method``: naive, clustering or joint. ``factors``, ``epochs``,
    ``learning_rate``, ``regularization``, ``init_std``: the server's MF
    (Surprise defaults); ``fine_tune_epochs``: the device's passes;
    ``clusters``: k-means clusters / joint-optimisation centres;
    ``top_r``: weights sent per item (joint); ``batch_size``: server SGD minibatch.
    """
    test_scenario: ClassVar[dict] = {
        "population": {"kind": "sbm_stars_selective", "n_items": 30, "ratings_per_user": 10, "held_out": 2,
                       "user_cluster_weights": [0.5, 0.5], "item_cluster_weights": [0.5, 0.5],
                       "star_probability": [[[0.05, 0.05, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.05, 0.05]],
                                            [[0.4, 0.3, 0.2, 0.05, 0.05], [0.05, 0.05, 0.2, 0.3, 0.4]]],
                       "allocation": "H1", "privacy_beta": [2.0, 2.0]},
        "churn": {"arrival_rate": 20, "mean_lifetime": 1.0, "horizon": 2.0, "query_interval": 0.5,
                  "release_interval": 1.0},
        "mechanism": {"method": "naive", "factors": 8, "epochs": 10, "fine_tune_epochs": 5},
        "attack": {"kind": "sp2_server_view"},
        "audit": {"design": "full_runs", "trials": 400, "block_size": 100, "alpha": 0.05},
    }

    method: Method = "naive"
    factors: Annotated[int, Ge(1)] = 100
    epochs: Annotated[int, Ge(1)] = 20
    learning_rate: Annotated[float, Gt(0)] = 0.005
    regularization: Annotated[float, Ge(0)] = 0.02
    init_std: Annotated[float, Gt(0)] = 0.1
    fine_tune_epochs: Annotated[int, Ge(0)] = 20
    clusters: Annotated[int, Ge(1)] = 10
    top_r: Annotated[int, Ge(1)] = 3
    batch_size: Annotated[int, Ge(1)] = 256
    claim_neighbouring = "replace_private"
    audit_pair = "private_replace"

    def __post_init__(self) -> None:
        if self.method not in ("naive", "clustering", "joint"):
            raise ParameterError("method", f"must be naive, clustering or joint, got {self.method!r}")

    # the claim is structural (nothing derived from a private rating is sent), not a randomizer's budget
    def privacy_event(self, answers: int = 1):
        return None

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        """ε = 0 on the server's view (the messages: public ratings and fetch requests), private ratings replaced."""
        return PrivacyClaim(0.0, 0.0, model="local", unit="user", neighbouring="replace_private")

    def round_cost(self, world: WorldInfo, users: float) -> RoundCost:
        """The server retrains its MF on every public rating it holds each round (``epochs`` passes), each device
        fine-tunes once on its ratings; a rating's SGD step costs ~110 + 8 x factors ns (measured on sp2-movielens-100k,
        319 s of CPU, and at 400 arrivals, 8 factors; numpy minibatch calls included), a joint fit about twice that;
        k-means over the items' factors for clustering; and each round's numpy calls however few the ratings (~15 a
        server epoch, ~10 a device epoch and rank of a rating within its user)."""
        per_rating = (110.0 + 8.0 * self.factors) * (2 if self.method == "joint" else 1)
        kmeans = 5e6 + 30.0 * world.n_items * self.clusters * self.factors if self.method == "clustering" else 0.0
        calls = (15 * self.epochs + 10 * self.fine_tune_epochs * world.ratings_per_user) * CALL_OPERATIONS
        return RoundCost(operations=kmeans + calls,
                         held_user_operations=self.epochs * world.ratings_per_user * per_rating,
                         user_operations=self.fine_tune_epochs * world.ratings_per_user * per_rating)

    def init_state(self, world: WorldInfo) -> SP2State:
        empty = np.zeros(0, np.int64)
        return SP2State(world.n_items, empty, empty, np.zeros(0))

    def make_queries(self, n_users, rng, state, rated=None):
        return np.zeros((n_users, 0))

    def fetch(self, users: UserBatch) -> np.ndarray:
        """Which items' auxiliary data each device requests: all of them."""
        return np.ones((len(users), users.n_items), bool)

    def respond(self, users, queries, published, carried, rng):
        """The message the server sees: the public ratings and the fetch request, one dense row of 2·items per user.

        (Dense rows keep the ``messages`` view a plain array; SP2 worlds in audits are small.)
        """
        public, _ = split_public_private(users)
        return np.hstack([public.toarray(), self.fetch(users).astype(float)]), None

    def aggregate(self, state: SP2State, queries, messages: np.ndarray) -> SP2State:
        n = state.n_items
        users, items = np.nonzero(messages[:, :n])
        return replace(state, users=np.r_[state.users, users + state.n_users], items=np.r_[state.items, items],
                       values=np.r_[state.values, messages[users, items]], n_users=state.n_users + len(messages))

    def end_round(self, state: SP2State, rng: np.random.Generator) -> SP2State:
        """Retrain the server's model on every public rating received so far."""
        if state.values.size == state.trained_on or state.values.size == 0:
            return state
        return replace(state, aux=self.server_aux(state.users, state.items, state.values,
                                                  (state.n_users, state.n_items), rng)[0],
                       trained_on=state.values.size)

    def server_aux(self, users, items, values, shape, rng) -> tuple[AuxData, np.ndarray, np.ndarray]:
        """The auxiliary data of ``method`` trained on public ratings, and the public user factors and biases."""
        mf = dict(factors=self.factors, epochs=self.epochs, lr=self.learning_rate, reg=self.regularization,
                  init_std=self.init_std, batch_size=self.batch_size)
        if self.method == "joint":
            model = fit_joint_mf(users, items, values, shape, rng, clusters=self.clusters, **mf)
            return joint_aux(model, self.top_r), model.user_factors, model.user_bias
        model = fit_biased_mf(users, items, values, shape, rng, **mf)
        aux = naive_aux(model) if self.method == "naive" else clustering_aux(model, self.clusters, rng)
        return aux, model.user_factors, model.user_bias

    def broadcast(self, state: SP2State):
        return state.aux

    def publish(self, state: SP2State):
        return state.aux

    def personal_output(self, users: UserBatch, carried, state: SP2State) -> DeviceRows:
        """Each device's user bias and factor (fitted on its public ratings, then fine-tuned on its private
        ones) with the auxiliary data it downloaded: a predictor of its ratings (``DeviceRows.at``)."""
        n = len(users)
        aux = state.aux
        if aux is None:
            return DeviceRows(np.zeros(n), np.zeros((n, self.factors)), (None,), np.zeros(n, np.int64))
        k = aux.slot_factors.shape[1]
        pu, bu = np.zeros((n, k)), np.zeros(n)
        for part in split_public_private(users):
            coo = sparse.coo_array(part)
            device = fine_tune(aux, pu, bu, coo.row, coo.col, coo.data, None, epochs=self.fine_tune_epochs,
                               lr=self.learning_rate, reg=self.regularization, shuffle=False)
            pu, bu = device.user_factors, device.user_bias
        return DeviceRows(bu, pu, (aux,), np.zeros(n, np.int64))


@dataclass
class SP2LeakyDownload(SP2, kind="sp2_leaky_download"):
    """Negative control: each device fetches only the factors of the items it rated privately.

    The paper's naive "download less" shortcut: the fetch log then names the
    private items, so the server's view depends on the private ratings and an
    audit of the ε = 0 claim must find it violated.
    """
    negative_control = True


    def fetch(self, users: UserBatch) -> np.ndarray:
        return users.private_mask.toarray()

