"""Trainers of real recommender libraries, as ``fit(ratings, rng)`` functions (docs/guide/trainers.md).

Optional: install them with ``pip install 'recaudit[trainers]'`` (``implicit``, ``scikit-surprise``); each is
imported when its trainer is first called, and a missing one is one clear error.

* ``implicit_als`` — ``implicit``'s ALS for implicit feedback (Hu, Koren, Volinsky 2008): the ratings are
  confidences, one thread (its result is then the same for the same seed). Publishes its ``item_factors``;
  ``recommend`` folds new users in with implicit's own ``recalculate_user``.
* ``surprise_svd`` — ``scikit-surprise``'s SVD (Funk's biased matrix factorisation by SGD) on explicit
  ratings. Publishes its item factors ``qi`` with the item bias ``bi`` as one more column (an item no rating
  reached has a zero row); ``predict`` and ``recommend`` fold users in against them.
"""
from __future__ import annotations

import importlib

import numpy as np
from scipy import sparse

from .als import FactorModel
from .base import ParameterError


def _library(name: str, extra: str = "trainers"):
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ParameterError("fit", f"this trainer needs the {name} package: pip install 'recaudit[{extra}]'") \
            from None


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2 ** 31 - 1))


class ImplicitModel:
    """``implicit``'s trained ALS: its ``item_factors`` and its own fold-in for ``recommend``."""

    def __init__(self, model):
        self.model = model
        self.item_factors = np.asarray(model.item_factors, dtype=float)

    def recommend(self, histories, k: int) -> np.ndarray:
        histories = sparse.csr_matrix(histories, dtype=np.float32)
        ids, _ = self.model.recommend(np.arange(histories.shape[0]), histories, N=k, recalculate_user=True,
                                      filter_already_liked_items=True)
        return np.asarray(ids, dtype=np.int64)


def implicit_als(ratings, rng: np.random.Generator, factors: int = 64, regularization: float = 0.01,
                 iterations: int = 15, alpha: float = 1.0) -> ImplicitModel:
    """``implicit.als.AlternatingLeastSquares`` on ``ratings`` as confidences (one thread, seeded from ``rng``)."""
    _library("implicit")
    from implicit.cpu.als import AlternatingLeastSquares

    model = AlternatingLeastSquares(factors=factors, regularization=regularization, iterations=iterations,
                                    alpha=alpha, random_state=_seed(rng), num_threads=1, calculate_training_loss=False)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, "blas"):  # implicit's advice: its own threads, BLAS on one
        model.fit(sparse.csr_matrix(ratings, dtype=np.float32), show_progress=False)
    return ImplicitModel(model)


def surprise_svd(ratings, rng: np.random.Generator, factors: int = 50, epochs: int = 20, lr_all: float = 0.005,
                 reg_all: float = 0.02) -> FactorModel:
    """``surprise.SVD`` on the explicit ratings (seeded from ``rng``); item factors ``[qi, bi]`` by column index."""
    surprise = _library("surprise")
    import pandas as pd

    coo = sparse.coo_matrix(ratings)
    frame = pd.DataFrame({"user": coo.row, "item": coo.col, "rating": coo.data})
    scale = (float(coo.data.min(initial=0.0)), float(coo.data.max(initial=1.0)))
    data = surprise.Dataset.load_from_df(frame, surprise.Reader(rating_scale=scale))
    trainset = data.build_full_trainset()
    algo = surprise.SVD(n_factors=factors, n_epochs=epochs, lr_all=lr_all, reg_all=reg_all, random_state=_seed(rng))
    algo.fit(trainset)
    item_factors = np.zeros((ratings.shape[1], factors + 1))
    inner = np.arange(trainset.n_items)
    raw = np.array([trainset.to_raw_iid(i) for i in inner], dtype=np.int64)  # (once per item)
    item_factors[raw, :factors] = algo.qi[inner]
    item_factors[raw, factors] = algo.bi[inner]
    return FactorModel(item_factors, reg_all)
