"""The dashboard's Outbox page: the outbox's entries by state (unpublished, failing, published),
oldest first, a page at a time, each with its last hand-over error; with actions on, a stuck
entry is retried (its retry delay dropped: the relay's next claim takes it), recorded in the
audit trail as ``outbox_retry`` like ``neverlost outbox retry``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loguru import logger
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .. import audit
from ..spi import OUTBOX_ENTRY_STATES
from .audit_page import dashboard_actor
from .formatting import now_ms
from .forms import answer, field
from .guard import CSRF_FIELD, CsrfTokens, csrf_cookie

if TYPE_CHECKING:
    from .render import Renderer
    from .source import DashboardSource

OUTBOX_PAGE_SIZE = 50
MAX_TYPE_LENGTH = 200


class OutboxPage:
    def __init__(self, source: DashboardSource, renderer: Renderer, csrf: CsrfTokens) -> None:
        self.source = source
        self.renderer = renderer
        self.csrf = csrf

    async def show(self, request: Request) -> Response:
        params = request.query_params
        state = params.get("state") or None
        entry_type = (params.get("type") or "").strip() or None
        cursor = params.get("cursor") or None
        if state is not None and state not in OUTBOX_ENTRY_STATES:
            raise HTTPException(
                400, f"unknown state {state!r}: use one of {', '.join(OUTBOX_ENTRY_STATES)}"
            )
        if entry_type is not None and len(entry_type) > MAX_TYPE_LENGTH:
            raise HTTPException(400, f"type is over {MAX_TYPE_LENGTH} characters")
        store = self.source.outbox
        context: dict[str, Any] = {
            "nav": "outbox", "now": now_ms(), "state": state, "entry_type": entry_type,
            "states": OUTBOX_ENTRY_STATES, "entries": [], "next_cursor": None, "status": None,
            "configured": store is not None,
        }  # fmt: skip
        if store is not None:
            try:
                page = await store.list_entries(
                    state=state, type=entry_type, limit=OUTBOX_PAGE_SIZE, cursor=cursor
                )
            except ValueError as exc:
                raise HTTPException(400, str(exc)) from None
            context.update(
                entries=page.entries,
                next_cursor=page.next_cursor,
                status=await self.source.outbox_status(),
            )
        return self.renderer.page(request, "outbox.html", **context)

    async def retry(self, request: Request) -> Response:
        form = await request.form()
        if not self.csrf.check(csrf_cookie(request), field(form, CSRF_FIELD)):
            raise HTTPException(
                403, "missing or stale CSRF token: reload the dashboard page and submit again"
            )
        entry_id = field(form, "entry_id")
        if not entry_id:
            raise HTTPException(400, "the form names no outbox entry (field entry_id)")
        store = self.source.outbox
        if store is None:
            raise HTTPException(404, "this dashboard shows no outbox store")
        moved = await store.retry_entry(entry_id)
        await audit.record(
            self.source.queue.driver,
            dashboard_actor(request),
            "outbox_retry",
            f"outbox entry {entry_id}",
            int(moved),
        )
        logger.info("dashboard: retried outbox entry {!r}: {}", entry_id, moved)
        message = (
            f"outbox entry {entry_id} is claimable now"
            if moved
            else f"outbox entry {entry_id} is published or gone: nothing changed"
        )
        return answer(request, form, message, ok=moved)
