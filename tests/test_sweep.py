import json

import numpy as np
import pytest

from recaudit.audits.cli import main
from recaudit.audits.language.scenario import with_parameter
from recaudit.audits.sweep import fit_slope
from recaudit.simulator.learning import checkpoints


def test_checkpoints_are_geometric_and_end_at_the_maximum():
    at = checkpoints(10_000, per_decade=4, start=10)
    assert at[0] == 10 and at[-1] == 10_000 and np.all(np.diff(at) > 0)
    ratios = at[1:-1] / at[:-2]
    assert np.allclose(ratios, 10 ** 0.25, rtol=0.05)


def test_fit_slope_recovers_a_power_law():
    rng = np.random.default_rng(0)
    x = np.repeat([10.0, 20, 40, 80], 5)
    u = 3 * x ** 2 * np.exp(rng.normal(0, 0.05, x.size))
    fit = fit_slope(x, u)
    assert fit["ci_low"] < 2 < fit["ci_high"] and abs(fit["slope"] - 2) < 0.1


def test_with_parameter_copies():
    data = {"mechanism": {"epsilon": 1.0}}
    assert with_parameter(data, "mechanism.epsilon", 2.0) == {"mechanism": {"epsilon": 2.0}}
    assert data == {"mechanism": {"epsilon": 1.0}}


SWEEP = """
sweep:
  replicates: 2
  target_accuracy: 1.0
  max_users: 400000
  start_users: 500
  checkpoints_per_decade: 10
  axes:
    - parameter: population.n_items
      values: [12, 24]
"""


def tiny(quickstart_data):
    quickstart_data["population"].update(n_items=12, ratings_per_user=3,
                                         like_probability=[[0.9, 0.2], [0.7, 0.05]])
    quickstart_data["mechanism"]["epsilon"] = 2.0
    return quickstart_data


def test_sweep_cli_writes_its_reports_and_resumes(tmp_path, quickstart_data, capsys):
    import yaml

    data = tiny(quickstart_data) | yaml.safe_load(SWEEP)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "sweep.json").read_text())
    assert len(report["points"]) == 4 and all(p["u_star"] for p in report["points"])
    fit = report["fits"][0]
    assert fit["parameter"] == "population.n_items" and fit["theory_slope"] > 1.5
    assert (out / "scaling.png").stat().st_size > 0 and "| population.n_items |" in (out / "sweep.md").read_text()
    assert main(["sweep", str(path), "--out", str(out), "--quiet", "--resume"]) == 0
    assert json.loads((out / "sweep.json").read_text())["points"] == report["points"]


def test_bad_sweep_values_fail_before_work(tmp_path, quickstart_data, capsys):
    import yaml

    data = tiny(quickstart_data) | yaml.safe_load(SWEEP.replace("[12, 24]", "[12, 2]"))
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "sweep: axes[0]: population.n_items = 2 is invalid" in err


def test_sweep_needs_a_sweep_block(tmp_path, quickstart_data, capsys):
    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(quickstart_data))
    assert main(["sweep", str(path), "--quiet"]) == 2
    assert "sweep: required" in capsys.readouterr().err


def test_linked_parameters_follow_the_axis():
    from recaudit.audits.language.scenario import SweepAxis

    axis = SweepAxis(parameter="population.n_items", values=[40, 80], linked={"population.ratings_per_user": 0.5})
    data = {"population": {"n_items": 10, "ratings_per_user": 5}}
    assert axis.apply(data, 80) == {"population": {"n_items": 80, "ratings_per_user": 40}}
    assert axis.grid() == [40, 80] and all(isinstance(v, int) for v in axis.grid())


COMPARE = """
  compare:
    - kind: maxsense
      epsilon: 2.0
      score: centred
    - kind: pairwise_preference
      epsilon: 2.0
  bounds: [fano, scarce, adaptive]
"""


def test_compare_runs_every_mechanism_on_the_same_worlds_and_draws_bounds(tmp_path, quickstart_data):
    import yaml

    from recaudit.mechanisms import theory

    base = tiny(quickstart_data) | yaml.safe_load(SWEEP)
    alone, both = tmp_path / "alone.yaml", tmp_path / "both.yaml"
    alone.write_text(yaml.safe_dump(base))
    both.write_text(yaml.safe_dump(base).replace("sweep:\n", "sweep:\n" + COMPARE.strip("\n") + "\n", 1))
    assert main(["sweep", str(alone), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["sweep", str(both), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    a = json.loads((tmp_path / "a" / "sweep.json").read_text())
    b = json.loads((tmp_path / "b" / "sweep.json").read_text())
    labels = ["maxsense (score=raw)", "maxsense (score=centred)", "pairwise_preference"]
    assert [f["mechanism"] for f in b["fits"]] == labels
    assert len(b["points"]) == 3 * len(a["points"])
    # the scenario's own mechanism sees the same worlds and seeds as without compare: identical U*
    first = [p["u_star"] for p in b["points"] if p["mechanism"] == labels[0]]
    assert first == [p["u_star"] for p in a["points"]]
    # the bounds are the theory's, at each grid value (epsilon 2, w 3)
    expected = {12: (theory.fano_min_users(12, 2.0), theory.scarce_min_users(12, 3, 2.0),
                     theory.adaptive_min_users(12)),
                24: (theory.fano_min_users(24, 2.0), theory.scarce_min_users(24, 3, 2.0),
                     theory.adaptive_min_users(24))}
    for row in b["bounds"]:
        assert row["users"] == pytest.approx(expected[row["value"]][["fano", "scarce", "adaptive"].index(row["bound"])])
    assert len(b["medians"]) == 3 * 2
    md = (tmp_path / "b" / "sweep.md").read_text()
    assert "| population.n_items | `maxsense (score=raw)` median U* |" in md and "bound: scarce" in md


def test_compare_mechanisms_must_have_the_axis_parameter(tmp_path, quickstart_data, capsys):
    import yaml

    data = tiny(quickstart_data) | yaml.safe_load(SWEEP.replace("population.n_items", "mechanism.theta")
                                                   .replace("[12, 24]", "[1.0, 2.0]"))
    data["sweep"]["compare"] = [{"kind": "pairwise_preference", "epsilon": 1.0}]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", str(path)]) == 2
    assert "compare[0]: pairwise_preference" in capsys.readouterr().err
