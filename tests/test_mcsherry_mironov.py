"""McSherry–Mironov: claims from the accountant, per-rating sensitivities checked by brute force, predictors."""
import math

import numpy as np
import pytest
from scipy import sparse

from recaudit.mechanisms import MECHANISMS
from recaudit.mechanisms.mcsherry_mironov import McSherryMironov, _weighted_gram, fit_and_predict, paper_epsilon


def test_laplace_claim_is_theta_as_in_the_paper():
    mech = McSherryMironov(epsilon=1.0)
    assert mech.claim.epsilon == pytest.approx(paper_epsilon(mech.theta, "laplace", 0.0), abs=1e-4)
    assert (mech.claim.unit, mech.claim.model) == ("rating", "central")
    assert MECHANISMS["mcsherry_mironov_per_user_claim"](epsilon=1.0).claim.unit == "user"


def test_gaussian_claim_is_the_requested_epsilon_and_below_the_papers_formula():
    mech = McSherryMironov(epsilon=1.0, noise="gaussian", delta=1e-6)
    assert mech.claim.epsilon == pytest.approx(1.0, rel=1e-6)
    shares = np.array(list(mech.shares.values()))
    assert mech.claim.gaussian_mu == pytest.approx(mech.theta * np.linalg.norm(shares), rel=1e-9)
    assert paper_epsilon(mech.theta, "gaussian", 1e-6) > 2 * mech.claim.epsilon


@pytest.mark.parametrize("noise,norm", [("laplace", 0), ("gaussian", 1)])
def test_covariance_sensitivity_bounds_one_rating_changing_value(noise, norm):
    """Brute force over random users and value changes (MAvg fixed, as in the paper's conditional analysis)."""
    rng = np.random.default_rng(5)
    mech = McSherryMironov(epsilon=1.0, noise=noise, delta=1e-6 if noise == "gaussian" else 0.0)
    bound = mech.sensitivity["Cov"][norm]
    worst = 0.0
    n = 12
    mavg = rng.uniform(1, 5, n)
    for _ in range(300):
        c = int(rng.integers(1, n + 1))
        items = rng.choice(n, c, replace=False)
        values = rng.choice([1.0, 5.0], c)
        a = sparse.csr_array((values, (np.zeros(c, int), items)), shape=(1, n))
        changed = values.copy()
        changed[0] = 6.0 - changed[0]
        b = sparse.csr_array((changed, (np.zeros(c, int), items)), shape=(1, n))
        ca = _weighted_gram(mech.centred(a, mavg), mech.weights(a))
        cb = _weighted_gram(mech.centred(b, mavg), mech.weights(b))
        d = ca - cb
        worst = max(worst, np.abs(d).sum() if norm == 0 else np.linalg.norm(d))
    assert 0 < worst <= bound


def test_predictions_beat_the_item_average_on_a_rank_one_world():
    """With a huge ε the SVD predictor must fit a rank-one world far better than predicting 0 (its mean)."""
    rng = np.random.default_rng(0)
    m, n, xi = 3000, 60, 20
    u, v = rng.uniform(-1, 1, m), rng.uniform(-1, 1, n)
    items = np.argsort(rng.random((m, n)), axis=1)[:, :xi].ravel()
    users = np.repeat(np.arange(m), xi)
    vals = u[users] * v[items]
    test = rng.random(vals.size) < 0.05
    train = sparse.csr_array((vals[~test], (users[~test], items[~test])), shape=(m, n))
    pred = fit_and_predict(train, users[test], items[test], 1e6, 1e-6, np.random.default_rng(1),
                           min_rating=-1, max_rating=1, rank=2)
    rmse = math.sqrt(np.mean((pred - vals[test]) ** 2))
    assert rmse < 0.5 * math.sqrt(np.mean(vals[test] ** 2))


def test_item_averages_are_shrunk_by_their_noise_like_the_centring():
    """``MAvg`` is the centring's posterior mean (issue 33): with noise far above an item's count it keeps the
    global mean; with little noise (ε = 10⁴) it is within 0.005 of the slides' ``(MSum + β_m G)/(MCount + β_m)``
    (deterministic)."""
    from recaudit.mechanisms.mcsherry_mironov import McSherryMironov

    m = {"GSum": np.array([300.0]), "GCount": np.array([100.0]), "MSum": np.full(4, 20.0), "MCount": np.full(4, 5.0)}
    noisy = McSherryMironov(epsilon=0.01, noise="gaussian", delta=1e-6)
    G, mavg = noisy.global_effects(m)
    assert G == 3.0 and np.all(np.abs(mavg - G) < 0.01)
    quiet = McSherryMironov(epsilon=1e4, noise="gaussian", delta=1e-6)
    _, mavg = quiet.global_effects(m)
    assert mavg == pytest.approx((20.0 + 15.0 * 3.0) / (5.0 + 15.0), abs=0.005)  # its noise: 3.2475
