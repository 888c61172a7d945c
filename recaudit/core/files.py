"""Reading a user's file with one clear line for every way it can fail."""
from __future__ import annotations

from pathlib import Path


def read_bytes(path: str | Path, error: type[Exception]) -> bytes:
    """The bytes of ``path``; a missing file, a folder, no permission or any other OS failure raises ``error``
    with one line naming the path."""
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise error(f"{path}: permission denied") from None
    except OSError as exc:
        if p.is_dir():
            raise error(f"{path}: is a directory, not a file") from None
        raise error(f"{path}: cannot read file ({exc.strerror or type(exc).__name__})") from None
