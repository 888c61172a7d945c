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

    from mechanisms.errors import BadInput, InternalError, RecauditError

    errors = {}
    for package in ("mechanisms", "simulator", "attacks", "audits", "studies"):
        for info in pkgutil.walk_packages([str(ROOT / package)], f"{package}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == info.name:
                    errors[f"{info.name}.{name}"] = cls
    assert len(errors) >= 12
    outside = [name for name, cls in errors.items() if not issubclass(cls, RecauditError)]
    assert not outside, f"error classes outside mechanisms.errors' hierarchy: {outside}"
    both = [name for name, cls in errors.items() if issubclass(cls, BadInput) and issubclass(cls, InternalError)]
    assert not both
