"""The live loss auditor (issue 33, item 6) on real stores: jobs on SQLite, PostgreSQL and
Redis, the outbox on SQLite (PostgreSQL beside PostgreSQL jobs). Each violation is planted
behind the auditor's back (a job deleted under its published entry, an entry no relay takes,
a job due or active for hours by a manual clock shared by the stores and the auditor); a
clean store passes."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from jobs import JobOutboxPublisher, JobQueue, ManualClock
from jobs.loss_audit import AuditReport, AuditSLOs, LossAuditor
from jobs.loss_audit_service import LossAuditService
from jobs.new_job import NewJob
from jobs.spi import JobDriver, WorkerRegistration, outbox_workflow_id
from jobs.workflow import chain
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager
from tests.integration.outbox.conftest import OutboxHarness
from tests.stores import StoreTarget
from tests.support import captured_logs, wait_until

MINUTE = 60_000
KINDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


class World:
    """A job store and an outbox store on one manual clock, and an auditor reading both."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.clock = ManualClock()
        self.target = StoreTarget.fresh(kind, tmp_path)
        self.driver: JobDriver = self.target.open(self.clock)
        self.queue = JobQueue(self.driver)
        self.harness = OutboxHarness("postgres" if kind == "postgres" else "sqlite", tmp_path)
        self.tm = SQLAlchemyTransactionManager(self.harness.engine())
        self.outbox: SQLAlchemyOutboxStore = self.harness.store(self.tm, clock=self.clock)

    def auditor(self, **slos: int) -> LossAuditor:
        return LossAuditor(self.driver, self.outbox, slos=AuditSLOs(**slos), clock=self.clock)

    async def append(self, *types: str) -> list[str]:
        ids = []
        async with self.tm.transaction():
            for job_type in types:
                entry_id = await self.outbox.append(job_type, {"n": len(ids)})
                assert entry_id is not None
                ids.append(entry_id)
        return ids

    async def publish(self) -> None:
        """What a relay does: claim, enqueue each entry as a job (keyed), mark published."""
        entries = await self.outbox.claim(100, MINUTE)
        await JobOutboxPublisher(self.queue).publish_many(entries)
        assert len(await self.outbox.mark_published_many(entries)) == len(entries)

    async def close(self) -> None:
        await self.driver.close()
        await self.harness.cleanup()
        await self.target.drop()


@pytest.fixture(params=KINDS)
async def world(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[World]:
    made = World(request.param, tmp_path)
    await made.harness.setup(made.outbox)
    yield made
    await made.close()


def checks(report: AuditReport) -> list[tuple[str, str]]:
    return sorted((finding.check, finding.target) for finding in report.findings)


async def test_a_clean_store_passes(world: World) -> None:
    await world.append("audit.mail", "audit.mail", "audit.bill")
    await world.publish()
    [claimed] = await world.driver.claim(1, MINUTE, ["audit.bill"])
    assert await world.driver.complete(claimed.id, claimed.lease_token)
    world.clock.advance(1_000)
    auditor = world.auditor()
    report = await auditor.check()
    assert report.findings == []
    assert (report.ok, report.outbox_checked, report.entries_checked) == (True, True, 3)
    assert auditor.health()["healthy"] is True
    world.clock.advance(1_000)
    again = await auditor.check()  # the walk goes on from where it stopped
    assert (again.ok, again.entries_checked) == (True, 0)


async def test_a_published_workflow_entry_is_found_by_its_workflow(world: World) -> None:
    """An ``append_workflow`` entry becomes unkeyed jobs: the auditor looks for its workflow
    (``outbox_workflow_id``), not a job holding the entry's key."""
    async with world.tm.transaction():
        entry_id = await world.outbox.append_workflow(
            chain(NewJob(type="audit.step", payload={}), NewJob(type="audit.step", payload={}))
        )
    await world.publish()
    assert entry_id is not None
    assert await world.queue.get_workflow(outbox_workflow_id(entry_id)) is not None
    world.clock.advance(1_000)
    report = await world.auditor().check()
    assert report.findings == []
    assert report.entries_checked == 1


async def test_a_published_entry_whose_job_is_gone_is_reported_every_pass(
    world: World, metric_reader: InMemoryMetricReader
) -> None:
    kept, lost = await world.append("audit.kept", "audit.lost")
    await world.publish()
    job = await world.driver.find_job(f"outbox:{lost}")
    assert job is not None
    assert await world.driver.delete(job.id)  # the store loses it, behind the API's back
    auditor = world.auditor()
    report = await auditor.check()
    assert checks(report) == [("outbox_job_missing", f"entry {lost}")]
    [finding] = report.findings
    assert finding.type == "audit.lost"
    assert f"no job holds its key 'outbox:{lost}'" in finding.message
    assert report.to_json()["counts"] == {"outbox_job_missing": 1}
    assert auditor.health()["healthy"] is False
    world.clock.advance(1_000)
    assert checks(await auditor.check()) == [("outbox_job_missing", f"entry {lost}")]
    assert _violations(metric_reader)["outbox_job_missing"] == 1
    assert kept != lost


async def test_entries_no_relay_takes_are_flagged_after_the_slo(world: World) -> None:
    idle, failing = await world.append("audit.idle", "audit.failing")
    claimed = {entry.id: entry for entry in await world.outbox.claim(10, MINUTE)}
    assert await world.outbox.release(
        failing, claimed[failing].lease_token, delay_ms=0, error="ConnectionError: no broker"
    )  # the hand-over failed
    assert await world.outbox.release(idle, claimed[idle].lease_token, delay_ms=0, error="")
    auditor = world.auditor(outbox_slo_ms=5 * MINUTE)
    world.clock.advance(4 * MINUTE)
    assert (await auditor.check()).ok  # within the SLO
    world.clock.advance(2 * MINUTE)
    report = await auditor.check()
    assert checks(report) == sorted(
        [("outbox_unpublished", f"entry {idle}"), ("outbox_unpublished", f"entry {failing}")]
    )
    messages = {finding.target: finding.message for finding in report.findings}
    assert (
        "its hand-over fails (1 attempts): ConnectionError: no broker"
        in messages[f"entry {failing}"]
    )
    assert "unpublished for 6m" in messages[f"entry {idle}"]


async def test_jobs_due_past_the_slo_name_the_type_and_whether_a_worker_serves_it(
    world: World,
) -> None:
    await world.queue.enqueue("audit.due", {})
    auditor = world.auditor(due_slo_ms=5 * MINUTE)
    world.clock.advance(6 * MINUTE)
    report = await auditor.check()
    assert checks(report) == [("due_no_worker", "type audit.due")]
    assert "1 due job(s) of 'audit.due', the oldest due for 6m" in report.findings[0].message
    await world.driver.register_worker(
        WorkerRegistration(
            id="w1",
            host=socket.gethostname(),
            pid=1,
            types=("audit.due",),
            concurrency=1,
            in_flight=0,
        ),
        ttl_ms=MINUTE,
    )
    assert checks(await auditor.check()) == [("due_stuck", "type audit.due")]


async def test_an_active_job_past_the_slo_is_reported_by_id(world: World) -> None:
    stuck = await world.queue.enqueue("audit.stuck", {})
    patient = await world.queue.enqueue("audit.long", {}, timeout_ms=3 * 60 * MINUTE)
    claimed = await world.driver.claim(10, 1_000, ["audit.stuck", "audit.long"])
    assert len(claimed) == 2
    world.clock.advance(90 * MINUTE)  # the leases expired long ago; nobody reclaims them
    report = await world.auditor(active_slo_ms=60 * MINUTE).check()
    assert checks(report) == [("active_stuck", f"job {stuck}")]  # not the 3 h job
    assert report.active_checked == 2
    message = report.findings[0].message
    expected = "'audit.stuck', attempt 1/3, active for 90m since due (SLO 60m): no live worker"
    assert expected in message
    assert patient is not None


def _violations(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    found: dict[str, int] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "neverlost.audit.violations":
                    for point in metric.data.data_points:
                        found[str(point.attributes["audit.check"])] = int(point.value)
    return found


async def test_the_service_turns_health_red_naming_the_lost_entry(world: World) -> None:
    """As a worker runs it: a pass every interval, health red while a finding lasts."""
    service = LossAuditService(world.driver, world.outbox, interval_ms=50)
    service.start()
    try:
        await wait_until(lambda: service.last_report is not None, timeout=10)
        assert service.health().healthy, service.health().reasons
        [lost] = await world.append("audit.gone")
        await world.publish()
        job = await world.driver.find_job(f"outbox:{lost}")
        assert job is not None
        assert await world.driver.delete(job.id)

        def red() -> bool:
            return not service.health().healthy

        await wait_until(red, timeout=10)
        reasons = service.health().reasons
        assert any(f"outbox_job_missing entry {lost}" in reason for reason in reasons), reasons
    finally:
        await service.close()


async def test_a_walk_that_falls_behind_the_look_back_says_what_it_skipped(world: World) -> None:
    await world.append("audit.a", "audit.b", "audit.c")
    await world.publish()
    auditor = world.auditor(max_entries=1, lookback_ms=10 * MINUTE, due_slo_ms=60 * MINUTE)
    first = await auditor.check()
    assert (first.entries_checked, first.backlog) == (1, True)
    world.clock.advance(20 * MINUTE)  # the two others are now older than the look-back
    with captured_logs("WARNING") as logs:
        later = await auditor.check()
    assert (later.ok, later.entries_checked) == (True, 0)
    assert any("fell behind" in record["message"] for record in logs), logs
