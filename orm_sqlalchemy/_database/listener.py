"""LISTEN on a PostgreSQL channel over a dedicated connection (job store and outbox wake-ups).

Channel names are derived from table names by a hash (see the schema modules), never from raw
user text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["PostgresListener"]


class PostgresListener:
    """LISTEN on one channel over a dedicated connection, made by the engine and detached.

    The connection is opened in a task of its own, so a waiter cancelled meanwhile does not
    abort it half-way. Notifications from the server processes ``ignore`` names (the store's
    own connections, whose enqueues woke its waiters already) are dropped. A lost connection
    wakes every waiter (so that none sleeps through a missed notification) and is opened
    again by the next ``ensure()``.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        channel: str,
        on_notify: Callable[[str | None], None],
        *,
        ignore: Callable[[int], bool],
    ) -> None:
        self._engine = engine
        self._channel = channel
        self._on_notify = on_notify
        self._ignore = ignore
        self._connection: Any = None
        self._connecting: asyncio.Task[None] | None = None

    async def ensure(self) -> bool:
        """Be listening: open the connection and LISTEN unless that is done already.

        True when this call (re)opened the connection: a notification sent while there was
        none may have been missed. Raises what opening the connection raised.
        """
        if self._connection is not None and not self._connection.is_closed():
            return False
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.create_task(self._connect(), name="LISTEN connection")
            self._connecting.add_done_callback(_retrieve)
        await asyncio.shield(self._connecting)
        return True

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
            await connection.add_listener(self._channel, self._notified)
        except BaseException:
            connection.terminate()
            raise
        connection.add_termination_listener(self._terminated)
        self._connection = connection

    def _notified(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        if not self._ignore(pid):
            self._on_notify(payload or None)

    def _terminated(self, connection: Any) -> None:
        logger.warning("lost the LISTEN connection on {}; reconnecting", self._channel)
        self._on_notify(None)


def _retrieve(task: asyncio.Task[None]) -> None:
    """Mark a background failure as seen: the waiter that awaits it reports it."""
    if not task.cancelled():
        task.exception()
