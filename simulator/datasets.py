"""Public ratings data sets, fetched on request into the user's cache and verified (``recaudit data``).

MovieLens-100K: ``fetch(name)`` tries each source in order — the publisher's archive first, then a
wheel on the package index that ships the same ratings (taken with ``pip download --no-deps``; the
package is never installed) — turns what it got into one canonical file (MovieLens ``u.data``
layout: ``user<TAB>item<TAB>rating<TAB>timestamp``, sorted by user then item) and checks its SHA-256
against the pinned one.

MovieLens-1M, -10M, -20M and -25M (:class:`PublisherArchive`): the publisher's zip is streamed to
disk (resumable, with progress), checked against the publisher's own MD5 (GroupLens publishes one
beside each archive), and its ratings file extracted as it is (``ratings.dat`` or ``ratings.csv``)
and counted; the file's SHA-256 is recorded beside it and checked whenever a scenario finds it.
``RECAUDIT_DATA_MIRROR`` (or ``recaudit data fetch --mirror URL``) replaces the publisher's address
with a mirror's (``https://``, ``http://`` or ``file://``) holding the same archives.

Nothing is fetched at any other time: scenarios naming a data set only ``find`` it in the cache.
The files are never part of the project (their licences forbid redistribution).
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

from .downloads import download, partial_path

#: the environment variable naming a mirror of the publishers' archives (a base URL)
MIRROR_ENV = "RECAUDIT_DATA_MIRROR"
MOVIELENS_BASE = "https://files.grouplens.org/datasets/movielens"


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
class PublisherArchive:
    """A zip archive on the publisher's site, streamed to disk and checked against the publisher's MD5;
    ``member`` is the ratings file inside it, kept as it is."""

    archive: str
    member: str
    md5: str
    base: str = MOVIELENS_BASE

    def url(self, mirror: str | None = None) -> str:
        return f"{(mirror or os.environ.get(MIRROR_ENV) or self.base).rstrip('/')}/{self.archive}"

    def describe(self) -> str:
        return self.url()


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    filename: str
    sha256: str | None  # of the canonical file, when pinned (else recorded at fetch, beside the file)
    ratings: int
    users: int
    items: int
    sources: tuple
    licence: str
    download_mb: float = 0.0  # about how much a fetch downloads

    @property
    def streamed(self) -> bool:
        return isinstance(self.sources[0], PublisherArchive)

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




def _movielens(size: str, member: str, md5: str, ratings: int, users: int, items: int, mb: float) -> Dataset:
    file = member.rsplit("/", 1)[-1]
    return Dataset(
        name=f"movielens-{size.lower()}",
        description=f"MovieLens {size.upper()} (GroupLens): {ratings:,} ratings of {items:,} movies by {users:,} users "
                    f"({file})",
        filename=file, sha256=None, ratings=ratings, users=users, items=items,
        sources=(PublisherArchive(f"ml-{size}.zip", member, md5),), download_mb=mb,
        licence="GroupLens' usage licence: research use only, no redistribution, no commercial use without "
                "permission, cite Harper & Konstan (2015) "
                f"(https://files.grouplens.org/datasets/movielens/ml-{size}-README.txt); recaudit never ships it")


# MD5s are the publisher's (the .md5 file beside each archive on files.grouplens.org)
MOVIELENS_1M = _movielens("1m", "ml-1m/ratings.dat", "c4d9eecfca2ab87c1945afe126590906",
                          1_000_209, 6_040, 3_706, 5.9)
MOVIELENS_10M = _movielens("10m", "ml-10M100K/ratings.dat", "ce571fd55effeba0271552578f2648bd",
                           10_000_054, 69_878, 10_677, 63.0)
MOVIELENS_20M = _movielens("20m", "ml-20m/ratings.csv", "cd245b17a1ae2cc31bb14903e1204af3",
                           20_000_263, 138_493, 26_744, 198.0)
MOVIELENS_25M = _movielens("25m", "ml-25m/ratings.csv", "6b51fb2759a8657d3bfcbfc42b592ada",
                           25_000_095, 162_541, 59_047, 262.0)

DATASETS = {d.name: d for d in (MOVIELENS_100K, MOVIELENS_1M, MOVIELENS_10M, MOVIELENS_20M, MOVIELENS_25M)}


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


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm, usedforsecurity=False)
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def sha256(path: Path) -> str:
    return _digest(path, "sha256")


def recorded_path(path: Path) -> Path:
    """Where the SHA-256 of a fetched file that has no pinned one is recorded (beside it)."""
    return path.with_name(path.name + ".sha256")


def expected_sha256(data: Dataset, path: Path) -> str | None:
    """The pinned SHA-256 of ``data``'s file, else the one recorded when it was fetched (None: neither)."""
    if data.sha256:
        return data.sha256
    recorded = recorded_path(path)
    return recorded.read_text().strip() if recorded.is_file() else None


def find(name: str, folder: Path | str | None = None) -> Path:
    """The verified file of ``name`` already fetched (nothing is downloaded here)."""
    path, data = target(name, folder), dataset(name)
    if not path.is_file():
        raise DataError(f"{name} is not fetched ({path} is missing): run `recaudit data fetch {name}`")
    if sha256(path) != expected_sha256(data, path):
        raise DataError(f"{path} is corrupted (SHA-256 mismatch): run `recaudit data fetch {name}` to replace it")
    return path


def fetch(name: str, folder: Path | str | None = None, timeout: float = 10.0, log=lambda message: None,
          mirror: str | None = None) -> tuple[Path, bool]:
    """The verified file of ``name`` and whether it was already there; fetched from the first source that works
    (the publisher's archives from ``mirror`` instead, when given)."""
    data, path = dataset(name), target(name, folder)
    corrupted = path.is_file()
    if corrupted and sha256(path) == expected_sha256(data, path):
        return path, True
    if data.streamed:
        return _fetch_archive(data, path, data.sources[0], timeout, log, mirror, corrupted), False
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


def _fetch_archive(data: Dataset, path: Path, source: PublisherArchive, timeout: float, log, mirror: str | None,
                   corrupted: bool) -> Path:
    """Download (resuming), check the archive's MD5, extract and count the ratings file, record its SHA-256."""
    url = source.url(mirror)
    archive = path.parent / source.archive
    try:
        download(url, archive, timeout, log, expected_bytes=None)
    except OSError as exc:
        raise DataError(f"could not fetch {data.name} from {url}: {' '.join(str(exc).split())}") from None
    digest = _digest(archive, "md5")
    if digest != source.md5:
        archive.unlink()
        raise DataError(f"{archive} from {url} is corrupted: MD5 {digest} is not the publisher's {source.md5} "
                        "(deleted; run again to download it afresh)")
    partial = partial_path(path)
    try:
        with zipfile.ZipFile(archive) as z, z.open(source.member) as member, open(partial, "wb") as out:
            lines, last = 0, b"\n"
            while block := member.read(1 << 22):
                out.write(block)
                lines += block.count(b"\n")
                last = block[-1:]
            lines += last != b"\n"
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        partial.unlink(missing_ok=True)
        raise DataError(f"{archive} from {url} cannot be read as the publisher's archive: {exc}") from None
    ratings = lines - (path.suffix == ".csv")
    if ratings != data.ratings:
        partial.unlink()
        raise DataError(f"{source.member} in {archive} holds {ratings:,} ratings, not the publisher's "
                        f"{data.ratings:,}: refused")
    partial.replace(path)
    recorded_path(path).write_text(sha256(path) + "\n")
    archive.unlink()
    log(f"fetched {data.name} from {url}" + (f" (replacing a corrupted {path})" if corrupted else ""))
    log(f"licence: {data.licence}")
    return path
