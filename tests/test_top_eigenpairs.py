"""``frank_wolfe_runs.top_eigenpairs`` (the batched runs' eigen-solve) against ``np.linalg.eigh``'s last pair."""
import numpy as np

from recaudit.mechanisms.frank_wolfe_runs import top_eigenpairs


def _signed(v):
    return v * np.sign(v[np.arange(len(v)), np.argmax(np.abs(v), axis=1)])[:, None]


def test_top_eigenpairs_equal_eigh_on_noisy_grams_to_rounding():
    rng = np.random.default_rng(5)
    a = rng.normal(0, 0.1, (3000, 14, 12)) * (rng.random((3000, 14, 12)) < 0.3)
    z = rng.normal(0, 0.05, (3000, 12, 12))
    m = np.swapaxes(a, 1, 2) @ a + np.triu(z) + np.swapaxes(np.triu(z, 1), 1, 2)
    value, vector = top_eigenpairs(m)
    values, vectors = np.linalg.eigh(m)
    scale = np.abs(values).max(axis=1)
    assert np.max(np.abs(value - values[:, -1]) / scale) < 1e-14
    assert np.max(np.abs(_signed(vector) - _signed(vectors[..., -1]))) < 1e-11
    assert np.allclose(np.linalg.norm(vector, axis=1), 1.0, rtol=0, atol=1e-15)


def test_what_squaring_cannot_settle_comes_from_eigh():
    """A zero matrix (no scale) and a near tie of the two largest eigenvalues: the residual check sends them to eigh."""
    q = np.linalg.qr(np.random.default_rng(1).normal(size=(6, 6)))[0]
    tie = q @ np.diag([0.1, 0.2, 0.3, 0.4, 1.0 - 1e-9, 1.0]) @ q.T
    m = np.stack([np.zeros((6, 6)), (tie + tie.T) / 2])
    value, vector = top_eigenpairs(m)
    values, vectors = np.linalg.eigh(m)
    assert np.array_equal(value, values[:, -1]) and np.array_equal(vector, vectors[..., -1])
