"""The Dask executor: a client on a scheduler (or on a new local cluster) that really uses the cluster.

* **A deadline.** The client connects in a thread given ``DASK_CONNECT_TIMEOUT`` seconds: an address where
  something else listens (a web server) is refused in one line, never waited on
  (``distributed.Client(address, timeout=...)`` alone can wait for minutes on a reply that is not a Dask frame).
* **Same code everywhere.** Every worker's recaudit and numpy versions are compared with the client's when
  it connects: a mismatch is refused in one line naming the worker (its blocks would be other numbers).
* **The cluster's size.** Tasks in flight: 2 per thread of the cluster's workers (the sum of their
  ``nthreads``, read again every few seconds, so a cluster that scales is followed), at most the scenario's
  ``executor.max_in_flight``. Two per thread keep every thread busy while a finished block travels back.
* **Data once per worker.** :meth:`DaskExecutor.share` sends an object (the audit's job: its population,
  catalogue, mechanism) to every worker once (``Client.scatter(..., broadcast=True)``); tasks name it by
  its future instead of carrying a copy each.
"""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from concurrent.futures import Executor, Future
from typing import Any, Iterator

from recaudit.core.errors import BadInput

#: seconds to reach a Dask scheduler before giving up (whatever listens at the address)
DASK_CONNECT_TIMEOUT = 10


class ExecutorUnavailable(BadInput, RuntimeError):
    """The executor cannot be started or reached (bad address, missing extra, other versions on a worker)."""


def capped(window: int, cap: int | None) -> int:
    """Tasks in flight: ``window``, at most ``cap`` (the scenario's ``executor.max_in_flight``)."""
    return max(1, window if cap is None else min(window, cap))

#: seconds between two reads of the cluster's thread count
RECOUNT_SECONDS = 5.0
#: a local cluster's settings (continual-naive, 2 workers of one thread on 2 loaded cores: 72-76 s of wall with
#: Dask's defaults against 45-47 s for the process pool; 55 s with these). Its workers are forked from this
#: process, whose modules are loaded (spawned, each imported numpy, scipy and recaudit again: 7-9 s before
#: the first block); the workers' stack profiler (every 10 ms) and monitors (every 0.1-0.5 s) sample less;
#: every event loop (workers, scheduler, client) checks its own health every second, not every 20 ms: that
#: check woke each worker 50 times a second and took the GIL from the block computing there (a worker
#: switched context 1,750-2,800 times per block of continual-naive, the pool's 20-75; 150-320 at 1 s), and
#: next to the pool on the same cores Dask spent 13.5 % more CPU on the same blocks, 6.9 % at 1 s.
LOCAL_CLUSTER = {"distributed.worker.multiprocessing-method": "fork",
                 "distributed.worker.profile.enabled": False,
                 "distributed.admin.system-monitor.interval": "2s",
                 "distributed.worker.memory.monitor-interval": "1s",
                 "distributed.admin.tick.interval": "1s"}


def versions() -> dict[str, str]:
    """The versions that decide a block's numbers (run on each worker by the client's check)."""
    from importlib import metadata

    import numpy

    try:
        mine = metadata.version("recaudit")
    except metadata.PackageNotFoundError:  # a source tree that is not installed
        mine = "0+unknown"
    return {"recaudit": mine, "numpy": numpy.__version__}


_BLAS_LIMITED: list[bool] = []  # set in a worker's process by its first task


def on_one_blas_thread(fn, /, *args, **kwargs):
    """A task on a Dask worker: BLAS on one thread in the worker's process (set by its first task, kept), then
    ``fn``. A local cluster's workers are forked from a process whose BLAS already runs its threads (Dask's
    ``OPENBLAS_NUM_THREADS=1`` comes too late for them): two workers of two BLAS threads on two cores spent
    18 % more CPU and 39 % more wall time than the process pool on a 5-minute audit."""
    if not _BLAS_LIMITED:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1, user_api="blas")  # called, not entered: the limit stays for the process's life
        _BLAS_LIMITED.append(True)
    return fn(*args, **kwargs)


class DaskExecutor(Executor):
    """``Client.get_executor()`` with the cluster's window and :meth:`share`."""

    def __init__(self, client, cap: int | None):
        self.client, self.cap = client, cap
        self._inner = client.get_executor()
        self._threads, self._counted = 0, -float("inf")
        self._shared: dict[int, Any] = {}

    @property
    def threads(self) -> int:
        """Threads of the cluster's workers now (read at most every RECOUNT_SECONDS)."""
        if time.monotonic() - self._counted > RECOUNT_SECONDS:
            with contextlib.suppress(Exception):  # a scheduler that blinks keeps the last count
                self._threads = sum(self.client.nthreads().values())
            self._counted = time.monotonic()
        return self._threads

    @property
    def window(self) -> int:
        return capped(2 * max(1, self.threads), self.cap)

    def share(self, value):
        """``value`` on every worker, once: a future tasks may take as an argument in its place (one future for
        the whole value: ``scatter`` alone would split a list, tuple or dict into a future per element)."""
        key = id(value)
        if key not in self._shared:
            self._shared[key] = (value, self.client.scatter([value], broadcast=True, hash=False)[0])
        return self._shared[key][1]

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self._inner.submit(on_one_blas_thread, fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._inner.shutdown(wait=wait)


@contextlib.contextmanager
def dask_executor(address: str | None, workers: int, cap: int | None) -> Iterator[DaskExecutor]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ExecutorUnavailable("the dask executor needs the 'dask' extra: pip install 'recaudit[dask]'") from None
    if address:
        client = _connect(Client, address)
        try:
            check_versions(client, address)
            executor = DaskExecutor(client, cap)
            try:
                yield executor
            except BaseException:
                with contextlib.suppress(Exception):
                    client.cancel(list(client.futures.values()), force=True)
                raise
        finally:
            with contextlib.suppress(Exception):
                client.close(timeout=5)
    else:
        import dask

        with dask.config.set(LOCAL_CLUSTER), LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                          dashboard_address=None) as cluster, Client(cluster) as client:
            yield DaskExecutor(client, cap)


def _connect(Client, address: str):
    """A client on ``address`` within the deadline, or :class:`ExecutorUnavailable` in one line."""
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = Client(address, timeout=max(1, DASK_CONNECT_TIMEOUT - 1), set_as_default=False)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=connect, name="recaudit-dask-connect", daemon=True)
    thread.start()
    thread.join(DASK_CONNECT_TIMEOUT)
    if thread.is_alive():  # something answers, but not as Dask does: the handshake never ends
        raise ExecutorUnavailable(f"executor.address: {address!r} did not answer as a Dask scheduler within "
                                  f"{DASK_CONNECT_TIMEOUT} s (another service listens on that port?)")
    if "error" in box:
        exc = box["error"]
        if _answers(address):  # e.g. a web server that closed at once: its reply read as a Dask frame
            raise ExecutorUnavailable(f"executor.address: {address!r} answers, but not as a Dask scheduler "
                                      "(another service listens on that port?)") from None
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ExecutorUnavailable(f"executor.address: cannot reach the Dask scheduler at {address!r} "
                                  f"({type(exc).__name__}: {first})") from None
    return box["client"]


def check_versions(client, address: str) -> None:
    """Refuse (one line) when a worker runs another recaudit or numpy than this client, or none."""
    mine = versions()
    try:
        theirs = client.run(versions)
    except Exception as exc:  # the function cannot be unpickled there: recaudit is not installed
        raise ExecutorUnavailable(f"executor.address: the workers of {address!r} cannot run recaudit "
                                  f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                                  f"install recaudit {mine['recaudit']} on every worker") from None
    for worker, found in sorted(theirs.items()):
        if found != mine:
            raise ExecutorUnavailable(
                f"executor.address: worker {worker} runs recaudit {found.get('recaudit')} with numpy "
                f"{found.get('numpy')}; this client runs recaudit {mine['recaudit']} with numpy {mine['numpy']}: "
                "install the same versions on every worker (docs/guide/dask.md)")


def _answers(address: str) -> bool:
    """Whether something accepts TCP connections at a ``[scheme://]host:port`` address."""
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
    except (OSError, ValueError):
        return False
    return True
