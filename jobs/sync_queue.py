"""SyncJobQueue: ``JobQueue`` for code with no event loop (Flask views, scripts, threads).

Every call runs ``JobQueue``'s own coroutine on an event loop and waits for it: the same checks,
span, metrics and driver call, so nothing differs but the waiting. The loop is a private one
in a daemon thread of the queue's (made from a driver or a URL, or ``JobQueue.sync()`` where no
loop runs), or the running loop ``JobQueue.sync()`` was called on (a FastAPI app: its sync
routes run in threads and hand their calls to the app's loop, where the driver's connections
live). Calls from many threads at once run concurrently on that loop, as concurrent tasks of
an async app would. A call runs in a copy of the caller's context (``contextvars``), so the
job's PRODUCER span is a child of the caller's current span, as with ``await queue.enqueue``.

A driver's connections belong to the loop they were opened on: hand a SyncJobQueue a driver
that has not run on another loop (a new one, or a URL), or call ``JobQueue.sync()`` on the
queue's own loop.

Measured: what a call adds to the async enqueue is one hand-over to the loop's thread and one
back (``call_soon_threadsafe``, a lock released), tens of microseconds; see the benchmark's
"Sync enqueue" rows.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from pydantic import BaseModel

from .audit import Actor
from .definitions import JobDefinition
from .new_job import NewJob
from .queue import JobQueue
from .settings import JobsSettings
from .spi.driver import JobDriver
from .spi.records import JobInfo, JobPage, JobTypeStats, QueueStats, WorkerInfo
from .urls import driver_from_url

if TYPE_CHECKING:
    from .handlers import JobHandlerRegistry

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

__all__ = ["SyncJobQueue"]


class SyncJobQueue:
    """A job queue for sync code: ``enqueue``, ``enqueue_many``, ``get_job`` and the
    operations of ``JobQueue``, as plain calls, safe from any number of threads.

    ``driver`` is a ``JobDriver`` (the queue closes it on ``close()``), a URL
    (``sqlite+aiosqlite:///jobs.db``, ``postgresql://...``, ``redis://...``: the driver the
    ``neverlost`` command line opens for ``--url``, with ``namespace``/``table_prefix``), or a
    ``JobQueue`` (borrowed, as ``JobQueue.sync()`` makes it). ``close()`` (or leaving a
    ``with`` block) closes what the queue owns and stops its thread; idempotent.
    """

    def __init__(
        self,
        driver: JobDriver | JobQueue | str,
        *,
        settings: JobsSettings | None = None,
        registry: JobHandlerRegistry | None = None,
        namespace: str | None = None,
        table_prefix: str | None = None,
    ) -> None:
        loop: asyncio.AbstractEventLoop | None = None
        if isinstance(driver, JobQueue):
            self._queue, self._owns_driver = driver, False
            loop = _running_loop()
        else:
            if isinstance(driver, str):
                driver = driver_from_url(
                    driver, namespace=namespace, table_prefix=table_prefix, owner="SyncJobQueue"
                )
            self._queue = JobQueue(driver, settings=settings, registry=registry)
            self._owns_driver = True
        self._owns_loop = loop is None
        self._loop = loop if loop is not None else asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)
        if self._owns_loop:
            started = threading.Event()
            self._thread = threading.Thread(
                target=self._serve, args=(started,), name="neverlost SyncJobQueue", daemon=True
            )
            self._thread.start()
            started.wait()

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(started.set)
        self._loop.run_forever()

    @property
    def queue(self) -> JobQueue:
        """The async queue the calls run on (use it only on its loop)."""
        return self._queue

    @property
    def driver(self) -> JobDriver:
        return self._queue.driver

    # -- producing -----------------------------------------------------------------------------

    @overload
    def enqueue(
        self,
        type_or_definition: JobDefinition[M],
        payload: M | Mapping[str, Any],
        *,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        key: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    @overload
    def enqueue(
        self,
        type_or_definition: str,
        payload: Any = None,
        *,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        key: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None: ...

    def enqueue(
        self,
        type_or_definition: str | JobDefinition[Any],
        payload: Any = None,
        *,
        delay_ms: int | None = None,
        run_at: datetime | None = None,
        max_attempts: int | None = None,
        timeout_ms: int | None = None,
        key: str | None = None,
        priority: int | None = None,
        queue: str | None = None,
    ) -> str | None:
        """``JobQueue.enqueue``: the job's id, or None when a live job holds ``key``."""
        return self._call(
            self._queue.enqueue,
            type_or_definition,
            payload,
            delay_ms=delay_ms,
            run_at=run_at,
            max_attempts=max_attempts,
            timeout_ms=timeout_ms,
            key=key,
            priority=priority,
            queue=queue,
        )

    def enqueue_many(self, jobs: Iterable[NewJob]) -> list[str | None]:
        """``JobQueue.enqueue_many``: one driver call for the batch."""
        return self._call(self._queue.enqueue_many, list(jobs))

    # -- reading and operating -----------------------------------------------------------------

    def get_job(self, job_id: str) -> JobInfo | None:
        return self._call(self._queue.get_job, job_id)

    def find_job(self, *, key: str) -> JobInfo | None:
        return self._call(self._queue.find_job, key=key)

    def list_jobs(
        self,
        *,
        state: str | None = None,
        type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        return self._call(
            self._queue.list_jobs, state=state, type=type, limit=limit, cursor=cursor, queue=queue
        )

    def stats(self) -> dict[str, JobTypeStats]:
        return self._call(self._queue.stats)

    def queue_stats(self) -> dict[str, QueueStats]:
        return self._call(self._queue.queue_stats)

    def workers(self) -> list[WorkerInfo]:
        return self._call(self._queue.workers)

    # ``actor``: who acts, for the store's audit trail (``jobs.audit``), as on JobQueue.

    def retry(self, job_id: str, *, actor: Actor | None = None) -> bool:
        return self._call(self._queue.retry, job_id, actor=actor)

    def retry_failed(self, type: str | None = None, *, actor: Actor | None = None) -> int:
        return self._call(self._queue.retry_failed, type, actor=actor)

    def cancel(self, job_id: str, *, actor: Actor | None = None) -> bool:
        return self._call(self._queue.cancel, job_id, actor=actor)

    def delete(self, job_id: str, *, actor: Actor | None = None) -> bool:
        return self._call(self._queue.delete, job_id, actor=actor)

    def purge(
        self,
        states: Iterable[str] = ("completed",),
        type: str | None = None,
        older_than_ms: int | None = None,
        *,
        actor: Actor | None = None,
    ) -> int:
        return self._call(self._queue.purge, list(states), type, older_than_ms, actor=actor)

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the driver the queue owns (a driver or URL given to it), then stop its loop
        and join its thread. Idempotent; a call after it raises RuntimeError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._in_flight:  # calls already handed over finish first
                self._idle.wait()
        try:
            if self._owns_driver:
                self._wait(self._queue.driver.close)
        finally:
            if self._owns_loop:
                self._loop.call_soon_threadsafe(self._loop.stop)
                if self._thread is not None:
                    self._thread.join()
                self._loop.close()

    def __enter__(self) -> SyncJobQueue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SyncJobQueue({self._queue.driver!r})"

    # -- the hand-over ---------------------------------------------------------------------------

    def _call(
        self, method: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any
    ) -> T:
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            self._in_flight += 1
        try:
            return self._wait(method, *args, **kwargs)
        finally:
            with self._lock:
                self._in_flight -= 1
                if not self._in_flight:
                    self._idle.notify_all()

    def _wait(
        self, method: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any
    ) -> T:
        """Run ``method(*args, **kwargs)`` on the loop, in a copy of the caller's context, and
        wait for its result (or exception)."""
        loop = self._loop
        if _running_loop() is loop:
            raise RuntimeError(
                "SyncJobQueue called on its own event loop, which would wait for itself: "
                "in async code await the JobQueue (sync_queue.queue) instead"
            )
        context = contextvars.copy_context()
        done = threading.Lock()
        done.acquire()
        outcome: list[asyncio.Task[T] | BaseException] = []

        def start() -> None:
            try:
                task = loop.create_task(method(*args, **kwargs), context=context)
            except BaseException as exc:
                outcome.append(exc)
                done.release()
                return
            outcome.append(task)
            task.add_done_callback(lambda _task: done.release())

        loop.call_soon_threadsafe(start)
        done.acquire()
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result.result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None

