"""The conformance cases of the audit trail (``jobs.spi.AuditTrail``): an operator's action is
recorded by the store's clock, read back newest first a page at a time, and the trail stays
bounded; ``JobQueue``'s operations record what they did, and who asked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jobs.audit import Actor
from jobs.queue import JobQueue
from jobs.spi import AUDIT_KEEP_MS, AuditEntry, AuditTrail

from .helpers import DriverHarness, claim_one, enqueue


def _seen(entries: list[AuditEntry]) -> list[tuple[str, str, str, str, int]]:
    return [(e.action, e.target, e.actor, e.source, e.count) for e in entries]


class AuditConformance:
    async def test_actions_are_recorded_by_the_store_clock_and_listed_newest_first(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        assert isinstance(driver, AuditTrail)
        clock = driver_harness.clock
        assert (await driver.list_actions()).entries == []
        started = clock.now_ms()
        for n in range(5):
            await driver.record_action(
                action="retry", target=f"job-{n}", actor="ann@ops", source="cli", count=1
            )
            clock.advance(1_000)
        first = await driver.list_actions(limit=2)
        assert [e.target for e in first.entries] == ["job-4", "job-3"]
        assert first.entries[0].at.timestamp() * 1000 == started + 4_000
        assert first.next_cursor is not None
        second = await driver.list_actions(limit=2, cursor=first.next_cursor)
        assert [e.target for e in second.entries] == ["job-2", "job-1"]
        assert second.next_cursor is not None
        last = await driver.list_actions(limit=2, cursor=second.next_cursor)
        assert [e.target for e in last.entries] == ["job-0"]
        assert last.next_cursor is None
        assert _seen(last.entries) == [("retry", "job-0", "ann@ops", "cli", 1)]
        assert len({e.id for e in first.entries + second.entries + last.entries}) == 5

    async def test_actions_of_one_millisecond_page_once_each_in_recording_order(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        assert isinstance(driver, AuditTrail)
        for n in range(4):
            await driver.record_action(
                action="cancel", target=f"job-{n}", actor="ann@ops", source="cli", count=1
            )
        seen: list[str] = []
        cursor = None
        for _ in range(5):
            page = await driver.list_actions(limit=1, cursor=cursor)
            seen.extend(e.target for e in page.entries)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == ["job-3", "job-2", "job-1", "job-0"]  # the later action first

    async def test_the_trail_forgets_actions_past_its_keep(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        assert isinstance(driver, AuditTrail)
        await driver.record_action(action="purge", target="old", actor="a", source="api", count=3)
        driver_harness.clock.advance(AUDIT_KEEP_MS + 1)
        await driver.record_action(action="purge", target="new", actor="a", source="api", count=0)
        assert [e.target for e in (await driver.list_actions()).entries] == ["new"]

    async def test_queue_operations_record_what_they_did_and_who_asked(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        queue = JobQueue(driver)
        cli = Actor("ann@ops-1", "cli")
        job_id = await enqueue(driver, max_attempts=1)
        job = await claim_one(driver)
        assert await driver.fail(job_id, job.lease_token, error="boom")
        clock = driver_harness.clock
        dashboard = Actor("10.0.0.7", "dashboard")
        steps: list[Callable[[], Awaitable[object]]] = [
            lambda: queue.retry(job_id, actor=cli),
            lambda: queue.retry(job_id, actor=cli),  # pending now: refused, recorded as 0
            lambda: queue.cancel(job_id, actor=dashboard),
            lambda: queue.delete(job_id, actor=dashboard),
            lambda: queue.retry_failed(type="email.send", actor=cli),
            lambda: queue.purge(("completed", "failed"), older_than_ms=60_000),
        ]
        results = []
        for step in steps:
            results.append(await step())
            clock.advance(1)  # one action a millisecond: newest first is their order reversed
        assert results == [True, False, True, True, 0, 0]
        page = await queue.list_actions(limit=10)
        assert _seen(page.entries[1:]) == [
            ("retry_failed", "failed jobs of type email.send", "ann@ops-1", "cli", 0),
            ("delete", job_id, "10.0.0.7", "dashboard", 1),
            ("cancel", job_id, "10.0.0.7", "dashboard", 1),
            ("retry", job_id, "ann@ops-1", "cli", 0),
            ("retry", job_id, "ann@ops-1", "cli", 1),
        ]
        purge = page.entries[0]
        assert (purge.action, purge.target, purge.source, purge.count) == (
            "purge", "completed/failed jobs older than 1m", "api", 0,
        )  # fmt: skip
        assert "@" in purge.actor  # this process's user@host
