"""Conformance: pausing named queues (issue 30, item 5), held in the store. A paused queue is
listed as paused; enqueues into it still succeed; a runner serving it claims nothing from it
(once it read the pause: within one poll interval) while it goes on with its other queues, and
claims from it again once resumed. Each pause and resume is in the audit trail."""

from __future__ import annotations

import pytest

from jobs.queue import JobQueue
from jobs.spi import AuditTrail, QueuePauses, WorkerRegistration

from .conformance_queues import _all_completed, _runner, _states
from .helpers import DriverHarness, enqueue, wait_until


class PauseConformance:
    async def test_pause_and_resume_are_held_listed_and_audited(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        if not isinstance(driver, QueuePauses):
            pytest.skip("the driver cannot pause queues")
        queue = JobQueue(driver)
        assert await queue.pause_queue("emails")
        assert not await queue.pause_queue("emails")  # paused already
        assert await driver.paused_queues() == {"emails"}
        other = await driver_harness.driver()  # another client of the store sees it
        assert isinstance(other, QueuePauses)
        assert await other.paused_queues() == {"emails"}
        assert await queue.enqueue("t", {}, queue="emails") is not None  # enqueues go on
        await driver.register_worker(
            WorkerRegistration(
                id="w1", host="h", pid=1, types=("t",), concurrency=1, in_flight=0,
                queues=("exports", "emails"),
            ),
            60_000,
        )  # fmt: skip
        assert [w.queues for w in await driver.list_workers()] == [("exports", "emails")]
        listed = {info.name: info for info in await queue.list_queues()}
        assert listed["emails"].paused
        assert listed["emails"].due == 1
        assert (listed["emails"].workers, listed["exports"].workers) == (1, 1)
        assert listed["default"].workers == 0
        assert not listed["default"].paused
        assert await queue.resume_queue("emails")
        assert not await queue.resume_queue("emails")
        assert await driver.paused_queues() == set()
        if isinstance(driver, AuditTrail):
            actions = [entry.action for entry in (await driver.list_actions()).entries]
            assert actions[:4] == ["resume_queue", "resume_queue", "pause_queue", "pause_queue"]

    async def test_a_runner_claims_nothing_from_a_paused_queue_until_it_is_resumed(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        if not isinstance(driver, QueuePauses):
            pytest.skip("the driver cannot pause queues")
        queue = JobQueue(driver)
        await queue.pause_queue("emails")
        ran: list[str] = []
        runner = _runner(driver, ran, queues="emails,default")
        held = await enqueue(driver, payload={"id": "mail"}, queue="emails")
        plain = await enqueue(driver, payload={"id": "plain"})
        runner.start()
        try:
            # strict order would take the emails job first: the default one ran, so the
            # runner had read the pause, and it left the paused queue's job alone
            await wait_until(lambda: _all_completed(driver, [plain]), message="plain ran")
            assert await _states(driver, [held]) == ["pending"]
            assert ran == ["plain"]
            await queue.resume_queue("emails")
            await wait_until(lambda: _all_completed(driver, [held]), message="mail ran")
        finally:
            await runner.close()
        assert ran == ["plain", "mail"]
