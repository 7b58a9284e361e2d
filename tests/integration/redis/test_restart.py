"""S16 on a private redis-server: Redis restarted mid-run, and its memory policy.

Each test starts its own redis-server (``redis_server.py``) on a free loopback port, with
``appendonly yes`` and ``appendfsync always`` so every write Redis acknowledged is on disk, and
restarts it on the same port and directory; the shared server on 127.0.0.1:6379 is not used.

The busy case is a Jepsen-style total-queue check. Every enqueue is labelled ``(n, try)``; one
that returned an id is *acknowledged*; one that raised ``StoreUnavailableError`` is not, and the
test enqueues ``n`` again (a new try) once Redis is back. Redis stays down until an enqueue has
raised, a claim has failed and a settle has given up (the lease ran out), then comes back. At the
end every acknowledged job must be ``completed`` and have run (lost = 0), every execution must
carry a label the test enqueued (unexpected = 0), and only a job the runner already held when
Redis went down may have run twice (duplicates bounded by the jobs it can hold: its concurrency
plus its prefetch). A held job is one a claim handed it: running, or prefetched and waiting for a
slot; a prefetched one starts once a slot frees, during the outage, and its lease may run out
before Redis is back, so it runs again after the restart (at least once). An enqueue that raised
may still have been stored (its reply was lost at the shutdown); such a job may run too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio.connection import AbstractConnection

from jobs import JobContext, JobHandlerRegistry, JobInfo, JobQueue, JobRunner, JobsSettings
from jobs.errors import StoreUnavailableError
from jobs.spi import ClaimedJob
from redis_jobs import RedisJobDriver
from tests.support import captured_logs, wait_until

from .redis_server import RedisServer, RedisServers

JOB_TYPE = "restart.work"
NAMESPACE = "restart"
CONCURRENCY = 10
LEASE_MS = 2_000
POLL_MS = 100
IDLE_POLL_MS = 10_000
"""The poll interval while the wake-up is checked: far longer than a woken runner may take."""
WAKE_DEADLINE_S = 2.0
BEFORE = 200
"""Jobs enqueued before the fault; Redis goes down while most of them still wait."""
DURING = 100
"""Jobs enqueued from the moment Redis goes down, one every ``DURING_GAP_S``."""
DURING_GAP_S = 0.01
HANDLER_S = 0.01
OUTAGE_DEADLINE_S = 15.0
DRAIN_DEADLINE_S = 15.0
SETTLE_GAVE_UP = "it will run again after its lease"


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[RedisServers]:
    started = RedisServers(tmp_path)
    try:
        yield started
    finally:
        await started.stop_all()


@dataclass(frozen=True)
class Execution:
    job_id: str
    attempt: int
    stalls: int
    label: tuple[int, int]
    """The ``(n, try)`` of the enqueue that stored the job."""
    started: float
    """``time.monotonic()`` when the handler began."""


@dataclass
class Producer:
    """Enqueues job ``n`` as ``{"n": n, "try": k}``; keeps what was acknowledged and what raised."""

    queue: JobQueue
    attempted: set[tuple[int, int]] = field(default_factory=set)
    acknowledged: dict[str, tuple[int, int]] = field(default_factory=dict)
    unavailable: list[int] = field(default_factory=list)
    """Every ``n`` whose enqueue raised StoreUnavailableError (a retried ``n`` may repeat)."""
    to_retry: list[int] = field(default_factory=list)
    wrong_errors: list[BaseException] = field(default_factory=list)
    tries: Counter[int] = field(default_factory=Counter)

    async def enqueue(self, n: int) -> str | None:
        label = (n, self.tries[n])
        self.tries[n] += 1
        self.attempted.add(label)
        try:
            job_id = await self.queue.enqueue(JOB_TYPE, {"n": n, "try": label[1]})
        except StoreUnavailableError:
            self.unavailable.append(n)
            self.to_retry.append(n)
            return None
        except Exception as exc:  # anything else is a defect: a raw redis error, say
            self.wrong_errors.append(exc)
            return None
        assert job_id is not None, "no key was given, so the enqueue cannot be dropped"
        self.acknowledged[job_id] = label
        return job_id

    async def enqueue_spaced(self, numbers: range) -> None:
        """Start one enqueue every DURING_GAP_S, each in its own task, and wait for them all."""
        tasks: list[asyncio.Task[str | None]] = []
        for n in numbers:
            tasks.append(asyncio.create_task(self.enqueue(n)))
            await asyncio.sleep(DURING_GAP_S)
        await asyncio.gather(*tasks)

    async def retry_refused(self) -> None:
        """Enqueue again every ``n`` whose enqueue raised, until each is acknowledged."""
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        while self.to_retry:
            assert time.monotonic() < deadline, f"enqueues still refused: {self.to_retry}"
            pending, self.to_retry = self.to_retry, []
            for n in pending:
                await self.enqueue(n)

    def acknowledged_numbers(self) -> set[int]:
        return {n for n, _ in self.acknowledged.values()}


class Rig:
    """A RedisJobDriver on a private server, a JobRunner and a handler that logs each execution.

    ``waits`` records the timeout of each ``wait_for_work`` call the runner makes, so a test can
    tell when the runner sits in a long wait; ``claimed`` the id of each job a claim handed the
    runner (running or prefetched: held); ``not_running_seen`` counts samples of
    ``runner.is_running`` that were False while the rig ran.
    """

    def __init__(self, server: RedisServer, *, poll_interval_ms: int) -> None:
        self.server = server
        self.driver = RedisJobDriver(url=server.url, namespace=NAMESPACE)
        self.executions: list[Execution] = []
        registry = JobHandlerRegistry()
        registry.register(JOB_TYPE, self.handle)
        self.runner = JobRunner(
            self.driver,
            registry,
            JobsSettings(
                concurrency=CONCURRENCY, lease_ms=LEASE_MS, poll_interval_ms=poll_interval_ms
            ),
        )
        self.producer = Producer(JobQueue(self.driver))
        self.not_running_seen = 0
        self.waits: list[int] = []
        self.waiting = False
        self.claimed: set[str] = set()

    async def handle(self, payload: dict[str, int], ctx: JobContext) -> None:
        label = (payload["n"], payload["try"])
        self.executions.append(
            Execution(ctx.id, ctx.attempt, ctx.stalls, label, time.monotonic())
        )
        await asyncio.sleep(HANDLER_S)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The runner started and watched; closed (and the driver with it) on the way out."""
        self._record_waits()
        self._record_claims()
        self.runner.start()
        watch = asyncio.create_task(self._watch_is_running())
        try:
            yield
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            await self.runner.close(drain_timeout_ms=5_000)
            await self.driver.close()

    def wait_long(self) -> None:
        """Idle waits of IDLE_POLL_MS: the runner otherwise caps a wait at its heartbeat interval
        (its leases are not at stake while it is idle), so only a wake-up starts a job sooner."""
        settings = self.runner.settings
        self.runner.settings = dataclasses.replace(settings, poll_interval_ms=IDLE_POLL_MS)
        self.runner.heartbeat_ms = IDLE_POLL_MS

    def executed_ids(self) -> set[str]:
        return {execution.job_id for execution in self.executions}

    async def idle_in_long_wait(self) -> bool:
        """The runner is in its longest ``wait_for_work`` and blocked in its BLPOP.

        An idle runner waits IDLE_POLL_MS at most, and at most a heartbeat interval (so it still
        hears from its store for its health): the longest wait is the smaller of the two.
        """
        longest = min(IDLE_POLL_MS, self.runner.heartbeat_ms)
        if not (self.waiting and self.waits[-1:] == [longest]):
            return False
        admin = self.server.admin()  # on the private server, only the runner's BLPOP can block
        try:
            return any(entry.get("cmd") == "blpop" for entry in await admin.client_list())
        finally:
            await admin.aclose()

    async def time_to_start(self, n: int) -> float:
        """Enqueue job ``n``; how long until its handler began."""
        started = time.monotonic()
        job_id = await self.producer.enqueue(n)
        assert job_id is not None, f"enqueue failed: {self.producer.wrong_errors}"

        def ran() -> list[Execution]:
            return [e for e in self.executions if e.job_id == job_id]

        await wait_until(lambda: bool(ran()), timeout=IDLE_POLL_MS / 500, message=f"job {n}")
        return ran()[0].started - started

    def _record_waits(self) -> None:
        wait_for_work = self.driver.wait_for_work

        async def recorded(types: Collection[str], timeout_ms: int) -> None:
            self.waits.append(timeout_ms)
            self.waiting = True
            try:
                await wait_for_work(types, timeout_ms)
            finally:
                self.waiting = False

        self.driver.wait_for_work = recorded  # type: ignore[method-assign]

    def _record_claims(self) -> None:
        claim = self.driver.claim

        async def recorded(limit: int, lease_ms: int, types: Collection[str]) -> list[ClaimedJob]:
            jobs = await claim(limit, lease_ms, types)
            self.claimed.update(job.id for job in jobs)
            return jobs

        self.driver.claim = recorded  # type: ignore[method-assign]

    async def _watch_is_running(self) -> None:
        while True:
            if not self.runner.is_running:
                self.not_running_seen += 1
            await asyncio.sleep(0.005)


def messages(logs: list[dict[str, Any]], level: str, text: str) -> list[str]:
    return [r["message"] for r in logs if r["level"] == level and text in r["message"]]


async def test_a_busy_runner_rides_out_a_redis_restart_and_loses_no_acknowledged_job(
    servers: RedisServers,
) -> None:
    server = await servers.start()
    rig = Rig(server, poll_interval_ms=POLL_MS)
    producer = rig.producer
    with captured_logs("DEBUG") as logs:
        async with rig.running():
            for n in range(BEFORE):
                assert await producer.enqueue(n) is not None
            await wait_until(lambda: len(rig.executions) >= BEFORE // 4, message="a quarter run")
            assert rig.runner.in_flight > 0, "the fault should hit jobs in flight"

            # The fault: Redis goes down under a busy runner and a producer that goes on.
            during = asyncio.create_task(producer.enqueue_spaced(range(BEFORE, BEFORE + DURING)))
            await server.shutdown()

            def outage_felt() -> bool:
                return bool(
                    producer.unavailable
                    and messages(logs, "ERROR", "claiming jobs failed")
                    and messages(logs, "ERROR", SETTLE_GAVE_UP)
                )

            await wait_until(
                outage_felt,
                timeout=OUTAGE_DEADLINE_S,
                message="an enqueue to raise, a claim to fail and a settle to give up",
            )
            # No claim gets through while Redis is down: what the runner was handed by now, it
            # held when Redis went down.
            held_at_fault = set(rig.claimed)
            await server.start()  # the same port and directory: Redis reloads its AOF
            await during
            await producer.retry_refused()

            async def drained() -> bool:
                counts = await rig.driver.counts()
                settled = counts["pending"] == 0 and counts["active"] == 0
                return settled and rig.executed_ids() >= producer.acknowledged.keys()

            await wait_until(drained, timeout=DRAIN_DEADLINE_S, message="every job to settle")

            # The wake-up after the restart: an idle runner on a long poll is woken at once.
            rig.wait_long()
            await wait_until(rig.idle_in_long_wait, message="the runner in a long wait")
            woken_in = await rig.time_to_start(BEFORE + DURING)
            await wait_until(drained, message="the woken job to settle")

    # Every failing enqueue raised the typed error, and every n got in after the restart.
    assert producer.wrong_errors == [], "an enqueue raised something but StoreUnavailableError"
    assert producer.unavailable, "no enqueue met the outage"
    assert producer.acknowledged_numbers() == set(range(BEFORE + DURING + 1))
    # Lost = 0: every acknowledged job ran and is completed; unexpected = 0.
    infos = await job_infos(server, producer.acknowledged)
    assert [i for i in infos.values() if i is None or i.state != "completed"] == []
    assert rig.executed_ids() >= producer.acknowledged.keys()
    unexpected = {e.label for e in rig.executions} - producer.attempted
    assert not unexpected, f"jobs ran that were never enqueued: {unexpected}"
    # Duplicates: only jobs the runner held when Redis went down, at most what one runner holds
    # (its slots and its prefetched jobs), each run a new delivery (a stall: the same attempt).
    runs = Counter(e.job_id for e in rig.executions)
    twice = {job_id for job_id, count in runs.items() if count > 1}
    assert twice <= held_at_fault, "a job claimed after the restart ran twice"
    assert len(twice) <= CONCURRENCY + rig.runner.prefetch
    deliveries: defaultdict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in rig.executions:
        deliveries[e.job_id].append((e.attempt, e.stalls))
    assert all(len(set(d)) == len(d) for d in deliveries.values()), "one delivery ran twice"
    assert all(i is not None and i.attempts == 1 and i.stalls <= 1 for i in infos.values())
    # The runner logged, backed off, reconnected and carried on: one runner, never restarted.
    assert rig.not_running_seen == 0
    assert messages(logs, "INFO", "claiming jobs works again")
    assert not messages(logs, "ERROR", "inside the runner")
    assert not messages(logs, "WARNING", "maxmemory-policy")
    assert woken_in < WAKE_DEADLINE_S, f"the idle runner took {woken_in:.2f} s to wake"
    counts = await with_driver(server, lambda driver: driver.counts())
    assert (counts["pending"], counts["active"], counts["failed"]) == (0, 0, 0), counts


async def test_an_idle_runner_is_woken_after_a_restart(servers: RedisServers) -> None:
    """A runner blocked in BLPOP on a long poll when Redis restarts still wakes for new work."""
    server = await servers.start()
    rig = Rig(server, poll_interval_ms=IDLE_POLL_MS)
    rig.wait_long()
    async with rig.running():
        await wait_until(rig.idle_in_long_wait, message="the runner in a long wait")
        await server.stop()
        await server.start()
        woken_in = await rig.time_to_start(0)
        assert rig.runner.is_running
    assert woken_in < WAKE_DEADLINE_S, f"the idle runner took {woken_in:.2f} s to wake"
    assert rig.not_running_seen == 0


async def test_a_cancel_dropped_by_a_send_still_ends_the_wait(
    servers: RedisServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Python 3.11 redis-py's send (asyncio.wait_for) can drop a cancellation.

    The BLPOP send here drops it the same way; the wait must end anyway, not block for its
    whole timeout (runner.stop() cancels a waiting claim loop).
    """
    server = await servers.start()
    driver = RedisJobDriver(url=server.url, namespace=NAMESPACE)
    send_command = AbstractConnection.send_command
    sending = asyncio.Event()

    async def dropping_cancel(self: AbstractConnection, *args: Any, **options: Any) -> None:
        if args[:1] == ("BLPOP",):
            sending.set()
            # The cancel arrives during the send and is dropped, as wait_for drops one that
            # arrives as the send completes.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.05)
        await send_command(self, *args, **options)

    monkeypatch.setattr(AbstractConnection, "send_command", dropping_cancel)
    try:
        waiting = asyncio.create_task(driver.wait_for_work([JOB_TYPE], IDLE_POLL_MS))
        await asyncio.wait_for(sending.wait(), WAKE_DEADLINE_S)
        waiting.cancel()
        done, _ = await asyncio.wait({waiting}, timeout=WAKE_DEADLINE_S)
        assert done, "the wait went on after its task was cancelled"
        assert waiting.cancelled()
    finally:
        await driver.close()


async def job_infos(server: RedisServer, job_ids: Collection[str]) -> dict[str, JobInfo | None]:
    async def read(driver: RedisJobDriver) -> dict[str, JobInfo | None]:
        return {job_id: await driver.get_job(job_id) for job_id in job_ids}

    result: dict[str, JobInfo | None] = await with_driver(server, read)
    return result


async def with_driver(server: RedisServer, call: Callable[[RedisJobDriver], Awaitable[Any]]) -> Any:
    """``call`` with a fresh driver on ``server`` (not the runner's), closed after."""
    driver = RedisJobDriver(url=server.url, namespace=NAMESPACE)
    try:
        return await call(driver)
    finally:
        await driver.close()


# -- maxmemory-policy (S16): a driver warns once when Redis may evict job keys ----------------


async def policy_records(server: RedisServer) -> list[dict[str, Any]]:
    """The log records of a driver's memory-policy check, after several calls."""
    driver = RedisJobDriver(url=server.url, namespace="policy")
    with captured_logs("DEBUG") as logs:
        try:
            for _ in range(3):
                await driver.counts()
                await driver.claim(1, LEASE_MS, [JOB_TYPE])

            def checked() -> bool:
                return any("maxmemory-policy" in r["message"] for r in logs)

            await wait_until(checked, message="the memory-policy check")
        finally:
            await driver.close()
    return [r for r in logs if "maxmemory-policy" in r["message"]]


async def test_a_policy_that_may_evict_is_warned_about_once(servers: RedisServers) -> None:
    server = await servers.start("--maxmemory-policy", "allkeys-lru")
    [record] = await policy_records(server)
    assert record["level"] == "WARNING"
    assert "'allkeys-lru'" in record["message"]
    assert "noeviction" in record["message"]


async def test_noeviction_is_not_warned_about(servers: RedisServers) -> None:
    server = await servers.start("--maxmemory-policy", "noeviction")
    [record] = await policy_records(server)
    assert record["level"] == "DEBUG"


async def test_a_server_that_refuses_config_is_skipped_quietly(servers: RedisServers) -> None:
    server = await servers.start(
        "--maxmemory-policy", "allkeys-lru", "--rename-command", "CONFIG", ""
    )
    [record] = await policy_records(server)
    assert record["level"] == "DEBUG"
    assert "not checked" in record["message"]
