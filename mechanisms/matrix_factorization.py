"""Biased matrix factorization and SP2's joint model: the server-side models SP2 fits on public ratings
(minibatch SGD; projected gradient for the joint model's non-negative weights)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from recaudit.core.errors import ParameterError


@dataclass(frozen=True)
class MFModel:
    """A biased MF model: global mean, user and item biases, user and item factors."""

    mu: float
    user_bias: np.ndarray
    item_bias: np.ndarray
    user_factors: np.ndarray
    item_factors: np.ndarray

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return (self.mu + self.user_bias[users] + self.item_bias[items]
                + np.einsum("ij,ij->i", self.user_factors[users], self.item_factors[items]))


def rating_gradients(err: np.ndarray, user_bias: np.ndarray, item_bias: np.ndarray, user_factors: np.ndarray,
                     item_factors: np.ndarray, reg: float):
    """Descent directions of the per-rating loss ``½e² + ½λ(b_u² + b_i² + |p_u|² + |q_i|²)``, per rating.

    Arguments are per rating (the terms of each rating's user and item);
    the SGD step is ``lr`` times these (Surprise's update, old values on the right).
    """
    e = err[:, None]
    return (err - reg * user_bias, err - reg * item_bias, e * item_factors - reg * user_factors,
            e * user_factors - reg * item_factors)


def _check_ratings(users, items, values, shape):
    users, items, values = np.asarray(users, np.int64), np.asarray(items, np.int64), np.asarray(values, float)
    if not users.shape == items.shape == values.shape:
        raise ParameterError("users", "users, items and ratings must be 1-D arrays of one length")
    if users.size and (users.min() < 0 or users.max() >= shape[0] or items.min() < 0 or items.max() >= shape[1]):
        raise ParameterError("users", f"user or item index outside the shape {shape}")
    return users, items, values


def _scatter_add(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``target[index] += values`` summing repeated indices (``np.add.at``, by a faster bincount)."""
    if target.ndim == 1:
        target += np.bincount(index, weights=values, minlength=target.size)
        return
    rows, inverse = np.unique(index, return_inverse=True)
    k = target.shape[1]
    flat = (inverse[:, None] * k + np.arange(k)).ravel()
    target[rows] += np.bincount(flat, weights=values.ravel(), minlength=rows.size * k).reshape(rows.size, k)


def _batches(n: int, batch_size: int, rng: np.random.Generator, shuffle: bool):
    order = rng.permutation(n) if shuffle else np.arange(n)
    return [order[s:s + batch_size] for s in range(0, n, batch_size)]


def fit_biased_mf(users, items, ratings, shape: tuple[int, int], rng: np.random.Generator, *, factors: int = 100,
                  epochs: int = 20, lr: float = 0.005, reg: float = 0.02, init_std: float = 0.1,
                  batch_size: int = 256, shuffle: bool = True) -> MFModel:
    """Biased MF by minibatch SGD (Surprise's SVD when ``batch_size=1, shuffle=False``).

    Factors start from N(0, ``init_std``²), biases at 0, ``μ`` is the mean
    rating. Each minibatch applies the summed per-rating steps of
    :func:`rating_gradients`; ratings of one batch see the same old values.
    """
    users, items, ratings = _check_ratings(users, items, ratings, shape)
    mu = float(ratings.mean()) if ratings.size else 0.0
    bu, bi = np.zeros(shape[0]), np.zeros(shape[1])
    pu = rng.normal(0.0, init_std, (shape[0], factors))
    qi = rng.normal(0.0, init_std, (shape[1], factors))
    for _ in range(epochs):
        for b in _batches(ratings.size, batch_size, rng, shuffle):
            u, i = users[b], items[b]
            err = ratings[b] - (mu + bu[u] + bi[i] + np.einsum("ij,ij->i", pu[u], qi[i]))
            gbu, gbi, gpu, gqi = rating_gradients(err, bu[u], bi[i], pu[u], qi[i], reg)
            _scatter_add(bu, u, lr * gbu)
            _scatter_add(bi, i, lr * gbi)
            _scatter_add(pu, u, lr * gpu)
            _scatter_add(qi, i, lr * gqi)
    return MFModel(mu, bu, bi, pu, qi)


@dataclass(frozen=True)
class JointModel:
    """The joint-optimisation model: item factors are ``C w_i`` with non-negative weights ``w_i``."""

    mu: float
    user_bias: np.ndarray
    item_bias: np.ndarray
    user_factors: np.ndarray
    centres: np.ndarray  # (factors, clusters): C
    weights: np.ndarray  # (items, clusters), >= 0

    def item_factors(self, top_r: int | None = None) -> np.ndarray:
        """``C w_i`` per item, keeping only each item's ``top_r`` largest weights when given."""
        return truncate_weights(self.weights, top_r) @ self.centres.T


def truncate_weights(weights: np.ndarray, top_r: int | None) -> np.ndarray:
    """Each row's ``top_r`` largest entries kept, the rest zeroed (None: all kept)."""
    if top_r is None or top_r >= weights.shape[1]:
        return weights
    keep = np.argpartition(-weights, top_r - 1, axis=1)[:, :top_r]
    out = np.zeros_like(weights)
    rows = np.arange(weights.shape[0])[:, None]
    out[rows, keep] = weights[rows, keep]
    return out


def fit_joint_mf(users, items, ratings, shape: tuple[int, int], rng: np.random.Generator, *, factors: int = 100,
                 clusters: int = 10, epochs: int = 20, lr: float = 0.005, reg: float = 0.02, init_std: float = 0.1,
                 batch_size: int = 256, centre_reg: Literal["once", "per_rating"] = "once") -> JointModel:
    """The paper's Algorithm 3 by minibatch projected SGD: ``r̂ = μ + b_u + b_i + w_iᵀCᵀp_u``, ``w_i ≥ 0``.

    Per rating the steps are the gradient steps of ``½e² + ½λ(b_u² + b_i² + |p_u|² + |w_i|²)``;
    after each step the weights are projected on ``w ≥ 0``. The centres ``C``
    are shared by every rating: ``centre_reg="per_rating"`` shrinks them by
    ``λC`` at every rating as Algorithm 3 is written, which over an epoch of
    ``N`` ratings is a penalty ``½λN|C|²`` and drives ``C`` to 0 (the model
    collapses to biases); the default ``"once"`` penalises ``½λ|C|²`` once per
    epoch (``λ·B/N`` per batch of ``B``).
    """
    users, items, ratings = _check_ratings(users, items, ratings, shape)
    mu = float(ratings.mean()) if ratings.size else 0.0
    bu, bi = np.zeros(shape[0]), np.zeros(shape[1])
    pu = rng.normal(0.0, init_std, (shape[0], factors))
    centres = rng.normal(0.0, init_std, (factors, clusters))
    weights = np.abs(rng.normal(0.0, init_std, (shape[1], clusters)))
    for _ in range(epochs):
        for b in _batches(ratings.size, batch_size, rng, True):
            u, i = users[b], items[b]
            w, p = weights[i], pu[u]
            q = w @ centres.T
            err = ratings[b] - (mu + bu[u] + bi[i] + np.einsum("ij,ij->i", p, q))
            e = err[:, None]
            _scatter_add(bu, u, lr * (err - reg * bu[u]))
            _scatter_add(bi, i, lr * (err - reg * bi[i]))
            _scatter_add(pu, u, lr * (e * q - reg * p))
            _scatter_add(weights, i, lr * (e * (p @ centres) - reg * w))
            shrink = b.size if centre_reg == "per_rating" else b.size / ratings.size
            centres += lr * ((e * p).T @ w - reg * shrink * centres)
            np.maximum(weights, 0.0, out=weights)
    return JointModel(mu, bu, bi, pu, centres, weights)
