"""BLAS threads on the project's matrix sizes: OpenBLAS's default threads against one (issue 20).

``python benchmarks/blas_threads.py`` times, in three child processes (BLAS at its default threads,
``OPENBLAS_NUM_THREADS=1``, and ``recaudit.audits.executors.one_blas_thread``, what a run uses), the linear
algebra of the hot paths: eigen-solves of items x items (matrix completion, McSherry–Mironov), batched
eigen-solves and products over runs (``frank_wolfe_runs``, ``projected_gradient_runs``), Lanczos for
one eigenpair, small Gram products. It prints CPU and wall milliseconds per call for each.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {"default": {}, "OPENBLAS_NUM_THREADS=1": {"OPENBLAS_NUM_THREADS": "1"}, "one_blas_thread": {}}


def cases() -> dict:
    import numpy as np
    from scipy.sparse import linalg as sparse_linalg

    rng = np.random.default_rng(0)

    def sym(*shape):
        a = rng.normal(size=shape)
        return a + np.swapaxes(a, -1, -2)

    m60, m200, m400, b10, b60 = sym(60, 60), sym(200, 200), sym(400, 400), sym(1000, 10, 10), sym(100, 60, 60)
    runs, rows, tall, narrow = rng.normal(size=(200, 50, 20)), rng.normal(size=(2000, 60)), \
        rng.normal(size=(40_000, 400)), rng.normal(size=(400, 5))
    return {  # name: (call, repetitions)
        "eigh 60 x 60": (lambda: np.linalg.eigh(m60), 300),
        "eigh 200 x 200": (lambda: np.linalg.eigh(m200), 30),
        "eigh 400 x 400": (lambda: np.linalg.eigh(m400), 8),
        "eigsh 400 x 400, k = 1": (lambda: sparse_linalg.eigsh(m400, k=1, which="LA", v0=np.ones(400), tol=1e-12),
                                   20),
        "eigh 1000 x (10 x 10)": (lambda: np.linalg.eigh(b10), 100),
        "eigh 100 x (60 x 60)": (lambda: np.linalg.eigh(b60), 5),
        "200 x (20 x 50 @ 50 x 20)": (lambda: np.swapaxes(runs, 1, 2) @ runs, 200),
        "Gram 2000 x 60": (lambda: rows.T @ rows, 300),
        "40000 x 400 @ 400 x 5": (lambda: tall @ narrow, 20),
        "400 x 400 @ 400 x 400": (lambda: m400 @ m400, 30),
    }


def child(mode: str) -> None:
    import contextlib

    from recaudit.audits.executors import one_blas_thread

    with one_blas_thread() if mode == "one_blas_thread" else contextlib.nullcontext():
        for name, (call, reps) in cases().items():
            call()
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(reps):
                call()
            cpu, wall = (time.process_time() - cpu) / reps, (time.perf_counter() - wall) / reps
            print(f"{mode:24s} {name:28s} CPU {1e3 * cpu:9.3f} ms   wall {1e3 * wall:9.3f} ms", flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2])
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    for mode, env in MODES.items():
        subprocess.run([sys.executable, __file__, "--child", mode], check=True, cwd=ROOT,
                       env=os.environ | env | {"PYTHONPATH": str(ROOT)})


if __name__ == "__main__":
    main()
