"""Helpers shared by the tests: waiting on a condition with a deadline, log capture."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from loguru import logger


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]],
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - a deadline for polling, not a cancel scope
    interval: float = 0.005,
    message: str = "condition",
) -> None:
    """Poll ``condition`` until it holds; fail with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        await asyncio.sleep(interval)


@contextmanager
def captured_logs(level: str = "DEBUG") -> Iterator[list[dict[str, Any]]]:
    """Loguru records (as dicts: level, message, extra) written inside the block."""
    records: list[dict[str, Any]] = []

    def sink(message: Any) -> None:
        record = message.record
        records.append(
            {"level": record["level"].name, "message": record["message"], "extra": record["extra"]}
        )

    handler_id = logger.add(sink, level=level, format="{message}")
    try:
        yield records
    finally:
        logger.remove(handler_id)
