"""Benchmark: the Gram sum ``rowsᵀ rows`` of sparse rows, three ways, in CPU seconds on one BLAS thread.

``./dev bench gram`` (or ``python benchmarks/gram.py``) times, for random sparse rows of each number of
items and density (4·10⁶ stored entries each), blocked sparse–dense products ``blockᵀ · dense(block)``,
dense blocks through ``dsyrk`` (``recaudit.mechanisms.gram_sums.gram`` picks between the two from the mean entries
per row) and, with ``--sparse``, one sparse ``rows.T @ rows``; and the rank-one world of the completion
benchmark (``--users`` x 400 items, 80 ratings each). Prints a markdown table.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse
from scipy.linalg import blas

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recaudit.mechanisms.base import take_rows  # noqa: E402
from recaudit.audits.executors import one_blas_thread  # noqa: E402
from recaudit.mechanisms.gram_sums import DENSE_CHUNK  # noqa: E402


def sparse_dense(rows: sparse.csr_array) -> np.ndarray:
    n = rows.shape[1]
    out, chunk = np.zeros((n, n)), max(1, DENSE_CHUNK // n)
    for start in range(0, rows.shape[0], chunk):
        block = take_rows(rows, slice(start, start + chunk))
        out += block.T @ block.toarray()
    return out


def dense_syrk(rows: sparse.csr_array) -> np.ndarray:
    n = rows.shape[1]
    out, chunk = np.zeros((n, n), order="F"), max(1, DENSE_CHUNK // n)
    for start in range(0, rows.shape[0], chunk):
        block = take_rows(rows, slice(start, start + chunk)).toarray()
        out = blas.dsyrk(1.0, block.T, beta=1.0, c=out, trans=0, lower=0, overwrite_c=1)
    return out


def one_sparse_product(rows: sparse.csr_array) -> np.ndarray:
    return (rows.T @ rows).toarray()


def cpu_seconds(function, rows) -> float:
    start = time.process_time()
    function(rows)
    return time.process_time() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[400, 1682, 4000])
    parser.add_argument("--densities", type=float, nargs="+", default=[0.01, 0.02, 0.05, 0.1, 0.2])
    parser.add_argument("--users", type=int, default=100_000, help="users of the rank-one world (0: none)")
    parser.add_argument("--sparse", action="store_true", help="also time one sparse rows.T @ rows")
    args = parser.parse_args(argv)
    methods = {"sparse–dense": sparse_dense, "dsyrk": dense_syrk} | (
        {"rows.T @ rows": one_sparse_product} if args.sparse else {})
    cases = []
    rng = np.random.default_rng(0)
    for n in args.items:
        for density in args.densities:
            users = int(4e6 / (n * density))
            cases.append((f"random, {n} items", density, sparse.random_array((users, n), density=density,
                                                                               format="csr", rng=rng)))
    if args.users:
        from recaudit.simulator.population import rank_one_world

        train = sparse.csr_array(rank_one_world(args.users, 400, 80, np.random.default_rng(1)).data.train)
        cases.append((f"rank-one world, {args.users:,} users, 400 items", train.nnz / np.prod(train.shape), train))
    print("| rows | density | entries per row | " + " | ".join(f"{m} CPU s" for m in methods) + " |")
    print("|---|---:|---:|" + "---:|" * len(methods))
    with one_blas_thread():
        for name, density, rows in cases:
            times = [cpu_seconds(f, rows) for f in methods.values()]
            print(f"| {name} | {density:.3f} | {rows.nnz / rows.shape[0]:.0f} | "
                  + " | ".join(f"{t:.3f}" for t in times) + " |", flush=True)


if __name__ == "__main__":
    main()
