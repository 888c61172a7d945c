"""Studies are scenarios: ``recaudit run`` on a ``study:`` scenario, refused before work, saved part by part."""
import json

import pytest

from recaudit.audits.cli import main
from recaudit.simulator.ratings import write_population_file


def scenario(tmp_path, name: str, study: str) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nseed: 3\nstudy: {study}\n")
    return str(path)


def test_an_unknown_setting_is_one_line_naming_it(tmp_path, capsys):
    path = scenario(tmp_path, "bad", "{kind: sp2, splitz: 2}")
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "splitz" in err[0] and "bad.yaml" in err[0]


@pytest.mark.parametrize("command", ["grid", "sweep"])
def test_grid_and_sweep_send_a_study_to_run(tmp_path, capsys, command):
    path = scenario(tmp_path, "mm", "{kind: mcsherry_mironov_per_user, counts: [1], trials: 50}")
    assert main([command, path, "--out", str(tmp_path / "out")]) == 2
    assert "recaudit run" in capsys.readouterr().err


def test_a_ratings_file_too_small_is_refused_before_any_work(tmp_path, capsys):
    from recaudit.studies.xin_jaakkola import file_population

    data = write_population_file(tmp_path / "u.data", file_population(40, 5), 150, seed=5, format="udata")
    path = scenario(tmp_path, "xj", f"{{kind: xin_jaakkola, ratings: '{data}', private: 60, items: 40}}")
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "too few" in err[0]
    assert not (tmp_path / "out").exists()


def test_the_per_user_study_saves_each_count_and_a_rerun_resumes(tmp_path, monkeypatch):
    from recaudit.studies import mcsherry_mironov_per_user as mm

    path = scenario(tmp_path, "mm", "{kind: mcsherry_mironov_per_user, counts: [1, 3], trials: 60, users: 30, "
                                    "items: 20}")
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 0
    saved = json.loads((tmp_path / "out" / "mm_user_study.json").read_text())
    assert [r["ratings"] for r in saved["rows"]] == [1, 3] and saved["world"]["seed"] == 3
    assert "| 3 |" in (tmp_path / "out" / "mm_user_study.md").read_text()

    def no_more_runs(*args, **kwargs):
        raise AssertionError("a saved count was computed again")

    monkeypatch.setattr(mm, "runs_block", no_more_runs)
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "mm_user_study.json").read_text())["rows"] == saved["rows"]


def test_sp2_study_runs_on_a_ratings_file_alone(tmp_path):
    from recaudit.studies.sp2 import METHODS, star_world

    data = write_population_file(tmp_path / "ratings.csv", star_world(120, 60, 20, 1), 120, seed=1,
                                 format="ratings_csv")
    path = scenario(tmp_path, "sp2", f"{{kind: sp2, ratings: '{data}', allocations: ['H1:2,2'], factors: 4, "
                                     "clusters: 3, surprise: false, fine_tune_epochs: 2}")
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "sp2_study.json").read_text())
    assert list(result["worlds"]) == ["ratings_file"]  # no synthetic world
    world = result["worlds"]["ratings_file"]
    row = world["allocations"]["H1 (2.0, 2.0)"] | world["baselines"]
    assert set(METHODS) <= set(row) and all(0 < row[m]["rmse"] < 4 for m in METHODS)


def test_sp2_refuses_a_file_too_small_for_its_clusters(tmp_path, capsys):
    from recaudit.studies.sp2 import star_world

    data = write_population_file(tmp_path / "u.data", star_world(8, 60, 20, 1), 8, seed=1, format="udata")
    path = scenario(tmp_path, "sp2", f"{{kind: sp2, ratings: '{data}', clusters: 10}}")
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "too few for 10 clusters" in err[0] and not (tmp_path / "out").exists()


def test_matrix_completion_study_over_splits_beside_the_mean(tmp_path):
    from recaudit.studies.sp2 import star_world

    data = write_population_file(tmp_path / "u.data", star_world(150, 40, 15, 2), 150, seed=2, format="udata")
    fw = ("{kind: private_frank_wolfe, delta: 1.0e-6, iterations: 3, row_bound: 3.0, centre: private, "
          "min_rating: 1, max_rating: 5}")
    path = scenario(tmp_path, "mc", f"{{kind: matrix_completion, ratings: '{data}', splits: 2, epsilons: [1, 5], "
                                    f"mechanisms: [{fw}], min_users: 100}}")
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 0
    points = json.loads((tmp_path / "out" / "mc_study.json").read_text())["points"]
    assert [(p["epsilon"], p["split"]) for p in points] == [(1, 0), (5, 0), (1, 1), (5, 1)]
    assert all(0 < p["rmse"] < 5 and 0 < p["mean_rmse"] < 5 for p in points)
    assert points[0]["mean_rmse"] != points[2]["mean_rmse"]  # another split holds out other ratings
    assert "| private_frank_wolfe centre=private | 5 | 2 |" in (tmp_path / "out" / "mc_study.md").read_text()
    small = scenario(tmp_path, "mc2", f"{{kind: matrix_completion, ratings: '{data}', mechanisms: [{fw}], "
                                      "min_users: 1000}")
    assert main(["run", small, "--out", str(tmp_path / "out2")]) == 2 and not (tmp_path / "out2").exists()
