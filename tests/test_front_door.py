"""The front door: shipped scenarios by name, init, schema, --version, list, progress lines, one wording."""
from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

from recaudit.audits.cli import PROGRESS_EVERY, ConsoleReporter, main
from recaudit.audits.reports.report import confidence_text, summary_line
from recaudit.audits.language.schema import scenario_schema
from recaudit.audits.language.shipped import resolve, shipped_scenarios
from recaudit.audits.language.yamlio import ScenarioError
from tests.conftest import SCENARIOS


def test_every_scenario_of_the_checkout_is_shipped():
    assert set(shipped_scenarios()) == {p.relative_to(SCENARIOS).with_suffix("").as_posix()
                                        for p in SCENARIOS.rglob("*.yaml")}
    assert "studies/sp2-table2-movielens-100k" in shipped_scenarios()


def test_a_name_resolves_to_the_shipped_file_and_a_path_stays_a_path(tmp_path):
    assert resolve("quickstart") == resolve("quickstart.yaml") == shipped_scenarios()["quickstart"]
    study = "studies/mcsherry-mironov-per-user"
    assert resolve(study) == resolve(f"{study}.yaml") == shipped_scenarios()[study]
    own = tmp_path / "quickstart.yaml"
    assert resolve(own) == own  # a path (even a missing one) is never replaced by a shipped file
    with pytest.raises(ScenarioError, match="no shipped scenario of that name"):
        resolve("no-such-scenario")


def test_version_scenarios_and_validate_by_name(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("recaudit ")
    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(shipped_scenarios())
    assert any(line.startswith("quickstart ") and "MaxSense" in line for line in lines)
    assert main(["validate", "quickstart"]) == 0


def test_init_copies_a_scenario_out_with_its_schema(tmp_path, capsys):
    out = tmp_path / "mine.yaml"
    assert main(["init", "quickstart", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# yaml-language-server: $schema=scenario.schema.json\n")
    assert yaml.safe_load(text) == yaml.safe_load(shipped_scenarios()["quickstart"].read_text())
    assert json.loads((tmp_path / "scenario.schema.json").read_text()) == scenario_schema()
    assert main(["init", "quickstart", "--out", str(out)]) == 2  # never overwrites
    assert main(["init", "no-such-scenario"]) == 2
    assert "exists" in capsys.readouterr().err


def test_every_shipped_scenario_matches_the_json_schema():
    validator = jsonschema.Draft202012Validator(scenario_schema())
    for name, path in shipped_scenarios().items():
        if name.startswith("studies/"):  # study scenarios: a study block, checked by its kind's dataclass
            continue
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], name
    assert list(validator.iter_errors({"name": "x", "seed": 1, "population": {"kind": "sbm"},
                                       "mechanism": {"kind": "maxsense", "epsilon": -1}, "typo": 1}))


def test_list_descriptions_are_whole_plain_lines(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "`" not in out and ".md" not in out
    kinds = [line for line in out.splitlines() if line.startswith("  ")]
    assert all(len(line.split(None, 1)) == 2 for line in kinds)  # every kind has its description


def test_progress_lines_every_thirty_seconds_off_a_terminal(monkeypatch):
    now, lines = [0.0], []
    monkeypatch.setattr("recaudit.audits.cli.log.info", lambda message, *args: lines.append(message % args))
    reporter = ConsoleReporter(stream=open("/dev/null", "w"), clock=lambda: now[0])
    for step in range(1, 91):  # 90 s of progress, one block a second, then done
        now[0] = float(step)
        reporter.progress("trial blocks", step, 90 if step == 90 else 200)
    assert lines == ["trial blocks: 31 / 200 (16 %), 1 a second, about 3 min left",
                     "trial blocks: 61 / 200 (30 %), 1 a second, about 2 min left"]
    assert PROGRESS_EVERY == 30
    quiet = ConsoleReporter(quiet=True, stream=open("/dev/null", "w"), clock=lambda: now[0])
    now[0] = 0.0
    quiet.progress("x", 1, 10)
    now[0] = 100.0
    quiet.progress("x", 2, 10)
    assert len(lines) == 2


def _report(epsilon, confidence=0.975, lb=1.0, ceiling=5.0):
    audit = {"epsilon_lb": lb, "confidence": confidence, "ceiling": ceiling}
    return {"scenario": {"name": "x"}, "audit": audit, "claim": {"epsilon": epsilon, "delta": 0.0},
            "verdict": "no_claim" if epsilon is None else "consistent",
            "utility": {"metric": "item clustering accuracy", "final_accuracy": 0.5}}


def test_one_confidence_wording_and_claimless_runs_said_so():
    assert confidence_text(0.975) == "97.5 %" and confidence_text(0.95) == "95 %"
    line = summary_line(_report(1.0))
    assert "at 97.5 % confidence" in line and "98%" not in line
    claimless = summary_line(_report(None))
    assert "no privacy claim" in claimless and "none" not in claimless and "δ" not in claimless
    assert "more runs would show more" in summary_line(_report(1.0, lb=5.0, ceiling=5.0))
    assert "more runs would show more" not in line


def test_no_reference_to_design_notes_users_do_not_have():
    """Docstrings and scenarios point at the docs pages (docs/...), never at the maintainers' design notes."""
    from tests.conftest import ROOT

    notes = ("DESIGN.md", "AUDITING.md", "ALGORITHMS.md")
    files = [p for folder in ("mechanisms", "simulator", "attacks", "audits", "studies", "scenarios")
             for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".yaml", ".html")]
    assert files
    assert [str(p) for p in files if any(n in p.read_text() for n in notes)] == []
