import numpy as np
import pytest

from recaudit.mechanisms import MaxSense
from recaudit.simulator.churn import Churn, simulate
from recaudit.simulator.population import SBMPopulation
from recaudit.simulator.transcript import releases_view

POP = SBMPopulation(n_items=50, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                    like_probability=[[0.9, 0.3], [0.6, 0.1]], ratings_per_user=5)


def run(seed=0, **churn):
    cfg = Churn(**({"arrival_rate": 200.0, "mean_lifetime": 1.0, "horizon": 30.0, "query_interval": 0.5,
                    "release_interval": 10.0} | churn))
    root = np.random.SeedSequence(seed)
    cat = POP.catalogue(np.random.default_rng(seed))
    return simulate(POP, cat, MaxSense(epsilon=1.0), cfg, root), cfg


def test_arrivals_are_poisson():
    tr, cfg = run()
    expected = cfg.arrival_rate * cfg.horizon
    # 6 standard deviations of a Poisson count: false-failure probability < 2e-9
    assert abs(tr.n_users - expected) < 6 * np.sqrt(expected)
    assert np.all(np.diff(tr.arrival) >= 0) and tr.arrival.max() <= cfg.horizon


def test_users_answer_only_while_present_and_at_most_their_quota():
    tr, _ = run(queries_per_user=2)
    arrival, departure = tr.arrival[tr.answer_user], tr.departure[tr.answer_user]
    assert np.all(arrival <= tr.answer_time) and np.all(tr.answer_time < departure)
    assert np.bincount(tr.answer_user).max() <= 2
    assert (np.bincount(tr.answer_user) == 2).any()


def test_short_visits_are_lost_to_churn():
    tr, cfg = run(mean_lifetime=0.2)
    # users who left before the next query tick never answer
    assert 0 < tr.n_answered_users < tr.n_users
    never = np.setdiff1d(np.arange(tr.n_users), tr.answer_user)
    next_tick = np.ceil(tr.arrival[never] / cfg.query_interval) * cfg.query_interval
    assert np.all(tr.departure[never] <= next_tick + 1e-9)


def test_releases_follow_the_schedule():
    tr, _ = run()
    assert [r.time for r in tr.releases] == [10.0, 20.0, 30.0]
    seen = [r.users_seen for r in tr.releases]
    assert seen == sorted(seen) and seen[-1] == tr.messages.shape[0]
    assert len(releases_view(tr).releases) == 3


def test_a_final_release_at_an_off_schedule_horizon():
    tr, _ = run(horizon=25.0)
    assert [r.time for r in tr.releases] == [10.0, 20.0, 25.0]


def test_same_seed_same_transcript_and_other_seed_differs():
    a, _ = run(seed=4)
    b, _ = run(seed=4)
    c, _ = run(seed=5)
    np.testing.assert_array_equal(a.messages, b.messages)
    np.testing.assert_array_equal(a.answer_user, b.answer_user)
    assert a.n_users != c.n_users or not np.array_equal(a.arrival, c.arrival)


def test_one_message_row_per_answer():
    tr, _ = run()
    user = int(tr.answer_user[0])
    assert tr.messages[tr.answer_user == user].shape == (1, 1)


def test_churn_rejects_intervals_longer_than_the_horizon():
    with pytest.raises(ValueError, match="horizon"):
        Churn(horizon=1.0, release_interval=5.0)
