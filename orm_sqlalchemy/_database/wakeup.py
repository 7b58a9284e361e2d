"""Waking idle runners: in-process events, and LISTEN/NOTIFY across processes on PostgreSQL.

A waiter registers the job types it wants before it looks at the table, so a job stored between
the look and the wait still wakes it. On PostgreSQL, after an enqueue or retry commits, the
store sends ``pg_notify(channel, type)``; one dedicated connection per store LISTENs and wakes
the waiters whose types match.

The notification is its own statement, not part of the enqueue: PostgreSQL takes a
database-wide lock when a transaction that notified commits, so notifying transactions commit
one at a time (measured here: 10 concurrent producers fell from 5,000 to 1,500 enqueues/s).
``Notifier`` keeps at most one notification in flight per store and folds the types that come
in meanwhile into the next, so a burst of enqueues costs a handful of notifications. If the
process dies between a commit and its notification, other runners find the job by polling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection

from loguru import logger

__all__ = ["Notifier", "Waiters"]


class Waiters:
    """The idle waiters of one store, each with the job types it waits for."""

    def __init__(self) -> None:
        self._waiting: dict[asyncio.Event, frozenset[str]] = {}

    def register(self, types: Collection[str]) -> asyncio.Event:
        event = asyncio.Event()
        self._waiting[event] = frozenset(types)
        return event

    def unregister(self, event: asyncio.Event) -> None:
        self._waiting.pop(event, None)

    def wake(self, job_type: str | None = None) -> None:
        """Wake the waiters for ``job_type``; every waiter when it is None."""
        for event, types in self._waiting.items():
            if job_type is None or job_type in types:
                event.set()


class Notifier:
    """Sends wake-ups for job types through ``send``, one batch in flight at a time."""

    def __init__(self, send: Callable[[list[str]], Awaitable[object]], name: str) -> None:
        self._send = send
        self._name = name
        self._types: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def notify(self, job_type: str) -> None:
        self._types.add(job_type)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"{self._name} notifications")

    async def close(self) -> None:
        """Let the notification in flight (one round trip) finish."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while self._types:
            types, self._types = sorted(self._types), set()
            try:
                await self._send(types)
            except Exception as exc:
                logger.warning(
                    "{} could not notify listeners (they will poll): {}", self._name, exc
                )
