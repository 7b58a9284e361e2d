"""Screenshots of the dashboard for the docs: ``python -m tests.web.screenshots [DIR]`` (by
default docs/images).

The browser test ``test_screenshots_of_the_overview_and_a_failed_job`` runs ``capture`` too, so
this script cannot rot unnoticed.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from jobs import JOB_QUEUE, InProcessJobDriver, JobQueue, ManualClock
from jobs.web import create_dashboard
from tests.support import wait_until

from .conftest import served
from .scenario import busy_hour, populate, scenario_context

VIEWPORT = {"width": 1360, "height": 900}
OVERVIEW = "dashboard-overview.png"
FAILED_JOB = "dashboard-failed-job.png"


async def settled(queue: JobQueue) -> None:
    async def idle() -> bool:
        stats = (await queue.stats()).values()
        return not any(row.active or (row.due and row.type != "invoice.export") for row in stats)

    await wait_until(idle, timeout=10, message="the runner to run every due job")


async def capture(browser: Any, out_dir: Path) -> list[Path]:
    """An hour of traffic, then the overview and a failed job's page as PNGs in ``out_dir``."""
    clock = ManualClock(start_ms=int(time.time() * 1000) - 60 * 60_000)
    async with scenario_context(InProcessJobDriver(clock=clock)) as context:
        queue = context.get_value(JOB_QUEUE)
        await busy_hour(queue, clock, lambda: settled(queue))
        await populate(queue, emails=0)
        await settled(queue)
        async with served(create_dashboard(context, allow_actions=True)) as url:
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
            finally:
                await page.close()
    return [overview, failed]


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
