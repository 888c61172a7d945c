"""Where trial blocks run: in-process, a local process pool, or a Dask cluster.

Every choice is a ``concurrent.futures.Executor``; results never depend on
which one runs them, because each block draws from its own named stream.
"""
from __future__ import annotations

import contextlib
import socket
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from typing import Any, Callable, Hashable, Iterable, Iterator

from mechanisms.errors import BadInput

#: at most this many workers: a pool starts them all, so a typo must not start a million
MAX_WORKERS = 256
#: seconds to reach a Dask scheduler before giving up
DASK_CONNECT_TIMEOUT = 10


class ExecutorUnavailable(BadInput, RuntimeError):
    """The executor cannot be started or reached (bad address, missing extra)."""


class SerialExecutor(Executor):
    """Runs each task at submit time, in this process (the default, and for debugging)."""

    window = 1  # tasks in flight: one, so each is handed back (and saved) before the next runs

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the caller through the future
            future.set_exception(exc)
        return future


@contextlib.contextmanager
def open_executor(kind: str = "serial", workers: int = 2, address: str | None = None) -> Iterator[Executor]:
    """An executor of ``kind``; for Dask, a client on ``address`` or on a new local cluster.

    Raises :class:`ExecutorUnavailable` at once (a Dask address within
    ``DASK_CONNECT_TIMEOUT`` seconds) when it cannot be had. Each executor's
    ``window`` is how many tasks :func:`as_finished` keeps in flight.
    """
    if not 1 <= workers <= MAX_WORKERS:
        raise ExecutorUnavailable(f"workers: must be between 1 and {MAX_WORKERS}, got {workers}")
    if kind == "serial":
        yield SerialExecutor()
    elif kind == "processes":
        with ProcessPoolExecutor(max_workers=workers) as pool:
            pool.window = 2 * workers
            yield pool
    elif kind == "dask":
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ExecutorUnavailable("the dask executor needs the 'dask' extra: pip install 'recaudit[dask]'") \
                from None
        if address:
            try:
                client = Client(address, timeout=DASK_CONNECT_TIMEOUT)
            except Exception as exc:  # OSError, TimeoutError, ValueError for malformed addresses
                if _answers(address):  # e.g. a web server: its reply read as a Dask frame (MemoryError...)
                    raise ExecutorUnavailable(f"executor.address: {address!r} answers, but not as a Dask scheduler "
                                              "(another service listens on that port?)") from None
                raise ExecutorUnavailable(f"executor.address: cannot reach the Dask scheduler at {address!r} "
                                          f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") \
                    from None
            with client:
                executor = client.get_executor()
                executor.window = 2 * workers
                yield executor
        else:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                executor = client.get_executor()
                executor.window = 2 * workers
                yield executor
    else:
        raise ExecutorUnavailable(f"unknown executor {kind!r}; choose serial, processes or dask")


def _answers(address: str) -> bool:
    """Whether something accepts TCP connections at a ``[scheme://]host:port`` address."""
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
    except (OSError, ValueError):
        return False
    return True


def as_finished(executor: Executor, tasks: Iterable[tuple[Hashable, Callable, tuple]]) -> Iterator[tuple[Hashable, Any]]:
    """Run ``(key, fn, args)`` tasks, yielding ``(key, fn(*args))`` as each finishes.

    At most the executor's ``window`` tasks are in flight, so results can be
    saved as they come (the serial executor included) and pending work never
    piles up in memory.
    """
    window = max(1, int(getattr(executor, "window", 8)))
    tasks = iter(tasks)
    pending: dict[Future, Hashable] = {}
    exhausted = False
    while pending or not exhausted:
        while not exhausted and len(pending) < window:
            try:
                key, fn, args = next(tasks)
            except StopIteration:
                exhausted = True
                break
            pending[executor.submit(fn, *args)] = key
        if not pending:
            break
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            key = pending.pop(future)
            try:
                result = future.result()
            except BaseException:
                for other in pending:
                    other.cancel()
                raise
            yield key, result
