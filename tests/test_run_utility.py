"""An ordinary run of Xin–Jaakkola or SP2 measures held-out RMSE and NDCG@10 of its users' predictions."""
from __future__ import annotations

import json

import numpy as np
import pytest

from recaudit.audits.language.scenario import load_scenario
from recaudit.audits.reports.report import write_reports
from recaudit.audits.runner import run_scenario
from recaudit.audits.utility import measure_utility, recording_needs, utility_summary
from recaudit.mechanisms import ParameterError
from recaudit.mechanisms.sp2 import SP2
from recaudit.mechanisms.xin_jaakkola import XinJaakkola
from recaudit.simulator.churn import Churn
from recaudit.simulator.engine import Inserted, run_protocol
from recaudit.simulator.population import StarSBMPopulation
from recaudit.simulator.populations import SelectiveStarSBMPopulation
from recaudit.simulator.transcript import Recorder

STARS = [[[0.02, 0.05, 0.13, 0.35, 0.45], [0.45, 0.35, 0.13, 0.05, 0.02]],
         [[0.45, 0.35, 0.13, 0.05, 0.02], [0.02, 0.05, 0.13, 0.35, 0.45]]]


def stars(cls=StarSBMPopulation, **kw):
    base = dict(n_items=30, ratings_per_user=10, user_cluster_weights=[1, 1], item_cluster_weights=[1, 1],
                star_probability=STARS)
    return cls(**(base | kw))


def test_held_out_split_is_the_same_draw_split_and_deterministic():
    """With ``held_out`` the users are the same draw (same seed) with k ratings of each moved aside."""
    whole = stars()
    split = stars(held_out=3)
    catalogue = whole.catalogue(np.random.default_rng(0))
    _, full = whole.sample_users(50, catalogue, np.random.default_rng(7))
    _, rows = split.sample_users(50, catalogue, np.random.default_rng(7))
    _, again = split.sample_users(50, catalogue, np.random.default_rng(7))
    kept, held = rows.ratings.toarray(), rows.held_out.toarray()
    assert np.array_equal(kept + held, full.ratings.toarray())
    assert np.all((kept != 0).sum(axis=1) == 7) and np.all((held != 0).sum(axis=1) == 3)
    assert not np.any((kept != 0) & (held != 0))
    assert np.array_equal(rows.likes.toarray(), (kept >= 4))
    assert np.array_equal(held, again.held_out.toarray()) and np.array_equal(kept, again.ratings.toarray())
    _, other = split.sample_users(50, catalogue, np.random.default_rng(8))
    assert not np.array_equal(held, other.held_out.toarray())
    with pytest.raises(ParameterError, match="ratings_per_user") as error:
        stars(held_out=10)
    assert error.value.field == "held_out"


def test_selective_split_marks_private_only_among_kept_ratings():
    _, rows = stars(SelectiveStarSBMPopulation, held_out=2).sample_users(
        40, stars().catalogue(np.random.default_rng(0)), np.random.default_rng(1))
    private, kept = rows.private_mask.toarray(), rows.ratings.toarray() != 0
    assert private.any() and not np.any(private & ~kept)


def run_with_canaries(mechanism, population, seed=3):
    """A small churn world with 6 canaries that also carry held-out ratings (which must not be scored)."""
    catalogue = population.catalogue(np.random.default_rng(0))
    churn = Churn(arrival_rate=60, mean_lifetime=1.0, horizon=1.5, query_interval=0.25, release_interval=0.75,
                  batch_size=20)
    _, canaries = population.sample_users(6, catalogue, np.random.default_rng(99))
    needs = recording_needs(mechanism, population, "messages")
    assert needs["outputs"] == "all"
    transcript = run_protocol(mechanism, population, catalogue, churn, np.random.SeedSequence(seed),
                              recorder=Recorder(**needs), inserted=Inserted(canaries, np.full(6, 2)))
    return transcript, measure_utility(mechanism, population, catalogue, transcript)


def independent_scores(transcript, predict_row):
    """RMSE over every background user's held-out ratings, from dense arrays (plain numpy, loop over users)."""
    held = transcript.held_out.toarray()
    errors, zero = [], []
    for index, user in enumerate(transcript.output_user):
        if user in transcript.inserted:
            continue
        items = np.flatnonzero(held[user])
        errors.append(predict_row(index)[items] - held[user, items])
        zero.append(held[user, items])
    return np.sqrt(np.mean(np.concatenate(errors) ** 2)), np.sqrt(np.mean(np.concatenate(zero) ** 2))


def test_xin_jaakkola_run_scores_its_users_predicted_rows():
    population = stars(held_out=3)
    transcript, utility = run_with_canaries(XinJaakkola(public_users=20), population)
    assert transcript.inserted.size == 6 and transcript.held_out[transcript.inserted].nnz == 18
    rmse, zero = independent_scores(transcript, lambda i: transcript.outputs[i])
    assert utility["rmse"] == pytest.approx(rmse, rel=1e-12)
    assert utility["zero_rmse"] == pytest.approx(zero, rel=1e-12)
    background = np.setdiff1d(transcript.output_user, transcript.inserted)
    assert utility["held_out"] == transcript.held_out[background].nnz == 3 * background.size
    assert 0.0 <= utility["ndcg10"] <= 1.0
    assert utility_summary(utility).startswith(f"held-out RMSE {rmse:.4g} (NDCG@10 {utility['ndcg10']:.4g})")


def test_sp2_run_scores_each_device_with_the_item_terms_it_downloaded():
    population = stars(SelectiveStarSBMPopulation, held_out=2)
    transcript, utility = run_with_canaries(SP2(factors=4, epochs=3, fine_tune_epochs=2), population)
    outputs = transcript.outputs
    assert {id(a) for a in outputs.aux} >= {id(outputs.aux[j]) for j in outputs.aux_of_row}

    def predict_row(i):  # μ + b_u + b_i + p_u·q_i over every item, from the row's own download
        aux = outputs.aux[outputs.aux_of_row[i]]
        if aux is None:
            return np.zeros(population.n_items)
        return aux.mu + outputs.user_bias[i] + aux.slot_bias + aux.slot_factors @ outputs.user_factors[i]

    rmse, _ = independent_scores(transcript, predict_row)
    assert utility["rmse"] == pytest.approx(rmse, rel=1e-12)
    assert 0.0 <= utility["ndcg10"] <= 1.0


def test_a_run_without_held_out_ratings_reports_no_rmse():
    transcript, utility = None, None
    population = stars()
    assert recording_needs(XinJaakkola(), population, "messages")["outputs"] == "watched"
    catalogue = population.catalogue(np.random.default_rng(0))
    churn = Churn(arrival_rate=40, mean_lifetime=1.0, horizon=1.0, query_interval=0.25, release_interval=0.5,
                  batch_size=20)
    transcript = run_protocol(XinJaakkola(public_users=20), population, catalogue, churn,
                              np.random.SeedSequence(1))
    utility = measure_utility(XinJaakkola(public_users=20), population, catalogue, transcript)
    assert transcript.held_out is None and utility.get("rmse") is None


def test_scenario_run_reports_rmse_and_ndcg(write_scenario, tmp_path):
    data = {"name": "xj-utility", "seed": 5,
            "population": {"kind": "sbm_stars", "n_items": 40, "ratings_per_user": 24, "held_out": 4,
                           "user_cluster_weights": [1, 1], "item_cluster_weights": [1, 1],
                           "star_probability": STARS},
            "churn": {"arrival_rate": 60, "mean_lifetime": 1.0, "horizon": 2.0, "query_interval": 0.25,
                      "release_interval": 1.0, "batch_size": 20},
            "mechanism": {"kind": "xin_jaakkola", "response": "pmd", "public_users": 20},
            "attack": {"kind": "pmd_coordinate"},
            "audit": {"method": "one-run", "trials": 100, "view": "messages", "alpha": 0.05, "guess_fraction": 0.1}}
    result = run_scenario(load_scenario(write_scenario(data)))
    out = tmp_path / "report"
    write_reports(result, out)
    report = json.loads((out / "report.json").read_text())
    assert report["utility"]["metric"] == "held-out RMSE" and report["utility"]["ndcg10"] is not None
    assert "NDCG@10" in (out / "report.md").read_text() and "NDCG@10" in (out / "report.html").read_text()
