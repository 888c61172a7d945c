"""McSherry–Mironov at a large catalogue (``recaudit.mechanisms.mcsherry_mironov_large``) and its non-private twin.

The large path must publish what the small one does: on a small matrix with the threshold, the product blocks and the
noise chunks patched down, both paths' measurements, cleaned matrix and factors agree to float32 rounding (the noise
is drawn in the same order, so the draws are the same too)."""
import numpy as np
import pytest
from scipy import sparse

from recaudit.mechanisms import MECHANISMS, PrivacyClaim
from recaudit.mechanisms import mcsherry_mironov, mcsherry_mironov_large as large


def _ratings(users=300, items=45, seed=0):
    rng = np.random.default_rng(seed)
    rated = rng.random((users, items)) < 0.25
    rated[:, 0] = True  # an item everyone rated: a dense column
    return sparse.csr_array(np.where(rated, rng.integers(1, 6, (users, items)), 0).astype(float))


def test_row_offsets_follow_numpy_upper_triangle_order():
    n = 7
    rows, cols = np.triu_indices(n)
    offsets = large.row_offsets(n)
    assert offsets[-1] == rows.size
    assert all((rows[offsets[i]:offsets[i + 1]] == i).all() and cols[offsets[i]] == i for i in range(n))


@pytest.mark.parametrize("kind, noise", [("mcsherry_mironov", "gaussian"), ("mcsherry_mironov", "laplace"),
                                         ("mcsherry_mironov_exact", "gaussian")])
def test_the_large_path_publishes_what_the_small_one_does(monkeypatch, kind, noise):
    ratings = _ratings()
    mech = MECHANISMS[kind](epsilon=3.0, noise=noise, delta=1e-6 if noise == "gaussian" else 0.0, rank=4)
    small = mech.release(ratings, np.random.default_rng(1))
    monkeypatch.setattr(mcsherry_mironov, "LARGE_FROM_ITEMS", 10)
    monkeypatch.setattr(large, "BLOCK", 8)
    monkeypatch.setattr(large, "NOISE_CHUNK", 100)
    big = mech.release(ratings, np.random.default_rng(1))
    assert big.cleaned.dtype == np.float32 and big.measurements["Cov"].dtype == np.float32
    for key in mcsherry_mironov.MEASUREMENTS:
        scale = max(1.0, float(np.abs(small.measurements[key]).max()))
        assert np.allclose(big.measurements[key], small.measurements[key], rtol=0, atol=1e-6 * scale), key
    assert np.array_equal(big.MAvg, small.MAvg)
    assert np.allclose(big.cleaned, small.cleaned, rtol=0, atol=1e-6 * np.abs(small.cleaned).max())
    # the same rank-4 approximation (eigenvectors are defined up to sign): the same projector times eigenvalues
    assert np.allclose(big.factors @ big.factors.T, small.factors @ small.factors.T, rtol=0,
                       atol=1e-4 * np.abs(small.factors).max() ** 2)


def test_the_non_private_twin_adds_no_noise_and_claims_nothing():
    twin = MECHANISMS["mcsherry_mironov_exact"](noise="gaussian", delta=1e-6, rank=3)
    ratings = _ratings(seed=2)
    a, b = (twin.release(ratings, np.random.default_rng(s)) for s in (0, 1))
    assert np.array_equal(a.cleaned, b.cleaned)  # nothing random left
    assert twin.claim_for(1) == PrivacyClaim.none()
    private = MECHANISMS["mcsherry_mironov"](epsilon=1.0, noise="gaussian", delta=1e-6, rank=3)
    assert not np.array_equal(private.release(ratings, np.random.default_rng(0)).cleaned, a.cleaned)


def test_the_round_cost_at_netflix_size_is_the_large_paths():
    from recaudit.mechanisms import WorldInfo

    mech = MECHANISMS["mcsherry_mironov"](epsilon=0.15, rank=10)
    cost = mech.round_cost(WorldInfo(17_770, 106, 1), 480_189)
    n2 = 17_770.0 ** 2
    assert cost.state_bytes < 80 * n2 / 4  # not the small path's ten n x n float64 arrays (25 GB)
    assert cost.operations < 1e13  # not users x n^2 dense products
