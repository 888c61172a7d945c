"""Where trial blocks run: in-process, a local process pool, or a Dask cluster.

Every choice is a ``concurrent.futures.Executor``; results never depend on
which one runs them, because each block draws from its own named stream.

A run computes with BLAS on one thread (:func:`one_blas_thread`), in this
process and in a pool's workers: its matrices are small (eigen-solves of
items x items, batched products of a few users), and OpenBLAS's own threads
cost more in waking and spinning than they save; the parallelism is the
executor's workers. A local Dask cluster's workers already start with
``OPENBLAS_NUM_THREADS=1`` (Dask's default).
"""
from __future__ import annotations

import contextlib
import functools
import socket
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from typing import Any, Callable, Hashable, Iterable, Iterator

from recaudit.core.errors import BadInput

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
def open_executor(executor_type: str = "serial", workers: int = 2, address: str | None = None) -> Iterator[Executor]:
    """An executor of ``executor_type`` (serial, processes, dask); for Dask, a client on ``address`` or on a new local
    cluster.

    Raises :class:`ExecutorUnavailable` at once (a Dask address within
    ``DASK_CONNECT_TIMEOUT`` seconds) when it cannot be had. Each executor's
    ``window`` is how many tasks :func:`as_finished` keeps in flight.
    """
    if not 1 <= workers <= MAX_WORKERS:
        raise ExecutorUnavailable(f"workers: must be between 1 and {MAX_WORKERS}, got {workers}")
    if executor_type == "serial":
        with one_blas_thread():
            yield SerialExecutor()
    elif executor_type == "processes":
        with one_blas_thread(), ProcessPoolExecutor(max_workers=workers, initializer=_blas_on_one_thread) as pool:
            pool.window = 2 * workers
            yield pool
    elif executor_type == "dask":
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
        raise ExecutorUnavailable(f"unknown executor {executor_type!r}; choose serial, processes or dask")


@functools.cache
def _blas():
    """The BLAS libraries loaded (numpy's and scipy's OpenBLAS), found once: finding them costs ~3 ms."""
    import scipy.linalg  # noqa: F401  (loads scipy's BLAS, so that it is found too)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS on one thread inside the block, as it was after.

    Measured on 2 loaded cores (CPU per call, default 2 threads vs 1): ``eigh`` of 60 x 60 7.9 vs 0.44 ms,
    of 200 x 200 216 vs 4.2 ms, of 100 batched 60 x 60 1.85 s vs 39 ms; a 400 x 400 product 16 vs 2.8 ms
    (wall 61 vs 14 ms). The reports and scores of quickstart, frank-wolfe, matrix-completion-utility,
    xin-jaakkola and pairwise-preference are byte for byte those of two threads (timing aside).
    """
    with _blas().limit(limits=1):
        yield


def _blas_on_one_thread() -> None:
    """A pool worker's initializer: BLAS on one thread for the worker's life."""
    _blas().limit(limits=1)


def _answers(address: str) -> bool:
    """Whether something accepts TCP connections at a ``[scheme://]host:port`` address."""
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
    except (OSError, ValueError):
        return False
    return True


def as_finished(executor: Executor,
                tasks: Iterable[tuple[Hashable, Callable, tuple]]) -> Iterator[tuple[Hashable, Any]]:
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
            try:
                yield key, result
            except GeneratorExit:  # the caller stopped early (a sequential audit): drop what is still pending
                for other in pending:
                    other.cancel()
                raise
