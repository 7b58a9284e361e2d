"""A small application whose jobs fill every part of the dashboard, shared by the tests and by
``python -m tests.web.screenshots``.

Handlers: ``email.send`` succeeds; ``report.build`` fails (one attempt) until ``Handlers.fixed``
is set; ``import.csv`` fails with markup in its error; ``report.nightly`` has a schedule.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from framework import ApplicationBuilder, ApplicationContext, configuration, entry
from jobs import (
    JOB_DRIVER,
    JOB_RUNNER,
    JOBS_SETTINGS,
    JobContext,
    JobDriver,
    JobQueue,
    JobsAutoConfiguration,
    JobsSettings,
    ManualClock,
    job_handler,
)
from jobs.audit import Actor

XSS = '<script>window.__xss = "ran"</script><img src=x onerror="window.__xss = \'ran\'">'

CRM_ERRORS = [
    TimeoutError("crm.example.com did not answer within 10 s"),
    ConnectionResetError("connection reset by crm.example.com"),
    PermissionError("crm.example.com: 403 Forbidden (API token revoked?)"),
]


class Handlers:
    def __init__(self) -> None:
        self.fixed = asyncio.Event()
        self.sent: list[Any] = []

    @job_handler("email.send")
    async def send(self, payload: Any) -> None:
        self.sent.append(payload)

    @job_handler("report.build", max_attempts=1)
    async def build(self, payload: Any) -> None:
        if not self.fixed.is_set():
            raise ConnectionError(f"warehouse timed out building report {payload['month']}")

    @job_handler("crm.sync", max_attempts=3)
    async def sync(self, payload: Any, ctx: JobContext) -> None:
        raise CRM_ERRORS[min(ctx.attempt, len(CRM_ERRORS)) - 1]

    @job_handler("import.csv", max_attempts=1)
    async def load(self, payload: Any) -> None:
        raise ValueError(f"row 7 is not valid: {XSS}")

    @job_handler("report.nightly", cron="0 3 * * *", timezone="Europe/Berlin")
    async def nightly(self, payload: Any) -> None:
        return None


@configuration
class DashboardScenario:
    @entry()
    def handlers(self) -> Handlers:
        return Handlers()

    @entry(JOBS_SETTINGS)
    def jobs_settings(self) -> JobsSettings:
        return JobsSettings(poll_interval_ms=50, heartbeat_ms=200)


@asynccontextmanager
async def scenario_context(driver: JobDriver | None = None) -> AsyncIterator[ApplicationContext]:
    """The scenario's context with its runner started (on ``driver``, by default in-process)."""
    classes: list[type] = [JobsAutoConfiguration, DashboardScenario]
    if driver is not None:

        @configuration
        class GivenDriver:
            @entry(JOB_DRIVER)
            def job_driver(self) -> JobDriver:
                return driver

        classes.append(GivenDriver)
    context = await ApplicationBuilder(classes).run()
    try:
        context.get_value(JOB_RUNNER).start()
        yield context
    finally:
        await context.close()


async def populate(queue: JobQueue, *, emails: int = 24) -> dict[str, str]:
    """Jobs in every state the runner can reach; the ids of a few, by role."""
    ids: dict[str, str] = {}
    for number in range(emails):
        await queue.enqueue(
            "email.send", {"to": f"user{number}@example.com", "template": "receipt"}
        )
    ids["failed"] = _id(
        await queue.enqueue("report.build", {"month": "2026-11"}, key="report:2026-11")
    )
    ids["xss"] = _id(await queue.enqueue("import.csv", {"file": XSS, "rows": 120}))
    ids["scheduled"] = _id(
        await queue.enqueue("email.send", {"to": "later@example.com"}, delay_ms=3_600_000)
    )
    ids["cancelled"] = _id(
        await queue.enqueue("email.send", {"to": "nobody@example.com"}, delay_ms=3_600_000)
    )
    await queue.cancel(ids["cancelled"], actor=Actor("ann@ops-1", "dashboard"))
    return ids


def _id(job_id: str | None) -> str:
    assert job_id is not None
    return job_id


async def busy_hour(
    queue: JobQueue, clock: ManualClock, settle: Callable[[], Awaitable[None]]
) -> None:
    """An hour of traffic on a driver whose manual clock starts an hour ago, a minute at a time.

    ``settle`` waits until the runner has run everything due (so each job finishes in its minute).
    """
    for number in range(3):  # a type no worker handles yet: due, and waiting since the start
        await queue.enqueue("invoice.export", {"invoice": 1000 + number})
    for minute in range(60):
        burst = 6 + (minute * 7) % 11 + (12 if 35 <= minute <= 42 else 0)
        for number in range(burst):
            await queue.enqueue("email.send", {"to": f"user{minute}-{number}@example.com"})
        if minute == 51:
            await queue.enqueue("crm.sync", {"account": 4711, "fields": ["email", "plan"]})
        if minute % 9 == 4:
            await queue.enqueue("report.build", {"month": f"2026-{minute % 12 + 1:02}"})
        await settle()
        clock.advance(60_000)
