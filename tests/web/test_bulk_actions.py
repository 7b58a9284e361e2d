"""Multi-select actions on the job list (POST /actions/bulk): each ticked job changed on its own
and recorded in the audit trail; Delete asks first; the answer returns to the filtered list."""

from __future__ import annotations

from jobs import JobQueue
from jobs.web import create_dashboard

from .conftest import client_for, csrf_token

FETCH = {"X-Dashboard-Fetch": "1"}
FILTERED = "/jobs?state=pending&type=email.send"


async def _pending(queue: JobQueue, n: int) -> list[str]:
    ids = [await queue.enqueue("email.send", {"n": i}, delay_ms=60_000) for i in range(n)]
    assert all(ids)
    return [str(job_id) for job_id in ids]


async def test_bulk_cancel_changes_each_ticked_job_and_says_how_many(queue: JobQueue) -> None:
    ids = await _pending(queue, 3)
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        token = await csrf_token(client, FILTERED)
        body = {"csrf_token": token, "action": "cancel", "job_id": [*ids[:2], "no-such-job"],
                "next": FILTERED}  # fmt: skip
        answer = await client.post("/actions/bulk", data=body, headers=FETCH)
    assert answer.json() == {
        "ok": True,
        "message": "2 of 3 selected jobs cancelled; 1 not pending or active: unchanged",
        "location": None,
    }
    states = [(await queue.get_job(job_id)).state for job_id in ids]  # type: ignore[union-attr]
    assert states == ["cancelled", "cancelled", "pending"]
    trail = (await queue.list_actions()).entries
    assert sorted((e.action, e.target, e.source, e.count) for e in trail) == sorted(
        [("cancel", ids[0], "dashboard", 1), ("cancel", ids[1], "dashboard", 1),
         ("cancel", "no-such-job", "dashboard", 0)]
    )  # fmt: skip


async def test_a_plain_form_returns_to_the_filtered_list(queue: JobQueue) -> None:
    ids = await _pending(queue, 2)
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        token = await csrf_token(client, FILTERED)
        body = {"csrf_token": token, "action": "cancel", "job_id": ids, "next": FILTERED}
        answer = await client.post("/actions/bulk", data=body)
        single = {"csrf_token": token, "job_id": ids[0], "next": FILTERED}
        retried = await client.post("/actions/retry", data=single)
        deleted = await client.post(
            "/actions/delete", data={**single, "confirmed": "yes"}, headers=FETCH
        )
    assert answer.status_code == 303
    assert answer.headers["location"] == FILTERED
    assert retried.headers["location"] == FILTERED
    assert deleted.json()["location"] is None  # the script refreshes the list it is on


async def test_bulk_delete_asks_first_and_deletes_only_when_confirmed(queue: JobQueue) -> None:
    ids = await _pending(queue, 2)
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        token = await csrf_token(client, FILTERED)
        body = {"csrf_token": token, "action": "delete", "job_id": ids, "next": FILTERED}
        asked = await client.post("/actions/bulk", data=body)
        assert asked.status_code == 200
        assert "Delete 2 jobs?" in asked.text
        assert None not in [await queue.get_job(job_id) for job_id in ids]
        done = await client.post("/actions/bulk", data={**body, "confirmed": "yes"})
    assert done.status_code == 303
    assert done.headers["location"] == FILTERED
    assert [await queue.get_job(job_id) for job_id in ids] == [None, None]


async def test_bulk_needs_the_csrf_token_and_actions_on(queue: JobQueue) -> None:
    ids = await _pending(queue, 1)
    async with client_for(create_dashboard(queue, allow_actions=True)) as client:
        await csrf_token(client)
        forged = await client.post("/actions/bulk", data={"action": "cancel", "job_id": ids})
        unknown = await client.post(
            "/actions/bulk",
            data={"csrf_token": await csrf_token(client), "action": "explode", "job_id": ids},
        )
    async with client_for(create_dashboard(queue)) as client:
        read_only = await client.post("/actions/bulk", data={"action": "cancel", "job_id": ids})
    assert forged.status_code == 403
    assert unknown.status_code == 400
    assert read_only.status_code in (403, 405)
    assert (await queue.get_job(ids[0])).state == "pending"  # type: ignore[union-attr]
