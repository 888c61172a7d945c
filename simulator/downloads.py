"""Streaming downloads for ``recaudit data fetch``: to disk in blocks, resumable, with progress, under a deadline.

A download goes to ``DEST.partial``; run again after an interruption and it asks the server for the
rest (an HTTP ``Range`` request) and appends it; a server that ignores the range gets the file
again from the start. Progress is a bar on a terminal and a line at most every 30 s elsewhere.
"""
from __future__ import annotations

import http.client
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

BLOCK_BYTES = 1 << 20
#: seconds between progress lines when stderr is not a terminal
LOG_EVERY = 30.0


def partial_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".partial")


def download(url: str, dest: Path, timeout: float, log: Callable[[str], None] = lambda message: None,
             expected_bytes: int | None = None) -> Path:
    """``url`` streamed to ``dest`` (resuming ``dest.partial``); ``OSError`` naming what failed, progress kept."""
    partial = partial_path(dest)
    partial.parent.mkdir(parents=True, exist_ok=True)
    have = partial.stat().st_size if partial.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 -- the data set's pinned URL
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the range starts at the end: the partial file is complete
            partial.replace(dest)
            return dest
        raise OSError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise OSError(str(exc.reason)) from None
    with response:
        resumed = have > 0 and getattr(response, "status", None) == 206
        if have and not resumed:
            log(f"{url}: the server does not resume downloads; starting again")
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else expected_bytes
        if resumed:
            log(f"resuming {url} at {have:,} bytes")
        progress = _Progress(url, total, have)
        try:
            with open(partial, "ab" if resumed else "wb") as out:
                while block := response.read(BLOCK_BYTES):
                    out.write(block)
                    have += len(block)
                    progress.update(have)
        except (http.client.HTTPException, OSError) as exc:
            raise OSError(f"the download stopped at {have:,} bytes ({type(exc).__name__}); run the same "
                          "command again to resume") from None
        finally:
            progress.close()
    if total is not None and have < total:
        raise OSError(f"the download stopped at {have:,} of {total:,} bytes; run the same command again to resume")
    partial.replace(dest)
    return dest


class _Progress:
    """A tqdm bar on a terminal; otherwise a line at most every ``LOG_EVERY`` seconds on stderr."""

    def __init__(self, url: str, total: int | None, start: int):
        self.url, self.total, self.start, self.bar = url, total, start, None
        self.started = self.last = time.monotonic()
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=start, unit="B", unit_scale=True, desc=url.rsplit("/", 1)[-1])

    def update(self, have: int) -> None:
        if self.bar is not None:
            self.bar.update(have - self.bar.n)
            return
        now = time.monotonic()
        if now - self.last >= LOG_EVERY:
            self.last = now
            rate = (have - self.start) / max(now - self.started, 1e-9)
            left = f", about {(self.total - have) / rate:.0f} s left" if self.total and rate > 0 else ""
            of = f" of {self.total / 1e6:,.1f}" if self.total else ""
            print(f"{self.url}: {have / 1e6:,.1f}{of} MB at {rate / 1e6:.2f} MB/s{left}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
