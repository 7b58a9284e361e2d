"""LISTEN on a PostgreSQL channel over a connection of its own (job store and outbox wake-ups).

Channel names are derived from table names by a hash (see ``tables``), never from raw user
text.

LISTEN is session state: behind a pooler in transaction mode (PgBouncer's most common set-up)
the registration would stay on whichever server connection ran it, which the pooler then hands
to other clients, while this client hears nothing. So before it listens the listener checks
that its connection reaches a PostgreSQL backend directly: a backend announces its pid in the
connection's start-up (BackendKeyData) and a pooler announces one of its own making, so the
pid asyncpg was told and ``pg_backend_pid()`` agree only on a direct connection (measured on
PgBouncer 1.18; a pid guessed by a chance-in-four-billion coincidence aside). Behind a pooler
it does not LISTEN: it says so once in the log and the store's waiters poll, unless the store
was given a ``listen_url``, whose connection is used as given (a direct one, or a pooler in
session mode, where LISTEN works).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

__all__ = ["PostgresListener", "listen_engine"]

def listen_engine(listen_url: str | None, *, postgres: bool, store: str) -> AsyncEngine | None:
    """The engine for ``listen_url`` (no pool: it opens one connection, held until close), or
    None without one; ValueError for a ``listen_url`` given to a store that is not on
    PostgreSQL or that is not a PostgreSQL URL."""
    if listen_url is None:
        return None
    from ..engine import create_engine

    if not postgres:
        raise ValueError(f"{store}: listen_url is for PostgreSQL stores (LISTEN/NOTIFY)")
    engine = create_engine(listen_url, poolclass=NullPool)
    if engine.dialect.name != "postgresql":
        raise ValueError(
            f"{store}: listen_url must be a PostgreSQL URL (postgresql://...), "
            f"not {engine.url.drivername}"
        )
    return engine


class PostgresListener:
    """LISTEN on one channel over a dedicated connection, made by ``engine`` and detached.

    The connection is opened in a task of its own, so a waiter cancelled meanwhile does not
    abort it half-way. ``on_notify`` gets each notification's payload, and None when the
    connection was lost (every waiter should look again: a notification may have been missed);
    the next ``ensure()`` opens it again. ``pooled`` turns True, for good, once the engine is
    found to reach PostgreSQL through a pooler (``check_pooler=False``: the engine is trusted
    to give LISTEN a session, as a ``listen_url`` is).
    """

    def __init__(
        self,
        engine: AsyncEngine,
        channel: str,
        on_notify: Callable[[str | None], None],
        *,
        name: str,
        check_pooler: bool = True,
    ) -> None:
        self._engine = engine
        self._check_pooler = check_pooler
        self._channel = channel
        self._on_notify = on_notify
        self._name = name
        self._connection: Any = None
        self._connecting: asyncio.Task[None] | None = None
        self.pooled = False

    @property
    def listening(self) -> bool:
        return self._connection is not None and not self._connection.is_closed()

    async def ensure(self) -> bool:
        """Be listening: open the connection and LISTEN unless that is done already (or the
        engine is pooled, when it does nothing).

        True when this call (re)opened the connection: a notification sent while there was
        none may have been missed. Raises what opening the connection raised.
        """
        if self.pooled or self.listening:
            return False
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.create_task(self._connect(), name="LISTEN connection")
            self._connecting.add_done_callback(_retrieve)
        await asyncio.shield(self._connecting)
        return self.listening

    async def close(self) -> None:
        if self._connecting is not None:
            await asyncio.gather(self._connecting, return_exceptions=True)
        connection, self._connection = self._connection, None
        if connection is None or connection.is_closed():
            return
        connection.remove_termination_listener(self._terminated)
        try:
            await connection.close(timeout=2)
        except Exception as exc:  # the connection is going anyway
            logger.debug("listener on {} closed uncleanly: {}", self._channel, exc)
            connection.terminate()

    async def _connect(self) -> None:
        raw = await self._engine.raw_connection()
        connection: Any = raw.driver_connection
        raw.detach()
        try:
            if await self._behind_pooler(connection):
                self.pooled = True
                logger.warning(
                    "{} reaches PostgreSQL through a pooler in transaction mode, where LISTEN "
                    "cannot work: wake-up falls back to polling (poll_interval_ms). Pass "
                    "listen_url= a direct connection to PostgreSQL (or, for a pooler in "
                    "session mode, the same URL) to wake runners at once",
                    self._name,
                )
                await connection.close(timeout=2)
                return
            await connection.add_listener(self._channel, self._notified)
        except BaseException:
            connection.terminate()
            raise
        connection.add_termination_listener(self._terminated)
        self._connection = connection

    async def _behind_pooler(self, connection: Any) -> bool:
        if not self._check_pooler:
            return False
        backend = await connection.fetchval("SELECT pg_backend_pid()")
        return bool(backend != connection.get_server_pid())

    def _notified(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        self._on_notify(payload)

    def _terminated(self, connection: Any) -> None:
        logger.warning("lost the LISTEN connection on {}; reconnecting", self._channel)
        self._on_notify(None)


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark a background failure as seen: the waiter that awaits it reports it."""
    if not task.cancelled():
        task.exception()
