"""Shared accuracy metrics against scikit-learn's independent implementations."""
import numpy as np
import pytest
from sklearn.metrics import mean_squared_error, ndcg_score

from recaudit.simulator.metrics import ndcg_at_k, rmse


def test_rmse_matches_sklearn():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=500), rng.normal(size=500)
    assert rmse(a, b) == pytest.approx(np.sqrt(mean_squared_error(b, a)), rel=1e-12)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_ndcg_matches_sklearn_per_user(k):
    rng = np.random.default_rng(1)
    counts = rng.integers(2, 25, size=40)
    users = np.repeat(np.arange(40), counts)
    actual = rng.integers(1, 6, size=users.size).astype(float)
    predicted = actual + rng.normal(scale=1.5, size=users.size)  # continuous: no ties
    shuffle = rng.permutation(users.size)
    users, actual, predicted = users[shuffle], actual[shuffle], predicted[shuffle]
    expected = np.mean([ndcg_score(actual[users == u][None], predicted[users == u][None], k=k)
                        for u in range(40)])
    assert ndcg_at_k(users, predicted, actual, k=k) == pytest.approx(expected, rel=1e-12)


def test_ndcg_perfect_and_reversed_rankings():
    users = np.zeros(5, int)
    actual = np.array([5.0, 4, 3, 2, 1])
    assert ndcg_at_k(users, actual, actual, k=5) == pytest.approx(1.0)
    assert ndcg_at_k(users, -actual, actual, k=5) < 0.8


def test_metric_errors_are_clear():
    with pytest.raises(ValueError, match="shapes differ"):
        rmse(np.zeros(2), np.zeros(3))
    with pytest.raises(ValueError, match="k must be at least 1"):
        ndcg_at_k(np.zeros(2), np.zeros(2), np.ones(2), k=0)
