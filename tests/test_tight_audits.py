"""Tight audits (issue 24): the white-box ``statistics`` view, worst-case pairs, the known-noise attack, batched runs.

Default tests are small and fast and compare against independent recomputations (the engine's own
records, closed forms, dp-accounting). The full-size ratio checks are ``slow``; each states its
false-failure probability.
"""
import math

import numpy as np
import pytest

from recaudit.attacks.known_noise import KnownNoiseAttack
from recaudit.mechanisms import UserBatch
from recaudit.mechanisms.continual_covariance import TreeContinualCovariance, nodes_touched
from recaudit.mechanisms.frank_wolfe import PrivateFrankWolfe
from recaudit.mechanisms.matrix_completion import upper
from recaudit.simulator.engine import Inserted, run_protocol
from recaudit.audits.designs.pairs import SingleItemReplace
from recaudit.simulator.populations import RankOneMatrix
from recaudit.simulator.schedules import Panel
from recaudit.simulator.seeds import stream
from recaudit.simulator.transcript import Recorder, statistics_view


def fw_world(canary_items=4, users=8, items=6):
    population = RankOneMatrix(n_users=users, n_items=items, ratings_per_user=3, test_fraction=0.0,
                               canary_items=canary_items)
    catalogue = population.catalogue(np.random.default_rng(1))
    mechanism = PrivateFrankWolfe(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, nuclear_scale=0.3)
    pair = SingleItemReplace().rows_for_runs(population, catalogue, 1, np.random.default_rng(2))
    return population, catalogue, mechanism, pair


def engine_run(population, catalogue, mechanism, pair, world, coins, users=8):
    schedule = Panel(users, getattr(mechanism, "iterations", 1))
    transcript = run_protocol(mechanism, population, catalogue, schedule, np.random.SeedSequence(5), coins,
                              Recorder(answers=False, outputs="all", statistics=True),
                              Inserted(pair.rows(world), np.ones(1, np.int64)))
    return transcript


def test_single_item_pair_uses_reserved_items_no_one_rates():
    population, catalogue, _, pair = fw_world()
    assert catalogue.n_items == 10
    _, users = population.sample_users(8, catalogue, np.random.default_rng(0))
    assert not users.rated[:, 6:].any()  # the canary items are the world's own, unrated
    assert pair.rows0.rated[0].sum() == pair.rows1.rated[0].sum() == 1
    assert set(np.flatnonzero(pair.rows0.rated[0] | pair.rows1.rated[0])) <= set(range(6, 10))
    assert not (pair.rows0.rated & pair.rows1.rated).any()


def test_panel_runs_equal_the_engine_for_the_same_coins():
    """One batched run draws the engine's noise: every round's noisy Gram and eigenpair agree."""
    population, catalogue, mechanism, pair = fw_world()
    coins = np.random.SeedSequence(9)
    transcript = engine_run(population, catalogue, mechanism, pair, 1, coins)
    _, rows = population.for_run().sample_users(8, catalogue, stream(np.random.SeedSequence(5), "users"))
    batched = mechanism.panel_runs(UserBatch.concat([rows, pair.rows1]), 1, stream(coins, "noise"))
    recorded = transcript.statistics
    np.testing.assert_allclose(batched["gram"][0], recorded["gram"], atol=1e-12)
    np.testing.assert_allclose(batched["basis"][0], recorded["basis"], atol=1e-8)
    np.testing.assert_allclose(batched["shifted"][0], recorded["shifted"], rtol=1e-9)
    assert batched["bound"][0, 0] == pytest.approx(recorded["bound"][0])


def test_white_box_means_equal_the_targets_recorded_messages():
    """The attack's replay of the target's residuals A_t (from the published history) equals what the engine's
    target really sent (its watched messages), in both worlds: the contribution the LR test assumes is right."""
    population, catalogue, mechanism, pair = fw_world()
    for world in (0, 1):
        transcript = engine_run(population, catalogue, mechanism, pair, world, np.random.SeedSequence(11 + world))
        view = statistics_view(transcript, transcript.inserted)
        means = mechanism.white_box_means(pair.rows(world), view.statistics)["gram"][0]
        sent = transcript.watched.messages.toarray()  # (rounds, n): A_t of the target
        np.testing.assert_allclose(means, upper(sent[:, :, None] * sent[:, None, :]), atol=1e-12)


def test_known_noise_reach_is_the_closed_form_mu_of_the_pair():
    """μ_pair = sqrt(Σ_t ‖d_t‖²)/σ recomputed from the target's recorded messages, and the first round's
    ‖d_1‖ = √2·L² exactly (A_1 = −Y*): the claim's 4√2·L² is 4 times what the pair can reach there."""
    population, catalogue, mechanism, pair = fw_world()
    transcript = engine_run(population, catalogue, mechanism, pair, 0, np.random.SeedSequence(3))
    view = statistics_view(transcript, transcript.inserted)
    law, mu = KnownNoiseAttack().reach(mechanism, pair, view)
    a0 = transcript.watched.messages.toarray()
    a1 = mechanism.white_box_means(pair.rows1, view.statistics)["gram"][0]
    d = a1 - upper(a0[:, :, None] * a0[:, None, :])
    assert law == "gaussian"
    assert mu[0] == pytest.approx(math.sqrt(np.sum(d * d)) / mechanism.noise.sigma, rel=1e-12)
    assert np.linalg.norm(d[0]) == pytest.approx(math.sqrt(2) * mechanism.row_bound ** 2, rel=1e-12)
    assert mu[0] <= mechanism.claim.gaussian_mu / 4 * (1 + 1e-9)


@pytest.mark.parametrize("rank", [1, 2])
def test_pgd_panel_runs_and_white_box_means_follow_the_engine(rank):
    """Private PGD: one batched run draws the engine's noise (every round's noisy Gram and eigenvectors agree),
    and the replay of the target's residuals from the published eigenvectors is what it really sent."""
    from recaudit.mechanisms.projected_gradient import PrivateProjectedGradient

    population, catalogue, _, pair = fw_world()
    mechanism = PrivateProjectedGradient(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, rank=rank)
    _, rows = population.for_run().sample_users(8, catalogue, stream(np.random.SeedSequence(5), "users"))
    for world in (0, 1):
        coins = np.random.SeedSequence(9 + world)
        transcript = engine_run(population, catalogue, mechanism, pair, world, coins)
        batched = mechanism.panel_runs(UserBatch.concat([rows, pair.rows(world)]), 1, stream(coins, "noise"))
        np.testing.assert_allclose(batched["gram"][0], transcript.statistics["gram"], atol=1e-12)
        np.testing.assert_allclose(batched["basis"][0], transcript.statistics["basis"], atol=1e-8)
        view = statistics_view(transcript, transcript.inserted)
        means = mechanism.white_box_means(pair.rows(world), view.statistics)["gram"][0]
        sent = transcript.watched.messages.toarray()
        np.testing.assert_allclose(means, upper(sent[:, :, None] * sent[:, None, :]), atol=1e-12)
        law, mu = KnownNoiseAttack().reach(mechanism, pair, view)  # round 1 alone reaches √2·L²/σ
        assert mechanism.noise.sigma * mu[0] >= math.sqrt(2) * mechanism.row_bound ** 2 * (1 - 1e-12)


def test_private_oja_panel_runs_and_white_box_means_follow_the_engine():
    """Private FW with private Oja: one batched run draws the engine's noise (every noisy product, iterate and
    norm agree), and the replayed contribution ``A_t (A_t·v_s)``, ``(A_t·v̂_t)²`` is what the target's sent
    rows give at the recorded iterates."""
    population, catalogue, _, pair = fw_world()
    mechanism = PrivateFrankWolfe(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, nuclear_scale=0.3,
                                  eigen="oja", oja_steps=6)
    _, rows = population.for_run().sample_users(8, catalogue, stream(np.random.SeedSequence(5), "users"))
    for world in (0, 1):
        coins = np.random.SeedSequence(9 + world)
        transcript = engine_run(population, catalogue, mechanism, pair, world, coins)
        batched = mechanism.panel_runs(UserBatch.concat([rows, pair.rows(world)]), 1, stream(coins, "noise"))
        assert set(transcript.statistics) == {"matvec", "iterate", "norm", "basis", "shifted", "bound"}
        for name, value in transcript.statistics.items():
            np.testing.assert_allclose(batched[name][0], value, atol=1e-10, err_msg=name)
        view = statistics_view(transcript, transcript.inserted)
        means = mechanism.white_box_means(pair.rows(world), view.statistics)
        sent = transcript.watched.messages.toarray()  # (rounds, n)
        iterates = transcript.statistics["iterate"]  # (rounds, steps, n)
        along = np.array([[it @ a for it in its] for its, a in zip(iterates, sent)])
        np.testing.assert_allclose(means["matvec"][0], sent[:, None, :] * along[..., None], atol=1e-14)
        np.testing.assert_allclose(means["norm"][0], (sent * transcript.statistics["basis"]).sum(axis=1) ** 2,
                                   atol=1e-14)


def test_gdp_at_a_fixed_cut_is_the_clopper_pearson_mu_bound_and_covers():
    """``method: gdp, threshold: explicit``: μ_LB recomputed from scipy's beta quantiles at the cut, and on
    Gaussian scores (μ = 0.3) and null scores (μ = 0) of 200 seeds each the bound exceeds the truth at most
    20 times. Each repetition exceeds it with probability ≤ α = 0.05, so a false failure has probability
    P(Binomial(200, 0.05) > 20) < 0.2 % per case."""
    from scipy import stats

    from recaudit.audits.stats.estimators import estimator_for
    from recaudit.audits.stats.gdp import fixed_threshold_gdp_bound

    estimator = estimator_for("gdp", "explicit")(threshold_value=0.0)
    claim = PrivateFrankWolfe(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1).claim
    n = 4000
    for mu in (0.3, 0.0):
        above = 0
        for seed in range(200):
            rng = np.random.default_rng([seed, int(mu * 10)])
            scores = rng.normal(0.0, 1.0, (2, n)) + np.array([[-mu / 2], [mu / 2]])  # N(∓μ/2, 1): μ-GDP exactly
            above += fixed_threshold_gdp_bound(scores[0], scores[1], 0.0, 1, 0.05, claim.delta).mu_lb > mu
        assert above <= 20, (mu, above)
    bound = estimator.estimate(scores, None, claim, 0.05).bound  # the estimator counts at the fixed cut
    fp, fn = int((scores[0] >= 0).sum()), int((scores[1] < 0).sum())
    fpr, fnr = (stats.beta.ppf(1 - 0.025, k + 1, n - k) for k in (fp, fn))
    assert (bound.false_pos, bound.false_neg, bound.threshold_rule) == (fp, fn, "explicit")
    assert bound.mu_lb == pytest.approx(max(0.0, stats.norm.isf(fpr) - stats.norm.ppf(fnr)), abs=1e-9)


def test_tree_means_follow_the_nodes_the_target_enters():
    """The tree's white-box means put the target's x xᵀ in exactly the nodes ``nodes_touched`` lists."""
    tree = TreeContinualCovariance(epsilon=3.0, delta=1e-5, ticks=8, row_bound=1.0)
    nodes = [(level, index) for level in range(tree.levels) for index in range(8 >> level)]
    first = np.array([[i * 2 ** lv + 1 for lv, i in nodes]])
    last = np.array([[(i + 1) * 2 ** lv for lv, i in nodes]])
    row = UserBatch.from_masks(np.eye(4, dtype=bool)[None, 1], np.ones((1, 4), bool))
    means = tree.white_box_means(row, {"first": first, "last": last}, np.array([6]))["noisy"][0]
    touched = set(nodes_touched(6, 8))
    assert [bool(means[k].any()) for k in range(len(nodes))] == [node in touched for node in nodes]


def mm_world():
    from recaudit.mechanisms.mcsherry_mironov import McSherryMironov
    from recaudit.audits.designs.pairs import SingleFlip

    population = RankOneMatrix(n_users=10, n_items=6, ratings_per_user=4, test_fraction=0.0, canary_items=2)
    catalogue = population.catalogue(np.random.default_rng(1))
    mechanism = McSherryMironov(epsilon=2.0, min_rating=-1.0, max_rating=1.0, rank=2)
    pair = SingleFlip().rows_for_runs(population, catalogue, 1, np.random.default_rng(2))
    return population, catalogue, mechanism, pair


def test_mm_panel_runs_equal_the_engine_and_the_means_its_measurements():
    """One batched McSherry–Mironov release draws the engine's noise (all six measurements agree), and the
    white-box means of the target's row are what it adds: the release of the world with the target minus the
    release of the world without it, under the same published MAvg (recomputed through ``release``)."""
    population, catalogue, mechanism, pair = mm_world()
    coins = np.random.SeedSequence(4)
    transcript = engine_run(population, catalogue, mechanism, pair, 1, coins, users=10)
    _, rows = population.for_run().sample_users(10, catalogue, stream(np.random.SeedSequence(5), "users"))
    batched = mechanism.panel_runs(UserBatch.concat([rows, pair.rows1]), 1, stream(coins, "noise"))
    for name, value in transcript.statistics.items():
        np.testing.assert_allclose(batched[name][0], value, atol=1e-12, err_msg=name)
    stats = {k: v[None] for k, v in transcript.statistics.items()}
    means = mechanism.white_box_means(pair.rows1, stats)
    _, mavg = mechanism._effects(stats)
    assert set(means) == {"MSum", "MCount", "Cov", "Wgt"}
    assert np.count_nonzero(means["Cov"]) == 3  # (i, i), (j, j), (i, j) of its two canary items
    centred = mechanism.centred(mechanism._clipped(pair.rows1.ratings.astype(float)), mavg[0]).toarray()[0]
    weight = 1.0 / 2  # Laplace weights 1 / c_u, two ratings
    np.testing.assert_allclose(means["Cov"][0], weight * upper(np.outer(centred, centred)), atol=1e-12)


def scenario_data(name, **audit):
    import yaml

    with open(f"scenarios/{name}.yaml") as f:
        data = yaml.safe_load(f)
    data["audit"].update(audit)
    data["executor"] = {"type": "serial"}
    return data


def test_the_no_noise_twin_is_violated_on_the_white_box(write_scenario):
    """The broken twin that adds no noise: the known-noise test separates the worlds perfectly (small run)."""
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    data = scenario_data("tight-private-frank-wolfe", trials=1000, block_size=1000)
    data["mechanism"]["kind"] = "private_frank_wolfe_no_noise"
    result = run_scenario(load_scenario(write_scenario(data)))
    assert result.verdict == "violated"
    assert result.tests[0].estimate.epsilon_lb > 3.0  # perfect separation: near the ceiling of 500 runs


def test_reports_carry_the_pair_reach(write_scenario, tmp_path):
    """JSON, Markdown and HTML all show the pair's reach, its ε and the claim's looseness (schema-valid)."""
    import json

    import jsonschema

    from recaudit.audits.reports.report import schema, write_reports
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    result = run_scenario(load_scenario(write_scenario(scenario_data("tight-private-frank-wolfe", trials=200,
                                                                     block_size=200))))
    write_reports(result, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    jsonschema.validate(report, schema())
    reach = report["tests"][0]["pair_reach"]
    assert reach["law"] == "gaussian" and reach["mu_pair"] < reach["mu_claim"] / 4 * (1 + 1e-9)
    assert reach["looseness"] == pytest.approx(1.0 / reach["epsilon_pair"], rel=1e-4)  # the claim is ε = 1
    for page in ("report.md", "report.html"):
        assert "loose by" in (tmp_path / page).read_text()


def _dp_accounting_epsilon(mu, delta):
    """ε of one Gaussian release with sensitivity μ and σ = 1 at δ, from dp-accounting (not our GDP code)."""
    import dp_accounting

    return dp_accounting.get_epsilon_gaussian(1.0 / mu, delta)


@pytest.mark.slow
@pytest.mark.parametrize("name, ratio, figure", [
    ("tight-private-frank-wolfe", 0.8, "estimate"),
    ("tight-continual-tree", 0.65, "bound"), ("tight-mcsherry-mironov", 0.7, "bound")])
def test_shipped_tight_scenarios_reach_their_share_of_the_tight_epsilon(name, ratio, figure):
    """The shipped scenarios (fixed seeds) at full size: the white-box ε_LB is at least ``ratio`` of the ε the
    claim makes or, where the pair cannot reach the claimed sensitivity, of the ε its real reach implies.

    For private FW the pair's reach varies between runs, so its Gaussian-DP figure is an estimate, not a bound
    (issue 31): the share asserted is the estimate's (how close the audit comes to the optimal test on this
    pair), and its bound (Clopper–Pearson on the same counts, 0.0605 at the shipped seed) must be positive and
    below the estimate. The tree's and McSherry–Mironov's figures are bounds.

    That ε is recomputed here from μ_pair with dp-accounting (Gaussian) — not the report's own conversion.
    Probability that a seed falls short, from Gaussian scores of the same μ and runs (40 and 200 seeds):
    below 1 % for FW (share mean 0.90, sd 0.02, lowest of 40 0.84, at 2 × 10⁶ runs per world with the cut
    chosen on 10 %, per-run μ as measured: 0.0645 typical, 0.0670 largest; the shipped seed gives 0.864),
    below 1 % for the tree (mean 0.82, sd 0.06 at 5,000 runs, none of 200 below 0.65). McSherry–Mironov
    (Laplace) was measured on its shipped seed only: 0.84 under the claim's own relation (pair add_rating,
    ε_pair 0.828; issue 31), 0.82 with the value-change pair it used before.
    """
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    result = run_scenario(load_scenario(f"scenarios/{name}.yaml"))
    white = next(t for t in result.tests if t.attack.startswith("known_noise"))
    reach = white.reach
    claim = result.claim
    tight = reach["epsilon_pair"]
    if reach["law"] == "gaussian":
        tight = _dp_accounting_epsilon(reach["mu_pair"], claim.delta)
        assert tight == pytest.approx(reach["epsilon_pair"], rel=1e-3)
    shown = white.estimate.epsilon_lb if figure == "bound" else white.estimate.bound.epsilon_lb
    assert white.estimate.is_bound == (figure == "bound")
    if figure == "estimate":
        assert 0 < white.estimate.epsilon_lb <= shown
    share = shown / min(claim.epsilon, tight)
    print(f"{name}: {figure} {shown:.4f}, bound {white.estimate.epsilon_lb:.4f}, epsilon_pair {tight:.4f} (mu_pair "
          f"{reach.get('mu_pair', float('nan')):.5f}), share {share:.3f}")  # shown with -s (Laplace: no mu)
    assert result.verdict == "consistent"
    assert shown >= ratio * min(claim.epsilon, tight)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tight-private-projected-gradient", "tight-private-oja"])
def test_pgd_and_oja_white_boxes_show_a_positive_bound_on_the_correct_mechanism(name):
    """The shipped scenarios at full size: a positive ε_LB on the correct mechanism, consistent with the claim.

    At the cut 0 the μ estimate has sd ≈ 1.77/√n: PGD (μ ≈ 0.065, 5 × 10⁵ runs) expects μ_LB ≈ 0.058 ± 0.003,
    Oja (μ ≈ 0.031, 4 × 10⁵ runs) ≈ 0.023 ± 0.003, so a seed giving 0 is a 7-sd event (probability < 1e-9).
    The bound must also stay below the ε of the pair's largest reach (above it, the replay or the noise law
    would be wrong): PGD's expected μ_LB sits 3 sd below its μ_pair (a false failure ≈ 0.1 %), Oja's 9 sd.
    Measured through the CLI at the shipped seeds: Gaussian-DP estimates 0.173 and 0.0616; the bounds printed
    (Clopper–Pearson on the same counts, the pairs' reach varying between runs) 0.0429 and 0.0167.
    """
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    result = run_scenario(load_scenario(f"scenarios/{name}.yaml"))
    white = result.tests[0]
    print(f"{name}: epsilon_lb {white.estimate.epsilon_lb:.4f}, epsilon_pair {white.reach['epsilon_pair']:.4f}")
    assert result.verdict == "consistent"
    assert 0 < white.estimate.epsilon_lb <= white.reach["epsilon_pair"]


@pytest.mark.slow
def test_the_naive_counter_is_violated_on_the_white_box(write_scenario):
    """The broken continual server (noise for one release, claimed for the stream): its noisy releases are
    the white-box statistics, and the known-noise test shows the violation."""
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    data = scenario_data("tight-continual-tree", trials=1000, block_size=500)
    data["mechanism"]["kind"] = "continual_covariance_naive"
    result = run_scenario(load_scenario(write_scenario(data)))
    assert result.verdict == "violated"
