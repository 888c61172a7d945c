import itertools

import numpy as np

from recaudit.mechanisms import MaxSense, MaxSenseBroken, UserBatch, WorldInfo
from recaudit.mechanisms.clustering import kmeans_1d
from recaudit.simulator.churn import Churn, simulate
from recaudit.simulator.population import SBMPopulation

WORLD = WorldInfo(n_items=40, ratings_per_user=4, n_item_clusters=2)


def test_sensing_probability_is_theta_over_w():
    m = MaxSense(epsilon=1.0, theta=2.0)
    state = m.init_state(WORLD)
    q = m.make_queries(20_000, np.random.default_rng(0), state)
    p = 2.0 / 4
    # 6 standard errors: false-failure probability < 2e-9
    assert abs(q.mean() - p) < 6 * np.sqrt(p * (1 - p) / q.size)


def test_sketch_is_the_max_of_sensed_likes():
    rng = np.random.default_rng(1)
    liked = rng.random((30, 40)) < 0.1
    users = UserBatch.from_masks(liked | (rng.random((30, 40)) < 0.1), liked)
    queries = rng.random((30, 40)) < 0.2
    sketch = MaxSense(epsilon=1.0).sketch(users, queries)
    expected = [[max([liked[u, i] for i in range(40) if queries[u, i]], default=False)] for u in range(30)]
    np.testing.assert_array_equal(sketch, expected)


def test_aggregate_adds_released_bits_of_sensed_items():
    m = MaxSense(epsilon=1.0)
    state = m.init_state(WORLD)
    queries = np.zeros((2, 40), bool)
    queries[0, [1, 2]] = True
    queries[1, [2, 3]] = True
    m.aggregate(state, queries, np.array([[True], [False]]))
    assert state.scores[[1, 2, 3]].tolist() == [1.0, 1.0, 0.0] and state.users_seen == 2


def test_broken_twin_spends_more_than_it_claims():
    twin = MaxSenseBroken(epsilon=1.0, leak_factor=3.0)
    assert twin.claim.epsilon == 1.0 and twin.randomizer_epsilon == 3.0


def test_kmeans_1d_is_optimal():
    rng = np.random.default_rng(2)
    x = rng.normal(size=9)
    labels = kmeans_1d(x, 3)

    def cost(lab):
        return sum(((x[lab == c] - x[lab == c].mean()) ** 2).sum() for c in np.unique(lab))

    best = min(cost(np.array(lab)) for lab in itertools.product(range(3), repeat=9) if len(set(lab)) == 3)
    assert cost(labels) == np.float64(best) or abs(cost(labels) - best) < 1e-12
    means = [x[labels == c].mean() for c in range(3)]
    assert means == sorted(means)



def test_kmeans_1d_in_small_blocks_is_still_optimal(monkeypatch):
    """The cost table is built a block of columns at a time; tiny blocks must not change the optimum."""
    import recaudit.mechanisms.clustering as clustering

    rng = np.random.default_rng(5)
    x = np.round(rng.normal(size=10), 1)  # ties included
    whole = kmeans_1d(x, 3)
    monkeypatch.setattr(clustering, "_BLOCK_ENTRIES", 5)
    labels = kmeans_1d(x, 3)

    def cost(lab):
        return sum(((x[lab == c] - x[lab == c].mean()) ** 2).sum() for c in np.unique(lab))

    every = np.array(list(itertools.product(range(3), repeat=10)))  # all 3^10 labelings, brute force
    member = every[:, :, None] == np.arange(3)  # (labelings, points, clusters)
    counts = member.sum(axis=1)
    sums, squares = (member * x[:, None]).sum(axis=1), (member * (x * x)[:, None]).sum(axis=1)
    costs = (squares - sums ** 2 / np.maximum(counts, 1)).sum(axis=1)
    best = cost(every[np.argmin(np.where((counts > 0).all(axis=1), costs, np.inf))])
    assert abs(cost(labels) - best) < 1e-12 and np.array_equal(labels, whole)

def test_maxsense_learns_the_item_clusters():
    pop = SBMPopulation(n_items=40, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                        like_probability=[[0.9, 0.2], [0.7, 0.05]], ratings_per_user=4)
    cat = pop.catalogue(np.random.default_rng(3))
    tr = simulate(pop, cat, MaxSense(epsilon=2.0), Churn(arrival_rate=4000, horizon=50, release_interval=25),
                  np.random.SeedSequence(3))
    labels = tr.releases[-1].published
    agree = (labels == cat.item_labels).mean()
    assert max(agree, 1 - agree) == 1.0


def test_centred_score_subtracts_the_mean_released_bit():
    # issue 13: score "centred" = sum_u H_ui (S_hat_u - mean bit), checked against a brute-force sum
    from recaudit.mechanisms import MultiMaxSense

    rng = np.random.default_rng(30)
    for mech, n_bits in ((MaxSense(epsilon=1.0, score="centred"), 1),
                         (MultiMaxSense(epsilon=3.0, score="centred"), 3)):
        state = mech.init_state(WORLD)
        qs, ms = [], []
        for size in (7, 13):
            q = mech.make_queries(size, rng, state)
            msg = rng.random((size, n_bits)) < 0.4
            state = mech.aggregate(state, q, msg)
            qs.append(q.reshape(size, n_bits, 40))
            ms.append(msg)
        q, msg = np.concatenate(qs).astype(float), np.concatenate(ms).astype(float)
        expected = np.einsum("ub,ubi->i", msg - msg.mean(), q)
        np.testing.assert_allclose(mech.item_scores(state), expected, atol=1e-9)
        np.testing.assert_allclose(type(mech)(epsilon=mech.epsilon).item_scores(state), state.scores)  # raw
        assert mech.dump_config()["score"] == "centred"
