"""Tests for recaudit.mechanisms.multi_maxsense (docs/families/local-clustering.md, Multi-MaxSense).

Statistical assertions use fixed seeds and a tolerance of 6 standard errors
(two-sided normal tail 2e-9 per comparison; with at most a few hundred
comparisons per test the union bound keeps each test's false-failure
probability below 1e-6). Audit assertions use Clopper–Pearson bounds at
alpha = 1e-6.
"""
import numpy as np
import pytest
from pydantic import ValidationError

from recaudit.audits.language.scenario import Scenario
from recaudit.audits.utility import clustering_accuracy
from recaudit.mechanisms import ParameterError, UserBatch, WorldInfo, bit_release
from recaudit.mechanisms.multi_maxsense import MultiMaxSense, MultiMaxSenseBroken, block_size
from recaudit.simulator.churn import Churn, simulate
from tests.ldp_helpers import audit, feed, sbm_population

Z = 6.0  # standard errors: P(|N(0,1)| > 6) = 2e-9


def scarce_population(n_items=40, w=10, b=((0.95, 0.05), (0.8, 0.05))):
    return sbm_population(n_items, w, b)


# ---------------------------------------------------------------- registry and parameters

def test_claim_composes_the_sketches_bits():
    m = MultiMaxSense(epsilon=2.5)
    c = m.claim
    # the accountant composes the Q bits: exact up to its discretization (1e-10 per RR bit), never below
    assert 2.5 <= c.epsilon == pytest.approx(2.5, rel=1e-9)
    assert (c.delta, c.model, c.unit, c.neighbouring) == (0.0, "local", "user", "replace")
    assert m.n_sketches == 3
    assert m.bit_epsilon == pytest.approx(2.5 / 3) == m.randomizer_epsilon


@pytest.mark.parametrize("eps, sketches, q", [(0.3, None, 1), (1.0, None, 1), (1.01, None, 2), (2.0, None, 2),
                                               (2.5, None, 3), (1.0, 4, 4)])
def test_number_of_sketches(eps, sketches, q):
    m = MultiMaxSense(epsilon=eps, sketches=sketches)
    assert m.n_sketches == q
    assert m.randomizer_epsilon == pytest.approx(eps / q)


def test_parameter_errors():
    with pytest.raises(ParameterError) as err:
        MultiMaxSense(epsilon=1.0, sketches=0)
    assert err.value.field == "sketches"
    with pytest.raises(ParameterError) as err:
        MultiMaxSenseBroken(epsilon=1.0)  # Q = 1: the twin would equal the correct mechanism
    assert err.value.field == "sketches"
    MultiMaxSenseBroken(epsilon=1.0, sketches=2)
    # N = 40, w = 10, theta = 1: 10 blocks of 4 items
    assert block_size(40, 10, 1.0) == 4
    MultiMaxSense(epsilon=1.0, sketches=10).init_state(WorldInfo(40, 10, 2))
    with pytest.raises(ParameterError) as err:
        MultiMaxSense(epsilon=1.0, sketches=11).init_state(WorldInfo(40, 10, 2))
    assert err.value.field == "sketches"


def test_block_size_rounding_and_clipping():
    assert block_size(100, 30, 1.0) == 3  # 3.33 rounds to 3
    assert block_size(100, 10, 20.0) == 100  # theta > w: one block of all items
    assert block_size(10, 1000, 1.0) == 1  # at least one item


def test_the_broken_twin_needs_two_sketches_to_leak():
    base = {"name": "t", "seed": 1, "population": {"kind": "sbm", "n_items": 10, "user_cluster_weights": [1],
                                                    "item_cluster_weights": [0.5, 0.5],
                                                    "like_probability": [[0.9, 0.1]], "ratings_per_user": 5}}
    Scenario.model_validate(base | {"mechanism": {"kind": "multi_maxsense_broken", "epsilon": 2.0}})
    with pytest.raises(ValidationError, match="sketches"):
        Scenario.model_validate(base | {"mechanism": {"kind": "multi_maxsense_broken", "epsilon": 1.0}})


# ---------------------------------------------------------------- queries

def test_queries_are_disjoint_blocks_with_sensing_probability_theta_over_w():
    n, w, users = 30, 6, 100_000
    m = MultiMaxSense(epsilon=3.0)  # Q = 3; block of round(30 / 6) = 5 items
    state = m.init_state(WorldInfo(n, w, 2))
    assert state.block_size == 5 and state.sensing_probability == pytest.approx(1 / w)
    q = m.make_queries(users, np.random.default_rng(1), state)
    assert q.shape == (users, 3, n) and q.dtype == bool
    assert np.all(q.sum(axis=2) == 5)  # every sensing set has exactly block_size items
    assert np.all(q.sum(axis=1) <= 1)  # disjoint
    # each (sketch, item) sensed with probability 1/6: 90 comparisons
    p = 5 / n
    freq = q.sum(axis=0)
    assert np.all(np.abs(freq - users * p) <= Z * np.sqrt(users * p * (1 - p)))
    # pairs of items in the same block: P = (5/30)(4/29) per sketch; check item 0 with each other item
    together = (q[:, :, 0:1] & q[:, :, 1:]).any(axis=1).sum(axis=0)
    p2 = 3 * (5 / 30) * (4 / 29)
    assert np.all(np.abs(together - users * p2) <= Z * np.sqrt(users * p2 * (1 - p2)))


# ---------------------------------------------------------------- sketch, release, likelihood, aggregate

def test_sketch_matches_brute_force():
    rng = np.random.default_rng(2)
    n, users = 12, 40
    rated = rng.random((users, n)) < 0.5
    liked = rated & (rng.random((users, n)) < 0.5)
    m = MultiMaxSense(epsilon=1.0, sketches=3)
    q = m.make_queries(users, rng, m.init_state(WorldInfo(n, 4, 2)))
    s = m.sketch(UserBatch.from_masks(rated, liked), q)
    assert s.shape == (users, 3) and s.dtype == bool
    for u in range(users):
        for k in range(3):
            assert s[u, k] == any(liked[u, i] for i in range(n) if q[u, k, i])


@pytest.mark.parametrize("cls, eps, sketches, bit_eps", [
    (MultiMaxSense, 2.0, None, 1.0), (MultiMaxSense, 3.0, 3, 1.0), (MultiMaxSense, 1.0, 2, 0.5),
    (MultiMaxSenseBroken, 2.0, None, 2.0), (MultiMaxSenseBroken, 1.0, 3, 1.0)])
def test_release_spends_the_randomizer_budget_per_bit(cls, eps, sketches, bit_eps):
    m = cls(epsilon=eps, sketches=sketches)
    assert m.randomizer_epsilon == pytest.approx(bit_eps)
    q = m.n_sketches
    bits = np.zeros((200_000, q), dtype=bool)
    bits[::2] = True
    out = m.release(bits, np.random.default_rng(3))
    keep = np.mean(out == bits, axis=0)  # per column
    p = float(bit_release.keep_probability(bit_eps))
    assert np.all(np.abs(keep - p) <= Z * np.sqrt(p * (1 - p) / bits.shape[0]))
    total = q * m.randomizer_epsilon  # basic composition over the Q bits
    if cls is MultiMaxSenseBroken:
        assert total == pytest.approx(q * eps) and total > m.claim.epsilon
    else:
        assert total == pytest.approx(m.claim.epsilon)


def test_message_log_likelihood_uses_epsilon_over_q_per_bit():
    rng = np.random.default_rng(4)
    s = rng.random((100, 3)) < 0.5
    msg = rng.random((100, 3)) < 0.5
    for m in (MultiMaxSense(epsilon=2.4, sketches=3), MultiMaxSenseBroken(epsilon=2.4, sketches=3)):
        np.testing.assert_allclose(m.message_log_likelihood(msg, s), bit_release.log_likelihood(msg, s, 0.8))


def test_aggregate_matches_brute_force():
    rng = np.random.default_rng(5)
    n = 12
    m = MultiMaxSense(epsilon=2.0)
    state = m.init_state(WorldInfo(n, 4, 2))
    ref = np.zeros(n)
    for size in (30, 1, 17):
        q = m.make_queries(size, rng, state)
        msg = rng.random((size, 2)) < 0.5
        state = m.aggregate(state, q, msg)
        for u in range(size):
            for k in range(2):
                ref += msg[u, k] * q[u, k]
    np.testing.assert_allclose(state.scores, ref)
    assert state.users_seen == 48


# ---------------------------------------------------------------- clustering

@pytest.mark.parametrize("params, users", [({"epsilon": 4.0, "sketches": 2}, 40_000), ({"epsilon": 2.0}, 80_000)])
def test_clustering_recovers_easy_blocks(params, users):
    pop = scarce_population()
    rng = np.random.default_rng(6)
    catalogue = pop.catalogue(rng)
    m = MultiMaxSense(**params)
    labels = m.publish(feed(m, pop, catalogue, users, rng))
    assert clustering_accuracy(labels, catalogue.item_labels) == 1.0


def test_simulate_end_to_end():
    pop = scarce_population()
    catalogue = pop.catalogue(np.random.default_rng(7))
    churn = Churn(arrival_rate=20_000, mean_lifetime=1.0, horizon=4.0, query_interval=0.25, release_interval=2.0)
    transcript = simulate(pop, catalogue, MultiMaxSense(epsilon=4.0, sketches=2), churn,
                          np.random.SeedSequence(7))
    assert transcript.messages.shape[1] == 2 and transcript.messages.dtype == bool
    assert transcript.releases[-1].users_seen == transcript.messages.shape[0] > 40_000
    assert clustering_accuracy(transcript.releases[-1].published, catalogue.item_labels) == 1.0


# ---------------------------------------------------------------- audit

@pytest.mark.parametrize("eps, sketches", [(1.0, None), (1.0, 2), (2.0, None), (2.0, 3)])
def test_audit_correct_is_consistent_broken_is_flagged(eps, sketches):
    pop = scarce_population(n_items=100, w=10, b=((0.9, 0.3), (0.6, 0.1)))
    m = MultiMaxSense(epsilon=eps, sketches=sketches)
    pair, bound = audit(m, pop, seed=8)
    q = m.n_sketches
    # the target pair differs in every one of the Q bits, so the audit can be tight
    assert pair.sketches.shape == (2, q) and pair.differing_bits == q
    assert bound.epsilon_lb <= eps  # false failure <= 1e-6
    assert bound.epsilon_lb > 0.85 * eps
    if q >= 2:
        pair_b, broken = audit(MultiMaxSenseBroken(epsilon=eps, sketches=sketches), pop, seed=8)
        assert pair_b.differing_bits == q
        assert broken.epsilon_lb > eps


def test_estimate_before_any_user_is_a_valid_labelling():
    m = MultiMaxSense(epsilon=2.0)
    labels = m.publish(m.init_state(WorldInfo(12, 6, 3)))
    assert labels.shape == (12,) and labels.min() >= 0 and labels.max() < 3
