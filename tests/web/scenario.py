"""A small application whose jobs fill every part of the dashboard, shared by the tests and by
``python -m tests.web.screenshots``.

Handlers: ``email.send`` succeeds; ``report.build`` fails (one attempt) until ``Handlers.fixed``
is set; ``import.csv`` fails with markup in its error; ``report.nightly`` has a schedule.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from framework import ApplicationBuilder, ApplicationContext, configuration, entry
from jobs import (
    JOB_RUNNER,
    JOBS_SETTINGS,
    JobQueue,
    JobsAutoConfiguration,
    JobsSettings,
    job_handler,
)

XSS = '<script>window.__xss = "ran"</script><img src=x onerror="window.__xss = \'ran\'">'


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
async def scenario_context() -> AsyncIterator[ApplicationContext]:
    """The scenario's context (in-process driver) with its runner started; closed after."""
    context = await ApplicationBuilder([JobsAutoConfiguration, DashboardScenario]).run()
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
    await queue.cancel(ids["cancelled"])
    return ids


def _id(job_id: str | None) -> str:
    assert job_id is not None
    return job_id
