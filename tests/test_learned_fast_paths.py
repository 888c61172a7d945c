"""The learned attacks' fast paths give the slow paths' scores (deterministic checks, fixed seeds; no statistics)."""
import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from recaudit.attacks.learned import MIN_SAMPLES_LEAF, output_table, splittable_columns
from recaudit.attacks.sparse import SparseBoostedAttack
from recaudit.mechanisms.vector_reference import VECTOR_REFERENCE


def test_splittable_columns_drops_only_columns_no_leaf_can_split():
    n = 1_000
    features = np.zeros((n, 5))
    features[:, 0] = np.arange(n)                     # all distinct: kept
    features[500:519, 1] = 1.0                        # 19 rows differ from the rest: no split leaves 20 a side
    features[500:520, 2] = 1.0                        # 20 rows differ: splittable, kept
    features[[0, n // 2, n - 1], 3] = 7.0             # 3 odd rows, all where the shared value is looked for: kept
    assert splittable_columns(features, MIN_SAMPLES_LEAF).tolist() == [0, 2, 3]  # column 4 is constant
    assert splittable_columns(np.zeros((n, 2)), MIN_SAMPLES_LEAF).tolist() == [0]  # never no column at all


def test_trees_on_splittable_columns_score_as_on_all_columns():
    # sparse_boosted on a 4-bin Laplace histogram (continuous): its count/column features are near-constant and
    # are left out of the trees; the trees fitted on every column, as before, give the same scores exactly
    mech = VECTOR_REFERENCE["vector_laplace"](1.0)
    seeds = np.random.SeedSequence(11).spawn(3)
    tables = [output_table(mech.sample(v, 6_000, np.random.default_rng(s)), 6_000)
              for v, s in zip(mech.neighbours, seeds)]
    attack = SparseBoostedAttack(max_fit=2_000, held_out=1_000)
    attack.fit_outputs(tables[0].take(slice(0, 4_000)), tables[1].take(slice(0, 4_000)), seed=seeds[2])
    every = attack._features(np.vstack([attack._rare(t.take(slice(0, 2_000))).values for t in tables]))
    assert attack._splittable.size < every.shape[1]  # something was left out
    with threadpool_limits(1):  # OpenMP's threads spin on a busy machine (the attack limits them too)
        slow = HistGradientBoostingClassifier(
            max_iter=attack.max_iter, learning_rate=attack.learning_rate, max_leaf_nodes=attack.max_leaf_nodes,
            min_samples_leaf=MIN_SAMPLES_LEAF, early_stopping=True, random_state=attack._model.random_state,
        ).fit(every, np.repeat([0, 1], 2_000))
        attack._additive = None  # score with the trees
        rest = tables[0].take(slice(4_000, None))
        np.testing.assert_array_equal(attack.score_outputs(rest),
                                      slow.decision_function(attack._features(attack._rare(rest).values)))


def test_additive_decision_is_numpy_interp_exactly():
    # the additive model's counted-interval interpolation against np.interp, bit for bit: random rows, rows on
    # every knot, left and right of the knots, a constant column (one knot), across chunk boundaries
    from recaudit.attacks.additive import Additive

    rng = np.random.default_rng(4)
    x = rng.laplace(0.0, 2.0, (3_000, 3))
    y = np.repeat([0, 1], 1_500)
    x[1_500:, 0] += 1.0
    x[:, 2] = 5.0
    model = Additive(x, y)
    model.CHUNK = 1_000
    probe = np.vstack([rng.laplace(0.0, 3.0, (2_500, 3)), np.column_stack([model.knots[0], model.knots[1][:10],
                                                                        np.full(10, 5.0)]),
                       [[-1e9, 1e9, 5.0], [1e9, -1e9, 4.0], [1e300, -1e300, 6.0]]])
    slow = model.intercept + probe @ model.slope
    for j, (k, v) in enumerate(zip(model.knots, model.values)):
        slow += np.interp(probe[:, j], k, v)
    assert [k.size for k in model.knots] == [10, 10, 1]
    np.testing.assert_array_equal(model.decision(probe), slow)


def test_trees_score_each_distinct_discrete_row_once_as_every_row():
    # noisy-max indices and sparse-vector rows (discrete, few distinct): boosted and sparse_boosted score the
    # distinct rows and gather; scoring every row gives the same numbers
    from recaudit.attacks.learned import BoostedAttack
    from recaudit.mechanisms.vector_reference import VECTOR_BROKEN

    for name in ("report_noisy_max_index", "sparse_vector"):
        mech = VECTOR_BROKEN[name](1.0)
        seeds = np.random.SeedSequence(12).spawn(2)
        tables = [output_table(mech.sample(v, 4_000, np.random.default_rng(s)), 4_000)
                  for v, s in zip(mech.neighbours, seeds)]
        assert tables[0].discrete.all()
        for attack in (BoostedAttack(max_fit=1_500, held_out=500), SparseBoostedAttack(max_fit=1_500, held_out=500)):
            attack.fit_outputs(tables[0].take(slice(0, 2_000)), tables[1].take(slice(0, 2_000)), seed=3)
            rest = tables[1].take(slice(2_000, None))
            fast = attack.score_outputs(rest)
            assert np.unique(fast).size < 100  # few distinct rows: the lookup path was taken
            np.testing.assert_array_equal(fast, attack._tree_scores(rest))
