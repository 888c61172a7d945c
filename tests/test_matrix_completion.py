"""Private matrix completion (seed 004): protocol checks and the first joint-DP audits.

The audits run the whole protocol per trial (design full_runs) on a small
rank-one world, the target inserted with disjoint-support rows. Each audit
family is judged by its Holm verdict at α = ALPHA: a correct mechanism is
wrongly flagged with probability ≤ ALPHA per test below (the bounds are
valid at 1 − α); the broken twins and the negative control leak by orders
of magnitude more than the claim, so their verdicts have a large margin.
"""
import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import sparse

from recaudit.attacks import SubspaceAlignmentAttack, UnpublishedDirectionAttack
from recaudit.audits.designs.base import AuditJob
from recaudit.audits.designs.full_runs import FullRuns
from recaudit.audits.store import Progress
from recaudit.audits.stats.estimators import ESTIMATORS
from recaudit.audits.stats.pvalues import holm_adjust
from recaudit.mechanisms import UserBatch
from recaudit.mechanisms.accounting import GaussianRelease, epsilon_for
from recaudit.mechanisms.frank_wolfe import (FrankWolfe, PrivateFrankWolfe, PrivateFrankWolfeLeakyOutputs,
                                    PrivateFrankWolfeNoNoise, PrivateFrankWolfeNoProjection)
from recaudit.mechanisms import gram_sums
from recaudit.mechanisms.matrix_completion import (LowRankRows, clip_rows, gram, observed, row_norms,
                                                   symmetric_gaussian, upper,
                                          upper_outer)
from recaudit.mechanisms.projected_gradient import PrivateProjectedGradient
from recaudit.simulator.engine import run_protocol
from recaudit.audits.designs.pairs import policy_for
from recaudit.simulator.populations import MatrixPopulation
from recaudit.simulator.schedules import Panel
from recaudit.simulator.transcript import Recorder

ALPHA = 0.01


def rank_one(m, n, per_user, seed, test_fraction=0.0):
    """Y = u vᵀ scaled to unit ℓ∞, ``per_user`` observed entries per row (written here, for the tests)."""
    rng = np.random.default_rng(seed)
    u, v = rng.normal(size=m), rng.normal(size=n)
    y = np.outer(u, v) / (np.abs(u).max() * np.abs(v).max())
    items = np.argsort(rng.random((m, n)), axis=1)[:, :per_user]
    users = np.repeat(np.arange(m), per_user)
    values = y[users, items.ravel()]
    test = rng.random(users.size) < test_fraction
    rows = UserBatch.from_coo(users[~test], items.ravel()[~test], values[~test], values[~test] > 0, (m, n))
    return rows, (users[test], items.ravel()[test], values[test]), y


def panel_run(mechanism, rows, seed=1):
    pop = MatrixPopulation(rows)
    catalogue = pop.catalogue(np.random.default_rng(0))
    return run_protocol(mechanism, pop, catalogue, Panel(len(rows), mechanism.iterations),
                        np.random.SeedSequence(seed), recorder=Recorder(answers=False, outputs="all"))


@pytest.mark.parametrize("per_row", [3, 40])  # sparse–dense products below DENSE_FROM_ENTRIES, dsyrk above
def test_gram_sums_match_numpy_in_blocks(monkeypatch, per_row):
    rng = np.random.default_rng(3)
    items = np.argsort(rng.random((500, 50)), axis=1)[:, :per_row]
    rows = sparse.csr_array((rng.normal(size=items.size), items.ravel(), np.arange(501) * per_row), shape=(500, 50))
    monkeypatch.setattr(gram_sums, "DENSE_CHUNK", 50 * 64)  # 64 rows a block: 8 blocks, the last one short
    dense = rows.toarray()
    out = gram_sums.gram(rows)
    np.testing.assert_allclose(out, dense.T @ dense, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(out, out.T)


def test_low_rank_helpers_match_dense_arithmetic():
    rows, _, _ = rank_one(30, 8, 3, seed=1)
    rng = np.random.default_rng(2)
    coefficients, basis = rng.normal(size=(30, 2)), rng.normal(size=(2, 8))
    dense = coefficients @ basis
    mask = rows.rated
    np.testing.assert_allclose(observed(rows.ratings, coefficients, basis).toarray(), np.where(mask, dense, 0))
    ratings = rows.ratings.toarray()
    np.testing.assert_allclose(gram(rows.ratings), ratings.T @ ratings)
    clipped = clip_rows(rows.ratings, 0.1).toarray()
    np.testing.assert_allclose(np.linalg.norm(clipped, axis=1),
                               np.minimum(np.linalg.norm(ratings, axis=1), 0.1), rtol=1e-12)
    np.testing.assert_allclose(row_norms(rows.ratings), np.linalg.norm(ratings, axis=1))
    low = LowRankRows(coefficients, basis)
    np.testing.assert_allclose(low.at(np.array([3, 7]), np.array([1, 5])), dense[[3, 7], [1, 5]])
    np.testing.assert_allclose(LowRankRows.concat([low[:10], low[10:]]).dense(), dense)


def test_claim_is_the_accountants_and_sigma_is_calibrated_to_it():
    mech = PrivateFrankWolfe(epsilon=1.0, delta=1e-6, iterations=10, row_bound=2.0)
    sensitivity = 4 * np.sqrt(2) * 2.0 ** 2
    assert mech.noise.sensitivity == pytest.approx(sensitivity)
    assert mech.claim.model == "joint" and mech.claim.unit == "user"
    assert epsilon_for(GaussianRelease(mech.noise.sigma, sensitivity, count=10), 1e-6) == pytest.approx(1.0, abs=1e-6)
    paper = PrivateFrankWolfe(epsilon=1.0, delta=1e-6, iterations=10, row_bound=2.0, calibration="paper")
    # the paper's σ = L² sqrt(64 T log(1/δ)) / ε is looser than the accountant's at the same (ε, δ)
    assert paper.noise.sigma == pytest.approx(4.0 * np.sqrt(64 * 10 * np.log(1e6)))
    assert paper.claim.epsilon < 1.0
    assert FrankWolfe().claim.epsilon == np.inf


@pytest.mark.parametrize("mechanism", [PrivateFrankWolfe(epsilon=2.0, iterations=6, row_bound=0.5),
                                       PrivateFrankWolfe(epsilon=2.0, iterations=6, row_bound=0.5, eigen="oja"),
                                       PrivateProjectedGradient(epsilon=2.0, iterations=6, row_bound=0.5, rank=2)])
def test_rows_respect_the_projection_and_stay_low_rank(mechanism):
    rows, _, _ = rank_one(200, 20, 6, seed=3)
    transcript = panel_run(mechanism, rows)
    outputs = transcript.outputs
    assert len(outputs) == 200 and outputs.basis.shape[0] <= mechanism.iterations
    source = transcript.user_cluster[transcript.output_user]
    completed = outputs.dense()
    observed_norms = np.linalg.norm(np.where(rows.rated[source], completed, 0.0), axis=1)
    assert observed_norms.max() <= mechanism.row_bound * (1 + 1e-9)  # ‖P_Ω(Y_i)‖ ≤ L
    assert np.linalg.matrix_rank(completed) <= outputs.basis.shape[0]


def test_non_private_frank_wolfe_completes_a_rank_one_matrix():
    """Against the truth: FW's held-out error falls well below predicting 0 (the scale of the entries).

    With the fixed step 1/T, T steps reach at most 1 − (1 − 1/T)^T ≈ 0.64 of
    the ball's radius, so the ball is that much larger than the truth's nuclear norm.
    """
    rows, (tu, ti, tv), y = rank_one(3000, 30, 10, seed=4, test_fraction=0.05)
    iterations = 30
    reach = 1 - (1 - 1 / iterations) ** iterations
    nuclear = np.linalg.norm(y, "nuc") / np.sqrt(y.size) / reach
    transcript = panel_run(FrankWolfe(iterations=iterations, row_bound=10.0, nuclear_scale=nuclear), rows)
    position = np.empty(3000, int)
    position[transcript.user_cluster[transcript.output_user]] = np.arange(3000)
    rmse = np.sqrt(np.mean((transcript.outputs.at(position[tu], ti) - tv) ** 2))
    assert rmse < 0.2 * np.sqrt(np.mean(tv ** 2))


def test_symmetric_noise_and_triangles_are_numpy_s_triu_bit_for_bit():
    """The cached-index versions against np.triu / np.triu_indices (the same draws, the same bits)."""
    for n in (1, 2, 7, 30):
        noise = np.triu(np.random.default_rng(n).normal(0.0, 1.7, (n, n)))
        assert symmetric_gaussian(n, 1.7, np.random.default_rng(n)).tobytes() == (noise + np.triu(noise, 1).T).tobytes()
        rows = np.random.default_rng(n + 1).normal(size=(3, 4, n))
        i, j = np.triu_indices(n)
        outer = rows[..., None] * rows[..., None, :]
        assert np.array_equal(upper(outer), outer[..., i, j])
        assert np.array_equal(upper_outer(rows), rows[..., i] * rows[..., j])


# ---------------------------------------------------------------- joint-DP audits

WORLD = rank_one(12, 10, 4, seed=5)[0]  # few users: one target moves W visibly
TRIALS = 300


def audit(mechanism, view, attacks=(SubspaceAlignmentAttack(),), trials=TRIALS):
    """Full-runs audit of ``mechanism`` on the small world: Holm verdict and the ε lower bounds."""
    population = MatrixPopulation(WORLD)
    catalogue = population.catalogue(np.random.default_rng(0))
    claim = mechanism.claim
    job = AuditJob(mechanism, population, catalogue, Panel(len(WORLD), mechanism.iterations), tuple(attacks),
                   claim, view, mechanism.iterations, entropy=11, world_entropy=12)
    design = FullRuns()
    with ThreadPoolExecutor(1) as executor:
        output = design.scores(job, policy_for(claim, mechanism), 1, trials, trials, None, executor,
                               Progress(None, {}, False),
                               lambda _: None)
    estimator = ESTIMATORS["split"]()
    estimates = [estimator.estimate(output.runs[0].scores[a], None, claim, ALPHA / len(attacks))
                 for a in range(len(attacks))]
    reject, _ = holm_adjust([e.p_value for e in estimates], ALPHA)
    return ("violated" if any(reject) else "consistent"), [e.epsilon_lb for e in estimates]


CORRECT = PrivateFrankWolfe(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, nuclear_scale=0.3)


def test_correct_frank_wolfe_is_consistent_on_the_others_view():
    verdict, bounds = audit(CORRECT, "others", (SubspaceAlignmentAttack(), UnpublishedDirectionAttack()))
    assert verdict == "consistent", bounds


def test_correct_projected_gradient_is_consistent_on_the_others_view():
    pgd = PrivateProjectedGradient(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1)
    verdict, bounds = audit(pgd, "others", (SubspaceAlignmentAttack(), UnpublishedDirectionAttack()))
    assert verdict == "consistent", bounds


def test_the_targets_own_row_leaks_negative_control():
    # 100 runs per world (ceiling 2.06): ε_LB 1.64 on this seed, 1.23-1.96 on seeds 20-25 (all violated)
    verdict, bounds = audit(CORRECT, "target", trials=100)
    assert verdict == "violated", bounds


# Trials per twin: at 100 runs per world the bound's ceiling is ε 2.06; there the no-noise and no-projection
# twins' subspace attack reached 1.97-2.06 against the claim's 1.0 on this seed and 10 others (20-29), so
# 100 keep the margin; the leaky twin's measured 1.8 at 300 runs needs them (0.48 at 100).
@pytest.mark.parametrize("twin, trials", [
    (PrivateFrankWolfeNoNoise(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, nuclear_scale=0.3), 100),
    (PrivateFrankWolfeNoProjection(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, nuclear_scale=0.3), 100),
    (PrivateFrankWolfeLeakyOutputs(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, nuclear_scale=0.3), TRIALS),
])
def test_broken_twins_are_flagged_on_the_others_view(twin, trials):
    verdict, bounds = audit(twin, "others", (SubspaceAlignmentAttack(), UnpublishedDirectionAttack()), trials)
    assert verdict == "violated", bounds


def test_the_leaky_twin_hides_from_a_releases_only_audit():
    """Its releases are the correct mechanism's: only a real others view shows the leak.

    100 runs per world (a false 'violated' still has probability <= ALPHA): ε_LB 0 on this seed and 3 others."""
    twin = PrivateFrankWolfeLeakyOutputs(epsilon=1.0, delta=1e-5, iterations=4, row_bound=0.1, nuclear_scale=0.3)
    verdict, bounds = audit(twin, "releases", trials=100)
    assert verdict == "consistent", bounds


# ---------------------------------------------------------------- scenarios

def run_cli(path, out):
    from recaudit.audits.cli import main
    return main(["run", str(path), "--out", str(out), "--quiet"])


@pytest.mark.slow
def test_the_shipped_full_run_scenarios_run_end_to_end(tmp_path, capsys):
    """Correct FW consistent, the leaky twin violated (full runs of the shipped scenarios, ~30 s)."""
    import json
    from pathlib import Path

    scenarios = Path(__file__).resolve().parents[1] / "scenarios"
    assert run_cli(scenarios / "private-frank-wolfe.yaml", tmp_path / "pfw") == 0
    assert json.loads((tmp_path / "pfw" / "report.json").read_text())["verdict"] == "consistent"
    assert run_cli(scenarios / "private-frank-wolfe-leaky.yaml", tmp_path / "leaky") == 0
    assert json.loads((tmp_path / "leaky" / "report.json").read_text())["verdict"] == "violated"


def test_one_run_canaries_beside_held_out_rmse_end_to_end(tmp_path, capsys):
    """The utility scenario, small: one-run canaries beside held-out RMSE."""
    import json
    from pathlib import Path

    import yaml

    scenarios = Path(__file__).resolve().parents[1] / "scenarios"
    small = yaml.safe_load((scenarios / "matrix-completion-utility.yaml").read_text())
    small["population"].update(n_users=3000, n_items=60, ratings_per_user=20, test_fraction=0.05)
    small["audit"]["trials"] = 200
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(small))
    assert run_cli(tmp_path / "small.yaml", tmp_path / "small") == 0
    report = json.loads((tmp_path / "small" / "report.json").read_text())
    assert report["verdict"] == "consistent" and report["world"]["canaries"] == 200
    assert 0 < report["utility"]["rmse"] < report["utility"]["zero_rmse"]


def test_a_panel_must_match_the_mechanisms_iterations(tmp_path):
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.language.yamlio import ScenarioError
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "scenarios" / "private-frank-wolfe.yaml").read_text()
    (tmp_path / "bad.yaml").write_text(text.replace("panel: {}", "panel: {rounds: 3}"))
    with pytest.raises(ScenarioError, match="panel.rounds"):
        load_scenario(tmp_path / "bad.yaml")


def _clip_observed(rows, mask, row_bound):
    """Π_{L,Ω}: each row scaled so its observed entries have norm ≤ L."""
    norms = np.linalg.norm(np.where(mask, rows, 0.0), axis=1)
    return rows * np.minimum(1.0, row_bound / np.maximum(norms, 1e-300))[:, None]


def _completed_rows(transcript, users: int) -> np.ndarray:
    """The users' completed rows, in the order of the panel's rows."""
    position = np.empty(users, int)
    position[transcript.user_cluster[transcript.output_user]] = np.arange(users)
    return transcript.outputs.dense()[position]


def reference_projected_gradient(y_star, mask, row_bound, iterations, step_size, rank):
    """Private PGD with σ = 0, dense, from Jain et al. (written for this test): Y⁰ = 0;
    A = P_Ω(Y − Y*); V = top-``rank`` eigenvectors of AᵀA; Y ← Π_{L,Ω}((Y − ηA) VᵀV)."""
    clip = functools.partial(_clip_observed, mask=mask, row_bound=row_bound)
    target = clip(np.where(mask, y_star, 0.0))
    y = np.zeros_like(target)
    for _ in range(iterations):
        residual = np.where(mask, y - target, 0.0)
        _, vectors = np.linalg.eigh(residual.T @ residual)
        basis = vectors[:, -rank:]
        y = clip((y - step_size * residual) @ basis @ basis.T)
    return y


@pytest.mark.parametrize("row_bound, rank", [(0.6, 1), (10.0, 1), (0.6, 2)])
def test_noiseless_projected_gradient_matches_a_dense_reimplementation(row_bound, rank):
    """The engine's PGD with the noise switched off (σ spent = 0) computes exactly the update of
    Jain et al.'s update: rounds, eigenvector signs and the change of basis between rounds included."""
    import dataclasses

    rows, _, y = rank_one(300, 12, 5, seed=7)
    iterations = 6
    pgd = PrivateProjectedGradient(epsilon=1.0, iterations=iterations, row_bound=row_bound, rank=rank)
    pgd.noise = dataclasses.replace(pgd.noise, spent_sigma=0.0)
    transcript = panel_run(pgd, rows)
    completed = _completed_rows(transcript, 300)
    mask = rows.ratings.toarray() != 0
    expected = reference_projected_gradient(np.where(mask, rows.ratings.toarray(), 0.0), mask, row_bound,
                                            iterations, pgd.step_size, rank)
    np.testing.assert_allclose(completed, expected, atol=1e-9)
    assert np.abs(expected).max() > 0.1  # not a comparison of two zero matrices


@pytest.mark.parametrize("chunk", [8 * 7, 1 << 17])  # 7 users a dense block (the last one short), or all at once
def test_observed_entries_match_dense_rows_in_blocks(monkeypatch, chunk):
    from recaudit.mechanisms import matrix_completion

    monkeypatch.setattr(matrix_completion, "OBSERVED_CHUNK", chunk)
    rows, _, _ = rank_one(40, 8, 3, seed=5)
    ratings = sparse.csr_array(rows.ratings.toarray() * (np.arange(40) % 9 != 4)[:, None])  # some rows empty
    rng = np.random.default_rng(6)
    coefficients, basis = rng.normal(size=(40, 3)), rng.normal(size=(3, 8))
    np.testing.assert_allclose(observed(ratings, coefficients, basis).toarray(),
                               np.where(ratings.toarray() != 0, coefficients @ basis, 0), rtol=1e-14, atol=1e-15)


def reference_frank_wolfe(y_star, mask, row_bound, iterations, nuclear_bound, shift):
    """Private FW with σ = 0, dense, from Jain et al.'s Algorithm 1 (written for this test): Y⁰ = 0; each round
    A = P_Ω(Y − Y*) of the clipped targets, (λ, v) the top eigenpair of AᵀA (largest entry of v positive),
    u = Av / (√λ + shift), Y ← Π_{L,Ω}((1 − 1/T) Y − (k/T) u vᵀ)."""
    clip = functools.partial(_clip_observed, mask=mask, row_bound=row_bound)
    target = clip(np.where(mask, y_star, 0.0))
    y = np.zeros_like(target)
    for _ in range(iterations):
        residual = np.where(mask, y - target, 0.0)
        values, vectors = np.linalg.eigh(residual.T @ residual)
        v = vectors[:, -1] * np.sign(vectors[np.argmax(np.abs(vectors[:, -1])), -1])
        u = residual @ v / max(np.sqrt(max(values[-1], 0.0)) + shift, 1e-12)
        y = clip((1 - 1 / iterations) * y - (nuclear_bound / iterations) * np.outer(u, v))
    return y


@pytest.mark.parametrize("row_bound", [0.3, 10.0])  # the projection binding (on 78 of 300 rows at the end), or not
def test_noiseless_frank_wolfe_matches_a_dense_reimplementation(row_bound):
    """The engine's private FW with the noise switched off (σ spent = 0): users' steps (``_step``, ``observed``: P_Ω
    of rows kept as coefficients, updated in place), the eigenvalue shift and the projection, against the dense
    algorithm."""
    import dataclasses

    rows, _, _ = rank_one(300, 12, 5, seed=8)
    fw = PrivateFrankWolfe(epsilon=1.0, iterations=6, row_bound=row_bound, nuclear_scale=0.8, shift_scale=0.05)
    fw.noise = dataclasses.replace(fw.noise, spent_sigma=0.0)
    transcript = panel_run(fw, rows)
    completed = _completed_rows(transcript, 300)
    mask = rows.ratings.toarray() != 0
    expected = reference_frank_wolfe(np.where(mask, rows.ratings.toarray(), 0.0), mask, row_bound, 6,
                                     0.8 * np.sqrt(300 * 12), fw.eigen_shift(12))
    np.testing.assert_allclose(completed, expected, atol=1e-9)
    assert np.abs(expected).max() > 0.25 and fw.eigen_shift(12) > 0.5  # not two zero matrices; the shift is taken


def test_a_rounds_gram_sum_is_the_batches_grams_added_in_turn_bit_for_bit(monkeypatch):
    """``GramSum`` (upper triangles summed, mirrored once) against adding each batch's ``gram`` in turn: dense-path
    batches of several blocks, then a sparse-path batch, then dense ones again; and numpy's product to 1e-12."""
    monkeypatch.setattr(gram_sums, "DENSE_CHUNK", 50 * 64)
    rng = np.random.default_rng(4)

    def batch(users, per_row):
        items = np.argsort(rng.random((users, 50)), axis=1)[:, :per_row]
        return sparse.csr_array((rng.normal(size=items.size), items.ravel(), np.arange(users + 1) * per_row),
                                shape=(users, 50))

    for kinds in ([40, 40, 40], [40, 3, 40, 40], [3, 3]):
        batches = [batch(150, per_row) for per_row in kinds]
        total, sums = np.zeros((50, 50)), gram_sums.GramSum(50)
        for rows in batches:
            total += gram_sums.gram(rows)
            sums.add(rows)
        np.testing.assert_array_equal(sums.total(), total)
        dense = np.vstack([rows.toarray() for rows in batches])
        np.testing.assert_allclose(sums.total(), dense.T @ dense, rtol=1e-12, atol=1e-12)
