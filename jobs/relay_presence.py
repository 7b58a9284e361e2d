"""A relay's presence in ``list_relays()``: registered at start, refreshed every interval.

Like a runner's (``jobs.presence``): the record lives for three intervals in the outbox store,
so a relay that dies (or whose loop stalls) drops out three intervals after its last refresh,
and a clean close removes it at once. ``neverlost stats`` and the dashboard count live relays
and flag NO RELAY when entries wait and none is alive. A store without ``OutboxOperations``
keeps no presence (logged once); a failed refresh is logged once per streak and tried again
at the next interval: relaying does not depend on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket

from loguru import logger

from .spi.outbox import OutboxOperations, OutboxStore
from .spi.records import RelayRegistration
from .supervision import Supervisor

LIVE_INTERVALS = 3
RELAY_PRESENCE_LOOP = "presence"
DEFAULT_PRESENCE_INTERVAL_MS = 5_000


def new_relay_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


class RelayPresence:
    """Keeps one relay listed in its store's ``list_relays()`` (a loop under the relay's
    supervisor)."""

    def __init__(self, store: OutboxStore, interval_ms: int, supervisor: Supervisor) -> None:
        self.store = store if isinstance(store, OutboxOperations) else None
        self.interval_ms = interval_ms
        self.registration = RelayRegistration(
            id=new_relay_id(), host=socket.gethostname(), pid=os.getpid()
        )
        self._supervisor = supervisor
        self._registered = False

    @property
    def ttl_ms(self) -> int:
        return self.interval_ms * LIVE_INTERVALS

    def start(self) -> None:
        if self.store is None:
            logger.info(
                "this outbox store keeps no relay registry (no OutboxOperations); "
                "neverlost stats will not count this relay"
            )
            return
        if not self._supervisor.running(RELAY_PRESENCE_LOOP):
            self._supervisor.spawn(RELAY_PRESENCE_LOOP, self._run)

    async def close(self) -> None:
        """Stop refreshing and remove the record (best effort: it expires anyway)."""
        await self._supervisor.close(RELAY_PRESENCE_LOOP)
        if self._registered and self.store is not None:
            self._registered = False
            with contextlib.suppress(Exception):
                await self.store.deregister_relay(self.registration.id)

    async def refresh(self) -> None:
        assert self.store is not None
        await self.store.register_relay(self.registration, self.ttl_ms)
        self._registered = True

    async def _run(self) -> None:
        failing = False
        supervisor = self._supervisor
        while not supervisor.stopping(RELAY_PRESENCE_LOOP):
            try:
                await self.refresh()
                if failing:
                    logger.info("relay registration works again")
                failing = False
            except Exception as exc:
                if not failing:
                    logger.warning(
                        "refreshing this relay's registration failed ({}: {}); retrying every "
                        "{} ms",
                        type(exc).__name__,
                        exc,
                        self.interval_ms,
                    )
                failing = True
            await supervisor.wait(asyncio.sleep(self.interval_ms / 1000))
