"""Where trial blocks run: in-process, a local process pool, or a Dask cluster.

Every choice is a ``concurrent.futures.Executor``; results never depend on
which one runs them, because each block draws from its own named stream.
"""
from __future__ import annotations

import contextlib
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Iterator


class SerialExecutor(Executor):
    """Runs each task at submit time, in this process (the default, and for debugging)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller through the future
            future.set_exception(exc)
        return future


@contextlib.contextmanager
def open_executor(kind: str = "serial", workers: int = 2, address: str | None = None) -> Iterator[Executor]:
    """An executor of ``kind``; for Dask, a client on ``address`` or on a new local cluster."""
    if kind == "serial":
        yield SerialExecutor()
    elif kind == "processes":
        with ProcessPoolExecutor(max_workers=workers) as pool:
            yield pool
    elif kind == "dask":
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise RuntimeError("the dask executor needs the 'dask' extra: pip install 'recaudit[dask]'") from exc
        if address:
            with Client(address) as client:
                yield client.get_executor()
        else:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                yield client.get_executor()
    else:
        raise ValueError(f"unknown executor {kind!r}; choose serial, processes or dask")
