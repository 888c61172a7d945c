"""The public API (``import recaudit as ra``, docs/api.md): every name's docstring example runs, the package
imports lazily, and a dict is validated as a file is."""
from __future__ import annotations

import doctest
import subprocess
import sys

import pytest
import yaml

import recaudit
from recaudit.audits import api, harness
from recaudit.audits.trainer_audit import audit_trainer

from .conftest import SCENARIOS


def _examples() -> list[doctest.DocTest]:
    """The docstring examples of every public name: those api.py defines, the harness's and the trainer audit's."""
    finder = doctest.DocTestFinder()
    tests = finder.find(api, "recaudit.audits.api", globs={})
    for name in ("run_audit", "assert_dp", "assert_not_dp"):
        tests += finder.find(getattr(harness, name), name, globs={})
    tests += finder.find(audit_trainer, "audit_trainer", globs={})
    return sorted((t for t in tests if t.examples), key=lambda t: t.name)


@pytest.mark.parametrize("example", _examples(), ids=lambda t: t.name.rsplit(".", 1)[-1])
def test_docstring_example_runs(example):
    """Each public name's docstring example, as doctest runs it (output compared exactly)."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(example, out=lambda text: pytest.fail(text))
    assert runner.failures == 0 and runner.tries == len(example.examples)


def test_every_public_name_has_an_example():
    """Every name of ``recaudit``'s API that api.py defines carries a docstring example that runs above."""
    documented = {t.name.rsplit(".", 1)[-1] for t in _examples()}
    functions = {getattr(recaudit, name).__name__ for name in recaudit._API
                 if callable(getattr(recaudit, name)) and not isinstance(getattr(recaudit, name), type)}
    assert functions == documented, functions ^ documented
    assert {"run", "estimate", "load_report", "load_scenario", "scenario_schema", "run_audit", "assert_dp",
            "assert_not_dp", "audit_trainer"} == functions


def test_names_resolve_and_unknown_ones_fail():
    for name in recaudit._API:
        assert getattr(recaudit, name) is not None
    assert recaudit.audit is recaudit.audits.harness.run_audit
    assert recaudit.Scenario is recaudit.audits.language.scenario.Scenario
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        recaudit.nope  # noqa: B018


def test_importing_mechanisms_does_not_load_the_audits_layer():
    code = ("import sys, recaudit, recaudit.mechanisms; "
            "print(sorted(m for m in sys.modules if m.startswith('recaudit.audits')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_dict_gets_the_files_messages(tmp_path):
    """The same problems, the same field names and words: a file's lines carry its line number, a dict's none."""
    data = yaml.safe_load((SCENARIOS / "quickstart.yaml").read_text())
    data["mechanism"]["epsilon"] = -1
    data["churn"]["horizon"] = "soon"
    data["extra"] = 1
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(recaudit.BadInput) as from_file:
        recaudit.load_scenario(path)
    with pytest.raises(recaudit.BadInput) as from_dict:
        recaudit.load_scenario(data)
    file_lines = str(from_file.value).splitlines()
    dict_lines = str(from_dict.value).splitlines()
    assert len(file_lines) == 3
    stripped = sorted(line.split(":", 2)[2].strip() for line in file_lines)  # path:LINE: field: message
    assert sorted(line.split(":", 1)[1].strip() for line in dict_lines) == stripped
    assert "churn.horizon: must be a number" in stripped and "mechanism.epsilon: must be > 0" in stripped
    assert data["mechanism"]["epsilon"] == -1  # the caller's dict is not changed


def test_a_dict_refuses_what_no_file_could_hold():
    data = yaml.safe_load((SCENARIOS / "quickstart.yaml").read_text())
    data["mechanism"]["epsilon"] = {1, 2}
    with pytest.raises(recaudit.BadInput, match=r"^scenario: mechanism\.epsilon: set is not scenario data"):
        recaudit.load_scenario(data)
    loop: dict = {"name": "x"}
    loop["population"] = loop
    with pytest.raises(recaudit.BadInput, match="population: a value may not contain itself"):
        recaudit.load_scenario(loop)


def test_run_refuses_a_sweep_naming_its_command():
    with pytest.raises(recaudit.BadInput, match=r"sweep: a sweep scenario runs with `recaudit sweep`"):
        recaudit.run("scaling-maxsense")


def test_load_report_of_a_folder_without_one(tmp_path):
    with pytest.raises(recaudit.BadInput, match="not a run folder"):
        recaudit.load_report(tmp_path)


def _page_blocks() -> list[str]:
    import re

    text = (SCENARIOS.parent / "docs" / "api.md").read_text()
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_quick_start_is_five_lines_at_most():
    quick_start = [line for line in _page_blocks()[0].splitlines() if line.strip()]
    assert 2 <= len(quick_start) <= 5 and quick_start[0] == "import recaudit as ra"


def test_the_api_pages_python_runs(tmp_path, monkeypatch, capsys):
    """docs/api.md's Python blocks, in order, in one namespace (as a notebook runs them), from an empty folder."""
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, block in enumerate(_page_blocks()):
        exec(compile(block, f"docs/api.md (python block {i + 1})", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "the best attack shows ε ≥" in out and "scenario: mechanism.epsilon: must be > 0" in out
    assert (tmp_path / "runs" / "half" / "report.json").exists()
    assert namespace["report"].claim["epsilon"] == pytest.approx(0.5) and not namespace["run"].violated
