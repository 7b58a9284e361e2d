"""Screenshots of the dashboard for the docs: ``python -m tests.web.screenshots [DIR]`` (by
default docs/images).

The browser test ``test_screenshots_of_the_dashboards_pages`` runs ``capture`` too, so
this script cannot rot unnoticed.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from jobs import JOB_QUEUE, InProcessJobDriver, JobQueue, ManualClock
from jobs.audit import Actor
from jobs.web import create_dashboard
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine
from tests.support import wait_until

from .conftest import served
from .scenario import busy_hour, populate, scenario_context

VIEWPORT = {"width": 1360, "height": 900}
OVERVIEW = "dashboard-overview.png"
FAILED_JOB = "dashboard-failed-job.png"
OUTBOX = "dashboard-outbox.png"
AUDIT = "dashboard-audit.png"
HAND_OVER_ERROR = (
    "StoreUnavailableError: the job store (redis://jobs:6379/0) did not answer: "
    "ConnectionError: Connection refused"
)


async def settled(queue: JobQueue) -> None:
    async def idle() -> bool:
        stats = (await queue.stats()).values()
        return not any(row.active or (row.due and row.type != "invoice.export") for row in stats)

    await wait_until(idle, timeout=10, message="the runner to run every due job")


@asynccontextmanager
async def outbox_with_a_stuck_entry() -> AsyncIterator[SQLAlchemyOutboxStore]:
    """A SQLite outbox (in a directory of its own) with entries waiting and one whose
    hand-over keeps failing."""
    with tempfile.TemporaryDirectory() as directory:
        engine = create_engine(f"sqlite+aiosqlite:///{Path(directory) / 'app.db'}")
        tm = SQLAlchemyTransactionManager(engine)
        store = SQLAlchemyOutboxStore(tm)
        try:
            await store.create_schema()
            async with tm.transaction():
                await store.append("receipt.send", {"order": 1041}, key="receipt:1041")
            (entry,) = await store.claim(1, 60_000)
            await store.release(entry.id, entry.lease_token, delay_ms=30_000, error=HAND_OVER_ERROR)
            for order in (1042, 1043):
                async with tm.transaction():
                    await store.append("receipt.send", {"order": order})
            yield store
        finally:
            await store.close()
            await engine.dispose()


async def operator_actions(queue: JobQueue) -> None:
    """A few operator actions from each source, for the audit trail."""
    failed = (await queue.list_jobs(state="failed", type="report.build")).jobs
    await queue.retry(failed[0].id, actor=Actor("ann@ops-1", "cli"))
    await queue.retry_failed("crm.sync", actor=Actor("bob@laptop", "dashboard"))
    scheduled = (await queue.list_jobs(state="pending", type="email.send")).jobs
    await queue.cancel(scheduled[0].id, actor=Actor("deploy-bot", "api"))


async def capture(browser: Any, out_dir: Path) -> list[Path]:
    """An hour of traffic, then the overview, a failed job's page, the Outbox page and the
    audit trail as PNGs in ``out_dir``."""
    clock = ManualClock(start_ms=int(time.time() * 1000) - 60 * 60_000)
    async with scenario_context(InProcessJobDriver(clock=clock)) as context, \
            outbox_with_a_stuck_entry() as outbox:  # fmt: skip
        queue = context.get_value(JOB_QUEUE)
        await busy_hour(queue, clock, lambda: settled(queue))
        await populate(queue, emails=0)
        await settled(queue)
        dashboard = create_dashboard(context, outbox=outbox, allow_actions=True)
        async with served(dashboard) as url:
            page = await browser.new_page(viewport=VIEWPORT)
            try:
                await page.goto(f"{url}/")
                await page.wait_for_selector("#throughput svg")
                overview = out_dir / OVERVIEW
                await page.screenshot(path=str(overview), full_page=True)
                crm = (await queue.list_jobs(state="failed", type="crm.sync")).jobs[0]
                await page.goto(f"{url}/job/{crm.id}")
                await page.wait_for_selector("[data-testid=error]")
                failed = out_dir / FAILED_JOB
                await page.screenshot(path=str(failed), full_page=True)
                await page.goto(f"{url}/outbox")
                await page.wait_for_selector("tr[data-state=failing]")
                await page.wait_for_load_state("load")
                outbox_page = out_dir / OUTBOX
                await page.screenshot(path=str(outbox_page), full_page=True)
                await operator_actions(queue)
                await page.goto(f"{url}/audit")
                await page.wait_for_selector("text=deploy-bot")
                await page.wait_for_load_state("load")
                audit = out_dir / AUDIT
                await page.screenshot(path=str(audit), full_page=True)
            finally:
                await page.close()
    return [overview, failed, outbox_page, audit]


async def main(out_dir: Path) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=shutil.which("chromium"), headless=True
        )
        try:
            for path in await capture(browser, out_dir):
                print(path)
        finally:
            await browser.close()


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
    target.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(target))
