"""The example of docs/guide/trainers.md runs as written and prints what the page says."""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "trainers.md"


def test_the_trainer_contract_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    example = next(b for b in blocks if "audit_trainer(" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, str(PAGE), "exec"), {"__name__": "trainers_doc"})
    verdict, epsilon, auc = out.getvalue().split()
    assert verdict == "consistent"
    assert f"{float(epsilon):.4f} {float(auc):.4f}" in PAGE.read_text().replace("`consistent ", "")
