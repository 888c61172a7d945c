"""The one atomic store: every file recaudit writes goes through here (reports, progress, sweeps).

A write lands in a temporary file in the same folder and is renamed over the
target, so a reader (or a resumed run) sees the old file or the new one,
never half of one.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    path = Path(path)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                     delete=False) as handle:
        handle.write(data)
    os.replace(handle.name, path)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any, allow_nan: bool = True) -> None:
    """``data`` as indented JSON; with ``allow_nan=False`` a NaN or infinity is an error (strict JSON)."""
    write_text(path, json.dumps(data, indent=2, allow_nan=allow_nan) + "\n")


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """A ``.npz`` of ``arrays``, atomically."""
    path = Path(path)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                     delete=False) as handle:
        np.savez(handle, **arrays)
    os.replace(handle.name, path)


class ProgressMismatch(RuntimeError):
    """Saved progress in the output folder belongs to another scenario, seed or grid."""


class Progress:
    """Finished units of work (trial blocks, sweep tasks) on disk, keyed by what determines them.

    ``key`` (e.g. the scenario's fingerprint) is stamped in the folder; with
    ``resume`` a different stamp is an error, without it old units are removed.
    """

    def __init__(self, directory: Path | None, key: dict, resume: bool, what: str = "scenario or seed"):
        self.directory = directory
        if directory is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        stamp = directory / "fingerprint.json"
        if resume and stamp.exists():
            previous = json.loads(stamp.read_text())
            if previous != key:
                raise ProgressMismatch(f"{directory}: saved progress belongs to another {what} "
                                       f"({previous} != {key}); remove it or run without --resume")
        else:
            for old in [*directory.glob("*.npz"), *directory.glob("*.json")]:
                old.unlink()
            write_json(stamp, key)

    def _path(self, name: str, suffix: str) -> Path:
        return self.directory / f"{name}{suffix}"

    def load_arrays(self, name: str) -> dict[str, np.ndarray] | None:
        if self.directory is None or not self._path(name, ".npz").exists():
            return None
        with np.load(self._path(name, ".npz")) as saved:
            return dict(saved)

    def save_arrays(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        if self.directory is not None:
            write_arrays(self._path(name, ".npz"), arrays)

    def load_json(self, name: str) -> Any | None:
        if self.directory is None or not self._path(name, ".json").exists():
            return None
        return json.loads(self._path(name, ".json").read_text())

    def save_json(self, name: str, data: Any) -> None:
        if self.directory is not None:
            write_json(self._path(name, ".json"), data)
