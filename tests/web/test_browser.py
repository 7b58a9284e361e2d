"""The dashboard in a real browser: headless Chromium (Debian's package) driven by Playwright."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fastapi import FastAPI
from playwright.async_api import expect

from framework import ApplicationContext
from jobs import JOB_QUEUE, JOB_RUNNER
from jobs.web import create_dashboard
from tests.support import wait_until

from .conftest import launched_chromium
from .scenario import XSS, Handlers, populate, scenario_context
from .screenshots import capture

# One Chromium for the module (a launch takes a second or two), so one event loop for it too.
pytestmark = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="module")]

Serve = Callable[[Any], AbstractAsyncContextManager[str]]
COLUMNS = ("due", "scheduled", "active", "completed", "failed", "cancelled")
REFRESH_MS = 300
expect.set_options(timeout=10_000)  # the machine is shared: give a busy moment room


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser() -> AsyncIterator[Any]:
    async with launched_chromium() as chromium:
        yield chromium


@pytest_asyncio.fixture(loop_scope="module")
async def context() -> AsyncIterator[ApplicationContext]:
    async with scenario_context() as context:
        yield context


@pytest_asyncio.fixture(loop_scope="module")
async def ids(context: ApplicationContext) -> dict[str, str]:
    queue = context.get_value(JOB_QUEUE)
    ids = await populate(queue, emails=5)

    async def ran() -> bool:
        stats = await queue.stats()
        return (
            stats["email.send"].completed == 5
            and stats["report.build"].failed == 1
            and (stats["import.csv"].failed == 1)
        )

    await wait_until(ran, timeout=15, message="the scenario's jobs to run")
    return ids


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser: Any) -> AsyncIterator[Any]:
    """A tab; at the end, no script error and no Content-Security-Policy violation on it."""
    page = await browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield page
    await page.close()
    assert problems == []


def type_cell(page: Any, job_type: str, column: str) -> Any:
    return page.locator(f'tr[data-type="{job_type}"] td[data-column="{column}"]')


async def test_overview_counts_match_stats_and_follow_them_without_a_reload(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    queue = context.get_value(JOB_QUEUE)
    async with serve(create_dashboard(context, refresh_ms=REFRESH_MS)) as url:
        await page.goto(f"{url}/")
        stats = await queue.stats()
        for job_type, row in stats.items():
            for column in COLUMNS:
                await expect(type_cell(page, job_type, column)).to_have_text(
                    str(getattr(row, column))
                )
        completed = sum(row.completed for row in stats.values())  # + the nightly's, after 02:00
        await expect(page.get_by_test_id("total-completed")).to_have_text(str(completed))
        await page.evaluate("window.__loaded = 'once'")
        for number in range(2):
            await queue.enqueue("invoice.export", {"invoice": number})  # no handler: stays due
        await expect(type_cell(page, "invoice.export", "due")).to_have_text("2")
        await expect(page.get_by_test_id("total-due")).to_have_text("2")
        assert await page.evaluate("window.__loaded") == "once"  # the same page, not reloaded


async def test_a_failed_jobs_detail_shows_its_error(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    async with serve(create_dashboard(context)) as url:
        await page.goto(f"{url}/")
        await type_cell(page, "report.build", "failed").get_by_role("link").click()
        await expect(page).to_have_url(f"{url}/jobs?type=report.build&state=failed")
        await page.locator(f'a[href$="/job/{ids["failed"]}"]').click()
        await expect(page.get_by_test_id("job-state")).to_have_text("failed")
        error = page.get_by_test_id("error")
        await expect(error).to_contain_text(
            "ConnectionError: warehouse timed out building report 2026-11"
        )
        await expect(error).to_contain_text("in build")  # the traceback's tail


async def test_retry_moves_the_job_to_pending_and_the_page_shows_it_complete(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    queue = context.get_value(JOB_QUEUE)
    runner = context.get_value(JOB_RUNNER)
    context.get_value("handlers").fixed.set()
    runner.stop()  # hold the retried job in pending long enough to see it there
    async with serve(create_dashboard(context, allow_actions=True, refresh_ms=REFRESH_MS)) as url:
        await page.goto(f"{url}/job/{ids['failed']}")
        await page.evaluate("window.__loaded = 'once'")
        await page.get_by_test_id("retry").click()
        await expect(page.get_by_test_id("job-state")).to_have_text("pending")
        await expect(page.locator("#notice")).to_contain_text("queued to run again")
        info = await queue.get_job(ids["failed"])
        assert info is not None
        assert info.state == "pending"
        runner.start()
        await expect(page.get_by_test_id("job-state")).to_have_text("completed")
        assert await page.evaluate("window.__loaded") == "once"
    info = await queue.get_job(ids["failed"])
    assert info is not None
    assert (info.state, info.attempts) == ("completed", 2)


async def test_retry_all_failed_of_a_type_asks_first(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    queue = context.get_value(JOB_QUEUE)
    handlers: Handlers = context.get_value("handlers")
    handlers.fixed.set()
    async with serve(create_dashboard(context, allow_actions=True, refresh_ms=REFRESH_MS)) as url:
        await page.goto(f"{url}/")
        questions: list[str] = []

        async def decline(dialog: Any) -> None:
            questions.append(dialog.message)
            await dialog.dismiss()

        page.once("dialog", decline)
        button = page.locator('tr[data-type="report.build"]').get_by_test_id("retry-failed")
        await button.click()
        await wait_until(lambda: bool(questions), message="the confirmation dialog")
        assert questions == ["Retry all 1 failed jobs of type report.build?"]
        assert (await queue.stats())["report.build"].failed == 1  # declined: nothing moved

        async def accept(dialog: Any) -> None:
            await dialog.accept()

        page.once("dialog", accept)
        await button.click()
        await expect(type_cell(page, "report.build", "completed")).to_have_text("1")
        await expect(type_cell(page, "report.build", "failed")).to_have_text("0")
        await expect(type_cell(page, "import.csv", "failed")).to_have_text("1")  # another type


async def test_markup_in_a_payload_or_error_renders_as_text(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    async with serve(create_dashboard(context, allow_actions=True)) as url:
        for path in (f"/job/{ids['xss']}", "/jobs?type=import.csv"):
            await page.goto(f"{url}{path}")
            await page.wait_for_load_state("load")
            assert await page.evaluate("typeof window.__xss") == "undefined"
            assert await page.locator("img[src=x]").count() == 0
        await page.goto(f"{url}/job/{ids['xss']}")
        as_json = XSS.replace('"', '\\"')  # the payload is shown as JSON
        await expect(page.get_by_test_id("payload")).to_contain_text(as_json)
        await expect(page.get_by_test_id("error")).to_contain_text(f"row 7 is not valid: {XSS}")


async def test_read_only_mode_shows_no_buttons_and_a_forged_post_gets_403(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    queue = context.get_value(JOB_QUEUE)
    async with serve(create_dashboard(context)) as url:
        for path in ("/", "/jobs", f"/job/{ids['failed']}", f"/job/{ids['scheduled']}"):
            await page.goto(f"{url}{path}")
            assert await page.locator("form[method=post]").count() == 0, path
            actions = page.get_by_role("button", name=re.compile("retry|cancel|delete", re.I))
            assert await actions.count() == 0, path
            await expect(page.locator(".badge")).to_have_text("read-only")
        status = await page.evaluate(
            """async (jobId) => {
                const body = new FormData();
                body.set("job_id", jobId);
                const response = await fetch("actions/retry", {method: "POST", body});
                return response.status;
            }""",
            ids["failed"],
        )
    assert status == 403
    info = await queue.get_job(ids["failed"])
    assert info is not None
    assert info.state == "failed"


async def test_mounted_under_a_prefix_in_a_fastapi_app(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    queue = context.get_value(JOB_QUEUE)
    app = FastAPI()
    app.mount("/admin/jobs", create_dashboard(context, allow_actions=True, refresh_ms=REFRESH_MS))
    async with serve(app) as url:
        await page.goto(f"{url}/admin/jobs/")
        position = await page.evaluate(
            "getComputedStyle(document.querySelector('.topbar')).position"
        )
        assert position == "sticky"  # the stylesheet came from under the prefix
        await page.get_by_role("link", name="Jobs", exact=True).click()
        await expect(page).to_have_url(f"{url}/admin/jobs/jobs")
        await page.locator(f'a[href="/admin/jobs/job/{ids["scheduled"]}"]').click()
        await expect(page.get_by_test_id("job-state")).to_have_text("pending")
        await page.get_by_test_id("cancel").click()
        await expect(page.get_by_test_id("job-state")).to_have_text("cancelled")
    info = await queue.get_job(ids["scheduled"])
    assert info is not None
    assert info.state == "cancelled"


async def test_screenshots_of_the_dashboards_pages(browser: Any, tmp_path: Path) -> None:
    """The overview, a failed job, the Outbox page and the audit trail render (the docs' images)."""
    for path in await capture(browser, tmp_path):
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        assert path.stat().st_size > 20_000  # a rendered page, not a blank one


async def test_on_sqlite_a_failed_jobs_page_shows_its_error(
    page: Any, serve: Serve, tmp_path: Path
) -> None:
    from orm_sqlalchemy import SQLAlchemyJobStore

    store = SQLAlchemyJobStore(url=f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}")
    async with scenario_context(store) as context:
        queue = context.get_value(JOB_QUEUE)
        job_id = await queue.enqueue("report.build", {"month": "2026-12"}, key="report:2026-12")
        assert job_id is not None

        async def failed() -> bool:
            info = await queue.get_job(job_id)
            return info is not None and info.state == "failed"

        await wait_until(failed, timeout=15, message="the job to fail on SQLite")
        async with serve(create_dashboard(context)) as url:
            await page.goto(f"{url}/job/{job_id}")
            await expect(page.get_by_test_id("job-state")).to_have_text("failed")
            await expect(page.get_by_test_id("payload")).to_contain_text('"month": "2026-12"')
            await expect(page.locator(".facts")).to_contain_text("report:2026-12")
            await expect(page.get_by_test_id("error")).to_contain_text(
                "ConnectionError: warehouse timed out building report 2026-12"
            )


async def test_the_jobs_list_shows_new_jobs_without_a_reload(
    context: ApplicationContext, ids: dict[str, str], page: Any, serve: Serve
) -> None:
    queue = context.get_value(JOB_QUEUE)
    async with serve(create_dashboard(context, refresh_ms=REFRESH_MS)) as url:
        await page.goto(f"{url}/jobs?state=pending")
        await expect(page.locator(f'tr[data-job-id="{ids["scheduled"]}"]')).to_be_visible()
        await page.evaluate("window.__loaded = 'once'")
        job_id = await queue.enqueue("invoice.export", {"invoice": 1})
        await expect(page.locator(f'tr[data-job-id="{job_id}"]')).to_contain_text("pending")
        assert await page.evaluate("window.__loaded") == "once"
