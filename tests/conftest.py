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


def small_world(data: dict, trials: int = 20_000) -> dict:
    """Shrink a scenario so a test runs in about a second."""
    data["churn"].update(arrival_rate=500, horizon=20.0, release_interval=5.0)
    data["audit"]["trials"] = trials
    data["audit"]["block_size"] = max(1, trials // 4)
    return data
