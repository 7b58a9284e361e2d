"""Every route of the dashboard over plain HTTP (httpx on the ASGI app, in this event loop)."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from framework import ApplicationContext
from jobs import JOB_QUEUE, InProcessJobDriver, JobPage, JobQueue, JobsSettings
from jobs.spi import FleetLimit
from jobs.web import create_dashboard
from tests.support import wait_until

from .conftest import bound_socket, client_for, csrf_token
from .scenario import XSS, populate, scenario_context


@pytest.fixture
async def context() -> AsyncIterator[ApplicationContext]:
    async with scenario_context() as context:
        yield context


@pytest.fixture
async def settled(context: ApplicationContext) -> dict[str, str]:
    """The scenario's jobs, once the runner has run everything that is due."""
    queue = context.get_value(JOB_QUEUE)
    ids = await populate(queue, emails=5)

    async def all_ran() -> bool:
        stats = await queue.stats()
        return (
            stats["email.send"].completed == 5
            and stats["import.csv"].failed == 1
            and (stats["report.build"].failed == 1)
        )

    await wait_until(all_ran, timeout=15, message="the scenario's jobs to run")
    return ids


def cell(page: str, job_type: str, column: str) -> str:
    row = re.search(rf'<tr data-type="{re.escape(job_type)}">(.*?)</tr>', page, re.S)
    assert row is not None, f"no row for {job_type}"
    value = re.search(
        rf'data-column="{column}">\s*(?:<a [^>]*>)?(?:<span [^>]*>)?(\d+)', row.group(1)
    )
    assert value is not None, f"no {column} cell for {job_type}"
    return value.group(1)


async def test_overview_shows_each_types_counts_as_stats_has_them(
    context: ApplicationContext, settled: dict[str, str]
) -> None:
    queue = context.get_value(JOB_QUEUE)
    async with client_for(create_dashboard(context)) as client:
        page = await client.get("/")
    assert page.status_code == 200
    stats = await queue.stats()
    for job_type, row in stats.items():
        for column in ("due", "scheduled", "active", "completed", "failed", "cancelled"):
            assert cell(page.text, job_type, column) == str(getattr(row, column)), (
                job_type,
                column,
            )
    # 5 emails, and the nightly schedule's job when the test runs after its 02:00 UTC occurrence
    completed = sum(row.completed for row in stats.values())
    assert completed - stats["email.send"].completed in (0, 1)
    assert f'data-testid="total-completed">{completed}<' in page.text
    assert f'data-testid="throughput-completed">{completed}<' in page.text  # all this minute
    assert 'data-testid="throughput-failed">2<' in page.text


async def test_jobs_page_filters_by_state_and_type_and_pages_with_the_cursor(
    queue: JobQueue,
) -> None:
    ids = {await queue.enqueue("email.send", {"n": n}) for n in range(7)}
    other = await queue.enqueue("sms.send", {"n": 0})
    expected = await queue.list_jobs(type="email.send", limit=3)
    async with client_for(create_dashboard(queue)) as client:
        first = await client.get("/jobs", params={"type": "email.send", "limit": "3"})
        assert first.status_code == 200
        listed = re.findall(r'data-job-id="([0-9a-f]+)"', first.text)
        assert listed == [job.id for job in expected.jobs]  # the queue's page, in its order
        cursor = re.search(r'rel="next" href="([^"]+)"', first.text)
        assert cursor is not None
        second = await client.get(html.unescape(cursor.group(1)))
        more = re.findall(r'data-job-id="([0-9a-f]+)"', second.text)
        assert len(more) == 3
        assert not set(more) & set(listed)
        assert set(more) <= ids
        failed = await client.get("/jobs", params={"state": "failed"})
        assert "data-job-id" not in failed.text
        assert "No failed jobs" in failed.text
        everything = await client.get("/jobs")
        assert other in everything.text


async def test_jobs_page_filters_by_queue_and_the_job_page_names_it(queue: JobQueue) -> None:
    mailed = await queue.enqueue("email.send", {"n": 1}, queue="emails")
    plain = await queue.enqueue("email.send", {"n": 2})
    async with client_for(create_dashboard(queue)) as client:
        everything = await client.get("/jobs")
        emails = await client.get("/jobs", params={"queue": "emails"})
        bad = await client.get("/jobs", params={"queue": "two words"})
        page = await client.get(f"/job/{mailed}")
    assert '<option value="emails">emails</option>' in everything.text
    assert {mailed, plain} <= set(re.findall(r'data-job-id="([0-9a-f]+)"', everything.text))
    assert re.findall(r'data-job-id="([0-9a-f]+)"', emails.text) == [mailed]
    assert '<td class="mono">emails</td>' in emails.text
    assert bad.status_code == 400
    assert "queue" in bad.text
    assert re.search(r"<dt>queue</dt><dd [^>]*>emails</dd>", page.text)


async def test_search_finds_a_job_by_id_or_by_key(queue: JobQueue) -> None:
    keyed = await queue.enqueue("email.send", {"n": 1}, key="receipt:7")
    plain = await queue.enqueue("email.send", {"n": 2})
    async with client_for(create_dashboard(queue)) as client:
        by_key = await client.get("/jobs", params={"q": "receipt:7"})
        by_id = await client.get("/jobs", params={"q": plain})
        missing = await client.get("/jobs", params={"q": "receipt:8"})
    assert re.findall(r'data-job-id="([0-9a-f]+)"', by_key.text) == [keyed]
    assert re.findall(r'data-job-id="([0-9a-f]+)"', by_id.text) == [plain]
    assert "No job has the id or key “receipt:8”" in missing.text


async def test_bad_filters_get_a_400_naming_the_fix(queue: JobQueue) -> None:
    async with client_for(create_dashboard(queue)) as client:
        state = await client.get("/jobs", params={"state": "lost"})
        limit = await client.get("/jobs", params={"limit": "5000"})
        cursor = await client.get("/jobs", params={"cursor": "not-a-cursor"})
    assert state.status_code == 400
    assert "unknown state &#39;lost&#39;" in state.text
    assert limit.status_code == 400
    assert "between 1 and 200" in limit.text
    assert cursor.status_code == 400
    assert "not a cursor" in cursor.text


async def test_job_detail_shows_payload_errors_key_and_times(
    context: ApplicationContext, settled: dict[str, str]
) -> None:
    async with client_for(create_dashboard(context)) as client:
        page = await client.get(f"/job/{settled['failed']}")
        missing = await client.get("/job/0000")
    assert page.status_code == 200
    assert "ConnectionError: warehouse timed out building report 2026-11" in page.text
    assert "in build" in page.text  # the traceback's tail, not only the message
    assert "report:2026-11" in page.text
    assert "&#34;month&#34;: &#34;2026-11&#34;" in page.text  # pretty-printed, escaped
    assert 'class="pill pill-failed"' in page.text
    assert re.search(r"<dt>stalls</dt><dd [^>]*>0 of 10</dd>", page.text)
    assert re.search(r"<dt>priority</dt><dd [^>]*>0</dd>", page.text)
    assert missing.status_code == 404
    assert "no such job" in missing.text


async def test_job_fields_are_escaped_everywhere(
    context: ApplicationContext, settled: dict[str, str]
) -> None:
    async with client_for(create_dashboard(context, allow_actions=True)) as client:
        pages = [
            await client.get(f"/job/{settled['xss']}"),
            await client.get("/jobs"),
            await client.get("/jobs", params={"q": XSS}),
            await client.get("/"),
        ]
    for page in pages:
        assert "<script>window" not in page.text
        assert "<img src=x" not in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "&lt;script&gt;window.__xss" in pages[0].text


async def test_schedules_page_lists_cron_timezone_next_and_last_occurrence(
    context: ApplicationContext, queue: JobQueue
) -> None:
    async with client_for(create_dashboard(context)) as client:
        page = await client.get("/schedules")
    async with client_for(create_dashboard(queue)) as client:
        unknown = await client.get("/schedules")
    row = re.search(r'<tr data-schedule="report.nightly">(.*?)</tr>', page.text, re.S)
    assert row is not None
    assert "0 3 * * *" in row.group(1)
    assert "Europe/Berlin" in row.group(1)
    assert re.search(r"\d{4}-\d\d-\d\d (01|02):00:00 UTC", row.group(1))  # 03:00 Berlin
    assert "pill-pending" in row.group(1) or "not queued" in row.group(1)
    assert "given a queue only" in unknown.text


async def test_static_files_ship_in_the_package(queue: JobQueue) -> None:
    async with client_for(create_dashboard(queue)) as client:
        page = await client.get("/")
        for asset in re.findall(r'(?:href|src)="(/static/[^"?]+)', page.text):
            response = await client.get(asset)
            assert response.status_code == 200, asset
            assert response.content


async def test_actions_need_the_csrf_token_and_change_nothing_without_it(
    context: ApplicationContext, settled: dict[str, str]
) -> None:
    queue = context.get_value(JOB_QUEUE)
    job_id = settled["failed"]
    async with client_for(create_dashboard(context, allow_actions=True)) as client:
        token = await csrf_token(client)
        forged = await client.post("/actions/retry", data={"job_id": job_id})
        wrong = await client.post("/actions/retry", data={"job_id": job_id, "csrf_token": "0" * 64})
        assert forged.status_code == wrong.status_code == 403
        assert "CSRF" in forged.text
        assert (await queue.get_job(job_id)).state == "failed"  # type: ignore[union-attr]
        done = await client.post(
            "/actions/retry", data={"job_id": job_id, "csrf_token": token, "next": "/jobs"}
        )
    assert done.status_code == 303
    assert done.headers["location"] == "/jobs"
    info = await queue.get_job(job_id)
    assert info is not None
    assert info.state in ("pending", "active", "failed")
    assert info.max_attempts == 2  # one more attempt, whatever the runner did with it since


async def test_cancel_and_retry_answer_json_to_the_script(queue: JobQueue) -> None:
    job_id = await queue.enqueue("email.send", {"n": 1}, delay_ms=60_000)
    assert job_id is not None
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        token = await csrf_token(client)
        headers = {"X-Dashboard-Fetch": "1"}
        body = {"job_id": job_id, "csrf_token": token}
        cancelled = await client.post("/actions/cancel", data=body, headers=headers)
        again = await client.post("/actions/cancel", data=body, headers=headers)
        retried = await client.post("/actions/retry", data=body, headers=headers)
    assert cancelled.json() == {"ok": True, "message": f"job {job_id} cancelled", "location": None}
    assert again.json()["ok"] is False
    assert "nothing changed" in again.json()["message"]
    assert retried.json()["ok"] is True
    assert (await queue.get_job(job_id)).state == "pending"  # type: ignore[union-attr]


async def test_retry_all_failed_of_a_type_asks_to_confirm_first(
    context: ApplicationContext, settled: dict[str, str]
) -> None:
    queue = context.get_value(JOB_QUEUE)
    async with client_for(create_dashboard(context, allow_actions=True)) as client:
        token = await csrf_token(client)
        body = {"type": "import.csv", "csrf_token": token, "next": "/"}
        asked = await client.post("/actions/retry-failed", data=body)
        assert asked.status_code == 200
        assert "Retry 1 failed jobs of type" in asked.text
        assert (await queue.stats())["import.csv"].failed == 1
        done = await client.post("/actions/retry-failed", data={**body, "confirmed": "yes"})
    assert done.status_code == 303
    info = await queue.get_job(settled["xss"])
    assert info is not None
    assert info.max_attempts == 2
    assert (await queue.get_job(settled["failed"])).max_attempts == 1  # type: ignore[union-attr]


async def test_the_queues_page_pauses_and_resumes_a_queue_with_the_csrf_token(
    queue: JobQueue,
) -> None:
    await queue.enqueue("email.send", {}, queue="emails")
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        page = await client.get("/queues")
        assert page.status_code == 200
        assert 'data-queue="emails"' in page.text
        assert 'data-queue="default"' in page.text
        forged = await client.post("/actions/pause-queue", data={"queue": "emails"})
        assert forged.status_code == 403
        assert await queue.list_queues() == [
            info for info in await queue.list_queues() if not info.paused
        ]
        token = await csrf_token(client)
        paused = await client.post(
            "/actions/pause-queue", data={"queue": "emails", "csrf_token": token}
        )
        assert paused.status_code == 303
        assert [q.name for q in await queue.list_queues() if q.paused] == ["emails"]
        shown = await client.get("/queues")
        assert "resume-queue" in shown.text
        bad = await client.post(
            "/actions/pause-queue", data={"queue": "two words", "csrf_token": token}
        )
        assert bad.status_code == 400
        resumed = await client.post(
            "/actions/resume-queue", data={"queue": "emails", "csrf_token": token}
        )
        assert resumed.status_code == 303
    assert not any(q.paused for q in await queue.list_queues())
    actions = (await queue.list_actions()).entries
    assert [(a.action, a.source) for a in actions[:2]] == [
        ("resume_queue", "dashboard"), ("pause_queue", "dashboard"),
    ]  # fmt: skip


async def test_redirects_stay_inside_the_dashboard(queue: JobQueue) -> None:
    job_id = await queue.enqueue("email.send", {}, delay_ms=60_000)
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        token = await csrf_token(client)
        answer = await client.post(
            "/actions/cancel",
            data={"job_id": job_id, "csrf_token": token, "next": "//evil.example/x"},
        )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/"


async def test_read_only_mode_has_no_buttons_and_refuses_every_post(
    context: ApplicationContext, settled: dict[str, str]
) -> None:
    queue = context.get_value(JOB_QUEUE)
    async with client_for(create_dashboard(context)) as client:
        paths = ("/", "/jobs", f"/job/{settled['failed']}", "/queues")
        pages = [await client.get(path) for path in paths]
        for page in pages:
            assert '<form method="post"' not in page.text
            assert '<button type="submit"' not in page.text
            assert "read-only" in page.text
        token = "0" * 64
        for path in (
            "/actions/retry", "/actions/retry-failed", "/actions/delete", "/",
            "/nowhere", "/actions/pause-queue",
        ):  # fmt: skip
            answer = await client.post(
                path, data={"job_id": settled["failed"], "csrf_token": token}
            )
            assert answer.status_code == 403, path
            assert "read-only" in answer.text
    assert (await queue.get_job(settled["failed"])).state == "failed"  # type: ignore[union-attr]


async def test_links_and_assets_respect_the_mount_path(queue: JobQueue) -> None:
    job_id = await queue.enqueue("email.send", {"n": 1}, delay_ms=60_000)
    host = Starlette(routes=[Mount("/ops/jobs", app=create_dashboard(queue, allow_actions=True))])
    async with client_for(host) as client:
        page = await client.get("/ops/jobs/jobs")
        assert page.status_code == 200
        links = re.findall(r'(?:href|src|action)="([^"]+)"', page.text)
        assert links
        assert all(link.startswith("/ops/jobs/") for link in links), links
        assert f'href="/ops/jobs/job/{job_id}"' in page.text
        css = await client.get("/ops/jobs/static/dashboard.css")
        assert css.status_code == 200
        assert "Path=/ops/jobs;" in page.headers["set-cookie"]
        token = await csrf_token(client, "/ops/jobs/")
        answer = await client.post(
            "/ops/jobs/actions/cancel",
            data={"job_id": job_id, "csrf_token": token, "next": "/ops/jobs/jobs"},
        )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ops/jobs/jobs"
    assert (await queue.get_job(job_id)).state == "cancelled"  # type: ignore[union-attr]


async def test_delete_removes_a_job_and_sends_the_page_to_the_list(queue: JobQueue) -> None:
    job_id = await queue.enqueue("email.send", {"n": 1}, key="receipt:9", delay_ms=60_000)
    assert job_id is not None
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        token = await csrf_token(client)
        body = {"job_id": job_id, "csrf_token": token, "next": f"/job/{job_id}"}
        asked = await client.post("/actions/delete", data=body)  # no confirmed=yes: it asks
        assert asked.status_code == 200
        assert "Delete job" in asked.text
        assert 'name="confirmed" value="yes"' in asked.text
        assert await queue.get_job(job_id) is not None
        body["confirmed"] = "yes"
        deleted = await client.post(
            "/actions/delete", data=body, headers={"X-Dashboard-Fetch": "1"}
        )
        again = await client.post("/actions/delete", data=body)
    assert deleted.json() == {"ok": True, "message": f"job {job_id} deleted", "location": "/jobs"}
    assert again.status_code == 303
    assert await queue.get_job(job_id) is None
    assert await queue.find_job(key="receipt:9") is None


async def test_a_store_that_is_down_gets_a_503_page_naming_it() -> None:
    from redis_jobs import RedisJobDriver

    sock = bound_socket()  # a port nobody answers on once closed
    port = sock.getsockname()[1]
    sock.close()
    driver = RedisJobDriver(url=f"redis://127.0.0.1:{port}/0")
    app = create_dashboard(JobQueue(driver))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://dashboard") as client:
            page = await client.get("/job/01a2315d35f8660151d9d3a5917a4435")
    finally:
        await driver.close()
    assert page.status_code == 503
    assert "the job store failed this request:" in page.text
    assert f"127.0.0.1:{port}" in page.text


async def test_job_page_shows_the_trace_id_of_the_enqueue(
    queue: JobQueue, span_exporter: object
) -> None:
    from opentelemetry import trace

    with trace.get_tracer("tests.web").start_as_current_span("request") as span:
        job_id = await queue.enqueue("email.send", {"n": 1})
    trace_id = format(span.get_span_context().trace_id, "032x")
    async with client_for(create_dashboard(queue)) as client:
        page = await client.get(f"/job/{job_id}")
    assert f'<dd class="mono">{trace_id}</dd>' in page.text


async def test_the_csrf_cookie_is_secure_over_https(queue: JobQueue) -> None:
    async with client_for(create_dashboard(queue), base_url="https://dashboard") as client:
        page = await client.get("/")
    assert "; Secure" in page.headers["set-cookie"]
    assert "HttpOnly; SameSite=Strict" in page.headers["set-cookie"]


class CountingDriver(InProcessJobDriver):
    """The reference driver, recording the page sizes the dashboard asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.pages: list[int] = []

    async def list_jobs(self, **arguments: Any) -> JobPage:
        self.pages.append(arguments["limit"])
        return await super().list_jobs(**arguments)


async def test_pages_read_one_page_of_the_store_not_every_job() -> None:
    driver = CountingDriver()
    queue = JobQueue(driver)
    for number in range(1_500):
        await queue.enqueue("email.send", {"n": number})
    async with client_for(create_dashboard(queue)) as client:
        page = await client.get("/jobs", params={"limit": "20"})
        assert driver.pages == [20]
        assert page.text.count("data-job-id=") == 20
        driver.pages.clear()
        await client.get("/")  # the throughput chart reads finished jobs only, page by page
    assert sum(driver.pages) <= 2 * 200


async def test_the_queues_page_shows_each_queues_fleet_wide_limits() -> None:
    driver = InProcessJobDriver()
    settings = JobsSettings(
        queue_limits={"exports": {"global_concurrency": 2, "rate_limit": "10/s"}}
    )
    queue = JobQueue(driver, settings=settings)
    try:
        async with client_for(create_dashboard(queue)) as client:
            page = await client.get("/queues")
        assert page.status_code == 200
        row = page.text.split('data-queue="exports"', 1)[1].split("</tr>", 1)[0]
        assert "2 at once, 10/s" in row
        listed = {info.name: info for info in await queue.list_queues()}
        assert listed["exports"].limits == FleetLimit(concurrency=2, rate=10, per_ms=1_000)
        assert listed["default"].limits is None
    finally:
        await driver.close()
