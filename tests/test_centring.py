"""Matrix completion on star ratings: centring (user / public / private, accounted), clamped predictions,
the per-user held-out split, and the mean's RMSE printed beside."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

from recaudit.mechanisms import UserBatch, centring
from recaudit.mechanisms.accounting import epsilon_for
from recaudit.mechanisms.frank_wolfe import FrankWolfe, PrivateFrankWolfe
from recaudit.mechanisms.projected_gradient import PrivateProjectedGradient
from recaudit.simulator.engine import run_protocol
from recaudit.simulator.populations import MatrixPopulation
from recaudit.simulator.rating_tables import held_out_per_user
from recaudit.simulator.schedules import Panel
from recaudit.simulator.transcript import Recorder


def star_world(m: int = 400, n: int = 30, per_user: int = 12, seed: int = 0):
    """Stars 1..5 = round(item quality + user generosity + noise): strong item and user effects."""
    rng = np.random.default_rng(seed)
    quality, generosity = rng.normal(3.2, 0.9, n), rng.normal(0, 0.6, m)
    items = np.argsort(rng.random((m, n)), axis=1)[:, :per_user].ravel()
    users = np.repeat(np.arange(m), per_user)
    stars = np.clip(np.round(quality[items] + generosity[users] + rng.normal(0, 0.5, users.size)), 1, 5)
    test = held_out_per_user(sparse.csr_array((stars, (users, items)), shape=(m, n)), 0.25, rng)
    table = sparse.csr_array((stars, (users, items)), shape=(m, n))
    table.sort_indices()
    coo = table.tocoo()
    train = UserBatch.from_coo(coo.row[~test], coo.col[~test], coo.data[~test], coo.data[~test] >= 4, (m, n))
    return train, sparse.csr_array((coo.data[test], (coo.row[test], coo.col[test])), shape=(m, n))


def completed(mechanism, rows: UserBatch, test: sparse.csr_array):
    """(RMSE of the users' predictions, RMSE of predicting the training mean, predictions) on ``test``."""
    pop = MatrixPopulation(rows, test, 5.0)
    catalogue = pop.catalogue(np.random.default_rng(0))
    n = len(rows) - mechanism.public_panel()
    transcript = run_protocol(mechanism, pop, catalogue, Panel(n, mechanism.rounds), np.random.SeedSequence(3),
                              recorder=Recorder(answers=False, outputs="all"))
    held = sparse.coo_array(test[transcript.user_cluster[transcript.output_user]])
    predicted = transcript.outputs.at(held.row, held.col)
    mean = rows.ratings.data.mean()
    rmse = lambda p: float(np.sqrt(np.mean((p - held.data) ** 2)))  # noqa: E731
    return rmse(predicted), rmse(np.full(held.nnz, mean)), predicted


def test_exact_effects_are_shrunk_item_means():
    table = sparse.csr_array(np.array([[5.0, 1, 0], [4, 0, 2], [3, 0, 0]]))
    got = centring.exact(table, (1.0, 5.0), beta_m=2.0)
    frame = pd.DataFrame({"item": table.tocoo().col, "r": table.tocoo().data})
    G = frame.r.mean()
    expected = frame.groupby("item").r.agg(lambda r: (r.sum() + 2.0 * G) / (r.size + 2.0)).to_numpy()
    assert got.G == pytest.approx(G) and got.MAvg == pytest.approx(expected)
    offsets = centring.offsets(table, got.MAvg, beta_p=1.0)
    assert offsets[2] == pytest.approx((3 - got.MAvg[0]) / 2)


@pytest.mark.parametrize("mechanism", [
    PrivateFrankWolfe(epsilon=1.0, iterations=4, row_bound=2.0, centre="private", centre_share=0.3, min_rating=1,
                      max_rating=5),
    PrivateFrankWolfe(epsilon=2.0, iterations=3, row_bound=2.0, centre="private", min_rating=1, max_rating=5,
                      eigen="oja", oja_steps=5),
    PrivateProjectedGradient(epsilon=0.5, iterations=5, row_bound=2.0, centre="private", min_rating=1,
                             max_rating=5)])
def test_private_centring_is_inside_the_accounted_claim(mechanism):
    """Two centring rounds plus the protocol's: the accountant's ε over all rounds is the configured ε,
    and the centring rounds hold ``centre_share`` of μ² (Gaussian composition is exact)."""
    assert mechanism.rounds == mechanism.iterations + 2
    assert epsilon_for(mechanism.privacy_event(mechanism.rounds), mechanism.delta) == pytest.approx(
        mechanism.epsilon, rel=1e-6)
    mu2 = lambda sigma, sens, count: count * (sens / sigma) ** 2  # noqa: E731
    centre = mu2(mechanism.centre_sigma, 2 * mechanism.centre_bound, 2)
    rest = mu2(mechanism.noise.sigma, mechanism._sensitivity(), mechanism.iterations * mechanism._releases_per_round())
    assert centre / (centre + rest) == pytest.approx(mechanism.centre_share)


def test_centred_completion_predicts_on_the_star_scale_and_beats_the_mean():
    """Non-private FW on a world with strong item and user effects: every centring beats predicting the mean
    (deterministic world and seed; the margins are several times the run-to-run spread seen)."""
    rows, test = star_world()
    for centre, extra in (("user", {}), ("public", {"public_users": 50}), ("private", {})):
        fw = FrankWolfe(iterations=5, row_bound=5.0, nuclear_scale=0.3, centre=centre, min_rating=1, max_rating=5,
                        **extra)
        rmse, mean_rmse, predicted = completed(fw, rows, test)
        assert predicted.min() >= 1 and predicted.max() <= 5
        assert rmse < 0.9 * mean_rmse, centre
    uncentred, mean_rmse, _ = completed(FrankWolfe(iterations=5, row_bound=5.0, nuclear_scale=0.3), rows, test)
    assert uncentred > mean_rmse  # what the issue saw: completing raw stars predicts about 0


def test_centring_needs_the_star_scale():
    with pytest.raises(ValueError, match="star scale"):
        PrivateFrankWolfe(epsilon=1.0, centre="private")
    with pytest.raises(ValueError, match="public_users"):
        PrivateFrankWolfe(epsilon=1.0, centre="public", min_rating=1, max_rating=5)


def test_the_per_user_split_holds_out_that_share_of_every_user():
    rng = np.random.default_rng(4)
    counts = rng.integers(1, 40, 300)
    rows = np.repeat(np.arange(300), counts)
    cols = np.concatenate([rng.choice(50, c, replace=False) for c in counts])
    table = sparse.csr_array((np.ones(rows.size), (rows, cols)), shape=(300, 50))
    test = held_out_per_user(table, 0.2, rng)
    held = np.bincount(rows[test], minlength=300)
    assert np.array_equal(held, np.minimum(np.round(0.2 * counts), counts - 1))


def _bias_rmse(rows: UserBatch, test: sparse.csr_array) -> float:
    from recaudit.mechanisms.baselines import fit_bias_model

    held = sparse.coo_array(test)
    model = fit_bias_model(sparse.csr_array(rows.ratings))
    return float(np.sqrt(np.mean((np.clip(model.predict(held.row, held.col), 1, 5) - held.data) ** 2)))


def test_the_private_centring_is_a_bias_model_near_the_non_private_one():
    """Noiseless (non-private FW's centring rounds draw no noise) the weighted centring is the bias model
    μ + b_i + b_u in one pass with β_m = 15, β_p = 20: with every user's weight the same (9 training ratings each) it
    equals the unweighted ``centring.exact`` to rounding, and is within 0.03 of ``fit_bias_model`` (10 alternating
    passes, λ = 10 / 15; deterministic). Shrinking by β_m *weighted* units (before issue 33: 1/w = 3x too hard here)
    was more than 0.01 worse."""
    rows, test = star_world()
    held = sparse.coo_array(test)
    score = lambda mavg, off: float(np.sqrt(np.mean((np.clip(mavg[held.col] + off[held.row], 1, 5)  # noqa: E731
                                                      - held.data) ** 2)))
    fw = FrankWolfe(iterations=2, row_bound=5.0, nuclear_scale=1e-9, centre="private", min_rating=1, max_rating=5)
    alone, _, _ = completed(fw, rows, test)
    exact = centring.exact(rows.ratings, (1, 5), 15.0)
    assert alone == pytest.approx(score(exact.MAvg, centring.offsets(rows.ratings, exact.MAvg, 20.0)), abs=1e-9)
    assert abs(alone - _bias_rmse(rows, test)) < 0.03
    counts = np.diff(rows.ratings.indptr)
    sums = [np.asarray(centring.message(rows.ratings, phase, (1, 5), 1.0).sum(axis=0)).ravel() for phase in (0, 1)]
    old = centring.effects(*sums, (1, 5), 15.0)  # β_m in weighted units, as before
    assert score(old.MAvg, centring.offsets(rows.ratings, old.MAvg, 20.0)) > alone + 0.01
    assert counts.min() == counts.max()


def test_a_run_worse_than_its_own_private_bias_model_is_flagged():
    """The run's centring alone is scored from its own outputs (``LowRankRows.centring_only``) and a run whose
    prediction is worse than it says so; the centring alone at ε = 20 is within 0.05 of the non-private bias model
    (one fixed seed; its noise σ on a weighted count is ~0.3 of an item's ~25: the margin is several times the
    spread of 5 seeds seen, 0.010-0.016)."""
    from recaudit.audits.utility import utility_summary

    rows, test = star_world()
    fw = PrivateFrankWolfe(epsilon=20.0, iterations=3, row_bound=3.0, nuclear_scale=0.3, centre="private",
                           centre_share=0.5, min_rating=1, max_rating=5)
    pop = MatrixPopulation(rows, test, 5.0)
    transcript = run_protocol(fw, pop, pop.catalogue(np.random.default_rng(0)), Panel(len(rows), fw.rounds),
                              np.random.SeedSequence(3), recorder=Recorder(answers=False, outputs="all"))
    from recaudit.audits.utility import completion_rmse

    utility = completion_rmse(transcript, test, train_mean=3.0, train=sparse.csr_array(rows.ratings))
    assert utility["centring_rmse"] is not None and abs(utility["centring_rmse"] - utility["bias_rmse"]) < 0.05
    flagged = utility_summary(utility | {"rmse": utility["centring_rmse"] + 0.01})
    assert "worse than its private bias model" in flagged
    assert "worse than its private bias model" not in utility_summary(utility | {"rmse": utility["centring_rmse"]})
