import numpy as np
import pytest

from scipy import sparse

from recaudit.mechanisms import ParameterError, UserBatch
from recaudit.simulator.population import (RankOnePopulation, SBMPopulation, StarSBMPopulation, _sizes_from_weights,
                                  rank_one_world)
from recaudit.simulator.populations import MatrixPopulation, RatingsFilePopulation
from recaudit.simulator.ratings import RatingsData

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
    pop = RatingsFilePopulation(path=path, like_threshold=4, bootstrap=True)
    cat = pop.catalogue(np.random.default_rng(0))
    assert cat.n_items == 3 and cat.item_labels is None and cat.ratings_per_user == 2
    _, users = pop.sample_users(10, cat, np.random.default_rng(1))
    assert users.rated.sum(axis=1).tolist() == [2] * 10
    assert not (users.liked & ~users.rated).any()


# ---------------------------------------------------------------- star levels

STARS = [[[0.05, 0.10, 0.20, 0.35, 0.30], [0.30, 0.30, 0.20, 0.15, 0.05]],
         [[0.20, 0.25, 0.25, 0.20, 0.10], [0.05, 0.05, 0.20, 0.30, 0.40]]]


def stars_world(**kw):
    args = dict(n_items=60, user_cluster_weights=[0.3, 0.7], item_cluster_weights=[0.5, 0.5],
                star_probability=STARS, ratings_per_user=8)
    return StarSBMPopulation(**(args | kw))


def level_counts(pop, users, clusters, cat):
    coo = users.ratings.tocoo()
    k, l = clusters[coo.row], cat.item_labels[coo.col]
    counts = np.zeros((2, 2, 5), np.int64)
    np.add.at(counts, (k, l, coo.data.astype(int) - 1), 1)
    return counts


def test_star_levels_follow_the_configured_distribution():
    """Pearson's chi-square (scipy) per block at level 1e-4: false-failure probability <= 4e-4 over
    the 4 blocks (fixed seed; ~96,000 ratings, every expected count > 400, so the chi-square
    approximation holds). The same counts against a distribution 0.03 off in one level are refused,
    so the test has the power to fail."""
    from scipy.stats import chisquare

    pop = stars_world()
    rng = np.random.default_rng(11)
    cat = pop.catalogue(rng)
    clusters, users = pop.sample_users(12_000, cat, rng)
    counts = level_counts(pop, users, clusters, cat)
    expected = np.asarray(STARS)
    for k in range(2):
        for l in range(2):
            n = counts[k, l].sum()
            assert chisquare(counts[k, l], n * expected[k, l]).pvalue > 1e-4
            wrong = expected[k, l] + np.array([0.03, -0.03, 0, 0, 0])
            assert chisquare(counts[k, l], n * wrong).pvalue < 1e-4


def test_stars_likes_and_shape():
    pop = stars_world(like_threshold=4)
    rng = np.random.default_rng(12)
    cat = pop.catalogue(rng)
    clusters, users = pop.sample_users(300, cat, rng)
    stars = users.ratings.toarray()
    assert (users.rated.sum(axis=1) == 8).all() and set(np.unique(stars[users.rated])) <= {1, 2, 3, 4, 5}
    assert np.array_equal(users.liked, users.rated & (stars >= 4))
    assert np.allclose(pop.like_probability, np.asarray(STARS)[:, :, 3:].sum(axis=2))


@pytest.mark.parametrize("kw, field", [
    (dict(star_probability=[[[0.5, 0.5], [0.5, 0.5]]]), "star_probability"),  # one user cluster's row only
    (dict(star_probability=[[[0.5, 0.5], [0.5, 0.5]], [[0.5, 0.5], [0.5]]]), "star_probability"),  # ragged
    (dict(star_probability=[[[0.5, 0.6], [0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]]]), "star_probability"),
    (dict(star_probability=[[[1.0], [1.0]], [[1.0], [1.0]]]), "star_probability"),  # one level
    (dict(like_threshold=6), "like_threshold"),
    (dict(ratings_per_user=61), "ratings_per_user"),
])
def test_bad_star_parameters_name_their_field(kw, field):
    with pytest.raises(ParameterError) as info:
        stars_world(**kw)
    assert info.value.field == field


# ---------------------------------------------------------------- Jain et al.'s rank-one world


def test_a_fully_observed_rank_one_world_has_rank_one_and_unit_entries():
    world = rank_one_world(60, 15, 15, np.random.default_rng(0), test_fraction=0.0)
    y = world.data.train.toarray()
    assert world.data.train.nnz == 60 * 15 and np.linalg.matrix_rank(y) == 1
    assert np.array_equal(y, np.outer(world.user_factors, world.item_factors))
    assert np.abs(y).max() <= 1 and np.abs(world.item_factors).max() == 1 and (y != 0).all()


def test_rank_one_world_observes_at_most_xi_uniform_entries_and_holds_out_one_percent():
    """Items observed uniformly: chi-square (scipy) at level 1e-4, false-failure probability 1e-4."""
    from scipy.stats import chisquare

    world = rank_one_world(4_000, 40, 5, np.random.default_rng(1), test_fraction=0.01)
    train, test = world.data.train, world.data.test
    assert test.nnz == round(0.01 * 4_000 * 5) and train.nnz + test.nnz == 4_000 * 5
    assert (np.diff(train.indptr) <= 5).all() and ((np.diff(train.indptr) + np.diff(test.indptr)) == 5).all()
    assert train.multiply(test).nnz == 0
    for table in (train, test):
        coo = table.tocoo()
        assert np.array_equal(coo.data, world.truth(coo.row, coo.col))
        assert (np.abs(coo.data) <= 1).all() and (coo.data != 0).all()
    items = np.bincount((train + test).indices, minlength=40)
    assert chisquare(items).pvalue > 1e-4


def test_rank_one_population():
    pop = RankOnePopulation(n_items=30, ratings_per_user=6)
    rng = np.random.default_rng(2)
    cat = pop.catalogue(rng)
    clusters, users = pop.sample_users(500, cat, rng)
    assert (users.rated.sum(axis=1) == 6).all() and np.abs(cat.item_factors).max() == 1
    assert np.array_equal(cat.item_labels, (cat.item_factors < 0).astype(int))
    values = users.ratings.toarray()
    # liked exactly where the user's and the item's signs agree (threshold 0)
    same_sign = clusters[:, None] == cat.item_labels[None, :]
    assert np.array_equal(users.liked, users.rated & same_sign)
    assert np.array_equal(users.liked, users.rated & (values >= 0))
    with pytest.raises(ParameterError) as info:
        RankOnePopulation(n_items=30, ratings_per_user=31)
    assert info.value.field == "ratings_per_user"


def test_matrix_population_rows_are_those_built_from_coo_with_32_bit_indices():
    rng = np.random.default_rng(5)
    table = sparse.random_array((200, 30), density=0.3, format="csr", rng=rng)
    table.data -= 0.5  # likes: the ratings >= 0.1 below
    wide = sparse.csr_array((table.data, table.indices.astype(np.int64), table.indptr.astype(np.int64)),
                            shape=table.shape)
    rows = MatrixPopulation.from_ratings(RatingsData(wide, None, np.arange(200), np.arange(30)), 0.1, 1.0).rows
    coo = table.tocoo()
    expected = UserBatch.from_coo(coo.row, coo.col, coo.data, coo.data >= 0.1, table.shape)
    for got, want in ((rows.ratings, expected.ratings), (rows.likes, expected.likes)):
        assert got.indices.dtype == np.int32 and got.indptr.dtype == np.int32
        np.testing.assert_array_equal(got.toarray(), want.toarray())
    both = UserBatch.concat([rows, UserBatch.from_masks(rng.random((3, 30)) < 0.5, rng.random((3, 30)) < 0.5)])
    assert both.ratings.indices.dtype == np.int32 and both.likes.indptr.dtype == np.int32
    np.testing.assert_array_equal(both.ratings.toarray()[:200], table.toarray())


@pytest.mark.parametrize("fraction", [0.1, 0.9])  # the kept entries counted from the kept or the dropped ones
def test_a_split_in_place_gives_the_tables_a_copying_split_gives(fraction):
    from recaudit.simulator.ratings import split_ratings

    rng = np.random.default_rng(11)
    table = sparse.random_array((300, 40), density=0.2, format="csr", rng=rng)
    table = sparse.csr_array(table[np.flatnonzero(rng.random(300) < 0.8)])  # (with empty rows)
    seed = np.random.SeedSequence(3)
    train, test = split_ratings(table, fraction, None, seed)
    own = sparse.csr_array((table.data.copy(), table.indices.copy(), table.indptr.copy()), shape=table.shape)
    train2, test2 = split_ratings(own, fraction, None, seed, in_place=True)
    assert test.nnz == round(fraction * table.nnz)
    assert np.shares_memory(train2.data, own.data) or fraction > 0.5  # (scipy copies a view under half its base)
    for got, want in ((train2, train), (test2, test)):
        for name in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    np.testing.assert_array_equal((train + test).toarray(), table.toarray())


def test_gathered_rows_are_the_concatenated_takes():
    rng = np.random.default_rng(12)

    def batch(n, held=False):
        rated = rng.random((n, 25)) < 0.3
        b = UserBatch.from_masks(rated, rated & (rng.random((n, 25)) < 0.5), np.where(rated, 2.0, 1.0))
        b = b.with_private(sparse.csr_array(rated & (rng.random((n, 25)) < 0.3)))
        return UserBatch(b.ratings, b.likes, b.private, sparse.csr_array(rng.random((n, 25)) < 0.1) if held else None)

    a, b = batch(50, held=True), batch(7)
    parts = [(a, rng.permutation(50)[:40]), (b, slice(2, 6)), (a, np.zeros(0, np.int64))]
    want = UserBatch.concat([x.take(i) for x, i in parts])
    got = UserBatch.gather(parts)
    for name in ("ratings", "likes", "private", "held_out"):
        np.testing.assert_array_equal(getattr(got, name).toarray(), getattr(want, name).toarray())
    assert got.ratings.indices.dtype == np.int32
    from recaudit.mechanisms.sparse_rows import gather_rows

    small_chunks = gather_rows([(x.ratings, i) for x, i in parts], chunk=3)
    np.testing.assert_array_equal(small_chunks.toarray(), want.ratings.toarray())


def test_likes_left_out_stay_out_and_reading_them_fails():
    rng = np.random.default_rng(13)
    batch = UserBatch.from_masks(rng.random((9, 6)) < 0.5, rng.random((9, 6)) < 0.5)
    lean = UserBatch.gather([(batch, slice(0, 5))], likes=False)
    assert lean.likes is None and lean.take(np.array([1, 2])).likes is None
    assert UserBatch.concat([lean, batch.take(slice(5, 9))]).likes is None
    np.testing.assert_array_equal(lean.ratings.toarray(), batch.ratings.toarray()[:5])
    with pytest.raises(AttributeError):
        lean.liked
