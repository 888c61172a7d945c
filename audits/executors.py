"""Where trial blocks run: in-process, a local process pool, or a Dask cluster.

Every choice is a ``concurrent.futures.Executor``; results never depend on
which one runs them, because each block draws from its own named stream.
"""
from __future__ import annotations

import contextlib
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Iterator


class _Deferred(Future):
    """A future that runs its task when its result is first asked for (serial progress advances per task)."""

    def __init__(self, fn, args, kwargs):
        super().__init__()
        self._call = (fn, args, kwargs)

    def _run(self) -> None:
        if self._call is None:
            return
        fn, args, kwargs = self._call
        self._call = None
        try:
            self.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller through the future
            self.set_exception(exc)

    def result(self, timeout=None):
        self._run()
        return super().result(timeout)

    def exception(self, timeout=None):
        self._run()
        return super().exception(timeout)


class SerialExecutor(Executor):
    """Runs each task in this process when its result is asked for (the default, and for debugging)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return _Deferred(fn, args, kwargs)


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
