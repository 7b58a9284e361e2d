"""Waking idle runners and relays: in-process events, and LISTEN/NOTIFY across processes.

A waiter registers what it wants before it looks at the table, so work stored between the look
and the wait still wakes it (``Waiters``). On PostgreSQL a store also tells other processes
(``PostgresWakeups``), with one policy for the job store and the outbox store:

* **After commit, never inside it.** PostgreSQL takes a database-wide lock when a transaction
  that notified commits, so notifying transactions commit one at a time (measured here: 10
  concurrent producers fell from 5,000 to 1,500 enqueues/s, and an app's outbox transactions to
  a third). The NOTIFY is sent once the enqueue or the app's transaction has committed.
* **On the store's own connection, coalesced.** At most one NOTIFY is in flight per store, and
  one starts at most every ``NOTIFY_SPACING_S``; what comes in meanwhile is folded into the
  next, so a burst costs a handful of notifications (an idle store's first one goes at once;
  under load a NOTIFY per commit would double the transactions: measured, 20 producers
  committing an outbox entry each ran at 0.5-0.7 of the rate without the entry, 0.8-0.9 with
  no NOTIFY at all). It
  runs on a pooled connection as one round trip, ``BEGIN; SET LOCAL synchronous_commit TO off;
  SELECT pg_notify(...); COMMIT`` (a notification has nothing to keep on disk, and ``SET
  LOCAL`` ends with its transaction: nothing outlives it on a pooler's server connection).
* **Best effort.** If the process dies between a commit and its notification, or a NOTIFY
  fails, other processes find the work by polling (``poll_interval_ms``).

Each notification carries its store's origin (``<origin>:<detail>``), so the store's own
listener skips what already woke its waiters in-process; and hears it: a store that listens
expects its own notifications back, and one not back within ``ECHO_TIMEOUT_S`` means wake-up is
broken while work is claimable (something between the store and PostgreSQL drops
notifications): that is logged, once per outage, and waiters keep polling.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Collection, Iterable

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

from .connections import PostgresBackend
from .listener import PostgresListener

__all__ = ["ECHO_TIMEOUT_S", "NOTIFY_SPACING_S", "PostgresWakeups", "Waiters", "notify_script"]

NOTIFY_SPACING_S = 0.010
"""At most one NOTIFY per store starts within this long of the previous one."""

ECHO_TIMEOUT_S = 2.0
"""A store's own notification not heard back within this long: wake-up is not working."""


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


def notify_script(channel: str, payloads: Iterable[str]) -> str:
    """One simple-query round trip that NOTIFYs ``payloads`` without waiting for an fsync."""
    calls = ", ".join(f"pg_notify({_literal(channel)}, {_literal(p)})" for p in payloads)
    return f"BEGIN; SET LOCAL synchronous_commit TO off; SELECT {calls}; COMMIT"


def _literal(text: str) -> str:
    """An escape-string literal: read the same whatever ``standard_conforming_strings`` is."""
    return "E'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class PostgresWakeups:
    """NOTIFY after this store's commits and LISTEN for everyone's, on one channel.

    ``on_wake(detail)`` is called for another store's notification (``detail`` as announced,
    None when empty) and with None when the LISTEN connection was lost. ``listen_engine``
    (from ``listen_url``: a direct connection past a pooler) is the engine LISTEN connects
    with, as given; without one, LISTEN uses the store's engine unless that is pooled.
    """

    def __init__(
        self,
        backend: PostgresBackend,
        *,
        listen_engine: AsyncEngine | None,
        channel: str,
        name: str,
        on_wake: Callable[[str | None], None],
    ) -> None:
        self._backend = backend
        self._channel = channel
        self._name = name
        self._on_wake = on_wake
        self._origin = uuid.uuid4().hex
        self._listener = PostgresListener(
            listen_engine or backend.engine,
            channel,
            self._notified,
            name=name,
            check_pooler=listen_engine is None,
        )
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._last_sent = 0.0
        self._unheard_since: float | None = None
        self._warned = False

    @property
    def listening(self) -> bool:
        return self._listener.listening

    def announce(self, detail: str = "") -> None:
        """Tell other processes' stores (call it once the change committed)."""
        self._pending.add(detail)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._send(), name=f"{self._name} notifications")

    async def listen(self) -> bool:
        """Be listening (see ``PostgresListener.ensure``); True if the connection was
        (re)opened, when a notification may have been missed. Also reports, once, a store
        whose own notifications stopped coming back."""
        reopened = await self._listener.ensure()
        if reopened:
            self._unheard_since = None
        self._check_echo()
        return reopened

    async def close(self) -> None:
        """Let the notification in flight (one round trip) finish; stop listening."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        await self._listener.close()

    async def _send(self) -> None:
        while self._pending:
            pause = self._last_sent + NOTIFY_SPACING_S - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            self._last_sent = time.monotonic()
            details, self._pending = sorted(self._pending), set()
            started = self._unheard_since is None and self._listener.listening
            if started:
                self._unheard_since = time.monotonic()
            script = notify_script(self._channel, (f"{self._origin}:{d}" for d in details))
            try:
                await self._backend.execute_script(script)
            except Exception as exc:
                if started:
                    self._unheard_since = None
                logger.warning(
                    "{} could not notify listeners (they will poll): {}", self._name, exc
                )

    def _notified(self, payload: str | None) -> None:
        if payload is None:
            self._on_wake(None)
            return
        origin, _, detail = payload.partition(":")
        if origin == self._origin:  # ours: our waiters were woken in-process already
            self._unheard_since = None
            self._warned = False
            return
        self._on_wake(detail or None)

    def _check_echo(self) -> None:
        since = self._unheard_since
        if since is None or self._warned or not self._listener.listening:
            return
        waited = time.monotonic() - since
        if waited > ECHO_TIMEOUT_S:
            self._warned = True
            logger.warning(
                "{}: a wake-up notification sent {:.1f} s ago has not come back on the LISTEN "
                "connection while work is claimable; something between the store and "
                "PostgreSQL drops notifications. Waiters poll (poll_interval_ms) meanwhile",
                self._name,
                waited,
            )
