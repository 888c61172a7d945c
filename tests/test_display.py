"""What people read: the command each shipped scenario needs, `run` refusing sweep and grid scenarios, numbers
rounded for display, tables without empty columns and without a horizontal scrollbar at 1400 px, and the
figures of reports and comparisons."""
from __future__ import annotations

import pytest

from recaudit.audits.cli import main
from recaudit.audits.language.shipped import shipped_scenarios


def test_scenarios_names_the_command_each_scenario_needs(capsys):
    assert main(["scenarios"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert set(lines) == set(shipped_scenarios())
    for name, command in [("quickstart", "run"), ("scaling-regimes", "sweep"), ("scaling-maxsense", "sweep"),
                          ("matrix-completion-rmse-vs-epsilon", "grid"), ("studies/sp2-table2-movielens-100k", "run")]:
        assert lines[name].split()[1:3] == ["recaudit", command], lines[name]
    assert "a study:" in lines["studies/sp2-table2-movielens-100k"] and "a study" not in lines["quickstart"]
    assert all(line.split()[2] in ("run", "sweep", "grid") for line in lines.values())


@pytest.mark.parametrize("name, command", [("scaling-regimes", "sweep"), ("matrix-completion-rmse-vs-epsilon", "grid")])
def test_run_refuses_a_sweep_or_grid_scenario_naming_the_right_command(tmp_path, capsys, name, command):
    out = tmp_path / "out"
    assert main(["run", name, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"'recaudit {command} {name}'" in err[0], err
    assert not out.exists()  # refused before any work
