"""``recaudit data``: list the public data sets, fetch one into the cache (verified), describe a ratings file."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from recaudit.mechanisms import ParameterError
from recaudit.simulator import datasets


def add_parser(sub) -> None:
    data = sub.add_parser("data", help="list, fetch (verified, cached) and describe ratings data sets",
                          description="Public ratings data sets: `list` names them, `fetch NAME` downloads one "
                                      "into the user cache (or --dir) and checks its pinned SHA-256, `info FILE` "
                                      "describes any ratings file. Only `fetch` uses the network.")
    what = data.add_subparsers(dest="data_command", required=True, metavar="ACTION", help="list, fetch or info")
    what.add_parser("list", help="the data sets `fetch` knows, and whether each is in the cache")
    fetch = what.add_parser("fetch", help="download a data set (first source that works), verify it, cache it")
    fetch.add_argument("name", help="a data set name (see `recaudit data list`)")
    fetch.add_argument("--dir", type=Path, metavar="D", help=f"write it to D instead of the cache "
                                                             f"({datasets.cache_dir()})")
    fetch.add_argument("--timeout", type=float, default=10.0, help="seconds per network attempt (default 10)")
    fetch.add_argument("--mirror", metavar="URL",
                       help="a mirror of the publisher's archives (https://, http:// or "
                            f"file://), instead of the publisher (or ${datasets.MIRROR_ENV})")
    info = what.add_parser("info", help="format, size and rating levels of a ratings file")
    info.add_argument("file", type=Path)
    info.add_argument("--format", default="auto", help="the file's format (default: detected)")


def run(args: argparse.Namespace, log) -> int:
    """Exit 0, or 2 with one line on stderr (``DataError``; a bad file is reported by the caller)."""
    if args.data_command == "list":
        for data in datasets.DATASETS.values():
            path = datasets.target(data.name)
            if not path.is_file():
                where = "not fetched"
            else:
                try:
                    where = f"fetched: {datasets.find(data.name)}"
                except datasets.DataError:
                    where = f"corrupted: {path} (fetch it again)"
            size = f"download about {data.download_mb:g} MB" if data.download_mb else "download under 5 MB"
            print(f"{data.name}: {data.description}; {size}; {where}")
            print(f"  sources: {'; then '.join(s.describe() for s in data.sources)}")
            print(f"  licence: {data.licence}")
        return 0
    if args.data_command == "fetch":
        started = time.perf_counter()
        try:
            path, cached = datasets.fetch(args.name, args.dir, args.timeout, log=log, mirror=args.mirror)
        except datasets.DataError as exc:
            print(f"recaudit data fetch: {exc}", file=sys.stderr)
            return 2
        data = datasets.dataset(args.name)
        state = "cache hit" if cached else f"fetched in {time.perf_counter() - started:.1f} s"
        check = "SHA-256 verified" if data.sha256 else "publisher's MD5 and rating count verified, SHA-256 recorded"
        print(f"{path} ({state}; {check}: {data.ratings:,} ratings, {data.users:,} users, {data.items:,} items)")
        print(f"licence: {data.licence}")
        return 0
    return _info(args.file, args.format)


def _info(path: Path, format: str) -> int:
    import numpy as np

    from recaudit.simulator.ratings import read_ratings

    try:
        parsed = read_ratings(path, format)
    except ParameterError as exc:  # a bad or missing file: one line naming file:line
        print(f"recaudit data info: {exc}", file=sys.stderr)
        return 2
    table = parsed.table
    counts = np.diff(table.indptr)
    levels = np.unique(table.data)
    digest = datasets.sha256(path)
    known = [d.name for d in datasets.DATASETS.values()
             if datasets.expected_sha256(d, datasets.target(d.name)) == digest]
    shown = ", ".join(f"{v:g}" for v in levels) if levels.size <= 12 else f"{levels.size} values"
    print(f"{path}: {table.nnz:,} ratings, {table.shape[0]:,} users, {table.shape[1]:,} items "
          f"(density {table.nnz / max(table.shape[0] * table.shape[1], 1):.4f})")
    print(f"  ratings: {levels.min():g} to {levels.max():g} ({shown}); mean {table.data.mean():.4f}")
    print(f"  ratings per user: min {counts.min()}, median {np.median(counts):g}, max {counts.max()}")
    print(f"  SHA-256 {digest}" + (f" (the canonical {', '.join(known)})" if known else ""))
    return 0
