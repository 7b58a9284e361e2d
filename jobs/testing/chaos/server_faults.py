"""Server faults on a private store the harness starts: the store goes away and comes back.

``redis_faults`` runs workers on a private, durable redis-server (append-only, fsync always)
while a producer enqueues, and meanwhile kills every client connection (CLIENT KILL), pauses the
server (CLIENT PAUSE) and SIGKILLs and restarts it. ``postgres_faults`` does the same on a
private PostgreSQL: ``pg_terminate_backend`` of every backend, then ``pg_ctl restart -m fast``.

Rules checked: lost = 0 over acknowledged enqueues; an enqueue that failed raised
``StoreUnavailableError`` (a caller retrying on it rides through); no worker process exited; one
attempt never ran twice; and duplicates (a settle lost to the outage, so the job ran again after
its lease) are bounded by what was in flight at the faults: faults x workers x concurrency.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from loguru import logger

from jobs import JobDriver, JobQueue, StoreUnavailableError

from ..postgres_server import PostgresServer
from ..redis_server import DURABLE, RedisServer
from .checker import Verdict, check_jobs
from .scenarios import ChaosPlan, ChaosTimeoutError, _idle, _infos, open_fleet
from .stores import ChaosStore
from .worker import WORK

Fault = Callable[[], Awaitable[None]]


class _Producer:
    """Enqueues ``jobs`` jobs one at a time, through any outage, sorting each call's outcome."""

    def __init__(self, queue: JobQueue, jobs: int) -> None:
        self.queue = queue
        self.jobs = jobs
        self.acknowledged: list[str] = []
        self.failed: list[int] = []
        self.untyped: list[str] = []

    async def run(self, pace_s: float) -> None:
        for n in range(self.jobs):
            try:
                job_id = await self.queue.enqueue(WORK, {"n": n})
            except StoreUnavailableError:
                self.failed.append(n)
                await asyncio.sleep(0.05)
            except Exception as exc:
                self.failed.append(n)
                self.untyped.append(f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.05)
            else:
                assert job_id is not None
                self.acknowledged.append(job_id)
            await asyncio.sleep(pace_s)


async def redis_faults(plan: ChaosPlan, workdir: Path) -> Verdict:
    server = RedisServer(workdir / "redis", DURABLE)
    await server.start()
    try:
        store = ChaosStore.fresh(server.url)
        return await _run_with_faults(store, plan, workdir, _redis_faults(server))
    finally:
        await server.stop()
        await server.kill()


async def postgres_faults(plan: ChaosPlan, workdir: Path) -> Verdict:
    server = PostgresServer(workdir / "postgres")
    await server.start()
    try:
        store = ChaosStore.fresh(server.url)
        return await _run_with_faults(store, plan, workdir, _postgres_faults(server))
    finally:
        await server.stop()


def _postgres_faults(server: PostgresServer) -> list[tuple[str, Fault]]:
    async def terminate() -> None:
        await server.terminate_backends()

    return [("pg_terminate_backend", terminate), ("pg_ctl restart -m fast", server.restart)]


def _redis_faults(server: RedisServer) -> list[tuple[str, Fault]]:
    async def client_kill() -> None:
        admin = server.admin()
        try:
            await admin.client_kill_filter(_type="normal", skipme=True)
        finally:
            await admin.aclose()

    async def client_pause() -> None:
        admin = server.admin()
        try:
            await admin.client_pause(1500, all=True)
        finally:
            await admin.aclose()

    async def restart() -> None:
        await server.kill()  # SIGKILL: only what the append-only file fsynced survives
        await asyncio.sleep(1.0)  # an outage the clients see as connection refused
        await server.start()

    return [("CLIENT KILL", client_kill), ("CLIENT PAUSE", client_pause), ("restart", restart)]


async def _run_with_faults(
    store: ChaosStore, plan: ChaosPlan, workdir: Path, faults: list[tuple[str, Fault]]
) -> Verdict:
    ledger, fleet = open_fleet(store, plan, workdir)
    driver = store.open_driver()
    deadline = time.monotonic() + plan.deadline_s
    try:
        await fleet.start(plan.workers)
        producer = _Producer(JobQueue(driver), plan.jobs)
        # pace the producer so it spans every fault
        producing = asyncio.create_task(producer.run(pace_s=0.005))
        for name, fault in faults:
            await asyncio.sleep(plan.kill_every_s)
            logger.info("chaos: {}", name)
            await fault()
        await producing
        while not await _settled(driver):
            if time.monotonic() > deadline:
                raise ChaosTimeoutError("chaos: timed out waiting for every job to finish")
            await asyncio.sleep(0.1)
        exited = fleet.exited()
        codes = await fleet.stop()
        events = ledger.read()
        ambiguous = {e["job"] for e in events if e.get("n") in set(producer.failed)}
        starts = {e["job"] for e in events if e["event"] == "start"}
        infos = await _infos(driver, set(producer.acknowledged) | starts)
        # a server fault hits every worker at once: any of them may lose a settle to it
        verdict = check_jobs(producer.acknowledged, infos, events, fleet.pids, ambiguous)
        verdict.kills = len(faults)
        in_flight = len(faults) * plan.workers * plan.options.concurrency
        if verdict.duplicates > in_flight:
            verdict.problems.append(
                f"{verdict.duplicates} duplicates, more than the {in_flight} jobs in flight "
                "at the faults"
            )
        verdict.problems += [f"enqueue raised {error}, not StoreUnavailableError"
                             for error in producer.untyped[:5]]  # fmt: skip
        verdict.problems += [f"a worker exited {code} during the faults" for code in exited]
        verdict.problems += [f"a worker asked to stop exited {c}" for c in codes if c != 0]
        return verdict
    finally:
        await fleet.abandon()
        await driver.close()


async def _settled(driver: JobDriver) -> bool:
    try:
        return await _idle(driver)
    except StoreUnavailableError:
        return False
