"""What a handler learns about its job: ``JobContext`` and its abort ``signal``."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .progress import ProgressReporter, check_progress
from .spi.inbox import AttemptSettlement


class AbortSignal:
    """Set when an attempt should stop: it timed out, lost its lease, was cancelled by an
    operator, or the runner shut down (``reason``: timeout, lease lost, cancelled, shutdown).

    Async handlers may ``await signal.wait()``; handlers running in a thread poll ``is_set()``
    or block in ``wait_blocking(timeout)``. ``reason`` says why it was set. The events behind
    the waits are made on first use: most attempts never wait.
    """

    __slots__ = ("_loop_event", "_thread_event", "reason")

    def __init__(self) -> None:
        self.reason: str | None = None
        self._loop_event: asyncio.Event | None = None
        self._thread_event: threading.Event | None = None

    def is_set(self) -> bool:
        return self.reason is not None

    def set(self, reason: str) -> None:
        """Set the signal (from the runner's event loop)."""
        if self.reason is not None:
            return
        self.reason = reason
        if self._loop_event is not None:
            self._loop_event.set()
        if self._thread_event is not None:
            self._thread_event.set()

    async def wait(self) -> None:
        if self.reason is not None:
            return
        if self._loop_event is None:
            self._loop_event = asyncio.Event()
        await self._loop_event.wait()

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """From a worker thread: block until set or ``timeout`` seconds; whether it is set."""
        event = self._thread_event
        if event is None:
            event = self._thread_event = threading.Event()
            if self.reason is not None:  # set() ran before the event existed
                event.set()
        return event.wait(timeout)


@dataclass(frozen=True, slots=True)
class JobContext:
    """Passed as the second argument to handlers that take one.

    ``key`` is the job's idempotency key; ``run_at`` when it was due (None where the driver
    does not say). ``stalls`` is how many times the job's lease expired without a settle
    before this delivery (its worker crashed, was killed or lost it): a reclaim runs the
    attempt that stalled again, with the same ``attempt``. ``lease_token`` is the token this
    delivery holds the job by; ``settlement`` what an inbox uses to complete the job in the
    app's transaction (``jobs.spi.AttemptSettlement``; None outside a runner).

    ``await ctx.progress(fraction, message=None)`` keeps how far the job got with it
    (``JobInfo.progress``), rate-limited and fenced by the lease (``jobs.progress``); a sync
    handler calls ``ctx.progress_blocking(...)`` from its thread.
    """

    id: str
    type: str
    attempt: int
    max_attempts: int
    signal: AbortSignal
    key: str | None = None
    run_at: datetime | None = None
    stalls: int = 0
    lease_token: str | None = None
    settlement: AttemptSettlement | None = field(default=None, repr=False, compare=False)
    reporter: ProgressReporter | None = field(default=None, repr=False, compare=False)
    parent_results: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """A workflow job's parents' results by parent job id (``jobs.workflow``); empty for a
    job without parents. A parent on an ``on_failure="continue"`` edge that did not complete
    has None; one retention already removed is absent."""

    async def progress(self, fraction: float, message: str | None = None) -> None:
        """Report ``fraction`` (0 to 1) of the job done, and what is going on; checked even
        where nothing keeps it (outside a runner, or a driver without ``set_progress``)."""
        reporter = self.reporter
        if reporter is None:
            check_progress(fraction, message)
            return
        await reporter.report(fraction, message)

    def progress_blocking(self, fraction: float, message: str | None = None) -> None:
        """``progress`` from a sync (``def``) handler's worker thread."""
        reporter = self.reporter
        if reporter is None:
            check_progress(fraction, message)
            return
        reporter.report_blocking(fraction, message)
