"""Shared fixtures: small scenarios built from the shipped quickstart."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"


@pytest.fixture
def quickstart_data() -> dict:
    """The quickstart scenario as plain data, to modify in a test."""
    return yaml.safe_load((SCENARIOS / "quickstart.yaml").read_text())


@pytest.fixture
def write_scenario(tmp_path):
    """Write scenario data to a YAML file in the test's folder; returns its path."""

    def write(data: dict, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture(autouse=True, scope="session")
def blas_on_one_thread():
    """Tests compute as a run does (``recaudit.audits.executors.one_blas_thread``), those calling mechanisms directly
    too."""
    from recaudit.audits.executors import one_blas_thread

    with one_blas_thread():
        yield


def small_world(data: dict, trials: int = 20_000) -> dict:
    """Shrink a scenario so a test runs in about a second."""
    data["churn"].update(arrival_rate=500, horizon=20.0, release_interval=5.0)
    data["audit"]["trials"] = trials
    data["audit"]["block_size"] = max(1, trials // 4)
    return data


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


@pytest.fixture(autouse=True)
def written_reports(monkeypatch) -> list[Path]:
    """Every report.json a test writes, validated at write time against the published schema.

    The report module's writer is wrapped: a report that breaks the schema,
    or a file that is not strict JSON (``NaN``, ``Infinity``), fails the test
    that wrote it. Returns the paths validated so far.
    """
    import json

    import jsonschema

    from recaudit.audits.reports import report as report_module

    validator = jsonschema.Draft202012Validator(report_module.schema())
    original, seen = report_module.write_json, []

    def checked(path, data, allow_nan=True):
        original(path, data, allow_nan=allow_nan)
        if Path(path).name == "report.json":
            validator.validate(json.loads(Path(path).read_text(), parse_constant=_reject_constant))
            seen.append(Path(path))

    monkeypatch.setattr(report_module, "write_json", checked)
    return seen


# ---------------------------------------------------------------- one clear line (tests of bad input)


def one_error(capsys, argv) -> tuple[int, str]:
    """``recaudit argv``: its exit code and its one line on stderr (log lines aside)."""
    from recaudit.audits.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("[recaudit]")]
    assert len(lines) == 1, err
    assert all(c.isprintable() for c in lines[0]), lines[0]
    return code, lines[0]


def write_text(tmp_path, text: str, name: str = "s.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def scenario_text(data: dict) -> str:
    # (libyaml's emitter when there is one: the same text, 3x faster on the hardening tests' long lists)
    return yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False, allow_unicode=True)
