"""The dashboard's actions are recorded in the audit trail (actor: the client, source
"dashboard") and its Audit page lists the trail newest first, escaped, a page at a time."""

from __future__ import annotations

from jobs import JobQueue
from jobs.audit import Actor
from jobs.web import create_dashboard

from .conftest import client_for, csrf_token


async def test_dashboard_actions_are_recorded_and_shown_on_the_audit_page(
    queue: JobQueue,
) -> None:
    job_id = await queue.enqueue("email.send", {"n": 1}, delay_ms=60_000)
    assert job_id is not None
    await queue.retry("<script>alert(1)</script>", actor=Actor("<b>eve</b>", "cli"))
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        token = await csrf_token(client)
        headers = {"X-Dashboard-Fetch": "1"}
        body = {"job_id": job_id, "csrf_token": token}
        assert (await client.post("/actions/cancel", data=body, headers=headers)).json()["ok"]
        confirmed = {**body, "confirmed": "yes"}
        assert (await client.post("/actions/delete", data=confirmed, headers=headers)).json()["ok"]
        page = await client.get("/audit")
    entries = (await queue.list_actions()).entries
    assert [(e.action, e.target, e.source, e.count) for e in entries[:2]] == [
        ("delete", job_id, "dashboard", 1),
        ("cancel", job_id, "dashboard", 1),
    ]
    assert entries[0].actor == "127.0.0.1"  # httpx's ASGI transport's client address
    assert page.status_code == 200
    assert 'data-action="cancel"' in page.text
    assert 'data-action="delete"' in page.text
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;b&gt;eve&lt;/b&gt;" in page.text
    assert 'aria-current="page">Audit<' in page.text


async def test_the_audit_page_pages_with_the_cursor(queue: JobQueue) -> None:
    for n in range(55):
        await queue.cancel(f"missing-{n}", actor=Actor("ann", "cli"))
    async with client_for(create_dashboard(queue)) as client:
        first = await client.get("/audit")
        assert first.status_code == 200
        assert first.text.count('data-action="cancel"') == 50
        older = first.text.split('href="/audit?cursor=')[1].split('"')[0]
        second = await client.get(f"/audit?cursor={older}")
        bad = await client.get("/audit?cursor=nonsense")
    assert second.text.count('data-action="cancel"') == 5
    assert bad.status_code == 400
