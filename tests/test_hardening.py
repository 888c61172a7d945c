"""Issue 21: every validated scenario finishes or is refused before work; every bad file gets one clear line.

Each case: exit 2, one line, ``file:line: field: message`` naming the field to change, before any work
(nothing simulated, nothing written).
"""
from __future__ import annotations

import re
import time

import pytest
import yaml

from audits.cli import main
from tests.conftest import one_error, scenario_text, write_text


def refused(capsys, tmp_path, data_or_text, field: str, command: str = "validate", seconds: float = 10):
    """Run ``command`` on the scenario: exit 2 within ``seconds``, one line naming ``field``; returns the line."""
    text = data_or_text if isinstance(data_or_text, str) else scenario_text(data_or_text)
    path = write_text(tmp_path, text)
    out = tmp_path / "out"
    started = time.monotonic()
    code, line = one_error(capsys, [command, str(path)] + ([] if command == "validate" else ["--out", str(out)]))
    assert code == 2 and re.match(rf"{re.escape(str(path))}:\d+: {re.escape(field)}: ", line), line
    assert time.monotonic() - started < seconds
    assert not out.exists()  # before any work
    return line


# ---------------------------------------------------------------- messages name the cause, and only the cause


@pytest.mark.parametrize("epsilon", [1e6, 1e-300])
def test_an_epsilon_the_accountant_cannot_take_names_mechanism_epsilon(tmp_path, capsys, quickstart_data, epsilon):
    quickstart_data["mechanism"]["epsilon"] = epsilon
    line = refused(capsys, tmp_path, quickstart_data, "mechanism.epsilon")
    assert "outside what the accountant can take (1e-15 to 700" in line and "Noise parameter" not in line


def test_many_keys_without_aliases_are_not_called_aliases(tmp_path, capsys):
    text = "".join(f"k{i}: {i}\n" for i in range(100_000))
    code, line = one_error(capsys, ["validate", str(write_text(tmp_path, text))])
    assert code == 2 and "<root>: holds 200,001 values" in line and "aliases expand" not in line


def test_a_long_grid_without_aliases_names_the_grid(tmp_path, capsys):
    text = "name: g\nseed: 1\ngrid:\n  compare: [[{a: 1}, 2]]\n  epsilons: [" + ", ".join(map(str, range(1, 100_001))) + "]\n"
    code, line = one_error(capsys, ["validate", str(write_text(tmp_path, text))])
    assert code == 2 and re.search(r":5: grid\.epsilons: holds 100,001 values", line) and "aliases expand" not in line


def test_an_empty_file_says_so(tmp_path, capsys):
    code, line = one_error(capsys, ["validate", str(write_text(tmp_path, ""))])
    assert code == 2 and line.endswith(":1: the file is empty (expected a mapping of keys)")


# ---------------------------------------------------------------- calibrations


def test_gaussian_calibration_is_the_smallest_sigma_the_accountant_accepts():
    # against dp-accounting's own analytic-Gaussian epsilon: sigma passes, sigma x (1 - 1e-8) does not
    from mechanisms.accounting import _gaussian_epsilon, gaussian_sigma_for

    for epsilon, delta in [(1.0, 1e-6), (0.01, 1e-5), (1e-6, 1e-6), (50.0, 1e-9), (1e-12, 1e-6)]:
        sigma = gaussian_sigma_for(epsilon, delta)
        assert _gaussian_epsilon(1 / sigma, delta) <= epsilon < _gaussian_epsilon(1 / (sigma * (1 - 1e-8)), delta)


def test_a_grid_of_300_points_validates_in_seconds(tmp_path, capsys):
    from tests.conftest import SCENARIOS

    data = yaml.safe_load((SCENARIOS / "matrix-completion-rmse-vs-epsilon.yaml").read_text())
    data["grid"]["epsilons"] = [round(0.1 + 0.01 * i, 4) for i in range(100)]  # x 3 mechanisms = 300 points
    path = write_text(tmp_path, scenario_text(data))
    started = time.monotonic()
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert time.monotonic() - started < 5 * 2  # 5 s on an idle 2-core machine; twice that when it is shared
