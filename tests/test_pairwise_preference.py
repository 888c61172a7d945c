"""Tests for recaudit.mechanisms.pairwise_preference (docs/families/local-clustering.md, Pairwise-Preference).

Statistical assertions use fixed seeds and a tolerance of 6 standard errors
(two-sided normal tail 2e-9 per comparison; with the number of comparisons
per test stated, the union bound keeps each test's false-failure probability
below 1e-6). The audit assertions use Clopper–Pearson bounds at alpha = 1e-6.
"""
import numpy as np
import pytest

from recaudit.audits.utility import clustering_accuracy
from recaudit.mechanisms import UserBatch, WorldInfo, bit_release
from recaudit.mechanisms.pairwise_preference import PairwisePreference, PairwisePreferenceBroken, rated_pairs
from recaudit.simulator.churn import Churn, simulate
from tests.ldp_helpers import audit, sbm_population
from tests.ldp_helpers import feed as _feed

Z = 6.0  # standard errors: P(|N(0,1)| > 6) = 2e-9


def rich_population(n_items=40, w=40, b=((0.95, 0.05), (0.05, 0.95))):
    return sbm_population(n_items, w, b)


def world(n_items, w=10, clusters=2):
    return WorldInfo(n_items, w, clusters)


def feed(*args, batch=10000, **kwargs):
    return _feed(*args, batch=batch, **kwargs)


# ---------------------------------------------------------------- registry and parameters

def test_claim_protects_only_likes_when_the_rated_set_is_public():
    m = PairwisePreference(epsilon=1.5, public_rated_set=True)
    c = m.claim
    # the accountant's epsilon is a pessimistic upper bound: exact up to its discretization (1e-10 for RR)
    assert c.epsilon == pytest.approx(1.5, rel=1e-9)
    # with a public rated set only the likes are protected (issue 13): neighbours share the rated set
    assert (c.delta, c.model, c.unit, c.neighbouring) == (0.0, "local", "user", "replace_likes")
    assert PairwisePreference(epsilon=1.5).claim.neighbouring == "replace"
    assert m.randomizer_epsilon == 1.5


# ---------------------------------------------------------------- queries

def test_random_pairs_are_distinct_ordered_and_uniform():
    n, users = 12, 300_000
    m = PairwisePreference(epsilon=1.0)
    q = m.make_queries(users, np.random.default_rng(1), m.init_state(world(n)))
    assert q.shape == (users, 2) and np.issubdtype(q.dtype, np.integer)
    assert np.all(q[:, 0] < q[:, 1]) and q.min() >= 0 and q.max() < n
    # every unordered pair with probability 1 / C(n, 2): 66 comparisons, union bound 1.3e-7
    counts = np.zeros((n, n))
    np.add.at(counts, (q[:, 0], q[:, 1]), 1)
    p = 1.0 / (n * (n - 1) / 2)
    upper = counts[np.triu_indices(n, 1)]
    assert np.all(np.abs(upper - users * p) <= Z * np.sqrt(users * p * (1 - p)))


def test_public_rated_set_pairs_are_uniform_rated_pairs():
    n, users = 10, 120_000
    rated = np.zeros((users, n), dtype=bool)
    rated[:, [1, 4, 6, 9]] = True  # every user rated items 1, 4, 6, 9
    rated[:1000] = False
    rated[:1000, 3] = True  # a thousand users rated a single item
    m = PairwisePreference(epsilon=1.0, public_rated_set=True)
    rng = np.random.default_rng(2)
    q = m.make_queries(users, rng, m.init_state(world(n)), rated)
    assert q.shape == (users, 2) and np.all(q[:, 0] < q[:, 1])
    rich = q[1000:]
    assert np.all(rated[np.arange(1000, users)[:, None], rich])
    # the six rated pairs, each with probability 1/6: 6 comparisons
    keys = rich[:, 0] * n + rich[:, 1]
    expected = {1 * n + 4, 1 * n + 6, 1 * n + 9, 4 * n + 6, 4 * n + 9, 6 * n + 9}
    values, counts = np.unique(keys, return_counts=True)
    assert set(values.tolist()) == expected
    k = rich.shape[0]
    assert np.all(np.abs(counts - k / 6) <= Z * np.sqrt(k * (1 / 6) * (5 / 6)))
    # users with fewer than two rated items get a random pair of distinct items
    few = q[:1000]
    assert np.all(few[:, 0] < few[:, 1]) and len(np.unique(few[:, 0] * n + few[:, 1])) > 30
    # without rated masks the pairs are uniform random pairs
    q2 = m.make_queries(500, rng, m.init_state(world(n)), None)
    assert q2.shape == (500, 2) and np.all(q2[:, 0] < q2[:, 1])


def test_rated_pairs_helper_on_sparse_masks():
    rng = np.random.default_rng(3)
    rated = rng.random((5000, 30)) < 0.1
    pairs = rated_pairs(rated, rng)
    ok = rated.sum(1) >= 2
    rows = np.arange(5000)
    assert np.all(rated[rows[ok], pairs[ok, 0]] & rated[rows[ok], pairs[ok, 1]])
    assert np.all(pairs[:, 0] < pairs[:, 1])


# ---------------------------------------------------------------- sketch, release, likelihood, aggregate

def test_sketch_matches_brute_force():
    rng = np.random.default_rng(4)
    n, users = 7, 50
    rated = rng.random((users, n)) < 0.6
    liked = rated & (rng.random((users, n)) < 0.5)
    batch = UserBatch.from_masks(rated, liked)
    m = PairwisePreference(epsilon=1.0)
    q = m.make_queries(users, rng, m.init_state(world(n)))
    s = m.sketch(batch, q)
    assert s.shape == (users, 1) and s.dtype == bool
    for u in range(users):
        i, j = q[u]
        assert s[u, 0] == bool(liked[u, i] and liked[u, j])


@pytest.mark.parametrize("cls, factor", [(PairwisePreference, 1.0), (PairwisePreferenceBroken, 2.0)])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_release_spends_the_randomizer_budget(cls, factor, eps):
    m = cls(epsilon=eps)
    assert m.randomizer_epsilon == pytest.approx(factor * eps)
    bits = np.zeros((400_000, 1), dtype=bool)
    bits[::2] = True
    out = m.release(bits, np.random.default_rng(5))
    keep = float(np.mean(out == bits))
    p = float(bit_release.keep_probability(factor * eps))
    assert abs(keep - p) <= Z * np.sqrt(p * (1 - p) / bits.size)
    if factor > 1:
        assert m.randomizer_epsilon > m.claim.epsilon


def test_message_log_likelihood_is_the_published_randomizer():
    rng = np.random.default_rng(6)
    s = rng.random((100, 1)) < 0.5
    msg = rng.random((100, 1)) < 0.5
    for m in (PairwisePreference(epsilon=1.3), PairwisePreferenceBroken(epsilon=1.3, leak_factor=3)):
        np.testing.assert_allclose(m.message_log_likelihood(msg, s), bit_release.log_likelihood(msg, s, 1.3))


def test_aggregate_matches_brute_force_and_statistics():
    rng = np.random.default_rng(7)
    n = 6
    m = PairwisePreference(epsilon=1.0)
    state = m.init_state(world(n))
    all_q, all_msg = [], []
    for size in (40, 1, 25):
        q = m.make_queries(size, rng, state)
        msg = rng.random((size, 1)) < 0.5
        state = m.aggregate(state, q, msg)
        all_q.append(q)
        all_msg.append(msg)
    q, msg = np.concatenate(all_q), np.concatenate(all_msg)
    ref, cnt = np.zeros((n, n)), np.zeros((n, n), dtype=np.int64)
    for (i, j), b in zip(q, msg[:, 0]):
        ref[i, j] += b
        ref[j, i] += b
        cnt[i, j] += 1
        cnt[j, i] += 1
    np.testing.assert_array_equal(state.counts, ref)
    np.testing.assert_array_equal(state.pair_counts, cnt)
    assert state.users_seen == 66 and np.all(np.diag(state.counts) == 0)
    e = np.e
    debiased = ((1 + e) * ref - cnt) / (e - 1)
    np.testing.assert_allclose(m.matrix(state), debiased)
    np.testing.assert_allclose(PairwisePreference(epsilon=1.0, statistic="sum").matrix(state), ref)
    np.testing.assert_allclose(PairwisePreference(epsilon=1.0, statistic="debiased_mean").matrix(state),
                               debiased / np.maximum(cnt, 1))


# ---------------------------------------------------------------- clustering

@pytest.mark.parametrize("statistic", ["debiased_sum", "debiased_mean"])
def test_clustering_recovers_easy_blocks(statistic):
    pop = rich_population()
    rng = np.random.default_rng(8)
    catalogue = pop.catalogue(rng)
    m = PairwisePreference(epsilon=3.0, statistic=statistic)
    state = feed(m, pop, catalogue, 60_000, rng)
    labels = m.publish(state)
    assert labels.shape == (40,)
    assert clustering_accuracy(labels, catalogue.item_labels) == 1.0
    np.testing.assert_array_equal(m.publish(state), labels)  # deterministic


def test_public_rated_set_clusters_in_scarce_regime():
    pop = rich_population(n_items=60, w=8)
    rng = np.random.default_rng(9)
    catalogue = pop.catalogue(rng)
    m = PairwisePreference(epsilon=3.0, public_rated_set=True)
    labels = m.publish(feed(m, pop, catalogue, 60_000, rng))
    assert clustering_accuracy(labels, catalogue.item_labels) == 1.0


def test_simulate_end_to_end():
    pop = rich_population()
    catalogue = pop.catalogue(np.random.default_rng(10))
    churn = Churn(arrival_rate=20_000, mean_lifetime=1.0, horizon=4.0, query_interval=0.25, release_interval=2.0)
    transcript = simulate(pop, catalogue, PairwisePreference(epsilon=3.0), churn, np.random.SeedSequence(10))
    assert transcript.messages.shape[1] == 1 and transcript.messages.dtype == bool
    assert len(transcript.releases) == 2
    assert transcript.releases[-1].users_seen == transcript.messages.shape[0] > 40_000
    assert clustering_accuracy(transcript.releases[-1].published, catalogue.item_labels) == 1.0


# ---------------------------------------------------------------- audit

@pytest.mark.parametrize("public", [False, True])
@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_audit_correct_is_consistent_broken_is_flagged(eps, public):
    pop = rich_population(n_items=30, w=15)
    pair, bound = audit(PairwisePreference(epsilon=eps, public_rated_set=public), pop, seed=11)
    assert pair.sketches.shape == (2, 1) and pair.differing_bits == 1
    assert bound.epsilon_lb <= eps  # false failure <= 1e-6 (Clopper–Pearson at alpha = 1e-6)
    assert bound.epsilon_lb > 0.9 * eps  # the LR test on one differing bit is nearly tight
    _, broken = audit(PairwisePreferenceBroken(epsilon=eps, public_rated_set=public), pop, seed=11)
    assert broken.epsilon_lb > eps


class PublicRatedSetOldClaim(PairwisePreference):
    """The first version: queries from the rated set, but the claim said epsilon-LDP per user (replace)."""

    claim_neighbouring = "replace"


def test_public_rated_set_under_a_user_level_claim_is_flagged():
    # Issue 13: the query is two of the user's own rated items, so a user-level replace neighbour with another
    # rated set never asks the same pair: epsilon is infinite. The old claim must be violated, by far: with
    # 10^5 evaluation runs per world and no error, the bound reaches its ceiling, 8.8 at alpha = 1e-6.
    pop = rich_population(n_items=30, w=15)
    old = PublicRatedSetOldClaim(epsilon=1.0, public_rated_set=True)
    assert old.claim.neighbouring == "replace" and old.claim.epsilon == pytest.approx(1.0, rel=1e-9)
    pair, bound = audit(old, pop, seed=12)
    assert not np.any(pair.rows0.rated & pair.rows1.rated)  # the worlds rate disjoint sets (w = N/2)
    assert bound.false_pos == 0 and bound.false_neg == 0
    assert bound.epsilon_lb == pytest.approx(bound.ceiling) and bound.epsilon_lb > 8 * old.claim.epsilon
    # the same mechanism audited for what it now claims (likes, rated set public) is consistent
    pair, bound = audit(PairwisePreference(epsilon=1.0, public_rated_set=True), pop, seed=12)
    assert np.array_equal(pair.rows0.rated, pair.rows1.rated)
    assert bound.epsilon_lb <= 1.0  # false failure <= 1e-6


def test_query_log_likelihood_matches_the_pair_law():
    rng = np.random.default_rng(13)
    rated = rng.random((5000, 12)) < 0.5
    rated[0] = False
    rated[0, 3] = True  # fewer than two rated items: a uniform pair
    m = PairwisePreference(epsilon=1.0, public_rated_set=True)
    q = m.make_queries(len(rated), rng, m.init_state(WorldInfo(12, 6, 2)), rated)
    ll = m.query_log_likelihood(q, rated)
    r = rated.sum(1)
    expected = np.where(r >= 2, -np.log(np.maximum(r * (r - 1) / 2, 1)), -np.log(66.0))
    np.testing.assert_allclose(ll, expected)
    other = ~rated
    assert np.all(np.isneginf(m.query_log_likelihood(q, other)[(r >= 2) & (other.sum(1) >= 2)]))
    assert PairwisePreference(epsilon=1.0).query_log_likelihood(q, rated) is None


def test_estimate_before_any_user_is_a_valid_labelling():
    m = PairwisePreference(epsilon=1.0)
    labels = m.publish(m.init_state(WorldInfo(12, 6, 3)))
    assert labels.shape == (12,) and labels.min() >= 0 and labels.max() < 3
    assert np.all(m.publish(m.init_state(WorldInfo(12, 6, 1))) == 0)


def test_unknown_statistic_is_a_parameter_error():
    from recaudit.mechanisms import ParameterError

    with pytest.raises(ParameterError) as err:
        PairwisePreference(epsilon=1.0, statistic="median")
    assert err.value.field == "statistic"
