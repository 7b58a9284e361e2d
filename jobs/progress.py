"""Progress a handler reports (``await ctx.progress(0.5, "halfway")``), kept with its job.

A report is checked (a fraction from 0 to 1, a message of at most ``MAX_MESSAGE_CHARS``) and
written through the driver's ``set_progress`` (``jobs.spi.ProgressReports``), fenced by the
attempt's lease token like a heartbeat: once the lease is lost or the job settled, the store
refuses it. Writes are rate-limited per attempt: at most one each ``PROGRESS_INTERVAL_MS``.
The first report (and one after a quiet interval) is written before ``progress`` returns; the
reports that come sooner replace each other in memory, and the last of them is written once
the interval has passed, in the background. So a handler may report in a tight loop: the store
sees a few writes a second per job, always the latest value. A failed write is logged, never
raised into the handler (progress is informational; the heartbeat guards the lease).
"""

from __future__ import annotations

import asyncio
import math
import time

from loguru import logger

from .failures import describe_cause
from .spi.driver import ProgressReports
from .spi.records import JobProgress

__all__ = ["MAX_MESSAGE_CHARS", "PROGRESS_INTERVAL_MS", "ProgressReporter", "check_progress"]

PROGRESS_INTERVAL_MS = 1_000
"""The shortest time between two progress writes of one attempt."""
MAX_MESSAGE_CHARS = 1_000


def check_progress(fraction: float, message: str | None) -> JobProgress:
    """The report as a record; ValueError (TypeError) for a fraction outside 0..1 or a message
    that is not a string of at most ``MAX_MESSAGE_CHARS``."""
    if type(fraction) not in (int, float) or not math.isfinite(fraction):
        raise TypeError(f"progress fraction must be a number from 0 to 1, got {fraction!r}")
    if not 0 <= fraction <= 1:
        raise ValueError(f"progress fraction must be from 0 to 1, got {fraction!r}")
    if message is not None:
        if not isinstance(message, str):
            raise TypeError(f"progress message must be a str or None, got {type(message).__name__}")
        if len(message) > MAX_MESSAGE_CHARS:
            raise ValueError(
                f"progress message is {len(message)} characters, over {MAX_MESSAGE_CHARS}"
            )
    return JobProgress(float(fraction), message)


class ProgressReporter:
    """One attempt's progress writes (``JobContext.progress``); closed when the attempt ends."""

    __slots__ = (
        "_closed", "_flush", "_job_id", "_last", "_latest", "_loop", "_store", "_token", "_writing",
    )  # fmt: skip

    def __init__(self, store: ProgressReports, job_id: str, lease_token: str) -> None:
        self._store = store
        self._job_id = job_id
        self._token = lease_token
        self._latest: str | None = None
        """A report not written yet."""
        self._last = -math.inf
        """When the last write started (``time.monotonic()``)."""
        self._writing = False
        self._flush: asyncio.TimerHandle | asyncio.Task[None] | None = None
        self._closed = False
        self._loop = asyncio.get_running_loop()

    def report_blocking(self, fraction: float, message: str | None = None) -> None:
        """``report`` from a sync handler's thread: run on the runner's loop, waited for."""
        check_progress(fraction, message)  # raised here, in the handler's thread
        asyncio.run_coroutine_threadsafe(self.report(fraction, message), self._loop).result()

    async def report(self, fraction: float, message: str | None = None) -> None:
        self._latest = check_progress(fraction, message).text()
        if self._closed or self._writing or self._flush is not None:
            return  # the write in flight, or the one scheduled, takes the latest
        wait = self._last + PROGRESS_INTERVAL_MS / 1000 - time.monotonic()
        if wait <= 0:
            await self._write()
        else:
            self._schedule(wait)

    def close(self) -> None:
        """The attempt ended: no more writes (one in flight finishes; the store fences it)."""
        self._closed = True
        flush = self._flush
        if isinstance(flush, asyncio.TimerHandle):
            flush.cancel()
        self._flush = None

    def _schedule(self, wait: float) -> None:
        self._flush = self._loop.call_later(wait, self._start_flush)

    def _start_flush(self) -> None:
        if self._closed:
            return
        self._flush = self._loop.create_task(self._write())

    async def _write(self) -> None:
        text, self._latest = self._latest, None
        if text is None or self._closed:
            self._flush = None
            return
        self._writing = True
        self._last = time.monotonic()
        try:
            held = await self._store.set_progress(self._job_id, self._token, text)
            if not held:
                logger.bind(job_id=self._job_id).debug(
                    "job {}: progress not kept, the lease no longer holds the job", self._job_id
                )
        except Exception as exc:
            logger.bind(job_id=self._job_id).warning(
                "job {}: keeping its progress failed: {}", self._job_id, describe_cause(exc)
            )
        finally:
            self._writing = False
            self._flush = None
        if self._latest is not None and not self._closed:  # reported while this one went
            self._schedule(max(0.0, self._last + PROGRESS_INTERVAL_MS / 1000 - time.monotonic()))
