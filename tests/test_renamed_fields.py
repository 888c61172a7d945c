"""Renamed scenario fields: the old name loads with a one-line warning; both names at once are refused."""
import subprocess
import sys

import pytest
from pydantic import ValidationError

from recaudit.audits.language.shipped import resolve
from recaudit.audits.language.sections import AuditConfig, ExecutorConfig


def test_executor_kind_is_read_as_type_with_a_warning():
    with pytest.warns(FutureWarning, match=r"executor\.kind is renamed executor\.type: write `type: processes`"):
        assert ExecutorConfig.model_validate({"kind": "processes"}).type == "processes"
    with pytest.raises(ValidationError, match="kind"):
        ExecutorConfig.model_validate({"kind": "processes", "type": "serial"})


def test_audit_threshold_rule_name_is_read_with_a_warning():
    with pytest.warns(FutureWarning, match=r"audit\.threshold is renamed audit\.threshold_rule"):
        assert AuditConfig.model_validate({"threshold": "bonferroni", "score_range": [0, 1]}).threshold_rule \
            == "bonferroni"
    with pytest.raises(ValidationError, match="threshold"):
        AuditConfig.model_validate({"threshold": 0.5})  # a number is a cut: threshold_value, not a rule


def test_cli_prints_the_warning_in_one_line(tmp_path):
    text = (tmp_path / "s.yaml")
    text.write_text(resolve("quickstart").read_text() + "\nexecutor: {kind: serial}\n")
    done = subprocess.run([sys.executable, "-m", "recaudit", "validate", str(text)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert "recaudit: warning: executor.kind is renamed executor.type: write `type: serial`" in err
    assert len([line for line in err.splitlines() if "executor.kind" in line]) == 1
