"""The dashboard shows the outbox (issue 33): the overview's Outbox panel (unpublished, the
oldest one's age, with errors, published in the last hour, NO RELAY) and the Outbox page
(entries by state, oldest first, escaped; a stuck one retried, recorded in the audit trail).
On a real SQLite outbox store (HTTP through the ASGI app) and in Chromium at 1280 and 390 px."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from jobs import InProcessJobDriver, JobQueue
from jobs.spi import RelayRegistration
from jobs.web import create_dashboard
from orm_sqlalchemy import SQLAlchemyOutboxStore, SQLAlchemyTransactionManager, create_engine

from .conftest import client_for, csrf_token, launched_chromium, served

expect.set_options(timeout=10_000)
STUCK_ERROR = "JobTypeError: <b>no such</b> type\nsecond line"


class Outbox:
    """A SQLite outbox with one stuck entry (its hand-over failed) and one waiting."""

    def __init__(self, store: SQLAlchemyOutboxStore, ids: dict[str, str]) -> None:
        self.store = store
        self.ids = ids


@pytest_asyncio.fixture
async def outbox(tmp_path: Path) -> AsyncIterator[Outbox]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'app.db'}")
    tm = SQLAlchemyTransactionManager(engine)
    store = SQLAlchemyOutboxStore(tm)
    await store.create_schema()
    ids: dict[str, str] = {}
    async with tm.transaction():
        ids["stuck"] = str(await store.append("<i>order.placed</i>", {"order": 7}))
    # Claimed while it is the only one: two appends in one millisecond are claimed in id order.
    (entry,) = await store.claim(1, 60_000)
    await store.release(entry.id, entry.lease_token, delay_ms=600_000, error=STUCK_ERROR)
    async with tm.transaction():
        ids["waiting"] = str(await store.append("order.shipped", {"order": 8}))
    try:
        yield Outbox(store, ids)
    finally:
        await store.close()
        await engine.dispose()


async def test_the_overview_shows_the_outbox_and_no_relay(outbox: Outbox) -> None:
    queue = JobQueue(InProcessJobDriver())
    async with client_for(create_dashboard(queue, outbox=outbox.store)) as client:
        page = (await client.get("/")).text
        assert 'data-testid="outbox-unpublished">2<' in page
        assert 'data-testid="outbox-with-errors">1<' in page
        assert 'data-testid="no-relay"' in page
        assert ">Outbox</a>" in page  # the tab
        await outbox.store.register_relay(RelayRegistration(id="r", host="h", pid=1), 60_000)
        page = (await client.get("/")).text
        assert 'data-testid="no-relay"' not in page
    async with client_for(create_dashboard(queue)) as client:  # no outbox: no panel, no tab
        page = (await client.get("/")).text
        assert 'id="outbox"' not in page
        assert ">Outbox</a>" not in page
        assert "shows no outbox store" in (await client.get("/outbox")).text


async def test_a_failing_outbox_store_does_not_take_the_overview_down(outbox: Outbox) -> None:
    queue = JobQueue(InProcessJobDriver())
    await outbox.store.close()  # every call now fails (DriverError: ... is closed)
    async with client_for(create_dashboard(queue, outbox=outbox.store)) as client:
        page = await client.get("/")
    assert page.status_code == 200
    assert 'data-testid="outbox-error"' in page.text
    assert "is closed" in page.text


async def test_the_outbox_page_lists_by_state_escaped_and_retries_a_stuck_entry(
    outbox: Outbox,
) -> None:
    queue = JobQueue(InProcessJobDriver())
    dashboard = create_dashboard(queue, outbox=outbox.store, allow_actions=True)
    async with client_for(dashboard) as client:
        listed = (await client.get("/outbox")).text
        assert listed.count("data-entry-id=") == 2  # the order is the store's (tested there)
        assert "<i>order.placed</i>" not in listed
        assert "&lt;i&gt;order.placed&lt;/i&gt;" in listed
        assert "<b>no such</b>" not in listed
        failing = (await client.get("/outbox?state=failing")).text
        assert outbox.ids["stuck"] in failing
        assert outbox.ids["waiting"] not in failing
        assert (await client.get("/outbox?state=lost")).status_code == 400
        token = await csrf_token(client, "/outbox")
        body = {"entry_id": outbox.ids["stuck"], "csrf_token": token}
        refused = await client.post("/actions/outbox-retry", data={"entry_id": "x"})
        assert refused.status_code == 403
        answer = await client.post(
            "/actions/outbox-retry", data=body, headers={"X-Dashboard-Fetch": "1"}
        )
        assert answer.json()["ok"] is True
    claimed = await outbox.store.claim(10, 60_000)
    assert {entry.id for entry in claimed} == set(outbox.ids.values())
    (action,) = (await queue.list_actions()).entries
    assert (action.action, action.target, action.source, action.count) == (
        "outbox_retry", f"outbox entry {outbox.ids['stuck']}", "dashboard", 1,
    )  # fmt: skip


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
async def test_the_outbox_page_in_chromium(outbox: Outbox, width: int, tmp_path: Path) -> None:
    queue = JobQueue(InProcessJobDriver())
    # No timed refresh meanwhile: the rows' ages change every second, so each refresh replaces
    # the list, and on a loaded machine a click could keep chasing a replaced button. The
    # action's own refresh (forced) still runs.
    dashboard = create_dashboard(
        queue, outbox=outbox.store, allow_actions=True, refresh_ms=600_000
    )
    async with launched_chromium() as browser, served(dashboard) as url:
        page: Any = await browser.new_page(viewport={"width": width, "height": 844})
        try:
            await page.goto(url + "/")
            await expect(page.get_by_test_id("no-relay")).to_be_visible()
            await page.get_by_role("link", name="Outbox", exact=True).first.click()
            await expect(page.locator("tr[data-entry-id]")).to_have_count(2)
            await page.wait_for_load_state("load")  # the rows may be there before the styles
            page_width = await page.evaluate("document.documentElement.scrollWidth")
            assert page_width <= width, f"/outbox is {page_width} px wide at {width} px"
            await page.screenshot(path=str(tmp_path / f"outbox-{width}.png"), full_page=True)
            await page.get_by_test_id("outbox-state-failing").click()
            stuck = page.locator(f'tr[data-entry-id="{outbox.ids["stuck"]}"]')
            await expect(page.locator("tr[data-entry-id]")).to_have_count(1)
            await stuck.get_by_test_id("outbox-retry").click()
            await expect(page.locator("#notice")).to_contain_text("is claimable now")
            assert page.url.endswith("/outbox?state=failing")  # the filter kept
        finally:
            await page.close()
    claimed = await outbox.store.claim(10, 60_000)
    assert outbox.ids["stuck"] in {entry.id for entry in claimed}
