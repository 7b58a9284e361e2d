"""What a handler learns about its job: ``JobContext`` and its abort ``signal``."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass


class AbortSignal:
    """Set when an attempt should stop: it timed out, lost its lease, or the runner shut down.

    Async handlers may ``await signal.wait()``; handlers running in a thread poll ``is_set()``
    or block in ``wait_blocking(timeout)``. ``reason`` says why it was set.
    """

    __slots__ = ("_event", "_loop_event", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._loop_event: asyncio.Event | None = None
        self.reason: str | None = None

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self, reason: str) -> None:
        """Set the signal (from the runner's event loop)."""
        if self._event.is_set():
            return
        self.reason = reason
        self._event.set()
        if self._loop_event is not None:
            self._loop_event.set()

    async def wait(self) -> None:
        if self._event.is_set():
            return
        if self._loop_event is None:
            self._loop_event = asyncio.Event()
        await self._loop_event.wait()

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """From a worker thread: block until set or ``timeout`` seconds; whether it is set."""
        return self._event.wait(timeout)


@dataclass(frozen=True, slots=True)
class JobContext:
    """Passed as the second argument to handlers that take one."""

    id: str
    type: str
    attempt: int
    max_attempts: int
    signal: AbortSignal
