"""Reconstruction attacks and their audit against the public prior (audits/reconstruction.py)."""
from __future__ import annotations


import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from recaudit.attacks import ATTACKS
from recaudit.attacks.laplace_posterior import level_prior
from recaudit.audits import reconstruction
from recaudit.mechanisms import UserBatch, WorldInfo
from recaudit.mechanisms.xin_jaakkola import XinJaakkola, XinJaakkolaLaplace
from recaudit.audits.designs.pairs import PAIR_POLICIES
from recaudit.simulator.transcript import MessagesView, ReleasesView

from tests.test_xin_jaakkola import star_population


@pytest.fixture(scope="module")
def world():
    """A 3-cluster blockmodel with 100 public and 300 private users, the public model fitted.

    (With 2 symmetric clusters the sign of every pair is nearly public: items of one
    cluster always move together. Three clusters leave a user-specific part.)
    """
    pop = star_population(90, 30, clusters=3)
    rng = np.random.default_rng(20)
    catalogue = pop.catalogue(rng)
    _, rows = pop.sample_users(400, catalogue, rng)
    public, private = rows.take(slice(0, 100)), rows.take(slice(100, 400))
    mech = XinJaakkola(response="pmd", public_users=100)
    state = mech.init_public(mech.init_state(WorldInfo(90, 30, 3)), public)
    return pop, catalogue, public, private, state.model


def test_dinur_nissim_recovers_the_database_from_noise_below_sqrt_n():
    """n = 128 bits, 8n random subset sums, noise |e| <= n^0.3 = 4.3 (o(sqrt n)): almost every bit back.

    Dinur–Nissim: all but o(n) bits. At this n we ask for >= 90% (5 other seeds gave 95-98%).
    """
    rng = np.random.default_rng(21)
    n = 128
    bits = (rng.random(n) < 0.5).astype(float)
    result = reconstruction.dinur_nissim(bits, 8 * n, n ** 0.3, rng)
    assert result.attack_accuracy >= 0.9
    assert result.p_value < 1e-6
    # the same attack against noise of order n recovers little: the o(sqrt n) condition matters
    loud = reconstruction.dinur_nissim(bits, 4 * n, float(n), rng)
    assert loud.attack_accuracy < result.attack_accuracy - 0.1


def test_mcnemar_agrees_with_statsmodels():
    rng = np.random.default_rng(22)
    a = rng.random(300) < 0.8
    p = rng.random(300) < 0.6
    ours = reconstruction.mcnemar("x", "y", a, p)
    table = [[np.sum(a & p), np.sum(a & ~p)], [np.sum(~a & p), np.sum(~a & ~p)]]
    two_sided = sm_mcnemar(table, exact=True).pvalue
    assert ours.wins > ours.losses
    assert ours.p_value == pytest.approx(two_sided / 2, rel=1e-9)


def test_laplace_posterior_beats_the_prior(world):
    pop, catalogue, public, private, model = world
    mech = XinJaakkolaLaplace(epsilon=3.0, n_items=90)
    messages = mech.messages(private, model, np.random.default_rng(23))
    prior = level_prior(public.ratings, mech.level_array)
    result = reconstruction.laplace_posterior(messages, private.ratings, prior, mech.level_array, mech.scale)
    assert result.attack_accuracy > result.prior_accuracy and result.p_value < 1e-6


def test_pmd_leaks_pairs_but_not_single_coordinates(world):
    pop, catalogue, public, private, model = world
    mech = XinJaakkola(response="pmd")
    messages = mech.messages(private, model, np.random.default_rng(24))
    for smooth in (False, True):
        pairs = reconstruction.pmd_pairwise(messages, model.mu, private.ratings, model.sigma, smooth)
        assert pairs.attack_accuracy > pairs.prior_accuracy and pairs.p_value < 1e-6
    single = reconstruction.pmd_coordinate(messages, private.ratings,
                                           reconstruction.public_level_mode(public.ratings, mech.level_array))
    # a uniform coordinate guesses a level with probability 1/5; the public mode does better
    assert single.attack_accuracy < single.prior_accuracy and single.p_value > 0.5


def _canary_view(mech, model, pair, worlds, rng):
    rows = pair.rows0.where(worlds == 1, pair.rows1)
    messages = mech.messages(rows, model, rng)
    return MessagesView(messages=messages, queries=(np.broadcast_to(model.mu, messages.shape),))


def test_distinguishing_scores_on_the_star_pattern_pair(world):
    """Pairwise score separates the worlds; the single-coordinate score does not (same marginal in both)."""
    from scipy import stats

    pop, catalogue, public, private, model = world
    pair = PAIR_POLICIES["star_pattern"].rows_for_runs(pop, catalogue, 600, np.random.default_rng(25))
    np.testing.assert_array_equal(pair.rows0.rated, pair.rows1.rated)
    np.testing.assert_array_equal(np.sort(pair.rows0.ratings.toarray(), axis=1),
                                  np.sort(pair.rows1.ratings.toarray(), axis=1))
    worlds = np.random.default_rng(26).integers(0, 2, 600)
    mech = XinJaakkola(response="pmd")
    view = _canary_view(mech, model, pair, worlds, np.random.default_rng(27))
    pairwise = ATTACKS["pmd_pairwise"]().scores(mech, pair, view)
    single = ATTACKS["pmd_coordinate"]().scores(mech, pair, view)
    # Mann–Whitney at fixed seeds; false failure of either check far below 1e-6 when the effect is as measured
    assert stats.mannwhitneyu(pairwise[worlds == 1], pairwise[worlds == 0], alternative="greater").pvalue < 1e-10
    assert stats.mannwhitneyu(single[worlds == 1], single[worlds == 0]).pvalue > 1e-4
    pmc = XinJaakkola(response="pmc")
    sign = ATTACKS["pmc_sign"]().scores(pmc, pair, _canary_view(pmc, model, pair, worlds, np.random.default_rng(28)))
    assert np.all(sign[worlds == 1] > 0) and np.all(sign[worlds == 0] < 0)


def test_dinur_nissim_attack_scores_a_subset_sum_view():
    from recaudit.simulator.targets import TargetPair

    rng = np.random.default_rng(29)
    n_items, q = 40, 160
    liked1 = rng.random((4, n_items)) < 0.5
    rated = np.ones_like(liked1)
    pair = TargetPair(UserBatch.from_masks(rated, ~liked1), UserBatch.from_masks(rated, liked1))
    subsets, answers = zip(*[reconstruction.noisy_subset_sums(liked1[i].astype(float), q, 2.0, rng)
                             for i in range(4)])
    view = MessagesView(messages=np.stack(answers), queries=(np.stack([s.ravel() for s in subsets]),))
    scores = ATTACKS["dinur_nissim"]().scores(None, pair, view)
    # score = 2·accuracy − 1 (world 0 holds the complement): every user's bits at least 75% right
    assert np.all(scores > 0.5)


def test_sigma_tilt_sees_an_answer_in_a_small_server(world):
    """One exact 2nd-order answer among ten moves Σ toward its row: the tilt favours the true world."""
    from recaudit.mechanisms.xin_jaakkola import XinJaakkola as XJ
    from recaudit.simulator.targets import TargetPair
    from recaudit.simulator.transcript import Release

    pop, catalogue, public, private, model = world
    pair = PAIR_POLICIES["star_pattern"].rows_for_runs(pop, catalogue, 2, np.random.default_rng(30))
    mech = XJ(response="exact", public_users=10, update_every=10)
    for truth in (0, 1):
        state = mech.init_public(mech.init_state(WorldInfo(90, 30, 3)), public.take(slice(0, 10)))
        rows = UserBatch.concat([pair.rows(truth).take(slice(0, 1)), private.take(slice(0, 9))])
        state = mech.aggregate(state, None, mech.messages(rows, state.model, np.random.default_rng(31)))
        one = TargetPair(pair.rows0.take(slice(0, 1)), pair.rows1.take(slice(0, 1)))
        view = ReleasesView(releases=((Release(1.0, 10, state.model),),))
        score = ATTACKS["sigma_tilt"]().scores(mech, one, view)[0]
        assert (score > 0) == bool(truth)


def test_pmd_single_coordinate_bound_is_zero_while_pairs_leak(world):
    """5000 releases per world of the star-pattern pair, bounds at α = 1e-6.

    A single PMD coordinate has the same (uniform) law in both worlds, so no threshold test
    can do better than chance and the Clopper–Pearson bound exceeds 0 with probability
    <= 1e-6 (the false-failure probability of the first check). The pairwise score, same runs,
    must show leakage.
    """
    from recaudit.audits.stats.bounds import split_epsilon_bound

    pop, catalogue, public, private, model = world
    pair = PAIR_POLICIES["star_pattern"].rows_for_runs(pop, catalogue, 5000, np.random.default_rng(32))
    mech = XinJaakkola(response="pmd", pmd_sweeps=1)
    views = []
    for w, rows in enumerate((pair.rows0, pair.rows1)):
        messages = mech.messages(rows, model, np.random.default_rng(33 + w))
        views.append(MessagesView(messages=messages, queries=(np.broadcast_to(model.mu, messages.shape),)))
    bounds = {}
    for name in ("pmd_coordinate", "pmd_pairwise"):
        s0, s1 = (ATTACKS[name]().scores(mech, pair, v) for v in views)
        bounds[name] = split_epsilon_bound(s0, s1, alpha=1e-6, rng=np.random.default_rng(34)).epsilon_lb
    assert bounds["pmd_coordinate"] == 0.0
    assert bounds["pmd_pairwise"] > 1.0
