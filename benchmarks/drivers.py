"""Driver factories for the benchmarks: each yields a driver on a fresh, empty store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from jobs import InProcessJobDriver, JobDriver

DriverFactory = Callable[[], AbstractAsyncContextManager[JobDriver]]


@asynccontextmanager
async def inprocess() -> AsyncIterator[JobDriver]:
    driver = InProcessJobDriver()
    try:
        yield driver
    finally:
        await driver.close()


FACTORIES: dict[str, DriverFactory] = {"inprocess": inprocess}
