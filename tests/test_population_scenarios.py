"""The new populations in scenarios: validated, run end to end through the CLI on small worlds."""
from __future__ import annotations

import json

import pytest

from recaudit.audits.cli import main
from tests.conftest import small_world

STAR_POPULATION = {"kind": "sbm_stars", "n_items": 100, "ratings_per_user": 10,
                   "user_cluster_weights": [0.5, 0.5], "item_cluster_weights": [0.5, 0.5],
                   "star_probability": [[[0.02, 0.03, 0.05, 0.3, 0.6], [0.3, 0.3, 0.2, 0.1, 0.1]],
                                        [[0.1, 0.1, 0.2, 0.3, 0.3], [0.5, 0.3, 0.1, 0.05, 0.05]]],
                   "like_threshold": 4}
RANK_ONE_POPULATION = {"kind": "rank_one", "n_items": 100, "ratings_per_user": 10}


@pytest.mark.parametrize("population", [STAR_POPULATION, RANK_ONE_POPULATION], ids=["sbm_stars", "rank_one"])
def test_maxsense_runs_on_the_population(quickstart_data, write_scenario, tmp_path, population):
    data = small_world(quickstart_data, 2_000)
    data["population"] = population
    path = write_scenario(data)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    # MaxSense is correct: flagged with probability <= alpha = 0.05 over seeds; this seed is fixed
    assert report["verdict"] == "consistent"
    assert population.items() <= report["scenario"]["population"].items()
    print(report["utility"])


def test_the_world_check_applies_to_the_new_populations(quickstart_data, write_scenario, capsys):
    data = quickstart_data
    data["population"] = dict(STAR_POPULATION, n_items=4, ratings_per_user=4)
    data["mechanism"] = {"kind": "multi_maxsense", "epsilon": 1.0, "sketches": 8}
    assert main(["validate", str(write_scenario(data))]) == 2
    assert "mechanism." in capsys.readouterr().err
