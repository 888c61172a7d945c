"""The per-user audit of McSherry–Mironov (recaudit.studies.mcsherry_mironov_per_user)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from recaudit.studies.mcsherry_mironov_per_user import StudyWorld, markdown, pair_loss, study, target_pair
from recaudit.mechanisms import McSherryMironov, UserBatch
from recaudit.simulator.targets import TargetPair


def test_the_pair_replaces_c_ratings_on_disjoint_items():
    pair = target_pair(5, 20, np.random.default_rng(0))
    r0, r1 = pair.rows0.ratings.toarray()[0], pair.rows1.ratings.toarray()[0]
    assert (r1 == 1).sum() == 5 and (r0 == -1).sum() == 5 and not np.any((r0 != 0) & (r1 != 0))
    with pytest.raises(ValueError, match="fewer than 2 x count"):
        target_pair(11, 20, np.random.default_rng(0))


def test_one_rating_added_costs_at_most_the_per_rating_epsilon():
    """The pure loss of adding one rating (any value, any user, MAvg fixed) is within the claimed ε —
    the paper's per-rating guarantee, computed from the measurements' real contributions."""
    rng = np.random.default_rng(1)
    mech = McSherryMironov(epsilon=1.0, min_rating=-1.0, max_rating=1.0)
    n = 12
    worst = 0.0
    for _ in range(200):
        mavg = rng.uniform(-1, 1, n)
        c = int(rng.integers(1, n))
        items = rng.choice(n, c, replace=False)
        values = rng.choice([-1.0, 1.0], c)
        with_one = UserBatch.from_coo(np.zeros(c, np.int64), items, values, values > 0, (1, n))
        without = UserBatch.from_coo(np.zeros(c - 1, np.int64), items[1:], values[1:], values[1:] > 0, (1, n))
        pure, _ = pair_loss(mech, TargetPair(without, with_one), mavg)
        worst = max(worst, pure)
    assert 0 < worst <= mech.claim.epsilon + 1e-9


@pytest.mark.slow
def test_user_level_epsilon_lb_grows_with_the_rating_count():
    """1 against 50 replaced ratings, 1,000 full runs per world each (about a minute).

    Growth is tested on the attack's separation d': its standard error is
    about sqrt((2 + d'²/2)/n) per count, so z below 3.5 when the shipped study
    measures d' ≈ 0.3 and ≈ 2 (z ≈ 25) has probability far below 1e-6. Every
    ε_LB must stay below the group-privacy bound 2cε: a valid bound exceeds the
    true ε with probability at most α = 0.01 (the false-failure probability of
    that check).
    """
    rows = study(counts=(1, 50), epsilon=2.0, trials=1000, alpha=0.01, world=StudyWorld(), report=lambda _: None)
    n = rows[0]["trials_per_world"]
    se = [math.sqrt((2 + r["d_prime"] ** 2 / 2) / n) for r in rows]
    z = (rows[1]["d_prime"] - rows[0]["d_prime"]) / math.hypot(*se)
    assert z > 3.5, rows
    assert rows[1]["epsilon_lb"] > rows[0]["epsilon_lb"], rows
    assert all(r["epsilon_lb"] <= r["group_bound"] for r in rows), rows
    assert "| 50 |" in markdown(rows, 2.0, StudyWorld(), 0.01)


@pytest.mark.parametrize("noise,norm", [("laplace", 0), ("gaussian", 1)])
def test_user_sensitivities_bound_a_whole_row_replaced(noise, norm):
    """Brute force over random pairs of rows with ≤ ξ ratings (MAvg fixed): every measurement's change
    stays within ``user_sensitivities``, and the worst pair found comes within a factor 3 of it."""
    from recaudit.studies.mcsherry_mironov_per_user import contributions
    from recaudit.mechanisms.mcsherry_mironov import MEASUREMENTS, user_sensitivities

    rng = np.random.default_rng(2)
    n, xi = 16, 6
    mech = McSherryMironov(epsilon=1.0, noise=noise, delta=1e-6 if norm else 0.0, min_rating=-1, max_rating=1)
    bound = user_sensitivities(-1, 1, 1.0, xi)
    worst = dict.fromkeys(MEASUREMENTS, 0.0)
    for _ in range(300):
        mavg = rng.uniform(-1, 1, n)
        rows = []
        for _ in range(2):
            c = int(rng.integers(1, xi + 1))
            items = rng.choice(n, c, replace=False)
            values = rng.choice([-1.0, 1.0], c) if rng.random() < 0.5 else np.full(c, rng.choice([-1.0, 1.0]))
            rows.append(UserBatch.from_coo(np.zeros(c, np.int64), items, values, values > 0, (1, n)).ratings)
        a, b = contributions(mech, rows[0], mavg), contributions(mech, rows[1], mavg)
        for k in MEASUREMENTS:
            d = a[k] - b[k]
            worst[k] = max(worst[k], np.abs(d).sum() if norm == 0 else np.linalg.norm(d))
    for k in MEASUREMENTS:
        assert worst[k] <= bound[k][norm] + 1e-9, (k, worst[k], bound[k][norm])
        assert worst[k] >= bound[k][norm] / 3, (k, worst[k], bound[k][norm])


def test_user_level_calibration_matches_the_accountant():
    """Noise of the per-rating ε from ``user_level_rating_epsilon``, composed by dp-accounting at the
    per-user sensitivities, gives back the requested user-level ε (Gaussian) — and exactly (Laplace)."""
    from recaudit.mechanisms.accounting import Composition, GaussianRelease, LaplaceRelease, epsilon_for
    from recaudit.mechanisms.mcsherry_mironov import MEASUREMENTS, user_level_rating_epsilon, user_sensitivities

    xi = 80
    user = user_sensitivities(-1, 1, 1.0, xi)
    for noise, delta in (("gaussian", 1e-6), ("laplace", 0.0)):
        target = McSherryMironov(epsilon=1.0, noise=noise, delta=delta, min_rating=-1, max_rating=1)
        mech = McSherryMironov(epsilon=user_level_rating_epsilon(target, xi), noise=noise, delta=delta,
                               min_rating=-1, max_rating=1)
        scales = mech.noise_scales()
        release = GaussianRelease if noise == "gaussian" else LaplaceRelease
        norm = 1 if noise == "gaussian" else 0
        event = Composition(tuple(release(scales[k], user[k][norm]) for k in MEASUREMENTS))
        assert epsilon_for(event, delta) == pytest.approx(1.0, rel=2e-3)
