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
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from typing import Any, Callable, Hashable, Iterable, Iterator

# the Dask executor's module holds what both use: the refusal, the deadline, the cap on tasks in flight
from .dask_cluster import DASK_CONNECT_TIMEOUT, ExecutorUnavailable, capped as _capped, dask_executor  # noqa: F401


#: at most this many workers: a pool starts them all, so a typo must not start a million
MAX_WORKERS = 256
#: exit codes of a run stopped by Ctrl-C (SIGINT) and by SIGTERM (128 + the signal, as a shell reports them)
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143
_signalled: list[int] = []  # SIGTERM seen by on_terminate's handler


def on_terminate(restore=None):
    """SIGTERM unwinds the main thread as Ctrl-C does (``KeyboardInterrupt``: the executor stops its workers,
    saved blocks stay; :func:`terminated` then says it was SIGTERM). Returns the handler it replaced (None off
    the main thread); ``on_terminate(previous)`` puts that one back."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if restore is not None:
        return signal.signal(signal.SIGTERM, restore)
    _signalled.clear()

    def terminate(signum, frame):
        _signalled.append(signum)
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, terminate)


def terminated() -> bool:
    """Whether the last interruption was SIGTERM (see :func:`on_terminate`)."""
    return bool(_signalled)


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
def open_executor(executor_type: str = "serial", workers: int = 2, address: str | None = None,
                  max_in_flight: int | None = None) -> Iterator[Executor]:
    """An executor of ``executor_type`` (serial, processes, dask); for Dask, a client on ``address`` or on a new local
    cluster.

    Raises :class:`ExecutorUnavailable` at once (a Dask address within
    ``DASK_CONNECT_TIMEOUT`` seconds, whatever answers there) when it cannot
    be had, or when a Dask worker runs other versions of recaudit or numpy.
    Each executor's ``window`` is how many tasks :func:`as_finished` keeps in
    flight: 2 per worker process (:class:`ProcessPool`, which sends a job once
    per worker), 2 per thread of a Dask cluster's workers
    (followed as the cluster grows or shrinks), at most ``max_in_flight``.
    Leaving the block by an exception (Ctrl-C, SIGTERM) stops the workers at
    once: queued tasks are cancelled and running ones killed (their blocks
    are recomputed on ``--resume``).
    """
    if not 1 <= workers <= MAX_WORKERS:
        raise ExecutorUnavailable(f"workers: must be between 1 and {MAX_WORKERS}, got {workers}")
    if executor_type == "serial":
        with one_blas_thread():
            yield SerialExecutor()
    elif executor_type == "processes":
        with one_blas_thread():
            pool = ProcessPool(workers, _capped(2 * workers, max_in_flight))
            try:
                yield pool
            except BaseException:
                pool.stop()
                raise
            pool.shutdown(wait=True)
    elif executor_type == "dask":
        with one_blas_thread(), dask_executor(address, workers, max_in_flight) as executor:
            yield executor
    else:
        raise ExecutorUnavailable(f"unknown executor {executor_type!r}; choose serial, processes or dask")


class Shared:
    """A value :meth:`ProcessPool.share` gave every worker once, named in a task's arguments by its key."""

    __slots__ = ("key",)

    def __init__(self, key: int):
        self.key = key

    def __reduce__(self):
        return Shared, (self.key,)


#: a pool worker's shared values (:meth:`ProcessPool.share`), by key, set by its initializer
_SHARED: dict[int, Any] = {}


class ProcessPool(Executor):
    """A local process pool whose workers receive the values of :meth:`share` (the audit's job) once each.

    ``concurrent.futures.ProcessPoolExecutor`` pickles a task's arguments with every task: a job of a large
    population went once per block. Here the workers start at the first ``submit`` with every value shared
    so far in their initializer's arguments (inherited through ``fork``, not pickled at all; pickled once
    per worker under ``spawn``), and a task names each by a :class:`Shared` key. A value shared after the
    workers started goes with each task, as before.
    """

    def __init__(self, workers: int, window: int):
        self.workers, self.window = workers, window
        self._pool: ProcessPoolExecutor | None = None
        self._shared: dict[int, Any] = {}

    def share(self, value):
        """What a task takes in ``value``'s place: a :class:`Shared` key (``value`` itself once started)."""
        key = id(value)
        if key in self._shared:
            return Shared(key)
        if self._pool is not None:
            return value
        self._shared[key] = value  # kept alive (and its id unique) while the pool lives
        return Shared(key)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, initializer=_worker_start,
                                             initargs=(os.getpid(), self._shared))
        if any(isinstance(a, Shared) for a in args):
            return self._pool.submit(_with_shared, fn, args, kwargs)
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def stop(self) -> None:
        """Stop the workers now (:func:`_stop_pool`)."""
        if self._pool is not None:
            _stop_pool(self._pool)


def _with_shared(fn, args: tuple, kwargs: dict):
    """In a pool worker: ``fn(*args, **kwargs)`` with each :class:`Shared` argument replaced by its value."""
    return fn(*(_SHARED[a.key] if isinstance(a, Shared) else a for a in args), **kwargs)


def _stop_pool(pool: ProcessPoolExecutor, grace: float = 3.0) -> None:
    """Stop a process pool now: queued tasks cancelled, workers sent SIGTERM, those alive after ``grace``
    seconds SIGKILL (the default shutdown waits for every queued block)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)  # (shutdown forgets them)
    manager = getattr(pool, "_executor_manager_thread", None)
    with contextlib.suppress(Exception):  # a task half-written into the queue's pipe must not hold the exit
        pool._call_queue.cancel_join_thread()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)
    # a worker killed while writing its result leaves half a message in the result pipe, and the pool's
    # manager thread (which the interpreter joins at exit) waits for the rest forever: with every worker gone,
    # closing this process's end of the pipe's writing side gives it an end of file, which it reads as a
    # broken pool, and it ends
    with contextlib.suppress(Exception):
        results._writer.close()
    if manager is not None:
        manager.join(2.0)


def _worker_start(parent: int, shared: dict[int, Any] | None = None) -> None:
    """A pool worker's initializer: the pool's shared values (:class:`ProcessPool`); BLAS on one thread; it
    dies with its parent (Linux: the kernel sends it SIGKILL, ``PR_SET_PDEATHSIG``; elsewhere a thread polls
    the parent's pid every second); Ctrl-C on the terminal goes to the parent only (which stops the pool),
    SIGTERM kills it at once."""
    _SHARED.update(shared or {})
    _blas().limit(limits=1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """Make this process end when ``parent`` does (see :func:`_worker_start`)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="recaudit-parent-watch", daemon=True).start()


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
    """BLAS on one thread for the rest of this process's life (a worker's start)."""
    _blas().limit(limits=1)


def as_finished(executor: Executor,
                tasks: Iterable[tuple[Hashable, Callable, tuple]]) -> Iterator[tuple[Hashable, Any]]:
    """Run ``(key, fn, args)`` tasks, yielding ``(key, fn(*args))`` as each finishes.

    At most the executor's ``window`` tasks are in flight, so results can be
    saved as they come (the serial executor included) and pending work never
    piles up in memory.
    """
    tasks = iter(tasks)
    pending: dict[Future, Hashable] = {}
    exhausted = False
    while pending or not exhausted:
        window = max(1, int(getattr(executor, "window", 8)))  # read each time: a Dask cluster's follows its size
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
