"""The one atomic store: every file recaudit writes goes through here (reports, progress, sweeps).

A write lands in a uniquely named temporary file in the same folder and is
renamed over the target, so a reader (or a resumed run) sees the old file or
the new one, never half of one. An output folder is held by one run at a time
(:func:`hold_folder`); every saved unit of work carries the fingerprint of what
produced it and a checksum of its content, and a unit that is corrupt or
foreign is recomputed (with a one-line warning), never reused.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import secrets
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from filelock import FileLock, Timeout

from recaudit.core.errors import BadInput

from .stats.coded import CodedScores, is_code_table

TEMP_SUFFIX = ".tmp"
LOCK_NAME = ".recaudit.lock"  # held with filelock (an OS lock: released when the process ends, even by kill -9)
OWNER_NAME = ".recaudit.pid"  # the holder's pid, for the message a second run gets


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: into a unique temporary file next to it, renamed over it.

    The temporary file is made with ``O_EXCL`` under a name of its own (``.NAME.XXXXXXXX.tmp``; a clash with a
    leftover draws another): 0.13 ms a file here, against 0.21 through ``tempfile.NamedTemporaryFile``.
    """
    path = Path(path)
    while True:
        temporary = path.parent / f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:
            continue
    try:
        with open(descriptor, "wb") as handle:
            handle.write(data)
            os.fchmod(descriptor, 0o644)  # an ordinary file, whatever the umask
    except BaseException:
        os.unlink(temporary)
        raise
    os.replace(temporary, path)


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any, allow_nan: bool = True) -> None:
    """``data`` as indented JSON; with ``allow_nan=False`` a NaN or infinity is an error (strict JSON)."""
    write_text(path, json.dumps(data, indent=2, allow_nan=allow_nan) + "\n")


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """A ``.npz`` of ``arrays``, atomically (made in memory, then written in one piece: zipfile's many small
    writes and seeks to a temporary file cost more than the copy)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_bytes(path, buffer.getbuffer())


def remove_temporaries(directory: Path) -> int:
    """Delete temporaries left by killed writers in ``directory`` (hold its lock first); returns how many."""
    removed = 0
    for leftover in Path(directory).glob(f".*{TEMP_SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
            removed += 1
    return removed


class FolderBusy(BadInput, RuntimeError):
    """Another run holds the output folder."""


class FolderUnusable(BadInput, RuntimeError):
    """The output folder cannot be created or written."""


_held: dict[Path, list] = {}  # folders this process holds: path -> [lock, depth]


@contextlib.contextmanager
def hold_folder(directory: Path | None) -> Iterator[None]:
    """Hold ``directory`` exclusively for this process (created if needed); re-entrant.

    A second process (or a second run in this one, through another path to the
    same folder after this one released it) gets :class:`FolderBusy` at once;
    an unusable folder gives :class:`FolderUnusable`. Temporaries left by killed
    writers are removed once the folder is held.
    """
    if directory is None:
        yield
        return
    try:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        key = directory.resolve()
    except OSError as exc:
        raise FolderUnusable(f"{directory}: cannot create the output folder ({exc.strerror or exc})") from None
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    lock = FileLock(key / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        try:
            holder = (key / OWNER_NAME).read_text().strip() or "unknown"
        except OSError:
            holder = "unknown"
        raise FolderBusy(f"{directory}: another recaudit run (pid {holder}) is writing to this folder; "
                         "wait for it to finish or choose another --out") from None
    except OSError as exc:
        raise FolderUnusable(f"{directory}: cannot write in the output folder ({exc.strerror or exc})") from None
    try:
        write_text(key / OWNER_NAME, str(os.getpid()))
        remove_temporaries(key)
        _held[key] = [lock, 1]
        try:
            yield
        finally:
            del _held[key]
    finally:
        lock.release()


class ProgressMismatch(BadInput, RuntimeError):
    """Saved progress in the output folder belongs to another scenario, seed or grid."""


def _digest_arrays(arrays: dict[str, np.ndarray]) -> str:
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _digest_json(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


_META = "__recaudit_meta__"
_VALUES = "@values"  # suffix of a coded array's table of distinct values
_BITS, _SHAPE = "@bits", "@shape"  # suffixes of the codes of a table of two values (or one), packed, and their shape


def _coded(array: np.ndarray, limit: int = 255) -> tuple[np.ndarray, np.ndarray] | None:
    """(uint8 codes, distinct values) that give back ``array`` bit for bit, or None.

    Scores of discrete outputs take a handful of values: stored as codes a block is 8 times smaller, so
    checksumming and writing it cost less than computing it. The distinct values are read off an evenly
    strided sample and then checked against every element (bit patterns, so -0.0 and NaNs survive).
    """
    if array.dtype.kind != "f" or array.size < 1024:
        return None
    flat = array.reshape(-1)
    values = np.unique(flat[::max(1, flat.size // 512)])
    if values.size > limit:
        return None
    if values.size <= 8:  # a few comparisons beat a binary search per element
        codes = np.zeros(flat.size, np.uint8)
        for value in values[1:]:
            codes += flat >= value
    else:
        codes = np.minimum(np.searchsorted(values, flat), values.size - 1)
    bits = f"i{array.itemsize}"
    if not np.array_equal(values[codes].view(bits), flat.view(bits)):
        return None
    return codes.astype(np.uint8).reshape(array.shape), values


def _encoded(arrays: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, array in arrays.items():
        coded = (array.codes, array.values) if isinstance(array, CodedScores) else _coded(np.asarray(array))
        if coded is None:
            out[name] = array
        elif coded[1].size <= 2:  # codes of two values are bits: eight to a byte
            out |= {name + _BITS: np.packbits(coded[0].reshape(-1), bitorder="little"),
                    name + _SHAPE: np.array(coded[0].shape, np.int64), name + _VALUES: coded[1]}
        else:
            out |= {name: coded[0], name + _VALUES: coded[1]}
    return out


def _decoded(arrays: dict[str, np.ndarray], keep_codes: tuple[str, ...] = ()) -> dict:
    """The arrays as saved; coded ones decoded, except those named in ``keep_codes`` whose table is a
    :class:`CodedScores` table (ascending, no NaN): those stay coded."""
    out = {}
    for key, array in arrays.items():
        if key.endswith(_BITS):
            name, shape = key[:-len(_BITS)], tuple(arrays[key[:-len(_BITS)] + _SHAPE])
            array = np.unpackbits(array, count=int(np.prod(shape)), bitorder="little").reshape(shape)
        elif key.endswith((_VALUES, _SHAPE)):
            continue
        else:
            name = key
        values = arrays.get(name + _VALUES)
        if values is None:
            out[name] = array
        elif name in keep_codes and array.dtype == np.uint8 and is_code_table(values):
            out[name] = CodedScores(array, values)
        else:
            out[name] = values[array]
    return out



class Progress:
    """Finished units of work (trial blocks, sweep tasks) on disk, keyed by what determines them.

    ``key`` (e.g. the scenario's fingerprint) is stamped in the folder and in
    every unit with a checksum of the unit's content. With ``resume`` a folder
    stamped with another key is an error; without it old units are removed.
    A unit that cannot be read, fails its checksum or carries another stamp is
    not reused: ``warn`` gets one line and the caller recomputes it.
    The folder must be held (:func:`hold_folder`) while a Progress writes to it.
    """

    def __init__(self, directory: Path | None, key: dict, resume: bool, what: str = "scenario or seed",
                 warn: Callable[[str], None] = lambda _: None):
        self.directory = directory
        self.stamp = _digest_json(key)
        self.warn = warn
        if directory is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        remove_temporaries(directory)
        stamp = directory / "fingerprint.json"
        if resume and stamp.exists():
            previous = self._read_stamp(stamp)
            if previous is not None and previous != key:
                raise ProgressMismatch(f"{directory}: saved progress belongs to another {what} "
                                       f"({previous} != {key}); remove it or run without --resume")
            if previous is None:  # every unit still proves its own origin
                write_json(stamp, key)
        else:
            for old in [*directory.glob("*.npz"), *directory.glob("*.json")]:
                old.unlink()
            write_json(stamp, key)

    @classmethod
    def saved(cls, directory: Path, warn: Callable[[str], None] = lambda _: None) -> "Progress":
        """The units a run left in ``directory``, read only (nothing is written or removed).

        Units are accepted when they carry the folder's stamp; without a readable stamp, none is.
        """
        try:
            key = json.loads((directory / "fingerprint.json").read_text())
        except (OSError, ValueError):
            key = None
        progress = cls(None, key, resume=False, warn=warn)
        progress.directory = directory
        return progress

    def _read_stamp(self, stamp: Path) -> Any:
        try:
            return json.loads(stamp.read_text())
        except (OSError, ValueError) as exc:
            self.warn(f"{stamp}: unreadable ({type(exc).__name__}); rewriting it, checking each saved unit")
            return None

    def _path(self, name: str, suffix: str) -> Path:
        return self.directory / f"{name}{suffix}"

    def _refuse(self, path: Path, why: str) -> None:
        self.warn(f"{path}: {why}; recomputing it")

    def load_arrays(self, name: str, keep_codes: tuple[str, ...] = ()) -> dict | None:
        """The saved unit ``name``, or None when absent, unreadable, corrupt or foreign; the arrays named in
        ``keep_codes`` come back as :class:`CodedScores` when the store coded them."""
        path = self._path(name, ".npz") if self.directory is not None else None
        if path is None or not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as saved:
                arrays = {k: saved[k] for k in saved.files}
            meta = json.loads(str(arrays.pop(_META)))
        except Exception as exc:  # any damage to the file means it is not reused
            self._refuse(path, f"unreadable saved block ({type(exc).__name__})")
            return None
        if meta.get("stamp") != self.stamp:
            self._refuse(path, "saved block belongs to another scenario")
            return None
        if meta.get("sha256") != _digest_arrays(arrays):
            self._refuse(path, "saved block fails its checksum")
            return None
        return _decoded(arrays, keep_codes)

    def save_arrays(self, name: str, arrays: dict) -> None:
        """Save the unit ``name``; float arrays of few distinct values are stored as codes (decoded on load),
        :class:`CodedScores` as their codes and table."""
        if self.directory is not None:
            arrays = _encoded(arrays)
            meta = json.dumps({"stamp": self.stamp, "sha256": _digest_arrays(arrays)})
            write_arrays(self._path(name, ".npz"), {**arrays, _META: np.array(meta)})

    def load_json(self, name: str) -> Any | None:
        """Like :meth:`load_arrays`, for JSON units."""
        path = self._path(name, ".json") if self.directory is not None else None
        if path is None or not path.exists():
            return None
        try:
            saved = json.loads(path.read_text())
            stamp, checksum, data = saved["stamp"], saved["sha256"], saved["data"]
        except Exception as exc:
            self._refuse(path, f"unreadable saved unit ({type(exc).__name__})")
            return None
        if stamp != self.stamp:
            self._refuse(path, "saved unit belongs to another scenario")
            return None
        if checksum != _digest_json(data):
            self._refuse(path, "saved unit fails its checksum")
            return None
        return data

    def save_json(self, name: str, data: Any) -> None:
        if self.directory is not None:
            write_json(self._path(name, ".json"), {"stamp": self.stamp, "sha256": _digest_json(data), "data": data})
