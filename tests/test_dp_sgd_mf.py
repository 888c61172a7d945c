"""DP-SGD matrix factorisation at user level (issue 32): the claim against dp-accounting's Poisson-subsampled
Gaussian accountants (composed here) and the Gaussian closed form at rate 1, clipping, Poisson batches, the
white-box replay against the recorded messages, and the known-noise attack's mixture likelihood ratio."""
import math

import numpy as np
import pytest
from scipy import stats

from recaudit.attacks.known_noise import _sampled
from recaudit.audits.designs.pairs import SingleItemAddRemove
from recaudit.mechanisms import UserBatch
from recaudit.mechanisms.base import WorldInfo
from recaudit.mechanisms.dp_sgd_mf import DPSGDMF, DPSGDMFFullBatch, DPSGDMFNoClipping
from recaudit.simulator.engine import Inserted, run_protocol
from recaudit.simulator.populations import RankOneMatrix
from recaudit.simulator.schedules import Panel
from recaudit.simulator.transcript import Recorder, statistics_view


@pytest.mark.parametrize("epsilon, rate, steps", [(8.0, 0.2, 10), (1.0, 0.05, 10)])
def test_claim_matches_dp_accountings_poisson_subsampled_gaussian(epsilon, rate, steps):
    """ε of the drawn noise multiplier from dp-accounting's PLD (add/remove, composed here on its own grid) and
    RDP accountants; the claim is at most the requested ε and within 0.5 % of it."""
    import dp_accounting

    m = DPSGDMF(epsilon=epsilon, sampling_rate=rate, iterations=steps, clip_norm=0.7)
    z = m.noise.sigma / 0.7
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(z)), steps)
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3).compose(event)
    rdp = dp_accounting.rdp.RdpAccountant().compose(event)
    claim = m.claim
    assert claim.neighbouring == "add_remove" and claim.model == "joint"
    assert 0.995 * epsilon <= claim.epsilon <= epsilon
    assert pld.get_epsilon(1e-5) == pytest.approx(claim.epsilon, rel=5e-3)
    assert claim.epsilon <= rdp.get_epsilon(1e-5) <= 1.6 * claim.epsilon


def test_at_rate_one_the_claim_is_the_gaussian_closed_form():
    """q = 1: T Gaussian releases of multiplier z, √T/z-GDP; δ(ε) from the closed form (Dong, Roth, Su)."""
    m = DPSGDMF(epsilon=2.0, sampling_rate=1.0, iterations=9)
    mu = 3.0 / m.noise_multiplier
    assert m.claim.gaussian_mu == pytest.approx(mu, rel=1e-12)
    delta = stats.norm.cdf(-m.claim.epsilon / mu + mu / 2) - math.exp(m.claim.epsilon) * stats.norm.cdf(
        -m.claim.epsilon / mu - mu / 2)
    assert delta == pytest.approx(1e-5, rel=1e-3)


def _rows(users=3000, items=15, per_user=5, seed=0):
    rng = np.random.default_rng(seed)
    rated = np.argsort(rng.random((users, items)), axis=1)[:, :per_user]
    values = rng.choice([-1.0, 1.0], (users, per_user)) * rng.uniform(0.2, 4.0, (users, per_user))
    r = np.repeat(np.arange(users), per_user)
    return UserBatch.from_coo(r, rated.ravel(), values.ravel(), values.ravel() > 0, (users, items))


def test_messages_are_clipped_poisson_batches():
    """Each message's Frobenius norm is at most C (the no-clipping twin's are not); a user is in a step's batch
    with probability q: 3,000 users at q = 0.2, sd 0.0073, checked to 0.04 (5.5 sd; false failure < 1e-7);
    the full-batch twin has everyone in."""
    rows = _rows()
    world = WorldInfo(15, 5, 1)
    for cls in (DPSGDMF, DPSGDMFNoClipping, DPSGDMFFullBatch):
        m = cls(epsilon=1.0, rank=3, sampling_rate=0.2, clip_norm=0.05, init_scale=1.0)
        state = m.init_state(world)
        messages, _ = m.respond(rows, None, m.broadcast(state), None, np.random.default_rng(1))
        norms = np.sqrt(np.asarray(messages.multiply(messages).sum(axis=1))).ravel()
        sent = np.diff(messages.indptr) > 0
        assert (norms <= 0.05 * (1 + 1e-12)).all() == (cls is not DPSGDMFNoClipping)
        if cls is DPSGDMFFullBatch:
            assert sent.all()
        else:
            assert abs(sent.mean() - 0.2) < 0.04


def test_white_box_means_are_the_targets_sent_gradients():
    """In an engine run (every user in every batch: the full-batch twin, so every step is checked), the replayed
    gradient of the target from the published factors is exactly its recorded message."""
    population = RankOneMatrix(n_users=8, n_items=6, ratings_per_user=3, test_fraction=0.0, canary_items=2)
    catalogue = population.catalogue(np.random.default_rng(1))
    pair = SingleItemAddRemove().rows_for_runs(population, catalogue, 1, np.random.default_rng(2))
    m = DPSGDMFFullBatch(epsilon=1.0, rank=2, iterations=4, sampling_rate=0.1, clip_norm=0.05, init_scale=1.0)
    transcript = run_protocol(m, population, catalogue, Panel(8, 4), np.random.SeedSequence(5),
                              np.random.SeedSequence(9), Recorder(answers=False, outputs="all", statistics=True),
                              Inserted(pair.rows1, np.ones(1, np.int64)))
    view = statistics_view(transcript, transcript.inserted)
    means = m.white_box_means(pair.rows1, view.statistics)["gradient"][0]
    sent = transcript.watched.messages.toarray().reshape(4, catalogue.n_items, 2)
    np.testing.assert_allclose(means, sent, atol=1e-12)
    assert (np.linalg.norm(sent, axis=(1, 2)) <= 0.05 * (1 + 1e-12)).all()  # within the clipping bound
    assert not m.white_box_means(pair.rows0, view.statistics)["gradient"].any()


def test_the_mixture_score_is_the_likelihood_ratio_of_the_sampled_statistic():
    """``_sampled`` against the log-ratio of the two mixtures' densities computed with scipy, round by round."""
    rng = np.random.default_rng(3)
    y, m1 = rng.normal(0, 1, (5, 3, 4)), rng.normal(0, 1, (5, 3, 4))
    m0 = np.zeros_like(m1)
    q, sigma = 0.3, 1.7

    def log_mixture(m):
        with_row = stats.norm.logpdf(y, m, sigma).reshape(5, 3, -1).sum(axis=2)
        without = stats.norm.logpdf(y, 0, sigma).reshape(5, 3, -1).sum(axis=2)
        return np.logaddexp(np.log(q) + with_row, np.log(1 - q) + without)

    expected = (log_mixture(m1) - log_mixture(m0)).sum(axis=1)
    np.testing.assert_allclose(_sampled(y, m0, m1, sigma, q), expected, rtol=1e-10, atol=1e-10)


def test_training_fits_the_ratings_without_noise():
    """With noise negligible (ε = 10⁴) and q = 1, the item-factor steps lower the training error from V_0's."""
    rows = _rows(users=500, items=10, per_user=6, seed=2)
    m = DPSGDMF(epsilon=1e4, rank=3, iterations=30, sampling_rate=1.0, clip_norm=10.0, learning_rate=2.0,
                regularization=0.5, init_scale=0.5)
    world = WorldInfo(10, 6, 1)
    coo = rows.ratings.tocoo()

    def error(state):
        return np.sqrt(np.mean((m.personal_output(rows, None, state).at(coo.row, coo.col) - coo.data) ** 2))

    state = m.init_state(world)
    before = error(state)
    rng = np.random.default_rng(0)
    for _ in range(m.iterations):
        messages, _ = m.respond(rows, None, m.broadcast(state), None, rng)
        state = m.end_round(m.aggregate(state, None, messages), rng)
    assert error(state) < 0.9 * before


@pytest.mark.slow
def test_shipped_dp_sgd_scenarios_reach_their_verdicts():
    """The shipped scenarios (fixed seeds): both twins violated in one run (measured ε_LB 1.54 and 2.50 against a
    claim of 1), the correct mechanism in the same design consistent, and at ε = 8 on the MovieLens-100K-sized
    world consistent with a held-out RMSE below the constant predictor's 1.306 (measured 1.193)."""
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    for name, verdict in (("dp-sgd-mf-full-batch", "violated"), ("dp-sgd-mf-no-clipping", "violated"),
                          ("dp-sgd-mf-one-run", "consistent")):
        assert run_scenario(load_scenario(f"scenarios/{name}.yaml")).verdict == verdict, name
    result = run_scenario(load_scenario("scenarios/dp-sgd-mf-eps8.yaml"))
    assert result.verdict == "consistent"
    assert result.utility["rmse"] < 1.306


@pytest.fixture
def movielens():
    from recaudit.simulator import datasets

    try:
        return datasets.fetch("movielens-100k", timeout=20)[0]
    except datasets.DataError as exc:
        pytest.skip(f"MovieLens-100K cannot be fetched here: {exc}")


@pytest.mark.data
def test_on_movielens_100k_dp_sgd_beats_the_mean_and_dp_als_does_not(movielens):
    """The real file (skipped without it): at ε = 8 DP-SGD MF's held-out RMSE is below the mean rating's (measured
    1.001 against 1.127), DP-ALS's above it (1.195: 943 users are too few for its noisy per-item sums); both
    consistent."""
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    sgd = run_scenario(load_scenario("scenarios/dp-sgd-mf-movielens-100k.yaml"))
    als = run_scenario(load_scenario("scenarios/dp-als-movielens-100k.yaml"))
    assert sgd.verdict == als.verdict == "consistent"
    assert sgd.utility["rmse"] < sgd.utility["mean_rmse"] < als.utility["rmse"]


def test_the_pairs_reach_accounts_for_the_sampling_and_the_gaussian_model_never_holds():
    """A sampled statistic's reach is its largest step's μ; the pair's ε is that of T Poisson-subsampled Gaussian
    steps at rate q (here every step reaches the clip, so exactly the claim's accounting: ε_pair = the claim),
    not the Gaussian-DP ε of the total μ (4.0 for these settings); the Gaussian-DP rule never holds for it."""
    from recaudit.audits.language.scenario import Scenario
    from recaudit.audits.runner import run_scenario
    from recaudit.audits.stats.gdp import gdp_epsilon
    from recaudit.audits.stats.reach import gaussian_by_construction, statistic_laws

    scenario = Scenario.model_validate({
        "name": "sgd-reach", "seed": 3203, "panel": {},
        "population": {"kind": "rank_one_matrix", "n_users": 20, "n_items": 10, "ratings_per_user": 4,
                       "test_fraction": 0.0, "canary_items": 2},
        "mechanism": {"kind": "dp_sgd_mf", "epsilon": 1.0, "delta": 1e-5, "rank": 1, "iterations": 5,
                      "sampling_rate": 0.2, "clip_norm": 0.002, "learning_rate": 1.0, "regularization": 1.0},
        "attack": [{"kind": "known_noise"}],
        "audit": {"design": "full_runs", "view": "statistics", "method": "clopper-pearson", "trials": 100}})
    result = run_scenario(scenario)
    reach = result.tests[0].reach
    assert reach["law"] == "subsampled_gaussian" and (reach["sampling_rate"], reach["steps"]) == (0.2, 5)
    assert reach["epsilon_pair"] == pytest.approx(result.claim.epsilon, rel=1e-3)
    assert gdp_epsilon(reach["mu_step"] * math.sqrt(5), 1e-5) > 3 * result.claim.epsilon
    mechanism = DPSGDMF(epsilon=1.0, sampling_rate=0.2)
    assert statistic_laws(mechanism) == {"subsampled_gaussian"}
    assert not gaussian_by_construction(statistic_laws(mechanism), [np.full(10, reach["mu_step"])])
    assert statistic_laws(DPSGDMF(epsilon=1.0, sampling_rate=1.0)) == {"gaussian"}
