"""Bad scenarios fail before any work with one line per problem and exit code 2."""
import re

import pytest

from recaudit.audits.cli import main

QUICKSTART_LINES = None


def run_validate(capsys, path):
    code = main(["validate", str(path)])
    return code, capsys.readouterr().err.strip().splitlines()


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.fixture
def quickstart_text():
    from tests.conftest import SCENARIOS

    return (SCENARIOS / "quickstart.yaml").read_text()


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize("old, new, needle, expected", [
    ("  epsilon: 1.0", "  epsilon: -1.0", "epsilon: -1.0", "mechanism.epsilon: must be > 0"),
    ("  theta: 1.0", "  theta: 1.0\n  thetta: 2", "thetta", "mechanism.thetta: unknown key"),
    ("    - [0.6, 0.1]", "    - [0.6, 1.1]", "[0.6, 1.1]", "population.like_probability[1][1]: must be <= 1"),
    ("    - [0.6, 0.1]", "    - [0.6, 0.1, 0.2]", "like_probability:",
     "population.like_probability: must be a 2x2 matrix"),
    ("seed: 20261122", "seed: 20261122\nseed: 7", "seed: 7", "seed: duplicate key 'seed'"),
    ("  kind: maxsense", "  kind: maxsens", "kind: maxsens", "mechanism.kind: unknown kind 'maxsens'"),
    ("  alpha: 0.05", "  alpha: 1.5", "alpha: 1.5", "audit.alpha: must be < 1"),
])
def test_each_bad_scenario_names_file_line_and_field(tmp_path, capsys, quickstart_text, old, new, needle, expected):
    text = edit(quickstart_text, old, new)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, lines = run_validate(capsys, path)
    assert code == 2
    assert f"{path}:{line_of(text, needle)}: {expected}" in "\n".join(lines)


def test_all_errors_are_reported_at_once(tmp_path, capsys, quickstart_text):
    text = edit(edit(quickstart_text, "  epsilon: 1.0", "  epsilon: 0"), "  n_items: 100", "  n_items: -3")
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, lines = run_validate(capsys, path)
    assert code == 2 and len(lines) == 2
    assert all(re.match(rf"{re.escape(str(path))}:\d+: [\w.\[\]]+: ", line) for line in lines)


def test_scientific_notation_reads_as_a_number(tmp_path, capsys, quickstart_text):
    path = tmp_path / "ok.yaml"
    path.write_text(edit(quickstart_text, "  epsilon: 1.0", "  epsilon: 1e-1"))
    assert main(["validate", str(path)]) == 0


def test_missing_scenario_file(tmp_path, capsys):
    code, lines = run_validate(capsys, tmp_path / "nowhere.yaml")
    assert code == 2 and lines == [f"{tmp_path / 'nowhere.yaml'}: file not found"]


def test_missing_ratings_file_is_named(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("name: f\nseed: 1\npopulation:\n  kind: ratings_file\n  path: nope.csv\n"
                    "mechanism: {kind: maxsense, epsilon: 1.0}\n")
    code, lines = run_validate(capsys, path)
    assert code == 2 and lines[0].startswith(f"{path}:5: population.path: ratings file not found")


def test_run_refuses_a_bad_scenario_before_any_work(tmp_path, capsys, quickstart_text):
    path = tmp_path / "bad.yaml"
    path.write_text(edit(quickstart_text, "  epsilon: 1.0", "  epsilon: -1"))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out)]) == 2
    assert not out.exists()
    assert "Traceback" not in capsys.readouterr().err


def test_every_shipped_scenario_validates(capsys):
    from tests.conftest import SCENARIOS

    # scenarios on a public data set validate once it is fetched: tests/test_data.py (-m data)
    paths = sorted(p for p in SCENARIOS.glob("*.yaml") if "dataset:" not in p.read_text())
    assert paths
    assert main(["validate", *map(str, paths)]) == 0


def test_list_names_the_registries(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "maxsense_broken" in out and "likelihood_ratio" in out and "sbm" in out


def test_ratings_file_without_the_needed_columns(tmp_path, capsys):
    (tmp_path / "r.csv").write_text("uid,iid,score\n1,2,3\n")
    path = tmp_path / "s.yaml"
    path.write_text("name: f\nseed: 1\npopulation:\n  kind: ratings_file\n  path: r.csv\n"
                    "mechanism: {kind: maxsense, epsilon: 1.0}\n")
    code, lines = run_validate(capsys, path)
    assert code == 2 and lines[0].startswith(f"{path}:5: population.path: ")
    assert "missing columns ['item', 'rating', 'user']" in lines[0]


def test_resuming_someone_elses_progress_is_a_clear_error(tmp_path, capsys, quickstart_text):
    import yaml

    from tests.conftest import small_world

    data = small_world(yaml.safe_load(quickstart_text), 2_000)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    data["seed"] += 1
    path.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), "--quiet", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "saved progress belongs to another scenario or seed" in err and "Traceback" not in err
