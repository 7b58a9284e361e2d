"""A worker's log through a 20 s Redis outage: a few dozen lines that say why, not thousands.

A runner (with a job in flight, whose heartbeats and settle meet the outage) and a scheduler
work on a private redis-server, which is stopped for 20 s and started again on the same port.
The log is captured as a worker in production writes it (loguru's default format, at INFO,
``diagnose`` and ``backtrace`` off as loguru advises for production): each failure is one
line whose headline names the cause, a cause is explained by one traceback, and each
recovery is said once.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from jobs import JobHandlerRegistry, JobQueue, JobRunner, JobScheduler, JobsSettings, Schedule
from redis_jobs import RedisJobDriver
from tests.support import wait_until

from .redis_server import RedisServer, RedisServers

OUTAGE_S = 20.0
PORTS = range(6800, 6900)
"""This test's private loopback ports."""
MAX_RECORDS = 40
"""About 30 in a run here: each loop's first three failures, then one a quiet interval."""
MAX_LINES = 120
"""Every physical line written, tracebacks included (about 100 here: two causes, two
tracebacks of redis-py's chained errors, about 35 lines each)."""


def port_in_range() -> int:
    for port in PORTS:
        with socket.socket() as probe, contextlib.suppress(OSError):
            probe.bind(("127.0.0.1", port))
            return port
    raise AssertionError(f"no free loopback port in {PORTS}")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    servers = RedisServers(tmp_path)
    try:
        started = RedisServer(tmp_path / "redis", ())
        started.port = port_in_range()
        servers.servers.append(started)
        await started.start()
        yield started
    finally:
        await servers.stop_all()


@contextlib.contextmanager
def worker_log() -> Iterator[list[Any]]:
    """Each record as ``neverlost worker``'s sink writes it (``jobs.cli.logs``), at INFO."""
    written: list[Any] = []
    handler_id = logger.add(written.append, level="INFO", diagnose=False, backtrace=False)
    try:
        yield written
    finally:
        logger.remove(handler_id)


@pytest.mark.slow
@pytest.mark.redis
async def test_a_20_s_outage_writes_a_few_dozen_lines_that_name_the_cause(
    server: RedisServer,
) -> None:
    driver = RedisJobDriver(url=server.url, namespace=f"outage-{uuid.uuid4().hex[:8]}")
    release = asyncio.Event()
    done: list[str] = []

    async def slow(payload: Any) -> None:
        await release.wait()
        done.append("slow")

    async def tick(payload: Any) -> None:
        done.append("tick")

    registry = JobHandlerRegistry()
    registry.register("outage.slow", slow)
    registry.register("outage.tick", tick)
    settings = JobsSettings(
        concurrency=4, lease_ms=60_000, heartbeat_ms=1_000, poll_interval_ms=500
    )
    runner = JobRunner(driver, registry, settings)
    queue = JobQueue(driver)
    scheduler = JobScheduler(
        queue, schedules=[Schedule(cron="* * * * *", job="outage.tick")], interval_ms=500
    )
    try:
        with worker_log() as log:
            runner.start()
            scheduler.start()
            await queue.enqueue("outage.slow")
            await wait_until(lambda: runner.in_flight == 1, message="the slow job is running")
            await server.stop()
            # The fault itself: Redis stays down this long; the handler ends a second before
            # Redis is back, so its settle meets the outage too.
            await asyncio.sleep(OUTAGE_S - 1)
            release.set()
            await asyncio.sleep(1)
            await server.start()
            await wait_until(lambda: "slow" in done and runner.in_flight == 0, timeout=30)
            await wait_until(
                lambda: any("claiming jobs works again" in str(m) for m in log),
                timeout=30,
                message="the runner says it recovered",
            )
    finally:
        await scheduler.close()
        await runner.close()
        await driver.close()

    records = [message.record for message in log]
    lines = sum(str(message).count("\n") for message in log)
    text = "".join(str(message) for message in log)
    assert len(records) <= MAX_RECORDS, text
    assert lines <= MAX_LINES, text
    failures = [r for r in records if r["level"].name in ("WARNING", "ERROR")]
    assert failures, "the outage was not logged at all"
    port = server.port
    for record in failures:
        assert "StoreUnavailableError: Redis is unavailable" in record["message"], record
    claims = [r["message"] for r in failures if r["message"].startswith("claiming jobs failed")]
    assert claims
    assert all(f"127.0.0.1:{port}" in message for message in claims), claims
    operations = {r["message"].split(" failed")[0] for r in failures}
    with_traceback = [r for r in records if r["exception"] is not None]
    assert len(with_traceback) <= len(operations), [r["message"] for r in with_traceback]
    assert "claiming jobs" in operations
    recovered = {
        r["message"].split(" works again")[0] for r in records if "works again" in r["message"]
    }
    assert "claiming jobs" in recovered
