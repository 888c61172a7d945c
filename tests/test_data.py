"""``recaudit data``: fetching, verifying and caching data sets (a fake source here; the real one under ``-m data``),
and each real user drawn at most once per run from a ratings file."""
from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pytest
from scipy import sparse

from recaudit.audits.cli import main
from recaudit.mechanisms import ParameterError
from recaudit.simulator import datasets
from recaudit.simulator.populations import RatingsFilePopulation, RatingsMatrix
from recaudit.simulator.ratings import read_ratings, write_ratings

RAW = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n3\t1\t4\t9\n1\t2\t5\t8\n1\t1\t3\t7\n"
CANONICAL = b"1\t1\t3\t7\n1\t2\t5\t8\n3\t1\t4\t9\n"


class FakeSource:
    def __init__(self, raw: bytes | Exception, header: bool = True):
        self.raw, self.header, self.calls = raw, header, 0

    def describe(self) -> str:
        return "fake"

    def fetch(self, timeout: float) -> bytes:
        self.calls += 1
        if isinstance(self.raw, Exception):
            raise self.raw
        return self.raw


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A data set ``tiny`` whose sources the test sets; the cache in ``tmp_path``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("sys.platform", "linux")
    base = replace(datasets.MOVIELENS_100K, name="tiny", sha256=hashlib.sha256(CANONICAL).hexdigest(),
                   ratings=3, users=2, items=2)

    def install(*sources):
        monkeypatch.setitem(datasets.DATASETS, "tiny", replace(base, sources=tuple(sources)))
        return sources

    return install


def test_sources_are_tried_in_order_and_the_canonical_file_is_cached(fake, tmp_path, capsys):
    offline, wheel = fake(FakeSource(OSError("Name or service not known")), FakeSource(RAW.encode()))
    assert main(["data", "fetch", "tiny"]) == 0
    path = tmp_path / "cache" / "recaudit" / "tiny" / "u.data"
    assert path.read_bytes() == CANONICAL and "fetched" in capsys.readouterr().out
    assert main(["data", "fetch", "tiny"]) == 0  # the second time: a cache hit, no source asked
    assert "cache hit" in capsys.readouterr().out and (offline.calls, wheel.calls) == (1, 1)
    assert datasets.find("tiny") == path


def test_offline_or_a_wrong_hash_is_one_line_and_exit_2(fake, capsys):
    fake(FakeSource(OSError("Name or service not known")), FakeSource(RAW.replace("\t5\t", "\t4\t").encode()))
    assert main(["data", "fetch", "tiny"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "could not fetch tiny" in err[0] and "SHA-256" in err[0]


def test_a_corrupted_cache_is_replaced_or_reported(fake, tmp_path, capsys):
    fake(FakeSource(RAW.encode()))
    assert main(["data", "fetch", "tiny", "--dir", str(tmp_path / "d")]) == 0
    path = tmp_path / "d" / "u.data"
    path.write_bytes(CANONICAL + b"1\t3\t1\t1\n")
    with pytest.raises(datasets.DataError, match="corrupted"):
        datasets.find("tiny", tmp_path / "d")
    assert main(["data", "fetch", "tiny", "--dir", str(tmp_path / "d")]) == 0 and path.read_bytes() == CANONICAL
    path.write_bytes(b"junk")
    fake(FakeSource(OSError("offline")))
    capsys.readouterr()
    assert main(["data", "fetch", "tiny", "--dir", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is corrupted" in err[0] and "offline" in err[0]


def test_a_scenario_naming_a_data_set_not_fetched_is_refused(fake, tmp_path, capsys):
    fake(FakeSource(OSError("offline")))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: f\nseed: 1\npopulation: {kind: ratings_matrix, dataset: tiny}\npanel: {}\n"
                        "mechanism: {kind: frank_wolfe, iterations: 2}\n")
    assert main(["validate", str(scenario)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run `recaudit data fetch tiny`" in err[0]


def test_data_info_describes_a_file(tmp_path, capsys):
    table = sparse.csr_array(np.array([[5.0, 0, 3], [0, 1.0, 2]]))
    path = write_ratings(tmp_path / "ratings.dat", table, "ratings_dat")
    assert main(["data", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 ratings, 2 users, 3 items" in out and "(1, 2, 3, 5)" in out
    (tmp_path / "bad.dat").write_text("1::2::3::4\n1::3::x::5\n")
    assert main(["data", "info", str(tmp_path / "bad.dat")]) == 2
    assert "bad.dat:2: rating: 'x' is not a number" in capsys.readouterr().err


def test_the_cache_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert datasets.cache_dir() == tmp_path / "recaudit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert datasets.cache_dir() == tmp_path / "home" / ".cache" / "recaudit"


# ---------------------------------------------------------------- users drawn without replacement


def small_file(tmp_path, users: int = 30):
    rng = np.random.default_rng(3)
    table = sparse.random_array((users, 12), density=0.5, rng=rng, format="csr")
    table.data = np.ceil(table.data * 5)
    return write_ratings(tmp_path / "u.data", table, "udata"), read_ratings(tmp_path / "u.data").table.shape[0]


def test_a_run_draws_each_real_user_at_most_once(tmp_path):
    path, size = small_file(tmp_path)
    pop = RatingsFilePopulation(path=path)
    catalogue, rng = pop.catalogue(np.random.default_rng(0)), np.random.default_rng(1)
    run = pop.for_run()
    rows = [run.sample_users(n, catalogue, rng)[1].ratings.toarray() for n in (10, 10, size - 20)]
    drawn = np.concatenate(rows)
    assert pop.size() == size and np.unique(drawn, axis=0).shape[0] == size  # every user once (rows all differ)
    with pytest.raises(ParameterError, match="bootstrap"):
        run.sample_users(1, catalogue, rng)
    resampled = RatingsFilePopulation(path=path, bootstrap=True)
    assert resampled.size() is None and len(resampled.for_run().sample_users(5 * size, catalogue, rng)[1]) == 5 * size


def test_public_and_panel_users_of_a_matrix_run_are_distinct(tmp_path):
    path, size = small_file(tmp_path)
    pop = RatingsMatrix(path=path, test_fraction=0.0)
    catalogue = pop.catalogue(np.random.default_rng(0))
    run = pop.for_run()
    public, _ = run.sample_users(5, catalogue, np.random.default_rng(1))
    panel, _ = run.sample_users(size - 5, catalogue, np.random.default_rng(2))
    assert sorted(np.concatenate([public, panel])) == list(range(size))


def test_a_scenario_needing_more_users_than_the_file_holds_is_refused(tmp_path, capsys):
    path, size = small_file(tmp_path)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: f\nseed: 1\npopulation: {{kind: ratings_file, path: {path.name}}}\n"
                        "churn: {arrival_rate: 10, horizon: 10}\nmechanism: {kind: maxsense, epsilon: 1.0}\n")
    assert main(["validate", str(scenario)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"the ratings file holds {size}" in err[0] and "bootstrap: true" in err[0]
    scenario.write_text(scenario.read_text().replace("ratings_file,", "ratings_file, bootstrap: true,"))
    assert main(["validate", str(scenario)]) == 0


# ---------------------------------------------------------------- the real data set (-m data)


@pytest.fixture(scope="module")
def movielens(tmp_path_factory):
    try:
        return datasets.fetch("movielens-100k", timeout=20)[0]
    except datasets.DataError as exc:
        pytest.skip(f"MovieLens-100K cannot be fetched here: {exc}")


@pytest.mark.data
def test_the_movielens_scenarios_validate(movielens, monkeypatch, capsys):
    from tests.conftest import SCENARIOS

    paths = sorted(p for p in SCENARIOS.glob("*.yaml") if "dataset: movielens-100k" in p.read_text())
    assert len(paths) >= 3
    assert main(["validate", *map(str, paths)]) == 0


@pytest.mark.data
def test_movielens_100k_is_fetched_verified_and_read(movielens):
    parsed = read_ratings(movielens)
    assert (parsed.table.nnz, parsed.table.shape) == (100_000, (943, 1_682))
    assert set(np.unique(parsed.table.data)) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert datasets.fetch("movielens-100k")[1]  # now a cache hit


@pytest.mark.data
def test_the_study_scenarios_validate_and_a_study_too_big_for_the_file_is_refused(movielens, tmp_path, capsys):
    from tests.conftest import SCENARIOS

    assert main(["validate", *map(str, sorted((SCENARIOS / "studies").glob("*.yaml")))]) == 0
    capsys.readouterr()
    path = tmp_path / "xj.yaml"
    path.write_text("name: xj\nseed: 0\nstudy: {kind: xin_jaakkola, dataset: movielens-100k, private: 900}\n")
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "943 users are too few" in err[0] and not (tmp_path / "out").exists()


@pytest.mark.data
def test_a_small_xin_jaakkola_study_runs_on_movielens_alone(movielens, tmp_path):
    import json

    path = tmp_path / "xj.yaml"
    path.write_text("name: xj\nseed: 0\nstudy: {kind: xin_jaakkola, dataset: movielens-100k, private: 100, "
                    "items: 100, replicates: 1, trials: 50}\n")
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    worlds = json.loads((tmp_path / "out" / "xj_study.json").read_text())["worlds"]
    assert len(worlds) == 1 and "u.data" in worlds[0]["name"]  # the file alone, no synthetic world
    rows = {r["mechanism"]: r for r in worlds[0]["rows"]}
    assert set(rows["PMD"]["rmse_curve"]) == {"0", "40", "60", "100"}  # 25 and 50 users: the cohorts reaching them
    assert all(0.5 < r["rmse"] < 1.5 for r in rows.values())


@pytest.mark.data
def test_private_frank_wolfe_with_private_centring_beats_the_mean_on_movielens(movielens, tmp_path):
    """The findings page's claim at ε = 1 (one split, fewer iterations than the study's 10)."""
    import json

    path = tmp_path / "mc.yaml"
    path.write_text("name: mc\nseed: 2018\nstudy: {kind: matrix_completion, dataset: movielens-100k, splits: 1, "
                    "epsilons: [1], mechanisms: [{kind: private_frank_wolfe, delta: 1.0e-6, iterations: 3, "
                    "row_bound: 3.0, nuclear_scale: 0.5, centre: private, centre_share: 0.5, min_rating: 1, "
                    "max_rating: 5}]}\n")
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 0
    (point,) = json.loads((tmp_path / "out" / "mc_study.json").read_text())["points"]
    assert point["rmse"] < point["mean_rmse"]
