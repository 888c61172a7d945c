"""Benchmark: the private FW row's floor (docs/benchmarks.md, "the Gram is the floor").

``./dev bench fw_floor`` (or ``python benchmarks/fw_floor.py --scale 1``) runs the table's ``completion`` row once
while keeping each round's noisy 400 x 400 matrix ``W + N``, then prints, per round: its top eigenvalues, the gap
ratio ``(λ₁ − λ₂)/(λ₁ − λₙ)``, how many products ARPACK (the run's solver: same start vector, tolerance 1e-12)
needs, and how far its vector is from ``eigh``'s; the products' total at one sparse ``Aᵀ(Av)`` each (the row's
baseline, timed here); and the CPU milliseconds of one 4,000 x 400 block's Gram through ``dsyrk``, ``dgemm``,
``ssyrk`` and ``sgemm`` on one BLAS thread. About a minute at scale 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def capture(scale: float) -> tuple[list, float]:
    """The row's noisy matrices, one a round, and its baseline's CPU seconds."""
    from recaudit.mechanisms import frank_wolfe
    from table import row_completion

    kept, solve = [], frank_wolfe.top_eigenpair
    frank_wolfe.top_eigenpair = lambda matrix: (kept.append(matrix.copy()), solve(matrix))[1]
    try:
        result = row_completion(scale)
    finally:
        frank_wolfe.top_eigenpair = solve
    return kept, result["baseline_cpu"]


def arpack(matrix: np.ndarray) -> tuple[np.ndarray, int]:
    """ARPACK's top vector as ``top_eigenpair`` computes it, and how many products it took."""
    from scipy.sparse import linalg

    products = [0]

    def product(x):
        products[0] += 1
        return matrix @ x

    n = matrix.shape[0]
    _, vectors = linalg.eigsh(linalg.LinearOperator(matrix.shape, matvec=product, dtype=float), k=1, which="LA",
                              v0=1.0 + np.arange(n) / n, tol=1e-12)
    v = vectors[:, 0]
    return v * np.sign(v[np.argmax(np.abs(v))]), products[0]


def block_grams(rows: int = 4000, items: int = 400, repeats: int = 15) -> dict[str, float]:
    """CPU ms of one block's Gram (80 % zeros, as the messages), the least of ``repeats``, four ways."""
    from scipy.linalg import blas

    from recaudit.audits.executors import one_blas_thread

    rng = np.random.default_rng(0)
    block = rng.normal(size=(rows, items)) * (rng.random((rows, items)) < 0.2)
    single = block.astype(np.float32)
    c64, c32 = np.zeros((items, items), order="F"), np.zeros((items, items), np.float32, order="F")
    ways = {"dsyrk": lambda: blas.dsyrk(1.0, block.T, beta=1.0, c=c64, trans=0, lower=0, overwrite_c=1),
            "dgemm": lambda: block.T @ block,
            "ssyrk": lambda: blas.ssyrk(1.0, single.T, beta=1.0, c=c32, trans=0, lower=0, overwrite_c=1),
            "sgemm": lambda: single.T @ single}
    out = {}
    with one_blas_thread():
        for name, way in ways.items():
            times = []
            for _ in range(repeats):
                start = time.process_time()
                way()
                times.append(time.process_time() - start)
            out[name] = 1e3 * min(times)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="the row's sizes times this (1: 500k users)")
    args = parser.parse_args(argv)
    matrices, baseline = capture(args.scale)
    print("| round | λ₁ | λ₂ | λₙ | gap ratio | ARPACK products | ARPACK vs eigh (max abs) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    total = 0
    for t, matrix in enumerate(matrices, 1):
        values, vectors = np.linalg.eigh(matrix)
        exact = vectors[:, -1] * np.sign(vectors[np.argmax(np.abs(vectors[:, -1])), -1])
        v, products = arpack(matrix)
        total += products
        print(f"| {t} | {values[-1]:.6g} | {values[-2]:.6g} | {values[0]:.5g} | "
              f"{(values[-1] - values[-2]) / (values[-1] - values[0]):.3g} | {products} | "
              f"{np.abs(v - exact).max():.1e} |")
    print(f"\n{total} products in all: {total * baseline:.1f} s at the baseline's {baseline:.4f} s each")
    print("one 4,000 x 400 block's Gram, CPU ms: "
          + ", ".join(f"{name} {ms:.1f}" for name, ms in block_grams().items()))


if __name__ == "__main__":
    main()
