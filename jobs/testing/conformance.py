"""The driver conformance suite: every rule of the JobDriver SPI, written once.

Each test takes a ``driver_harness`` fixture: a ManualClock and a way to open drivers on one
fresh, empty store (namespace, schema prefix or in-memory map) that all read ``harness.clock``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

from jobs.queue import JobQueue
from jobs.schedule import Schedule, occurrence_iso
from jobs.scheduler import JobScheduler, PassReport
from jobs.spi import JOB_STATES, JobDriver

from .conformance_audit import AuditConformance
from .conformance_batches import BatchConformance
from .conformance_counters import CountersConformance
from .conformance_fleet_limits import FleetLimitConformance
from .conformance_limits import LimitsConformance
from .conformance_malformed import MalformedRecordConformance
from .conformance_options import OptionsConformance
from .conformance_pauses import PauseConformance
from .conformance_priority import PriorityConformance
from .conformance_progress import ProgressConformance
from .conformance_queues import QueueConformance
from .conformance_results import ResultsConformance
from .conformance_runner import RunnerConformance
from .conformance_stalls import StallConformance
from .conformance_workflows import WorkflowConformance
from .dashboard_cases import DashboardConformance
from .helpers import ALL, LEASE_MS, DriverHarness, claim_one, enqueue
from .operations import OperationsConformance
from .requests import new_request

__all__ = [
    "ALL",
    "LEASE_MS",
    "DriverConformance",
    "DriverHarness",
    "claim_one",
    "enqueue",
    "new_request",
]


class DriverConformance(
    AuditConformance,
    BatchConformance,
    CountersConformance,
    FleetLimitConformance,
    OperationsConformance,
    DashboardConformance,
    RunnerConformance,
    LimitsConformance,
    OptionsConformance,
    PauseConformance,
    PriorityConformance,
    ProgressConformance,
    QueueConformance,
    ResultsConformance,
    StallConformance,
    MalformedRecordConformance,
    WorkflowConformance,
):
    """The rules every JobDriver keeps. Subclass it and provide ``driver_harness``."""

    # -- enqueue and inspect -------------------------------------------------------------------

    async def test_enqueue_stores_a_pending_job(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        request = new_request("email.send", {"to": "a@b.c"}, max_attempts=5, timeout_ms=1_500)
        assert await driver.enqueue(request) == request.id
        info = await driver.get_job(request.id)
        assert info is not None
        assert (info.id, info.type, info.state) == (request.id, "email.send", "pending")
        assert info.payload == {"to": "a@b.c"}
        assert (info.attempts, info.max_attempts, info.timeout_ms) == (0, 5, 1_500)
        assert info.last_error is None
        assert int(info.run_at.timestamp() * 1000) == driver_harness.clock.now_ms()

    async def test_get_job_of_an_unknown_id_is_none(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        assert await driver.get_job(uuid.uuid4().hex) is None

    async def test_counts_report_every_state(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        assert await driver.counts() == dict.fromkeys(JOB_STATES, 0)
        for _ in range(4):
            await enqueue(driver)
        done, failed, active = await driver.claim(3, LEASE_MS, ALL)
        assert await driver.complete(done.id, done.lease_token)
        assert await driver.fail(failed.id, failed.lease_token, error="boom")
        assert await driver.counts() == {
            "pending": 1,
            "active": 1,
            "completed": 1,
            "failed": 1,
            "cancelled": 0,
        }
        assert active.id not in (done.id, failed.id)

    # -- claim ---------------------------------------------------------------------------------

    async def test_claim_leases_a_due_job_and_counts_the_attempt(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, payload={"n": 1}, max_attempts=4)
        job = await claim_one(driver)
        assert (job.id, job.type, json.loads(job.payload)) == (job_id, "t", {"n": 1})
        assert (job.attempt, job.max_attempts) == (1, 4)
        assert job.lease_token
        info = await driver.get_job(job_id)
        assert info is not None
        assert (info.state, info.attempts) == ("active", 1)

    async def test_claim_takes_at_most_limit(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        for _ in range(5):
            await enqueue(driver)
        assert len(await driver.claim(3, LEASE_MS, ALL)) == 3
        assert len(await driver.claim(3, LEASE_MS, ALL)) == 2
        assert await driver.claim(3, LEASE_MS, ALL) == []

    async def test_claim_takes_only_the_given_types(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        wanted = await enqueue(driver, "wanted")
        other = await enqueue(driver, "deployed.later")
        assert await driver.claim(10, LEASE_MS, []) == []
        claimed = await driver.claim(10, LEASE_MS, ["wanted", "missing"])
        assert [job.id for job in claimed] == [wanted]
        info = await driver.get_job(other)
        assert info is not None
        assert (info.state, info.attempts) == ("pending", 0)

    async def test_claim_takes_the_earliest_run_at_first(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        now = driver_harness.clock.now_ms()
        late = await enqueue(driver, run_at_ms=now - 1_000)
        early = await enqueue(driver, run_at_ms=now - 3_000)
        middle = await enqueue(driver, run_at_ms=now - 2_000)
        claimed = await driver.claim(3, LEASE_MS, ALL)
        assert [job.id for job in claimed] == [early, middle, late]

    async def test_a_delayed_job_waits_until_it_is_due(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        delayed = await enqueue(driver, delay_ms=5_000)
        scheduled = await enqueue(driver, run_at_ms=clock.now_ms() + 8_000)
        info = await driver.get_job(delayed)
        assert info is not None
        assert int(info.run_at.timestamp() * 1000) == clock.now_ms() + 5_000
        assert await driver.claim(10, LEASE_MS, ALL) == []
        clock.advance(4_999)
        assert await driver.claim(10, LEASE_MS, ALL) == []
        clock.advance(1)
        assert [job.id for job in await driver.claim(10, LEASE_MS, ALL)] == [delayed]
        clock.advance(3_000)
        assert [job.id for job in await driver.claim(10, LEASE_MS, ALL)] == [scheduled]

    # -- leases --------------------------------------------------------------------------------

    async def test_a_live_lease_is_not_claimed_again(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        await enqueue(driver)
        await claim_one(driver)
        driver_harness.clock.advance(LEASE_MS - 1)
        assert await driver.claim(10, LEASE_MS, ALL) == []

    async def test_an_expired_lease_is_claimed_again_with_a_new_token(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        first = await claim_one(driver)
        driver_harness.clock.advance(LEASE_MS)
        second = await claim_one(driver)
        assert second.id == job_id
        assert (second.attempt, second.stalls, second.reclaimed) == (1, 1, True)
        assert second.lease_token != first.lease_token

    async def test_heartbeat_extends_the_lease(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        await enqueue(driver)
        job = await claim_one(driver)
        clock.advance(LEASE_MS - 100)
        assert await driver.heartbeat(job.id, job.lease_token, LEASE_MS)
        clock.advance(LEASE_MS - 1)
        assert await driver.claim(10, LEASE_MS, ALL) == []
        clock.advance(1)
        again = await driver.claim(10, LEASE_MS, ALL)
        assert [(job.attempt, job.stalls) for job in again] == [(1, 1)]

    async def test_a_heartbeat_for_a_missing_job_creates_nothing(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        missing = uuid.uuid4().hex
        assert await driver.heartbeat(missing, "1:abc", LEASE_MS) is False
        assert await driver.get_job(missing) is None
        assert await driver.counts() == dict.fromkeys(JOB_STATES, 0)
        assert await driver.claim(10, LEASE_MS, ALL) == []

    async def test_a_stale_token_changes_nothing(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        job_id = await enqueue(driver)
        stale = await claim_one(driver)
        clock.advance(LEASE_MS)
        fresh = await claim_one(driver)
        before = await driver.get_job(job_id)
        assert await driver.heartbeat(job_id, stale.lease_token, LEASE_MS * 10) is False
        assert await driver.complete(job_id, stale.lease_token) is False
        assert await driver.retry(job_id, stale.lease_token, delay_ms=0, error="stale") is False
        assert await driver.fail(job_id, stale.lease_token, error="stale") is False
        assert await driver.release(job_id, stale.lease_token) is False
        assert await driver.release_many([(job_id, stale.lease_token)]) == [False]
        assert await driver.get_job(job_id) == before
        # The stale heartbeat did not extend the new holder's lease.
        clock.advance(LEASE_MS)
        third = await claim_one(driver)
        assert (third.attempt, third.stalls) == (1, 2)
        assert await driver.complete(job_id, fresh.lease_token) is False
        assert await driver.complete(job_id, third.lease_token)

    async def test_a_token_for_another_job_is_stale(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        await enqueue(driver)
        await enqueue(driver)
        one, two = await driver.claim(2, LEASE_MS, ALL)
        assert await driver.complete(one.id, two.lease_token) is False
        info = await driver.get_job(one.id)
        assert info is not None
        assert info.state == "active"

    # -- settle --------------------------------------------------------------------------------

    async def test_complete_is_terminal(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        job = await claim_one(driver)
        assert await driver.complete(job_id, job.lease_token)
        info = await driver.get_job(job_id)
        assert info is not None
        assert (info.state, info.attempts, info.last_error) == ("completed", 1, None)
        driver_harness.clock.advance(LEASE_MS * 3)
        assert await driver.claim(10, LEASE_MS, ALL) == []
        assert await driver.complete(job_id, job.lease_token) is False
        assert await driver.retry(job_id, job.lease_token, delay_ms=0, error="late") is False
        assert await driver.fail(job_id, job.lease_token, error="late") is False
        assert await driver.heartbeat(job_id, job.lease_token, LEASE_MS) is False
        assert await driver.get_job(job_id) == info

    async def test_retry_puts_the_job_back_after_its_delay(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        clock = driver_harness.clock
        job_id = await enqueue(driver)
        job = await claim_one(driver)
        error = 'ValueError: bad input\n  File "handler.py", line 3'
        assert await driver.retry(job_id, job.lease_token, delay_ms=2_000, error=error)
        info = await driver.get_job(job_id)
        assert info is not None
        assert (info.state, info.attempts, info.last_error) == ("pending", 1, error)
        assert int(info.run_at.timestamp() * 1000) == clock.now_ms() + 2_000
        clock.advance(1_999)
        assert await driver.claim(10, LEASE_MS, ALL) == []
        clock.advance(1)
        again = await claim_one(driver)
        assert (again.id, again.attempt) == (job_id, 2)
        assert await driver.complete(job_id, job.lease_token) is False

    async def test_fail_is_terminal_and_keeps_the_error(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver)
        job = await claim_one(driver)
        assert await driver.fail(job_id, job.lease_token, error="RuntimeError: no")
        info = await driver.get_job(job_id)
        assert info is not None
        assert (info.state, info.last_error) == ("failed", "RuntimeError: no")
        driver_harness.clock.advance(LEASE_MS * 3)
        assert await driver.claim(10, LEASE_MS, ALL) == []

    async def test_complete_racing_a_reclaim_has_one_winner(
        self, driver_harness: DriverHarness
    ) -> None:
        first, second = await driver_harness.driver(), await driver_harness.driver()
        for _ in range(20):
            job_id = await enqueue(first)
            old = await claim_one(first)
            driver_harness.clock.advance(LEASE_MS)
            completed, reclaimed = await asyncio.gather(
                first.complete(job_id, old.lease_token), second.claim(1, LEASE_MS, ALL)
            )
            info = await first.get_job(job_id)
            assert info is not None
            if completed:
                assert reclaimed == []
                assert (info.state, info.attempts) == ("completed", 1)
            else:
                assert [(job.attempt, job.stalls) for job in reclaimed] == [(1, 1)]
                assert (info.state, info.attempts, info.stalls) == ("active", 1, 1)
                assert await second.complete(job_id, reclaimed[0].lease_token)

    # -- idempotency keys and retention ----------------------------------------------------------

    async def test_a_live_key_drops_repeats_in_every_state(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        job_id = await enqueue(driver, key="receipt:1")
        assert await driver.enqueue(new_request(key="receipt:1")) is None
        job = await claim_one(driver)
        assert await driver.enqueue(new_request(key="receipt:1")) is None
        assert await driver.complete(job_id, job.lease_token)
        assert await driver.enqueue(new_request(key="receipt:1")) is None
        assert await driver.enqueue(new_request("other.type", key="receipt:1")) is None
        assert await driver.enqueue(new_request(key="receipt:2")) is not None
        info = await driver.get_job(job_id)
        assert info is not None
        assert info.key == "receipt:1"
        counts = await driver.counts()
        assert sum(counts.values()) == 2

    async def test_concurrent_enqueues_of_one_key_store_one_job(
        self, driver_harness: DriverHarness
    ) -> None:
        drivers = [await driver_harness.driver() for _ in range(3)]
        requests = [new_request(key="only-once") for _ in range(30)]
        results = await asyncio.gather(
            *(drivers[i % 3].enqueue(request) for i, request in enumerate(requests))
        )
        stored = [result for result in results if result is not None]
        assert len(stored) == 1
        assert sum((await drivers[0].counts()).values()) == 1

    async def test_retention_prunes_completed_jobs_and_frees_their_keys(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver(retain_completed_ms=60_000, retain_failed_ms=600_000)
        clock = driver_harness.clock
        done_id = await enqueue(driver, key="k-done")
        done = await claim_one(driver)
        assert await driver.complete(done_id, done.lease_token)
        clock.advance(59_999)
        assert await driver.enqueue(new_request(key="k-done")) is None
        assert await driver.get_job(done_id) is not None
        clock.advance(1)
        assert await driver.get_job(done_id) is None
        again = await driver.enqueue(new_request(key="k-done"))
        assert again is not None
        assert again != done_id

    async def test_retention_prunes_failed_jobs_on_their_own_schedule(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver(retain_completed_ms=1_000, retain_failed_ms=120_000)
        clock = driver_harness.clock
        failed_id = await enqueue(driver, key="k-failed")
        job = await claim_one(driver)
        assert await driver.fail(failed_id, job.lease_token, error="no")
        clock.advance(60_000)
        assert await driver.enqueue(new_request(key="k-failed")) is None
        info = await driver.get_job(failed_id)
        assert info is not None
        assert info.state == "failed"
        clock.advance(60_000)
        assert await driver.get_job(failed_id) is None
        assert await driver.enqueue(new_request(key="k-failed")) is not None

    async def test_keep_until_holds_a_key_past_retention(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver(retain_completed_ms=1_000)
        clock = driver_harness.clock
        keep_until = clock.now_ms() + 3_600_000
        job_id = await enqueue(driver, key="nightly:03:00", keep_until_ms=keep_until)
        job = await claim_one(driver)
        assert await driver.complete(job_id, job.lease_token)
        clock.advance(3_599_999)
        assert await driver.enqueue(new_request(key="nightly:03:00")) is None
        clock.advance(1)
        assert await driver.enqueue(new_request(key="nightly:03:00")) is not None

    async def test_pending_and_active_jobs_are_never_pruned(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver(retain_completed_ms=1, retain_failed_ms=1)
        clock = driver_harness.clock
        pending_id = await enqueue(driver, run_at_ms=clock.now_ms() + 10_000_000)
        active_id = await enqueue(driver)
        await claim_one(driver)
        clock.advance(LEASE_MS - 1)
        await enqueue(driver)  # any write gives a driver the chance to prune
        for job_id, state in ((pending_id, "pending"), (active_id, "active")):
            info = await driver.get_job(job_id)
            assert info is not None
            assert info.state == state

    # -- schedules -----------------------------------------------------------------------------

    async def test_schedulers_racing_for_an_occurrence_store_one_job(
        self, driver_harness: DriverHarness
    ) -> None:
        """Five servers' schedulers ask for the same occurrence at once: one job. With no
        retention at all, a repeat after the job ran is still dropped (keep_until), and the
        next pass queues the next occurrence, once."""
        clock = driver_harness.clock
        drivers = [await driver_harness.driver(retain_completed_ms=0) for _ in range(5)]
        nightly = Schedule(cron="0 3 * * *", job="t", name="nightly")
        schedulers = [
            JobScheduler(JobQueue(driver), schedules=[nightly], clock=clock) for driver in drivers
        ]

        async def race() -> tuple[list[tuple[str, str]], list[str]]:
            reports: list[PassReport] = await asyncio.gather(*(s.run_pass() for s in schedulers))
            queued = [entry for report in reports for entry in report.queued]
            dropped = sorted(key for report in reports for key in report.dropped)
            assert [key for report in reports for key in report.failed + report.late] == []
            return queued, dropped

        first = nightly.next_after(clock.now_ms() + 120_000)
        assert first is not None
        clock.advance(first - 30_000 - clock.now_ms())  # 02:59:30
        first_key = f"nightly:{occurrence_iso(first)}"
        queued, dropped = await race()
        assert [key for key, _ in queued] == [first_key]
        assert dropped == [first_key] * 4
        assert await drivers[0].counts() == {
            "pending": 1,
            "active": 0,
            "completed": 0,
            "failed": 0,
            "cancelled": 0,
        }
        info = await drivers[1].get_job(queued[0][1])
        assert info is not None
        assert (info.type, info.key, info.state) == ("t", first_key, "pending")
        assert int(info.run_at.timestamp() * 1000) == first
        assert await drivers[2].claim(10, LEASE_MS, ALL) == []  # due at 03:00, not before

        clock.advance(30_000)  # 03:00
        job = await claim_one(drivers[3])
        assert job.key == first_key
        assert await drivers[3].complete(job.id, job.lease_token)

        clock.advance(30_000)  # 03:00:30: in the catch-up window, so every server asks again
        queued, dropped = await race()
        second_key = f"nightly:{occurrence_iso(first + 86_400_000)}"
        assert [key for key, _ in queued] == [second_key]
        assert dropped == sorted([first_key] * 5 + [second_key] * 4)
        assert await drivers[4].counts() == {
            "pending": 1,
            "active": 0,
            "completed": 1,
            "failed": 0,
            "cancelled": 0,
        }

    # -- data ----------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        "payload",
        [
            None,
            {"to": "a@b.c", "n": 1, "ok": True, "ratio": 0.5, "none": None},
            ["a", 1, -0.0, 5e-324, 1.7976931348623157e308, 2**63, -(2**63), 2**64 + 1],
            {"nul": "a\u0000b", "emoji": "\U0001f600", "rtl": "\u05e9\u05dc\u05d5\u05dd"},
            {"ls": "\u2028\u2029", "quote": "\"'`", "lua": "]]--[[ redis.call('FLUSHALL')"},
            "x" * 100_000,
        ],
        ids=["null", "object", "numbers", "unicode", "code-like", "long"],
    )
    async def test_payloads_round_trip_exactly(
        self, driver_harness: DriverHarness, payload: Any
    ) -> None:
        driver = await driver_harness.driver()
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        job_id = await enqueue(driver, payload_json=text)
        job = await claim_one(driver)
        assert job.payload == text
        info = await driver.get_job(job_id)
        assert info is not None
        assert info.payload == payload

    async def test_deeply_nested_payload_round_trips(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        payload: Any = "leaf"
        for depth in range(200):
            payload = {"d": payload, "i": depth} if depth % 2 else [payload]
        text = json.dumps(payload, separators=(",", ":"))
        await enqueue(driver, payload_json=text)
        assert (await claim_one(driver)).payload == text

    @pytest.mark.parametrize(
        "name",
        [
            "x'); DROP TABLE jobs;--",
            'a" OR "1"="1',
            "a%",
            "_",
            "\\",
            "*",
            "?",
            "[",
            "{tag}",
            ":",
            "with spaces",
            "line\nbreak\r\n",
            "é",
            "e\u0301",
            "\U0001f680",
            "]] redis.call('DEL', KEYS[1]) --",
            "k" * 255,
        ],
    )
    async def test_types_and_keys_are_data(self, driver_harness: DriverHarness, name: str) -> None:
        driver = await driver_harness.driver()
        bystander = await enqueue(driver, "ab", key="a-key")
        job_id = await enqueue(driver, name, key=name)
        assert await driver.enqueue(new_request(name, key=name)) is None
        claimed = await driver.claim(10, LEASE_MS, [name])
        assert [(job.id, job.type, job.key) for job in claimed] == [(job_id, name, name)]
        info = await driver.get_job(job_id)
        assert info is not None
        assert (info.type, info.key) == (name, name)
        other = await driver.get_job(bystander)
        assert other is not None
        assert (other.state, other.type, other.key) == ("pending", "ab", "a-key")

    async def test_claim_carries_timeout_key_and_trace_context(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        await enqueue(driver, timeout_ms=2_500, key="k", trace_context=traceparent)
        job = await claim_one(driver)
        assert (job.timeout_ms, job.key, job.trace_context) == (2_500, "k", traceparent)

    # -- concurrency ---------------------------------------------------------------------------

    async def test_concurrent_claimers_never_share_a_live_job(
        self, driver_harness: DriverHarness
    ) -> None:
        drivers = [await driver_harness.driver() for _ in range(4)]
        total = 200
        for index in range(total):
            await enqueue(drivers[index % 4], payload={"i": index})
        seen: list[str] = []

        async def claimer(driver: JobDriver) -> None:
            while True:
                batch = await driver.claim(7, LEASE_MS, ALL)
                if not batch:
                    return
                seen.extend(job.id for job in batch)

        await asyncio.gather(*(claimer(drivers[i % 4]) for i in range(8)))
        assert len(seen) == total
        assert len(set(seen)) == total

    # -- wake-up and close ---------------------------------------------------------------------

    async def test_wait_for_work_wakes_when_a_job_is_enqueued(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        waiter = asyncio.create_task(driver.wait_for_work(ALL, 30_000))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await enqueue(driver)
        await asyncio.wait_for(waiter, timeout=5)

    async def test_an_enqueue_between_a_claim_and_the_wait_ends_the_wait(
        self, driver_harness: DriverHarness
    ) -> None:
        """A driver may answer the wait from what its claim saw (the SQL stores do); a job
        enqueued after the claim still ends it."""
        driver = await driver_harness.driver()
        await driver.wait_for_work(ALL, 60)  # an idle runner has waited before
        await enqueue(driver)
        assert len(await driver.claim(10, LEASE_MS, ALL)) == 1
        await enqueue(driver)
        await asyncio.wait_for(driver.wait_for_work(ALL, 30_000), timeout=5)
        assert len(await driver.claim(10, LEASE_MS, ALL)) == 1

    async def test_wait_for_work_returns_after_its_timeout(
        self, driver_harness: DriverHarness
    ) -> None:
        driver = await driver_harness.driver()
        await asyncio.wait_for(driver.wait_for_work(ALL, 50), timeout=5)

    async def test_close_is_idempotent(self, driver_harness: DriverHarness) -> None:
        driver = await driver_harness.driver()
        await enqueue(driver)
        await driver.close()
        await driver.close()
