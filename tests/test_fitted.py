"""``population: {kind: fitted}``: a world drawn from a fit of a ratings file (recaudit.simulator.fitted), checked
against the file it was fitted to, a file made here from a known rank-3 model."""
import json

import numpy as np
import pytest
import yaml
from scipy import sparse

from recaudit.audits.cli import main
from recaudit.mechanisms import ParameterError
from recaudit.mechanisms.baselines import fit_als, fit_bias_model
from recaudit.simulator.fitted import FittedMatrix
from recaudit.simulator.ratings import write_ratings


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """600 users x 300 items, rank 3 plus biases and noise, star ratings 1-5; activity heavy-tailed
    (log-normal), popularity Zipf-like."""
    rng = np.random.default_rng(11)
    users, items = 600, 300
    activity = np.clip(np.round(np.exp(rng.normal(3.0, 0.7, users))), 5, items).astype(int)
    popularity = 1.0 / np.arange(1, items + 1) ** 0.8
    p, q = rng.normal(0, 0.5, (users, 3)), rng.normal(0, 0.5, (items, 3))
    rows, cols = [], []
    for u, n in enumerate(activity):
        rows.append(np.full(n, u))
        cols.append(rng.choice(items, n, replace=False, p=popularity / popularity.sum()))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    values = np.clip(np.round(3.6 + rng.normal(0, 0.3, users)[rows] + np.einsum("ij,ij->i", p[rows], q[cols])
                              + rng.normal(0, 0.6, rows.size)), 1, 5)
    table = sparse.csr_array((values, (rows, cols)), shape=(users, items))
    return write_ratings(tmp_path_factory.mktemp("fit") / "ratings.csv", table), table


def _world(path, seed=1, **kw):
    population = FittedMatrix(**({"users": 1500, "items": 200, "path": path, "rank": 3, "test_fraction": 0.1} | kw))
    population.catalogue(np.random.default_rng(seed))
    return population.matrix


def test_the_world_keeps_the_files_activity_popularity_levels_and_structure(source):
    path, table = source
    world = _world(path)
    train = world.rows.ratings
    ratings = train.nnz + world.test.nnz
    file_activity = np.minimum(np.diff(table.indptr), 200)
    assert abs(ratings / 1500 / file_activity.mean() - 1) < 0.05  # duplicates trimmed: a few % at most
    assert set(np.unique(train.data)) <= set(np.unique(table.data))
    top = np.sort(np.argsort(-np.bincount(table.indices, minlength=300), kind="stable")[:200])
    world_pop = np.bincount(train.indices, minlength=200)
    file_pop = np.bincount(table.indices, minlength=300)[top]
    assert np.corrcoef(world_pop, file_pop)[0, 1] > 0.9
    held = sparse.coo_array(world.test)

    def rmse(model):
        return float(np.sqrt(np.mean((model.predict(held.row, held.col) - held.data) ** 2)))

    bias, als = rmse(fit_bias_model(train)), rmse(fit_als(train, 3, np.random.default_rng(0)))
    assert als < bias - 0.02, (als, bias)  # the rank-3 structure carried into the world


def test_same_seed_same_world_and_more_items_than_the_file(source):
    path, _ = source
    a, b, c = _world(path), _world(path), _world(path, seed=2)
    assert (a.rows.ratings != b.rows.ratings).nnz == 0 and (a.rows.ratings != c.rows.ratings).nnz > 0
    wide = _world(path, users=200, items=900)
    assert wide.rows.ratings.shape == (200, 900) and np.diff(wide.rows.ratings.indptr).min() >= 1


def test_bad_settings_are_one_line(source):
    path, _ = source
    with pytest.raises(ParameterError, match="must be below the file.s 300 items") as refused:
        FittedMatrix(users=10, items=10, path=path, rank=300)
    assert refused.value.field == "rank"
    with pytest.raises(ParameterError, match="not fetched|dataset"):
        FittedMatrix(users=10, items=10, dataset="movielens-25m")


def test_a_scenario_runs_on_a_fitted_world(source, tmp_path, capsys):
    path, _ = source
    scenario = {"name": "fitted-small", "seed": 5,
                "population": {"kind": "fitted", "path": str(path), "users": 800, "items": 150, "rank": 3,
                               "test_fraction": 0.1},
                "panel": {},
                "mechanism": {"kind": "mcsherry_mironov", "noise": "gaussian", "epsilon": 2.0, "delta": 1e-6,
                              "min_rating": 1.0, "max_rating": 5.0, "rank": 3},
                "attack": [{"kind": "covariance_projection"}],
                "audit": {"design": "one_run", "method": "one-run", "trials": 100}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    assert main(["validate", str(tmp_path / "s.yaml")]) == 0
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    utility = report["utility"]
    assert utility["rmse"] is not None and utility["bias_rmse"] < utility["mean_rmse"]


def test_the_catalogue_states_the_mean_activity_and_mean_activity_scales_it(source):
    path, table = source
    population = FittedMatrix(users=3000, items=200, path=path, rank=3, test_fraction=0.0)
    catalogue = population.catalogue(np.random.default_rng(4))
    drawn = np.diff(population.matrix.rows.ratings.indptr)
    assert abs(catalogue.ratings_per_user / drawn.mean() - 1) < 0.06  # the mean (duplicates trimmed), not the max
    assert catalogue.ratings_per_user < 0.5 * drawn.max()
    sparser = FittedMatrix(users=3000, items=300, path=path, rank=3, test_fraction=0.0, mean_activity=15.0)
    assert abs(sparser.catalogue(np.random.default_rng(4)).ratings_per_user - 15) <= 0.5
    assert abs(np.diff(sparser.matrix.rows.ratings.indptr).mean() / 15.0 - 1) < 0.03


def test_a_study_runs_its_mechanisms_at_every_world_size(source, tmp_path):
    path, _ = source
    fw = ("{kind: private_frank_wolfe, delta: 1.0e-6, iterations: 3, row_bound: 3.0, centre: private, "
          "min_rating: 1, max_rating: 5}")
    (tmp_path / "s.yaml").write_text(
        f"name: sizes\nseed: 3\nstudy: {{kind: matrix_completion, population: {{kind: fitted, path: '{path}', "
        f"users: 100, items: 60, rank: 3, test_fraction: 0.05}}, users: [300, 900], splits: 1, epsilons: [8], "
        f"mechanisms: [{fw}]}}\n")
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    points = json.loads((tmp_path / "out" / "mc_study.json").read_text())["points"]
    assert [p["users"] for p in points] == [300, 900]
    assert all(p["centring_rmse"] is not None and p["bias_rmse"] < p["mean_rmse"] for p in points)
    assert "| 900 | private_frank_wolfe centre=private | 8 | 1 |" in (tmp_path / "out" / "mc_study.md").read_text()
