import numpy as np
import pytest

from mechanisms import ParameterError
from simulator.population import SBMPopulation, RatingsFilePopulation, _sizes_from_weights

B = [[0.9, 0.3], [0.6, 0.1]]


def make(**kw):
    args = dict(n_items=60, user_cluster_weights=[0.3, 0.7], item_cluster_weights=[0.5, 0.5],
                like_probability=B, ratings_per_user=8)
    return SBMPopulation(**(args | kw))


def test_cluster_sizes_follow_weights_exactly():
    assert list(_sizes_from_weights(np.array([0.2, 0.3, 0.5]), 11)) == [2, 3, 6]
    cat = make().catalogue(np.random.default_rng(0))
    assert np.bincount(cat.item_labels).tolist() == [30, 30]


def test_users_rate_exactly_w_items_and_like_only_rated_ones():
    pop = make()
    rng = np.random.default_rng(1)
    cat = pop.catalogue(rng)
    clusters, users = pop.sample_users(500, cat, rng)
    assert (users.rated.sum(axis=1) == 8).all()
    assert not (users.liked & ~users.rated).any()
    assert set(np.unique(clusters)) <= {0, 1}


def test_like_rates_match_the_block_matrix():
    pop = make()
    rng = np.random.default_rng(2)
    cat = pop.catalogue(rng)
    clusters, users = pop.sample_users(40_000, cat, rng)
    for k in range(2):
        for l in range(2):
            rated = users.rated[clusters == k][:, cat.item_labels == l]
            liked = users.liked[clusters == k][:, cat.item_labels == l]
            n = rated.sum()
            # 6 standard errors: false-failure probability < 2e-9 per cell
            assert abs(liked.sum() / n - B[k][l]) < 6 * np.sqrt(0.25 / n)


def test_user_cluster_weights():
    pop = make()
    rng = np.random.default_rng(3)
    clusters, _ = pop.sample_users(100_000, pop.catalogue(rng), rng)
    assert abs((clusters == 0).mean() - 0.3) < 6 * np.sqrt(0.21 / 100_000)


@pytest.mark.parametrize("kw, field", [
    (dict(like_probability=[[0.9, 0.3]]), "like_probability"),
    (dict(like_probability=[[0.9, 0.3], [0.6, 0.1, 0.2]]), "like_probability"),
    (dict(like_probability=[[0.9, 1.3], [0.6, 0.1]]), "like_probability"),
    (dict(ratings_per_user=61), "ratings_per_user"),
])
def test_bad_parameters_name_their_field(kw, field):
    with pytest.raises(ParameterError) as info:
        make(**kw)
    assert info.value.field == field


def test_ratings_file_population(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("user,item,rating\n1,a,5\n1,b,2\n2,a,1\n2,c,4\n")
    pop = RatingsFilePopulation(path=path, like_threshold=4)
    cat = pop.catalogue(np.random.default_rng(0))
    assert cat.n_items == 3 and cat.item_labels is None and cat.ratings_per_user == 2
    _, users = pop.sample_users(10, cat, np.random.default_rng(1))
    assert users.rated.sum(axis=1).tolist() == [2] * 10
    assert not (users.liked & ~users.rated).any()
