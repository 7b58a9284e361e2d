"""Supervised loops and health: a failure in each loop is logged, the loop restarts, health says
so while it is down; a store that refuses every call turns health red within its window."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from jobs import (
    InProcessJobDriver,
    JobHandlerRegistry,
    JobOutboxPublisher,
    JobQueue,
    JobRunner,
    JobScheduler,
    JobsSettings,
    OutboxRelay,
    Schedule,
    StoreUnavailableError,
)
from jobs.spi import ClaimedJob, OutboxEntry
from jobs.supervision import Supervisor
from tests.support import captured_logs, wait_until


async def test_a_loop_that_fails_is_logged_restarted_and_down_meanwhile() -> None:
    supervisor = Supervisor("test service", backoff=lambda n: 200)
    runs = 0
    release = asyncio.Event()

    async def body() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise RuntimeError("first run breaks")
        await supervisor.wait(release.wait())

    with captured_logs("INFO") as logs:
        supervisor.spawn("work", body)
        await wait_until(lambda: bool(supervisor.down()), message="the loop down")
        assert supervisor.down() == ["the work loop is down: RuntimeError: first run breaks"]
        assert not supervisor.health()["work"].alive
        await wait_until(lambda: runs == 2, message="the loop restarted")
        health = supervisor.health()["work"]
        assert (health.alive, health.restarts) == (True, 1)
        assert supervisor.down() == []
        await supervisor.close()  # interrupts the wait: the loop ends at once
    messages = [(log["level"], log["message"]) for log in logs]
    assert messages == [
        (
            "ERROR",
            "test service: the work loop failed: RuntimeError: first run breaks; "
            "restarting it in 200 ms",
        ),
        ("INFO", "test service: the work loop restarted"),
    ]


async def test_close_reports_what_ended_a_loop_while_stopping() -> None:
    supervisor = Supervisor("test service")
    entered = asyncio.Event()

    async def body() -> None:
        entered.set()
        await asyncio.sleep(0.05)  # not an interruptible wait: stop lets it finish
        raise ValueError("broke on the way out")

    supervisor.spawn("work", body)
    await entered.wait()
    with captured_logs("ERROR") as logs:
        await supervisor.close()
    assert [log["message"] for log in logs] == [
        "test service: the work loop ended by an error: ValueError: broke on the way out"
    ]


class FlakyDriver(InProcessJobDriver):
    """An in-process driver whose claims can misbehave or refuse, as a test asks."""

    def __init__(self) -> None:
        super().__init__()
        self.foreign_claims = 0
        self.refusing = False

    async def claim(self, limit: int, lease_ms: int, types: Collection[str]) -> list[ClaimedJob]:
        if self.refusing:
            raise StoreUnavailableError("the store refuses")
        if self.foreign_claims:
            self.foreign_claims -= 1
            return [
                ClaimedJob(
                    id="x", type="unknown", payload="null", attempt=1, max_attempts=1,
                    lease_token="t",
                )
            ]
        return await super().claim(limit, lease_ms, types)

    async def heartbeat(self, job_id: str, lease_token: str, lease_ms: int) -> bool:
        if self.refusing:
            raise StoreUnavailableError("the store refuses")
        return await super().heartbeat(job_id, lease_token, lease_ms)


def _runner(driver: InProcessJobDriver, ran: list[Any]) -> JobRunner:
    registry = JobHandlerRegistry()

    async def handle(payload: Any) -> None:
        ran.append(payload)

    registry.register("t", handle)
    settings = JobsSettings(lease_ms=600, heartbeat_ms=100, poll_interval_ms=50)
    return JobRunner(driver, registry, settings)


async def test_the_claim_loop_restarts_after_a_failure_and_runs_jobs_again() -> None:
    driver = FlakyDriver()
    driver.foreign_claims = 1  # a claim hands over a job no handler knows: a defect escapes
    ran: list[Any] = []
    runner = _runner(driver, ran)
    assert not runner.health().healthy  # not started
    with captured_logs("ERROR") as logs:
        runner.start()
        await wait_until(lambda: not runner.health().loops["claim"].alive, message="claim down")
        health = runner.health()
        assert not health.healthy
        assert any("the claim loop is down: JobsError" in reason for reason in health.reasons)
        await wait_until(lambda: runner.health().loops["claim"].restarts == 1, timeout=10)
    assert "the claim loop failed: JobsError" in logs[0]["message"]
    await JobQueue(driver).enqueue("t", {"n": 1})
    await wait_until(lambda: ran == [{"n": 1}], message="the job ran after the restart")
    assert runner.health().healthy
    assert runner.health().last_claim_ms_ago is not None
    await runner.close()
    assert not runner.health().healthy


async def test_the_heartbeat_loop_restarts_after_a_failure_and_keeps_leases() -> None:
    driver = FlakyDriver()
    ran: list[Any] = []
    runner = _runner(driver, ran)
    sweep = runner.leases.sweep
    failures = 1

    def sweep_failing_once(now: float, interval_s: float) -> None:
        nonlocal failures
        if failures:
            failures -= 1
            raise RuntimeError("sweep broke")
        sweep(now, interval_s)

    runner.leases.sweep = sweep_failing_once  # type: ignore[method-assign]
    runner.start()
    await wait_until(lambda: runner.health().loops["heartbeat"].restarts == 1, timeout=10)
    assert runner.health().loops["heartbeat"].last_error == "RuntimeError: sweep broke"
    await wait_until(lambda: runner.health().healthy, message="healthy again")
    await runner.close()


async def test_a_store_that_refuses_every_call_turns_the_runner_red_within_three_beats() -> None:
    driver = FlakyDriver()
    runner = _runner(driver, [])
    runner.start()
    await wait_until(lambda: runner.health().healthy, message="healthy at first")
    driver.refusing = True
    await wait_until(lambda: not runner.health().healthy, timeout=0.3 + 0.2, interval=0.01)
    health = runner.health()
    assert health.store_error == "StoreUnavailableError: the store refuses"
    assert any("last answered" in reason for reason in health.reasons)
    driver.refusing = False
    await wait_until(lambda: runner.health().healthy, timeout=5, message="green again")
    data = runner.health().as_dict()
    assert data["healthy"] is True
    assert data["loops"]["claim"]["alive"] is True
    await runner.close()


class FlakyOutbox:
    """An outbox store double: entries in memory; ``wait_for_entries`` breaks once."""

    def __init__(self) -> None:
        self.entries: list[OutboxEntry] = []
        self.published: set[str] = set()
        self.breaks = 1
        self.refusing = False

    async def claim(self, limit: int, lease_ms: int) -> list[OutboxEntry]:
        if self.refusing:
            raise StoreUnavailableError("the outbox refuses")
        batch = [e for e in self.entries if e.id not in self.published][:limit]
        self.entries = [e for e in self.entries if e not in batch]
        return batch

    async def mark_published_many(self, entries: list[OutboxEntry]) -> list[str]:
        self.published.update(entry.id for entry in entries)
        return [entry.id for entry in entries]

    async def mark_published(self, entry_id: str, lease_token: str) -> bool:
        self.published.add(entry_id)
        return True

    async def wait_for_entries(self, timeout_ms: int) -> None:
        if self.breaks:
            self.breaks -= 1
            raise RuntimeError("wake-up broke")
        await asyncio.sleep(timeout_ms / 1000)

    async def prune(self, older_than_ms: int) -> int:
        return 0


async def test_the_relay_loop_restarts_after_a_failure_and_relays_again() -> None:
    store = FlakyOutbox()
    driver = InProcessJobDriver()
    publisher = JobOutboxPublisher(JobQueue(driver))
    relay = OutboxRelay(store, publisher, poll_interval_ms=50)  # type: ignore[arg-type]
    relay._supervisor.backoff = lambda n: 100
    relay.start()
    await wait_until(lambda: relay.health().loops["relay"].restarts == 1, timeout=10)
    assert relay.health().loops["relay"].last_error == "RuntimeError: wake-up broke"
    store.entries.append(
        OutboxEntry(
            id="e1", type="t", payload=None, key=None, delay_ms=None,
            created_at=datetime.now(UTC), attempts=1, lease_token="1:a",
        )
    )
    await wait_until(lambda: relay.stats["published"] == 1, message="relayed after restart")
    assert relay.health().healthy
    store.refusing = True
    await wait_until(lambda: not relay.health().healthy, timeout=0.15 + 0.5, interval=0.01)
    await relay.close()


async def test_the_scheduler_reports_a_store_it_cannot_reach_and_turns_green_when_it_answers(
) -> None:
    driver = FlakyDriver()

    async def refuse(job: Any) -> str | None:
        raise StoreUnavailableError("the store refuses")

    enqueue = driver.enqueue
    driver.enqueue = refuse  # type: ignore[method-assign]
    scheduler = JobScheduler(
        JobQueue(driver),
        schedules=[Schedule(cron="* * * * *", job="report")],
        interval_ms=100,
    )
    with captured_logs("ERROR") as logs:
        scheduler.start()
        await wait_until(lambda: bool(logs), message="a line about the store")
    assert logs[0]["message"].startswith("job scheduler: its store FlakyDriver cannot be reached")
    assert logs[0]["message"].endswith(": StoreUnavailableError: the store refuses")
    assert not scheduler.health().healthy
    driver.enqueue = enqueue  # type: ignore[method-assign]
    await wait_until(lambda: scheduler.health().healthy, timeout=5, message="green")
    await scheduler.close()
    assert not scheduler.health().healthy


class GatedClaims(InProcessJobDriver):
    """An in-process driver whose first claim waits for ``gate``; claims are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.claims = 0
        self.second_claim = asyncio.Event()

    async def claim(self, limit: int, lease_ms: int, types: Collection[str]) -> list[ClaimedJob]:
        self.claims += 1
        if self.claims == 1:
            self.entered.set()
            await self.gate.wait()
        else:
            self.second_claim.set()
        return await super().claim(limit, lease_ms, types)


async def test_start_right_after_stop_runs_one_claim_loop_within_concurrency() -> None:
    driver = GatedClaims()
    registry = JobHandlerRegistry()
    running = 0
    most = 0
    done: list[Any] = []

    async def handle(payload: Any) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1
        done.append(payload)

    registry.register("t", handle)
    runner = JobRunner(driver, registry, JobsSettings(concurrency=1, poll_interval_ms=50))
    queue = JobQueue(driver)
    await queue.enqueue("t", {"n": 1})
    await queue.enqueue("t", {"n": 2})
    runner.start()
    await asyncio.wait_for(driver.entered.wait(), 5)  # the claim loop is inside a claim
    runner.stop()
    runner.start()
    # A second loop would claim now, beside the first one's claim still in flight.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(driver.second_claim.wait(), 0.3)
    driver.gate.set()
    await wait_until(lambda: len(done) == 2, timeout=10, message="both jobs ran")
    assert most == 1  # never more handlers than the concurrency
    claim_tasks = [
        task for task in asyncio.all_tasks()
        if task.get_name() == "job runner: claim" and not task.done()
    ]
    assert len(claim_tasks) == 1
    assert runner.health().healthy
    await runner.close()


class NoRegistry(InProcessJobDriver):
    async def register_worker(self, worker: Any, ttl_ms: int) -> None:
        raise NotImplementedError("no registry here")


async def test_the_presence_loop_runs_under_the_runners_supervisor() -> None:
    driver = InProcessJobDriver()
    runner = _runner(driver, [])
    runner.start()
    async def listed() -> bool:
        return bool(await driver.list_workers())

    await wait_until(listed, message="registered")
    assert runner.health().loops["presence"].alive
    await runner.close()
    assert not runner.health().loops["presence"].alive
    assert await JobQueue(driver).workers() == []

    quiet = NoRegistry()
    runner = _runner(quiet, [])
    runner.start()
    await wait_until(
        lambda: not runner.health().loops["presence"].alive, message="presence ended"
    )
    assert runner.health().healthy  # a driver without a registry is not a loop down
    await runner.close()
