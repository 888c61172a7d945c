"""`recaudit estimate FILE` (scores in, ε out): its contract, its one-line refusals of bad files, its agreement
with ``ra.estimate`` and with the report of a run whose scores it is given."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

import recaudit as ra
from recaudit.audits.cli import main
from recaudit.audits.stats import bounds
from recaudit.audits.stats.estimators import ANY_MECHANISM, ESTIMATORS

from .conftest import SCENARIOS, one_error, small_world


def _write(path, columns: dict) -> str:
    names = list(columns)
    rows = zip(*(columns[n] for n in names))
    path.write_text(",".join(names) + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows))
    return str(path)


@pytest.fixture
def canaries():
    """1,000 canaries, each in with probability 1/2, scored N(2·in, 1) (seeded)."""
    rng = np.random.default_rng(20261128)
    members = rng.integers(0, 2, 1000)
    return np.round(rng.normal(2.0 * members, 1.0), 6), members


@pytest.fixture
def runs():
    """600 runs in each world, scored N(world, 1) (seeded)."""
    rng = np.random.default_rng(11)
    worlds = np.repeat([0, 1], 600)
    return np.round(rng.normal(worlds.astype(float), 1.0), 6), worlds


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- the contract and agreement with ra.estimate


def test_one_run_file_gives_the_one_run_estimators_as_ra_estimate_does(tmp_path, capsys, canaries):
    scores, members = canaries
    path = _write(tmp_path / "s.csv", {"score": scores, "member": members})
    out = _json(capsys, ["estimate", path, "--epsilon", "1", "--delta", "1e-5", "--json"])
    expected = ra.estimate(scores, members=members, epsilon=1.0, delta=1e-5).to_dict()
    assert out == json.loads(json.dumps(expected))  # the same figures, to the last bit
    kinds = [e["estimator"] for e in out["estimates"]]
    assert kinds == ["one-run", "gauss-fit"]  # fdp-one-run needs the claim's mu: skipped, with its reason
    assert [s["estimator"] for s in out["skipped"]] == ["fdp-one-run"] and "mu" in out["skipped"][0]["reason"]
    for e in out["estimates"]:
        assert e["valid_for"] == ESTIMATORS[e["estimator"]].valid_for
        assert {"epsilon_lb", "ceiling", "uninformative"} <= set(e)
    one_run = out["estimates"][0]
    assert one_run["valid_for"] == ANY_MECHANISM == "any mechanism"
    # scores two standard deviations apart: far more than ε = 1 shows, below the guesses' ceiling
    assert 1.0 < one_run["epsilon_lb"] <= one_run["ceiling"] and not one_run["uninformative"]
    assert out["counts"] == {"in": int(members.sum()), "out": int(1000 - members.sum())}


def test_many_runs_file_gives_the_split_bound_of_the_files_order(tmp_path, capsys, runs):
    scores, worlds = runs
    path = _write(tmp_path / "s.csv", {"world": worlds, "score": scores, "other": np.arange(worlds.size)})
    out = _json(capsys, ["estimate", path, "--epsilon", "0.5", "--delta", "0", "--estimator", "split", "--json"])
    direct = bounds.split_epsilon_bound(scores[worlds == 0], scores[worlds == 1], alpha=0.05, delta=0.0)
    (split,) = out["estimates"]
    assert split["estimator"] == "split" and split["valid_for"] == "any mechanism"
    assert split["epsilon_lb"] == direct.epsilon_lb > 0 and split["ceiling"] == direct.ceiling
    assert out == json.loads(json.dumps(ra.estimate(scores, worlds=worlds, epsilon=0.5, delta=0.0,
                                                    estimators=["split"]).to_dict()))


def test_gaussian_dp_estimators_run_with_the_claims_mu(tmp_path, capsys, runs, canaries):
    scores, worlds = runs
    path = _write(tmp_path / "runs.csv", {"score": scores, "world": worlds})
    code, line = one_error(capsys, ["estimate", path, "--epsilon", "1", "--delta", "1e-5", "--estimator", "gdp"])
    assert code == 2 and "estimator gdp: needs the claim's Gaussian mu" in line
    out = _json(capsys, ["estimate", path, "--epsilon", "1", "--delta", "1e-5", "--mu", "0.5", "--json"])
    assert [e["estimator"] for e in out["estimates"]] == ["split", "gdp"]
    assert out["estimates"][1]["valid_for"] == ESTIMATORS["gdp"].valid_for != ANY_MECHANISM
    # bonferroni, explicit, gdp-explicit need settings fixed before the scores: skipped, saying so
    assert {s["estimator"] for s in out["skipped"]} == {"bonferroni", "explicit", "gdp-explicit"}
    code, line = one_error(capsys, ["estimate", path, "--epsilon", "1", "--delta", "0", "--estimator", "bonferroni"])
    assert code == 2 and "bonferroni: needs settings fixed before the scores are seen" in line
    code, line = one_error(capsys, ["estimate", path, "--epsilon", "1", "--delta", "0", "--estimator", "one-run"])
    assert code == 2 and "one-run: reads canaries (a member label), the scores come with world labels" in line


def test_table_and_npz(tmp_path, capsys, canaries):
    scores, members = canaries
    np.savez(tmp_path / "s.npz", score=scores, member=members)
    assert main(["estimate", str(tmp_path / "s.npz"), "--epsilon", "1", "--delta", "1e-5"]) == 0
    table = capsys.readouterr().out
    lines = table.splitlines()
    assert lines[0].startswith(f"{members.sum()} canaries in, {1000 - members.sum()} out (one run)")
    assert lines[1].split()[:3] == ["estimator", "eps_lb", "ceiling"]
    one_run = ra.estimate(scores, members=members, epsilon=1.0, delta=1e-5)["one-run"]
    assert lines[2].split()[:2] == ["one-run", f"{one_run.epsilon_lb:.4f}"] and lines[2].endswith("any mechanism")
    assert any(line.startswith("skipped fdp-one-run:") for line in lines)


# ---------------------------------------------------------------- bad files: one line naming column and row


def _bad(tmp_path, text: str | bytes, name: str = "bad.csv") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


@pytest.mark.parametrize("text, expected", [
    ("member,value\n1,0.5\n0,0.1\n", "score: no such column (the columns: member, value)"),
    ("score\n0.5\n0.1\n", "member or world: no such column"),
    ("score,member\n0.5,1\n0.2,0\nhigh,1\n", "score, row 3: 'high' is not a number"),
    ("score,member\n0.5,1\n0.2,0\n0.3,1\nnan,0\n", "score, row 4: is NaN"),
    ("score,member\n0.5,1\n,0\n", "score, row 2: is empty"),
    ("score,member\n0.5,1\n0.2,2\n", "member, row 2: must be 0 or 1, got '2'"),
    ("score,world\n0.5,1\n0.2,yes\n", "world, row 2: 'yes' is not a number"),
    ("score,member\n0.5,1\n0.2,1\n", "member: no label is 0 (no canary was out of the run)"),
    ("score,world\n0.5,0\n0.2,0\n", "world: no label is 1 (no run came from world 1)"),
    ("score,member,world\n0.5,1,0\n0.2,0,1\n", "member and world: both present"),
    ("score,member\n", "score: no data rows"),
    ("", "the file is empty"),
    (b"score,member\n\xff\xfe,1\n", "line 2: not UTF-8 text"),
])
def test_a_bad_file_is_one_line_naming_column_and_row(tmp_path, capsys, text, expected):
    path = _bad(tmp_path, text)
    code, line = one_error(capsys, ["estimate", path, "--epsilon", "1", "--delta", "0"])
    assert code == 2 and line.startswith(f"{path}: {expected}"), line


def test_unreadable_files(tmp_path, capsys):
    for path, expected in ((tmp_path / "missing.csv", "file not found"), (tmp_path, "is a directory, not a file"),
                           (tmp_path / "x.npz", "not a readable .npz file")):
        if path.suffix == ".npz":
            path.write_bytes(b"not a zip")
        code, line = one_error(capsys, ["estimate", str(path), "--epsilon", "1", "--delta", "0"])
        assert code == 2 and line.startswith(f"{path}: {expected}"), line


def test_a_reports_file_with_several_tests_needs_one_picked(tmp_path, capsys):
    path = _write(tmp_path / "t.csv", {"test": ["a", "a", "b", "b"], "score": [1, 0, 1, 0], "world": [1, 0, 1, 0]})
    code, line = one_error(capsys, ["estimate", path, "--epsilon", "1", "--delta", "0"])
    assert code == 2 and line == f"{path}: test: the file holds 2 tests (a, b); pick one with --test NAME"
    out = _json(capsys, ["estimate", path, "--test", "b", "--epsilon", "1", "--delta", "0", "--json"])
    assert out["counts"] == {"world0": 1, "world1": 1}
    code, line = one_error(capsys, ["estimate", path, "--test", "c", "--epsilon", "1", "--delta", "0"])
    assert code == 2 and line == f"{path}: test: no row is test 'c' (the file's: a, b)"


def test_bad_arguments_in_python_name_the_argument():
    with pytest.raises(ra.BadInput, match=r"members\[1\]: must be 0 or 1, got .3."):
        ra.estimate([0.1, 0.2, 0.3], members=[1, 3, 0], epsilon=1, delta=0)
    with pytest.raises(ra.BadInput, match=r"scores\[2\]: NaN"):
        ra.estimate([0.1, 0.2, float("nan")], worlds=[1, 0, 0], epsilon=1, delta=0)
    with pytest.raises(ra.BadInput, match="exactly one of members= .* and worlds="):
        ra.estimate([0.1], epsilon=1, delta=0)
    with pytest.raises(ra.BadInput, match="delta: must be in"):
        ra.estimate([0.1, 0.2], worlds=[0, 1], epsilon=1, delta=1)


# ---------------------------------------------------------------- agreement with a run's report


@pytest.mark.parametrize("audit, estimator", [({}, "split"), ({"method": "one-run", "design": "one_run"}, "one-run")])
def test_a_runs_trials_csv_gives_its_reports_bound(tmp_path, capsys, write_scenario, audit, estimator):
    """`recaudit run --csv`, then `recaudit estimate trials.csv`: the report's ε_LB, ceiling and p-value."""
    data = small_world(yaml.safe_load((SCENARIOS / "quickstart.yaml").read_text()), 4_000)
    data["audit"].update(audit)
    out = tmp_path / "run"
    assert main(["run", str(write_scenario(data)), "--out", str(out), "--csv", "--quiet"]) == 0
    capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    (test,) = report["tests"]
    claim = report["claim"]
    header = (out / "trials.csv").read_text().splitlines()[0]
    assert header == ("test,trial,member,part,score" if audit else "test,trial,world,part,score")
    argv = ["estimate", str(out / "trials.csv"), "--epsilon", repr(claim["epsilon"]), "--delta",
            repr(claim["delta"]), "--estimator", estimator, "--alpha", repr(report["audit"]["family_alpha"]), "--json"]
    (mine,) = _json(capsys, argv)["estimates"]
    assert test["method"] == mine["method"]
    assert (mine["epsilon_lb"], mine["ceiling"]) == (test["epsilon_lb"], test["ceiling"])
    assert mine["p_value"] == pytest.approx(test["p_value"], rel=1e-12)
    assert mine["epsilon_lb"] > 0  # a figure worth comparing: the likelihood-ratio attack shows ε > 0


def test_an_estimator_with_its_settings_from_python(runs):
    """What the command line skips (settings fixed in advance) runs from Python as an instance."""
    from recaudit.audits.stats.estimators import Bonferroni

    scores, worlds = runs
    (result,) = ra.estimate(scores, worlds=worlds, epsilon=0.5, delta=0.0,
                            estimators=[Bonferroni(score_range=(-3.0, 3.0), grid_size=50)])
    direct = bounds.bonferroni_epsilon_bound(scores[worlds == 0], scores[worlds == 1], 0.05, 0.0, grid_size=50,
                                             score_range=(-3.0, 3.0))
    assert result.estimator == "bonferroni" and result.epsilon_lb == direct.epsilon_lb > 0
