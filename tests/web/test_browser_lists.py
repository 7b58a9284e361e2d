"""Job lists in Chromium: multi-select actions that keep the list's filter, a confirmation for
Delete, ticks that survive the live refresh; and the layout at 1280 px and at 390 px (nothing
wider than the window, every row's actions inside its panel, the Live toggle on screen)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from jobs import InProcessJobDriver, JobQueue
from jobs.web import create_dashboard
from tests.support import wait_until

from .conftest import launched_chromium, served

pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]
expect.set_options(timeout=10_000)
REFRESH_MS = 300


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Any]:
    async with launched_chromium() as chromium:
        yield chromium


async def _store() -> tuple[JobQueue, dict[str, list[str]]]:
    driver = InProcessJobDriver()
    queue = JobQueue(driver)
    ids: dict[str, list[str]] = {"pending": [], "failed": []}
    for n in range(3):
        ids["pending"].append(str(await queue.enqueue("email.send", {"n": n}, delay_ms=3_600_000)))
    for n in range(2):
        job_id = str(await queue.enqueue("report.build", {"month": n}, max_attempts=1))
        (claimed,) = await driver.claim(1, 30_000, ["report.build"])
        assert await driver.fail(claimed.id, claimed.lease_token, error="warehouse timed out " * 9)
        ids["failed"].append(job_id)
    await queue.enqueue("email.send", {"n": 9}, key="report.nightly:2026-12-05T02:00:00+00:00")
    return queue, ids


async def test_multi_select_cancel_keeps_the_filter_and_the_ticks_survive_refresh(
    browser: Any,
) -> None:
    queue, ids = await _store()
    dashboard = create_dashboard(queue, allow_actions=True, refresh_ms=REFRESH_MS)
    async with served(dashboard) as url:
        page = await browser.new_page()
        try:
            listed = f"{url}/jobs?state=pending&type=email.send"
            await page.goto(listed)
            for job_id in ids["pending"][:2]:
                await page.locator(f'tr[data-job-id="{job_id}"] input[data-pick]').check()
            await expect(page.get_by_test_id("selected-count")).to_have_text("2 selected")
            before = await page.evaluate("document.body.dataset.refreshedAt || ''")
            await wait_until(
                lambda: _refreshed_since(page, before), message="a live refresh of the list"
            )
            for job_id in ids["pending"][:2]:  # still ticked after the list was replaced
                box = page.locator(f'tr[data-job-id="{job_id}"] input[data-pick]')
                await expect(box).to_be_checked()
            await page.get_by_test_id("bulk-cancel").click()
            await expect(page.locator("#notice")).to_have_text("2 of 2 selected jobs cancelled")
            await expect(page.locator("tr[data-job-id]")).to_have_count(2)  # 1 of 3 + keyed one
            assert page.url == listed  # the filter stays
        finally:
            await page.close()
    states = [(await queue.get_job(job_id)).state for job_id in ids["pending"]]  # type: ignore[union-attr]
    assert states == ["cancelled", "cancelled", "pending"]


async def _refreshed_since(page: Any, before: str) -> bool:
    return bool(await page.evaluate("document.body.dataset.refreshedAt || ''") not in ("", before))


async def test_delete_selected_asks_first_and_keeps_the_filter(browser: Any) -> None:
    queue, ids = await _store()
    async with served(create_dashboard(queue, allow_actions=True, refresh_ms=REFRESH_MS)) as url:
        page = await browser.new_page()
        try:
            listed = f"{url}/jobs?state=failed"
            await page.goto(listed)
            await page.locator("input[data-pick-all]").check()
            await expect(page.get_by_test_id("selected-count")).to_have_text("2 selected")
            questions: list[str] = []

            async def decline(dialog: Any) -> None:
                questions.append(dialog.message)
                await dialog.dismiss()

            page.once("dialog", decline)
            await page.get_by_test_id("bulk-delete").click()
            await wait_until(lambda: bool(questions), message="the confirmation dialog")
            assert questions == [
                "Delete the selected jobs? Their records and keys are gone for good."
            ]
            assert None not in [await queue.get_job(job_id) for job_id in ids["failed"]]

            async def accept(dialog: Any) -> None:
                await dialog.accept()

            page.once("dialog", accept)
            await page.get_by_test_id("bulk-delete").click()
            await expect(page.locator("#notice")).to_have_text("2 of 2 selected jobs deleted")
            await expect(page.locator("tr[data-job-id]")).to_have_count(0)
            assert page.url == listed
        finally:
            await page.close()
    assert [await queue.get_job(job_id) for job_id in ids["failed"]] == [None, None]


@pytest.mark.parametrize("width", [1280, 390])
async def test_the_layout_fits_the_window(browser: Any, width: int, tmp_path: Path) -> None:
    queue, _ = await _store()
    async with served(create_dashboard(queue, allow_actions=True)) as url:
        page = await browser.new_page(viewport={"width": width, "height": 844})
        try:
            for path in ("/", "/jobs", "/audit", "/schedules", "/queues"):
                await page.goto(url + path)
                page_width = await page.evaluate("document.documentElement.scrollWidth")
                assert page_width <= width, f"{path} is {page_width} px wide at {width} px"
                toggle = await page.locator("#live-toggle").bounding_box()
                assert toggle is not None
                assert toggle["x"] >= 0, (path, toggle)
                assert toggle["x"] + toggle["width"] <= width, (path, toggle)
                await page.screenshot(path=str(tmp_path / f"{path.strip('/') or 'overview'}.png"))
            await page.goto(url + "/jobs")
            if width >= 1280:  # wide enough: every row's buttons inside the panel, no scrolling
                panel = await page.locator("#job-list").bounding_box()
                assert panel is not None
                for button in await page.locator("#job-list [data-testid=delete]").all():
                    box = await button.bounding_box()
                    assert box is not None
                    assert box["x"] + box["width"] <= panel["x"] + panel["width"], box
        finally:
            await page.close()
