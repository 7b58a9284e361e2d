"""A runner's presence in ``workers()``: registered at start, refreshed every heartbeat interval.

The record lives for three heartbeat intervals in the store, so a worker that dies (or whose
loop stalls) is gone from ``workers()`` three intervals after its last refresh; a clean close
removes it at once. A store that fails a refresh is logged once per streak and tried again at
the next interval; the runner's work does not depend on its presence. The refresh loop runs
under the runner's ``Supervisor`` (``PRESENCE_LOOP``), like its claim and heartbeat loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable

from loguru import logger

from . import counters
from .counters import OutcomeTally
from .service import BackgroundService
from .spi.driver import JobDriver
from .spi.records import WorkerRegistration
from .supervision import Supervisor

LIVE_INTERVALS = 3
PRESENCE_LOOP = "presence"


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


class WorkerPresence(BackgroundService):
    """Keeps a runner listed in ``workers()``; its loop runs under the runner's supervisor."""

    service = "worker presence"

    def __init__(
        self,
        driver: JobDriver,
        heartbeat_ms: int,
        describe: Callable[[], WorkerRegistration],
        supervisor: Supervisor,
        *,
        tally: OutcomeTally | None = None,
    ) -> None:
        super().__init__(driver, supervisor=supervisor)
        self.driver = driver
        self.tally = tally
        self._counting_fails = False
        self.heartbeat_ms = heartbeat_ms
        self.describe = describe
        self._registered = False

    @property
    def ttl_ms(self) -> int:
        return self.heartbeat_ms * LIVE_INTERVALS

    def _on_start(self) -> None:
        if not self._supervisor.running(PRESENCE_LOOP):
            self._supervisor.spawn(PRESENCE_LOOP, self._run)

    def _on_stop(self) -> None:
        """Stop refreshing; the record expires ``ttl_ms`` after the last refresh."""
        self._supervisor.stop(PRESENCE_LOOP)

    async def _on_close(self) -> None:
        """Stop refreshing and remove the record (best effort: it expires anyway)."""
        await self._supervisor.close(PRESENCE_LOOP)
        await self.flush_counts()
        if self._registered:
            self._registered = False
            with contextlib.suppress(Exception):
                await self.driver.deregister_worker(self.describe().id)

    async def expire(self) -> None:
        """Stop refreshing and wait until no refresh is under way, leaving the record to
        expire as a killed process's would (``close()`` removes it)."""
        self.stop()
        await self._supervisor.close(PRESENCE_LOOP)

    def _health_window_ms(self) -> int:
        return self.ttl_ms

    async def refresh(self) -> None:
        await self.flush_counts()
        await self.driver.register_worker(self.describe(), self.ttl_ms)
        self._registered = True

    async def flush_counts(self) -> None:
        """Hand what the runner counted to the store (``jobs.counters``); a failure is logged
        once per streak, the counts kept for the next interval."""
        if self.tally is None:
            return
        try:
            await counters.flush(self.tally, self.driver)
            self._counting_fails = False
        except Exception as exc:
            counters.log_flush_failure(exc, self._counting_fails)
            self._counting_fails = True

    async def _run(self) -> None:
        failing = False
        supervisor = self._supervisor
        while not supervisor.stopping():
            try:
                await self.refresh()
                if failing:
                    logger.info("worker registration works again")
                failing = False
            except NotImplementedError as exc:
                logger.info("this driver keeps no worker registry; workers() will not list this "
                            "worker: {}", exc)
                supervisor.stop(PRESENCE_LOOP)  # ended on purpose, not down
                return
            except Exception as exc:
                if not failing:
                    logger.warning(
                        "refreshing this worker's registration failed ({}: {}); retrying every "
                        "heartbeat",
                        type(exc).__name__,
                        exc,
                    )
                failing = True
            await supervisor.wait(asyncio.sleep(self.heartbeat_ms / 1000))
