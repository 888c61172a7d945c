"""The architecture contracts (pyproject.toml, [tool.importlinter]) hold: layers and no import cycles."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a test dependency: pip install -e '.[test]'"
    result = subprocess.run([lint, "--no-logo", "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_error_class_is_in_the_one_hierarchy():
    """Every exception class of the packages derives from RecauditError: BadInput (exit 2) or InternalError."""
    import importlib
    import inspect
    import pkgutil

    from recaudit.core.errors import BadInput, InternalError, RecauditError

    errors = {}
    for package in ("core", "mechanisms", "simulator", "attacks", "audits", "studies"):
        for info in pkgutil.walk_packages([str(ROOT / "recaudit" / package)], f"recaudit.{package}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == info.name:
                    errors[f"{info.name}.{name}"] = cls
    assert len(errors) >= 12
    outside = [name for name, cls in errors.items() if not issubclass(cls, RecauditError)]
    assert not outside, f"error classes outside recaudit.core.errors' hierarchy: {outside}"
    both = [name for name, cls in errors.items() if issubclass(cls, BadInput) and issubclass(cls, InternalError)]
    assert not both


FRAMEWORK = ("mechanisms", "simulator", "attacks", "audits")
MODULE_LINES = 450


def _sources(*packages: str) -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text() for package in packages
            for path in sorted((ROOT / package).rglob("*.py"))}


def test_no_module_is_over_450_lines():
    """Modules split by topic: neither the four packages nor the studies hold a module of more than 450 lines."""
    long = {name: text.count("\n") for name, text in _sources(*FRAMEWORK, "studies").items()
            if text.count("\n") > MODULE_LINES}
    assert not long, f"split these by topic: {long}"


def test_one_round_loop_and_no_study_in_the_framework():
    """The engine is the one round loop: only simulator/engine.py asks users to respond and aggregates their
    messages; studies live in studies/, not audits/."""
    loops = [name for name, text in _sources(*FRAMEWORK, "studies").items()
             if (".respond(" in text or ".aggregate(" in text) and not name.startswith("mechanisms/")]
    assert loops == ["simulator/engine.py"], loops
    assert not list((ROOT / "audits").rglob("*_study.py"))


def test_one_name_per_thing():
    """One ViewKind, no class shadowing typing.Protocol, and every registered part names its kind once."""
    import re

    from recaudit.attacks import ATTACKS
    from recaudit.audits.designs import DESIGNS
    from recaudit.audits.stats.estimators import ESTIMATORS
    from recaudit.mechanisms import MECHANISMS
    from recaudit.simulator.populations import POPULATIONS

    sources = _sources(*FRAMEWORK, "studies")
    assert [n for n, t in sources.items() if re.search(r"^ViewKind\s*=", t, re.M)] == ["mechanisms/claims.py"]
    assert not [n for n, t in sources.items() if re.search(r"^class Protocol\b", t, re.M)]
    for registry in (MECHANISMS, ATTACKS, ESTIMATORS, DESIGNS, POPULATIONS):
        for kind, cls in registry.items():
            assert cls.kind == kind and "name" not in vars(cls), f"{cls.__qualname__} states its name twice"
