"""Ratings files: every bad file is one clean line naming file and line; round trips; split and cap."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse

from recaudit.audits.cli import main
from recaudit.mechanisms import ParameterError
from recaudit.simulator.population import StarSBMPopulation
from recaudit.simulator.populations import RatingsFilePopulation
from recaudit.simulator.ratings import (RatingsFileError, load_ratings, read_ratings, write_population_file,
                               write_ratings)

ROOT = Path(__file__).resolve().parents[1]
ML_HEADER = "userId,movieId,rating,timestamp\n"
INTER_HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"

# (file name, bytes, line named, message the line carries)
BAD_FILES = [
    ("word.csv", ML_HEADER + "1,2,4,9\n1,3,five,9\n", 3, "rating: 'five' is not a number"),
    ("nan.csv", ML_HEADER + "1,2,4,9\n1,3,nan,9\n", 3, "rating: nan is not a finite number"),
    ("inf.csv", ML_HEADER + "1,2,4,9\n1,3,-inf,9\n", 3, "rating: -inf is not a finite number"),
    ("zero.csv", ML_HEADER + "1,2,4,9\n1,3,0,9\n", 3, "rating: 0 is not allowed"),
    ("empty_rating.csv", ML_HEADER + "1,2,4,9\n1,3,,9\n", 3, "rating: empty"),
    ("too_many.csv", ML_HEADER + "1,2,4,9\n1,3,4,9,9\n", 3, "expected 4 fields, saw 5"),
    ("too_few.csv", ML_HEADER + "1,2,4,9\n1,3\n", 3, "expected 4 fields, saw 2"),
    ("duplicate.csv", ML_HEADER + "1,2,4,9\n2,2,3,9\n1,2,5,9\n", 4,
     "duplicate rating of movieId 2 by userId 1 (first at line 2)"),
    ("bad_id.csv", ML_HEADER + "1,2,4,9\nx,3,4,9\n", 3, "userId: 'x' is not a 64-bit integer"),
    ("blank_lines.csv", ML_HEADER + "1,2,4,9\n\n\n1,3,five,9\n", 5, "rating: 'five' is not a number"),
    ("crlf.csv", ML_HEADER.replace("\n", "\r\n") + "1,2,4,9\r\n\r\n1,3,0,9\r\n", 4, "rating: 0 is not allowed"),
    ("encoding.csv", ML_HEADER.encode() + b"1,2,4,9\n1,3,\xe9,9\n", 3, "not UTF-8 text"),
    ("u.data", "1\t2\t4\t9\n1\t3\t4\t9\n2\t3\tfive\t9\n", 3, "rating: 'five' is not a number"),
    ("u2.data", "1\t2\t4\t9\n1\t3\t4\n", 2, "expected 4 fields, saw 3"),
    ("own.csv", "user,item,rating\nann,x,4\nbob,,3\n", 3, "item: empty"),
    ("own_dup.csv", "user,item,rating\nann,x,4\nbob,x,3\nann,x,1\n", 4, "duplicate rating of item x by user ann"),
    ("ratings.dat", "1::2::4::9\n1::3::4::9\n2::3::five::9\n", 3, "rating: 'five' is not a number"),
    ("short.dat", "1::2::4::9\n\n1::3::4\n", 3, "expected 4 fields, saw 3"),
    ("dup.dat", "1::2::4::9\n1::2::5::9\n", 2, "duplicate rating of item 2 by user 1 (first at line 1)"),
    ("r.inter", INTER_HEADER + "7\t2\t4\t9\n7\t3\t0\t9\n", 3, "rating: 0 is not allowed"),
    ("dup.inter", INTER_HEADER + "a\tb\t4\t9\na\tb\t3\t9\n", 3, "duplicate rating of item_id b by user_id a"),
    ("columns.csv", "uid,iid,score\n1,2,3\n", 1, "missing columns ['item', 'rating', 'user']"),
    ("columns.inter", "user_id:token\titem:token\trating:float\n1\t2\t3\n", 1, "missing columns ['item_id']"),
]
# no line to name: the file as a whole is wrong
BAD_WHOLE_FILES = [
    ("empty.csv", "", "empty file (no ratings)"),
    ("header_only.csv", ML_HEADER, "no ratings after the header"),
]


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


@pytest.mark.parametrize("name, content, line, message", BAD_FILES, ids=[case[0] for case in BAD_FILES])
def test_a_bad_line_is_named_with_its_file_and_line(tmp_path, name, content, line, message):
    path = write(tmp_path, name, content)
    with pytest.raises(RatingsFileError) as info:
        read_ratings(path)
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: {message}") and "\n" not in text
    assert info.value.field == "path" and info.value.line == line


@pytest.mark.parametrize("name, content, message", BAD_WHOLE_FILES, ids=[case[0] for case in BAD_WHOLE_FILES])
def test_a_bad_file_is_named(tmp_path, name, content, message):
    path = write(tmp_path, name, content)
    with pytest.raises(RatingsFileError) as info:
        read_ratings(path)
    assert str(info.value) == f"{path}: {message}" or str(info.value).startswith(f"{path}: {message}")


def test_more_bad_lines_are_counted(tmp_path):
    path = write(tmp_path, "zeros.csv", ML_HEADER + "1,2,0,9\n1,3,0,9\n1,4,0,9\n")
    with pytest.raises(RatingsFileError, match=r":2: rating: 0 is not allowed .* \(and 2 more such lines\)"):
        read_ratings(path)


def test_a_bad_line_deep_in_a_chunked_file_is_found(tmp_path, monkeypatch):
    import recaudit.simulator.rating_formats as ratings  # the format layer reads in chunks and blocks

    monkeypatch.setattr(ratings, "_CHUNK_ROWS", 7)  # the slow pass reads chunks: cross several of them
    monkeypatch.setattr(ratings, "_BLOCK_BYTES", 16)  # and lines across byte blocks
    rows = [f"{u},{i},3,9\n" for u in range(1, 6) for i in range(1, 6)]
    rows[22] = "5,3,3.5.1,9\n"
    path = write(tmp_path, "deep.csv", ML_HEADER + "".join(rows[:10]) + "\n" + "".join(rows[10:]))
    with pytest.raises(RatingsFileError) as info:
        read_ratings(path)
    assert str(info.value).startswith(f"{path}:25: rating: '3.5.1' is not a number")  # header + blank line


def test_double_colons_cut_between_blocks_read_as_separators(tmp_path, monkeypatch):
    import recaudit.simulator.rating_formats as ratings  # the format layer reads in chunks and blocks

    table = sparse.csr_array(np.array([[5.0, 0, 3.5], [0, 1.0, 2.0], [4.0, 4.0, 0]]))
    expected = read_ratings(write_ratings(tmp_path / "u.data", table, "udata")).table
    for block in (1, 2, 3, 5, 7):
        monkeypatch.setattr(ratings, "_BLOCK_BYTES", block)
        got = read_ratings(write_ratings(tmp_path / "ratings.dat", table, "ratings_dat")).table
        assert (got != expected).nnz == 0 and got.shape == expected.shape


@pytest.mark.parametrize("name, content, line, message", BAD_FILES[:6] + BAD_FILES[-5:-3],
                         ids=[case[0] for case in BAD_FILES[:6] + BAD_FILES[-5:-3]])
def test_validate_refuses_a_bad_file_in_one_line(tmp_path, capsys, name, content, line, message):
    data = write(tmp_path, name, content)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"name: f\nseed: 1\npopulation:\n  kind: ratings_file\n  path: {name}\n"
                        "mechanism: {kind: maxsense, epsilon: 1.0}\n")
    assert main(["validate", str(scenario)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert err[0].startswith(f"{scenario}:5: population.path: ") and f"{data}:{line}: {message}" in err[0]


EVERY_BAD_FILE = [(n, c, f"{n}:{line}: {m}") for n, c, line, m in BAD_FILES] + \
    [(n, c, f"{n}: {m}") for n, c, m in BAD_WHOLE_FILES]


@pytest.mark.parametrize("command", ["validate", "run", "data info"])
def test_every_bad_file_is_exit_2_in_one_line_by_every_command(tmp_path, capsys, command):
    """Issue 34's holdout check: each bad ratings file, read by each command that reads one, is exit 2 with one
    line naming the file (and its line), nothing written, never an internal error (exit 3)."""
    for name, content, message in EVERY_BAD_FILE:
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        data = write(folder, name, content)
        scenario = folder / "s.yaml"
        scenario.write_text(f"name: f\nseed: 1\npopulation:\n  kind: ratings_file\n  path: {name}\n"
                            "mechanism: {kind: maxsense, epsilon: 1.0}\n")
        argv = {"validate": ["validate", str(scenario)], "run": ["run", str(scenario), "--out", str(folder / "out")],
                "data info": ["data", "info", str(data)]}[command]
        assert main(argv) == 2, (command, name)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in err[0], (command, name, err)
        assert f"{folder}/{message}" in err[0], (command, name, err)
        assert not (folder / "out").exists(), (command, name)


STARS = [[[0.05, 0.10, 0.20, 0.35, 0.30], [0.30, 0.30, 0.20, 0.15, 0.05]],
         [[0.20, 0.25, 0.25, 0.20, 0.10], [0.05, 0.05, 0.20, 0.30, 0.40]]]


def star_world(**kw) -> StarSBMPopulation:
    args = dict(n_items=80, user_cluster_weights=[0.4, 0.6], item_cluster_weights=[0.5, 0.5],
                star_probability=STARS, ratings_per_user=12)
    return StarSBMPopulation(**(args | kw))


def read_back(path: Path, fmt: str) -> dict[tuple[str, str], float]:
    """The file read by Python's csv module: an independent reader."""
    with open(path, newline="") as f:
        if fmt == "ratings_dat":
            return {tuple(line.split("::")[:2]): float(line.split("::")[2]) for line in f.read().splitlines()}
        rows = list(csv.reader(f, delimiter="\t" if fmt in ("udata", "inter") else ","))
    if fmt != "udata":
        rows = rows[1:]
    return {(r[0], r[1]): float(r[2]) for r in rows}


def as_dict(table: sparse.csr_array, user_ids, item_ids) -> dict[tuple[str, str], float]:
    coo = table.tocoo()
    return {(str(user_ids[u]), str(item_ids[i])): float(v) for u, i, v in zip(coo.row, coo.col, coo.data)}


@pytest.mark.parametrize("fmt", ["udata", "ratings_csv", "ratings_dat", "inter", "csv"])
def test_a_generated_file_round_trips(tmp_path, fmt):
    path = write_population_file(tmp_path / f"r.{fmt}", star_world(), 300, seed=5, format=fmt)
    assert load_ratings(path, format=fmt).train.nnz == 300 * 12  # named explicitly, and detected (below)
    data = load_ratings(path)
    expected = read_back(path, fmt)
    assert data.train.nnz == len(expected) == 300 * 12 and data.test.nnz == 0
    assert as_dict(data.train, data.user_ids, data.item_ids) == expected
    assert list(data.user_ids) == sorted(data.user_ids) and data.n_users == 300
    assert set(data.train.data) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    single = load_ratings(path, dtype=np.float32).train
    assert single.dtype == np.float32 and (single != data.train).nnz == 0


def test_written_values_read_back_exactly(tmp_path):
    rng = np.random.default_rng(0)
    table = sparse.random_array((40, 30), density=0.2, random_state=rng, format="csr")
    table.data = 1.0 - table.data * 2.0  # in (-1, 1], fractional, never 0
    path = write_ratings(tmp_path / "x.csv", table, "csv", user_ids=np.arange(40) * 7, item_ids=np.arange(30) + 100)
    data = load_ratings(path)
    got = as_dict(data.train, data.user_ids, data.item_ids)
    want = as_dict(table, np.arange(40) * 7, np.arange(30) + 100)
    assert got == want  # bit-exact float round trip


def test_split_is_exact_disjoint_and_seeded(tmp_path):
    path = write_population_file(tmp_path / "r.csv", star_world(), 500, seed=1)
    total = 500 * 12
    data = load_ratings(path, test_fraction=0.01, seed=3)
    assert data.test.nnz == round(0.01 * total) and data.train.nnz + data.test.nnz == total
    assert (data.train.multiply(data.test)).nnz == 0  # disjoint
    whole = as_dict(load_ratings(path).train, data.user_ids, data.item_ids)
    assert as_dict(data.train + data.test, data.user_ids, data.item_ids) == whole
    again = load_ratings(path, test_fraction=0.01, seed=3)
    other = load_ratings(path, test_fraction=0.01, seed=4)
    assert (again.test != data.test).nnz == 0 and (other.test != data.test).nnz > 0


def test_the_cap_keeps_at_most_xi_ratings_and_all_of_the_others(tmp_path):
    rng = np.random.default_rng(2)
    counts = rng.integers(1, 40, 200)  # users rate 1..39 items of 50
    rows = np.repeat(np.arange(200), counts)
    cols = np.concatenate([rng.choice(50, c, replace=False) for c in counts])
    table = sparse.csr_array((rng.integers(1, 6, rows.size).astype(float), (rows, cols)), shape=(200, 50))
    path = write_ratings(tmp_path / "r.csv", table)
    data = load_ratings(path, max_ratings_per_user=10, seed=0)
    kept = data.ratings_per_user()
    assert (kept == np.minimum(counts, 10)).all()
    assert as_dict(data.train, data.user_ids, data.item_ids).items() <= read_back(path, "ratings_csv").items()
    # the kept subset is random: across seeds, every rating of a heavy user is sometimes dropped
    heavy = int(np.argmax(counts))
    seen = Counter()
    for seed in range(40):
        seen.update(load_ratings(path, max_ratings_per_user=10, seed=seed).train[[heavy]].indices.tolist())
    assert len(seen) == counts[heavy]


def test_top_items_are_the_most_rated(tmp_path):
    path = write_population_file(tmp_path / "r.csv", star_world(n_items=60, ratings_per_user=5), 400, seed=9)
    counts = Counter(item for _, item in read_back(path, "ratings_csv"))
    ranked = sorted(counts, key=lambda item: (-counts[item], int(item)))
    data = load_ratings(path, top_items=10)
    assert sorted(map(str, data.item_ids)) == sorted(ranked[:10])
    expected = {k: v for k, v in read_back(path, "ratings_csv").items() if k[1] in set(ranked[:10])}
    assert as_dict(data.train, data.user_ids, data.item_ids) == expected
    assert (data.ratings_per_user() > 0).all()  # users left without ratings are dropped


def test_population_options_and_existing_keys(tmp_path):
    path = write_population_file(tmp_path / "u.data", star_world(), 200, seed=2, format="udata")
    pop = RatingsFilePopulation(path=path, like_threshold=4, format="udata", top_items=50,
                                max_ratings_per_user=8, test_fraction=0.05, split_seed=1)
    cat = pop.catalogue(np.random.default_rng(0))
    assert cat.n_items == 50 and cat.item_labels is None
    assert pop.data.test.nnz == round(0.05 * load_ratings(path, top_items=50).train.nnz)
    _, users = pop.sample_users(150, cat, np.random.default_rng(1))
    assert (users.rated.sum(axis=1) <= 8).all() and (users.rated.sum(axis=1) > 0).all()
    assert np.array_equal(users.liked, users.rated & (users.ratings.toarray() >= 4))
    with pytest.raises(ParameterError) as info:
        RatingsFilePopulation(path=path, format="ratings_csv")
    assert info.value.field == "path"


def test_a_scenario_with_the_new_keys_validates(tmp_path, capsys):
    write_population_file(tmp_path / "ratings.csv", star_world(), 200, seed=2)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: f\nseed: 1\npopulation:\n  kind: ratings_file\n  path: ratings.csv\n"
                        "  format: ratings_csv\n  top_items: 40\n  max_ratings_per_user: 6\n"
                        "  test_fraction: 0.01\n  like_threshold: 4\n  bootstrap: true\n"
                        "mechanism: {kind: maxsense, epsilon: 1.0}\n")
    assert main(["validate", str(scenario)]) == 0
    scenario.write_text(scenario.read_text().replace("format: ratings_csv", "format: tsv"))
    capsys.readouterr()
    assert main(["validate", str(scenario)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{scenario}:6: population.format: ")


MEMORY_SCRIPT = """
import json, sys
from pathlib import Path
import numpy as np
from recaudit.mechanisms import MaxSense
from recaudit.simulator.churn import Churn, simulate
from recaudit.simulator.populations import RatingsFilePopulation

def peak_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

before = peak_mb()
pop = RatingsFilePopulation(path=sys.argv[1], like_threshold=4, bootstrap=True)
catalogue = pop.catalogue(np.random.default_rng(0))
loaded = peak_mb()
churn = Churn(arrival_rate=2000, mean_lifetime=1.0, horizon=5.0, query_interval=0.25, release_interval=5.0)
simulate(pop, catalogue, MaxSense(epsilon=1.0), churn, np.random.SeedSequence(1))
print(json.dumps({"imports": before, "loaded": loaded, "run": peak_mb(), "items": catalogue.n_items}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc for peak memory")
def test_a_100k_rating_file_loads_and_runs_in_little_memory(tmp_path):
    """100,000 ratings over 10,000 items (MovieLens small's size; it used to peak at 3.3 GB).

    Peak resident memory (VmHWM) of a fresh process, measured after the imports, after loading
    and after a short MaxSense churn run on it (10,000 users, one release: its exact k-means over
    10,000 items takes 4 s of CPU, and a second release would add time, not memory). Tolerances: the load may add at
    most 100 MB over
    the imports (the sparse table is ~2 MB), the whole process may peak at 500 MB (issue 11).
    """
    rng = np.random.default_rng(7)
    users, per_user = 1_000, 100
    cols = np.concatenate([rng.choice(10_000, per_user, replace=False) for _ in range(users)])
    table = sparse.csr_array((rng.integers(1, 6, users * per_user).astype(float),
                              (np.repeat(np.arange(users), per_user), cols)), shape=(users, 10_000))
    path = write_ratings(tmp_path / "ratings.csv", table, "csv")
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(path)], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    peak = json.loads(out.stdout)
    print(peak)
    assert peak["items"] > 9_900
    assert peak["loaded"] - peak["imports"] < 100 and peak["run"] < 500


def test_validating_then_running_parses_the_file_once(tmp_path):
    import os

    from recaudit.simulator.ratings import load_ratings_cached

    path = write_population_file(tmp_path / "r.csv", star_world(), 50, seed=1)
    first = load_ratings_cached(path, test_fraction=0.1)
    assert load_ratings_cached(path, test_fraction=0.1) is first
    assert load_ratings_cached(path, test_fraction=0.2) is not first  # other options, another table
    path.write_text(path.read_text() + "999,1,5,1\n")
    os.utime(path, ns=(1, 1))  # a changed file (size and mtime) is read again
    assert load_ratings_cached(path, test_fraction=0.1).n_users == 51
