"""Public ratings data sets, fetched on request into the user's cache and verified (``recaudit data``).

``fetch(name)`` tries each source of the data set in order — the publisher's archive first, then
a wheel on the package index that ships the same ratings (taken with ``pip download --no-deps``;
the package is never installed) — turns what it got into one canonical file (MovieLens ``u.data``
layout: ``user<TAB>item<TAB>rating<TAB>timestamp``, sorted by user then item) and checks its SHA-256
against the pinned one. Nothing is fetched at any other time: scenarios naming a data set only
``find`` it in the cache. The files are never part of the project (their licences forbid
redistribution).
"""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recaudit.core.errors import BadInput


class DataError(BadInput):
    """A data set could not be fetched, found or verified: one line, for exit code 2."""


@dataclass(frozen=True)
class ArchiveSource:
    """A zip archive on the publisher's site and the ratings member inside it."""

    url: str
    member: str
    header: bool = False

    def describe(self) -> str:
        return self.url

    def fetch(self, timeout: float) -> bytes:
        with urllib.request.urlopen(self.url, timeout=timeout) as response:  # noqa: S310 -- a pinned https URL
            archive = response.read()
        with zipfile.ZipFile(io.BytesIO(archive)) as z:
            return z.read(self.member)


@dataclass(frozen=True)
class WheelSource:
    """A pinned wheel on the package index (``pip download --no-deps``) and the ratings member inside it."""

    requirement: str
    member: str
    header: bool = True

    def describe(self) -> str:
        return f"pip download --no-deps {self.requirement}"

    def fetch(self, timeout: float) -> bytes:
        with tempfile.TemporaryDirectory() as folder:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                 "--disable-pip-version-check", "--timeout", str(int(max(timeout, 1))), "--retries", "1",
                 "--dest", folder, self.requirement], capture_output=True, text=True)
            wheels = sorted(Path(folder).glob("*.whl"))
            if done.returncode or not wheels:
                lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
                raise OSError(lines[-1].strip() if lines else f"pip exited with {done.returncode}")
            with zipfile.ZipFile(wheels[0]) as z:
                return z.read(self.member)


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    filename: str
    sha256: str  # of the canonical file
    ratings: int
    users: int
    items: int
    sources: tuple
    licence: str

    def canonical(self, raw: bytes, header: bool) -> bytes:
        """The ratings as the canonical ``u.data`` text: integer fields, sorted by (user, item)."""
        lines = raw.decode("utf-8").splitlines()[1 if header else 0:]
        table = np.array([line.split("\t") for line in lines if line.strip()], dtype=np.float64)
        if table.ndim != 2 or table.shape[1] != 4 or not np.array_equal(table, np.round(table)):
            raise ValueError("not four integer fields per line")
        table = table.astype(np.int64)
        table = table[np.lexsort((table[:, 1], table[:, 0]))]
        return "".join(f"{u}\t{i}\t{r}\t{t}\n" for u, i, r, t in table.tolist()).encode()


MOVIELENS_100K = Dataset(
    name="movielens-100k",
    description="MovieLens 100K (GroupLens, 1998): 100,000 ratings 1-5 of 1,682 movies by 943 users",
    filename="u.data",
    sha256="6cfffb52c89b05fbc3afb75f6912eeda04c81c2add0dc58e773a0ef6c8adb160",
    ratings=100_000, users=943, items=1_682,
    sources=(ArchiveSource("https://files.grouplens.org/datasets/movielens/ml-100k.zip", "ml-100k/u.data"),
             WheelSource("recbole==1.2.1", "recbole/dataset_example/ml-100k/ml-100k.inter")),
    licence="GroupLens' terms: research use, no redistribution (https://files.grouplens.org/datasets/movielens/"
            "ml-100k-README.txt); recaudit never ships it")

DATASETS = {d.name: d for d in (MOVIELENS_100K,)}


def cache_dir() -> Path:
    """The user's cache folder for recaudit's data (``$XDG_CACHE_HOME/recaudit``, as platformdirs would)."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "recaudit"


def dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise DataError(f"unknown data set {name!r} (known: {', '.join(DATASETS)})")
    return DATASETS[name]


def target(name: str, folder: Path | str | None = None) -> Path:
    """Where the canonical file of ``name`` lives: ``folder`` or the cache."""
    return Path(folder) / dataset(name).filename if folder else cache_dir() / name / dataset(name).filename


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find(name: str, folder: Path | str | None = None) -> Path:
    """The verified file of ``name`` already fetched (nothing is downloaded here)."""
    path, data = target(name, folder), dataset(name)
    if not path.is_file():
        raise DataError(f"{name} is not fetched ({path} is missing): run `recaudit data fetch {name}`")
    if sha256(path) != data.sha256:
        raise DataError(f"{path} is corrupted (SHA-256 mismatch): run `recaudit data fetch {name}` to replace it")
    return path


def fetch(name: str, folder: Path | str | None = None, timeout: float = 10.0, log=lambda message: None
          ) -> tuple[Path, bool]:
    """The verified file of ``name`` and whether it was already there; fetched from the first source that works."""
    data, path = dataset(name), target(name, folder)
    corrupted = path.is_file()
    if corrupted and sha256(path) == data.sha256:
        return path, True
    failures = []
    for source in data.sources:
        try:
            raw = source.fetch(timeout)
            text = data.canonical(raw, source.header)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
            failures.append(f"{source.describe()}: {' '.join(str(exc).split()) or type(exc).__name__}")
            continue
        digest = hashlib.sha256(text).hexdigest()
        if digest != data.sha256:
            failures.append(f"{source.describe()}: SHA-256 {digest[:12]}... is not the pinned {data.sha256[:12]}...")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_bytes(text)
        partial.replace(path)
        log(f"fetched {name} from {source.describe()}" + (f" (replacing a corrupted {path})" if corrupted else ""))
        return path, False
    raise DataError((f"cached {path} is corrupted (SHA-256 mismatch) and " if corrupted else "")
                    + f"could not fetch {name} (offline?): " + "; ".join(failures))
