"""The scenarios shipped inside the package (``audits/scenarios``: in a checkout, a link to ``scenarios/``),
runnable by name from any folder: ``recaudit run quickstart``."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from .yamlio import ScenarioError

SUFFIX = ".yaml"


def shipped_folder() -> Path:
    """Where the shipped scenario files are (inside the installed package)."""
    return Path(str(resources.files("recaudit.audits") / "scenarios"))


def shipped_scenarios() -> dict[str, Path]:
    """Every shipped scenario, by name (its path under the folder without ``.yaml``: ``quickstart``,
    ``studies/sp2-table2-movielens-100k``), sorted."""
    folder = shipped_folder()
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix().removesuffix(SUFFIX): p for p in sorted(folder.rglob(f"*{SUFFIX}"))}


def resolve(argument: str | Path) -> Path:
    """A scenario file: ``argument`` itself when it exists (or looks like a path), else the shipped scenario
    of that name (``quickstart`` or ``quickstart.yaml``). A name that is neither is a one-line error."""
    path = Path(argument)
    if path.exists():
        return path
    name = path.as_posix().removesuffix(SUFFIX)
    shipped = shipped_scenarios()
    if name in shipped:
        return shipped[name]
    if path.parent == Path(".") and path.suffix == "":
        raise ScenarioError(f"{argument}: no such file and no shipped scenario of that name "
                            f"(`recaudit scenarios` lists them)")
    return path  # a path: the loader reports it missing


def command(path: Path) -> str:
    """The command that runs a scenario file, read from its top-level keys without validating it: ``sweep``
    (a ``sweep`` block), ``grid`` (a ``grid`` block), ``run`` (one audit, or a ``study``: it iterates by itself)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return "run"
    data = data if isinstance(data, dict) else {}
    return "sweep" if data.get("sweep") else "grid" if data.get("grid") else "run"


def is_study(path: Path) -> bool:
    """Whether a scenario file names a ``study`` (read without validating it)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "study" in data


def description(path: Path) -> str:
    """What a scenario file is, in one sentence of plain text: the first sentence of its ``description``, or of
    its leading comment lines, without validating the whole file."""
    import re

    import yaml

    from .schema import plain

    try:
        text = path.read_text()
        data = yaml.safe_load(text)
    except (OSError, yaml.YAMLError):
        return ""
    said = data.get("description", "") if isinstance(data, dict) else ""
    if not said:
        comments = []
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            comments.append(line.lstrip("#").strip())
        said = " ".join(comments)
    return re.split(r"(?<=\.)\s", plain(said), maxsplit=1)[0]
