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


def _mc_file(tmp_path):
    from recaudit.studies.sp2 import star_world

    return write_population_file(tmp_path / "u.data", star_world(150, 40, 15, 2), 150, seed=2, format="udata")


FW = ("{kind: private_frank_wolfe, delta: 1.0e-6, iterations: 3, row_bound: 3.0, centre: private, "
      "min_rating: 1, max_rating: 5}")


def test_a_study_prints_its_estimate_before_any_work(tmp_path, capsys):
    path = scenario(tmp_path, "mc", f"{{kind: matrix_completion, ratings: '{_mc_file(tmp_path)}', splits: 1, "
                                    f"epsilons: [1], mechanisms: [{FW}], min_users: 100}}")
    assert main(["run", path, "--out", str(tmp_path / "out")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "estimated" in first and "CPU" in first and "MB" in first


def test_a_study_over_its_limits_is_one_line_of_bad_input(tmp_path, capsys):
    path = tmp_path / "mc.yaml"
    path.write_text(f"name: mc\nseed: 3\nlimits: {{hours: 1.0e-6}}\nstudy: {{kind: matrix_completion, ratings: "
                    f"'{_mc_file(tmp_path)}', splits: 1, epsilons: [1], mechanisms: [{FW}], min_users: 100}}\n")
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "limits.hours" in err[0] and "\\n" not in err[0]
    assert not (tmp_path / "out").exists()
    path.write_text(path.read_text().replace("hours: 1.0e-6", "memory_gb: 0.01"))
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "limits.memory_gb" in err[0] and "\\n" not in err[0]


@pytest.mark.parametrize("block", ["{kind: sp2, splits: 2}", "{kind: xin_jaakkola, replicates: 2}",
                                   "{kind: mcsherry_mironov_per_user, counts: [1, 2]}"])
def test_every_study_kind_estimates_its_cost(block):
    from recaudit.audits.language.limits import LimitsConfig
    from recaudit.audits.language.studies import StudyScenario

    study = StudyScenario.model_validate({"name": "s", "seed": 0, "study": yaml_block(block)}).build()
    cost = study.estimate(0, LimitsConfig())
    assert cost["seconds"] > 0 and cost["memory"] > 0 and cost["basis"]


def yaml_block(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)


def test_a_study_point_costs_its_world_alone_not_an_audit_s_canaries():
    """The point's scenario names a one-run audit of 200,000 canaries it never runs (measure_world): the estimate
    counts the panel's users only (it used to count the canaries: 10.1 GiB for a MovieLens-100K point)."""
    from recaudit.audits.language.limits import estimate_cost
    from recaudit.audits.language.scenario import Scenario
    from recaudit.audits.language.sections import build
    from recaudit.mechanisms import MECHANISMS

    data = {"name": "p", "seed": 1, "panel": {}, "mechanism": yaml_block(FW) | {"epsilon": 1.0},
            "population": {"kind": "rank_one_matrix", "n_users": 500, "n_items": 40, "ratings_per_user": 10},
            "audit": {"design": "one_run", "method": "one-run", "trials": 200_000},
            "attack": {"kind": "subspace_alignment"}}
    one = Scenario.model_validate(data, context={"world_only": True})
    alone = estimate_cost(one, build(one.mechanism, MECHANISMS), world_only=True)
    audited = estimate_cost(one, build(one.mechanism, MECHANISMS))
    assert alone["users"] == 500 and audited["users"] == 200_500
    assert alone["audit_seconds"] == 0 and alone["memory"] < audited["memory"]
    assert alone["rounds"] == 3 + 2 + 1  # the iterations, the two centring rounds and the release
