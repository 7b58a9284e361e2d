"""What the dashboard gives away: headers on every response, the warning banner, a large payload
cut with a way to see all of it, and the ``redact`` hook (httpx on the ASGI app, a SQLite file)."""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobs import JobQueue
from jobs.redaction import redact_keys
from jobs.web import create_dashboard
from jobs.web.pages import PAYLOAD_PREVIEW_CHARS
from orm_sqlalchemy import SQLAlchemyJobStore

from .conftest import client_for, csrf_token

SECURITY_HEADERS = {
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}
BANNER = "this dashboard listens on 0.0.0.0 <b>with no login</b>"


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[JobQueue]:
    store = SQLAlchemyJobStore(f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}")
    yield JobQueue(store)
    await store.close()


def assert_guarded(response: httpx.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get(name) == value, (response.url, name)
    policy = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy


@pytest.mark.parametrize("allow_actions", [False, True])
async def test_every_response_forbids_framing_and_caching(
    queue: JobQueue, allow_actions: bool
) -> None:
    job_id = await queue.enqueue("mail.send", {"to": "a@example.com"})
    async with client_for(create_dashboard(queue, allow_actions=allow_actions)) as client:
        responses = [
            await client.get("/"),
            await client.get("/jobs"),
            await client.get(f"/job/{job_id}"),
            await client.get("/job/no-such-job"),  # 404 page
            await client.get("/jobs", params={"state": "lost"}),  # 400 page
            await client.get("/schedules"),
            await client.get("/static/dashboard.css"),
            await client.post("/actions/cancel", data={"job_id": str(job_id)}),  # 403 either way
        ]
        if allow_actions:
            token = await csrf_token(client)
            responses.append(
                await client.post(
                    "/actions/cancel",
                    data={"job_id": str(job_id), "csrf_token": token},
                    headers={"X-Dashboard-Fetch": "1"},
                )
            )
    assert [r.status_code for r in responses] == [
        200, 200, 200, 404, 400, 200, 200, 403, *([200] if allow_actions else []),
    ]  # fmt: skip
    for response in responses:
        assert_guarded(response)


async def test_a_banner_is_shown_escaped_on_every_page_when_given(queue: JobQueue) -> None:
    job_id = await queue.enqueue("mail.send", {})
    async with client_for(create_dashboard(queue, banner=BANNER)) as client:
        pages = [await client.get(path) for path in ("/", "/jobs", f"/job/{job_id}", "/x/404")]
    for page in pages:
        assert 'data-testid="banner"' in page.text
        assert html.escape(BANNER, quote=False) in page.text
        assert "<b>with no login</b>" not in page.text
    async with client_for(create_dashboard(queue)) as client:
        assert 'data-testid="banner"' not in (await client.get("/")).text


async def test_a_large_payload_is_cut_with_a_link_to_all_of_it(queue: JobQueue) -> None:
    rows = [{"n": n, "note": "<script>alert(1)</script>"} for n in range(2_000)]
    job_id = await queue.enqueue("import.rows", {"rows": rows, "last": "THE-END"})
    async with client_for(create_dashboard(queue)) as client:
        preview = await client.get(f"/job/{job_id}")
        whole = await client.get(f"/job/{job_id}", params={"payload": "all"})
    assert preview.status_code == whole.status_code == 200
    assert 'data-testid="payload-cut"' in preview.text
    assert f"the first {PAYLOAD_PREVIEW_CHARS:,}".replace(",", "") in preview.text
    assert "THE-END" not in preview.text
    assert f'href="/job/{job_id}?payload=all"' in preview.text
    assert len(preview.text) < PAYLOAD_PREVIEW_CHARS * 2 + 20_000  # escaping at most doubles it
    assert "THE-END" in whole.text
    assert 'data-testid="payload-cut"' not in whole.text
    for page in (preview, whole):
        assert "<script>alert(1)</script>" not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


async def test_a_small_payload_is_shown_whole_without_a_link(queue: JobQueue) -> None:
    job_id = await queue.enqueue("mail.send", {"to": "a@example.com"})
    async with client_for(create_dashboard(queue)) as client:
        page = await client.get(f"/job/{job_id}")
    assert "a@example.com" in page.text
    assert 'data-testid="payload-all"' not in page.text


async def test_the_redact_hook_decides_what_the_job_page_shows(queue: JobQueue) -> None:
    payload = {"user": "ann", "password": "hunter2", "card": {"PASSWORD": "swordfish", "n": 4}}
    job_id = await queue.enqueue("user.create", payload)
    dashboard = create_dashboard(queue, redact=redact_keys(["password"]))
    async with client_for(dashboard) as client:
        page = await client.get(f"/job/{job_id}")
        whole = await client.get(f"/job/{job_id}", params={"payload": "all"})
    for shown in (page.text, whole.text):
        assert "hunter2" not in shown
        assert "swordfish" not in shown
        assert "&#34;password&#34;: &#34;***&#34;" in shown
        assert "&#34;user&#34;: &#34;ann&#34;" in shown
    stored = await queue.get_job(str(job_id))
    assert stored is not None
    assert stored.payload == payload  # shown redacted, kept as it was


async def test_the_job_page_shows_the_result_redacted_like_the_payload(queue: JobQueue) -> None:
    job_id = str(await queue.enqueue("user.create", {"user": "ann"}))
    (claimed,) = await queue.driver.claim(1, 30_000, ["user.create"])
    result = {"id": 42, "password": "hunter2", "note": "<b>made</b>"}
    assert await queue.driver.complete(job_id, claimed.lease_token, json.dumps(result))
    async with client_for(create_dashboard(queue, redact=redact_keys(["password"]))) as client:
        page = await client.get(f"/job/{job_id}")
    assert 'data-testid="result"' in page.text
    assert "&#34;id&#34;: 42" in page.text
    assert "hunter2" not in page.text
    assert "&lt;b&gt;made&lt;/b&gt;" in page.text
    async with client_for(create_dashboard(queue)) as client:
        unfinished = await client.get(f"/job/{await queue.enqueue('user.create', {})}")
    assert 'data-testid="result"' not in unfinished.text


async def test_the_job_page_shows_the_progress_reported(queue: JobQueue) -> None:
    job_id = str(await queue.enqueue("user.import", {"rows": 10}))
    (claimed,) = await queue.driver.claim(1, 30_000, ["user.import"])
    store: Any = queue.driver
    assert await store.set_progress(job_id, claimed.lease_token, '[0.42,"row <4> of 10"]')
    async with client_for(create_dashboard(queue)) as client:
        page = await client.get(f"/job/{job_id}")
    assert '<progress max="1" value="0.42"></progress> 42% · row &lt;4&gt; of 10' in page.text


async def test_the_workflow_page_lists_its_jobs_in_dependency_order(tmp_path: Path) -> None:
    from jobs import InProcessJobDriver, NewJob
    from jobs.workflow import group

    queue = JobQueue(InProcessJobDriver())
    workflow = group(NewJob(type="page", payload={}), NewJob(type="page", payload={}))
    workflow_id = await queue.enqueue_workflow(workflow.then(NewJob(type="zip<b>", payload={})))
    info = await queue.get_workflow(workflow_id)
    assert info is not None
    async with client_for(create_dashboard(queue)) as client:
        page = await client.get(f"/workflow/{workflow_id}")
        job_page = await client.get(f"/job/{info.jobs[2].id}")
        missing = await client.get("/workflow/no-such-workflow")
    assert page.status_code == 200
    assert page.text.index(info.jobs[0].id) < page.text.index(info.jobs[2].id)
    assert "zip&lt;b&gt;" in page.text
    assert "#1, #2" in page.text
    assert f"/workflow/{workflow_id}" in job_page.text
    assert missing.status_code == 404
