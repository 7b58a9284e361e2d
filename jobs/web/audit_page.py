"""The dashboard's audit page: the store's trail of operators' actions, newest first, a page at
a time (``JobQueue.list_actions``); and who the audit trail says acted through the dashboard."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..audit import Actor
from .formatting import now_ms

if TYPE_CHECKING:
    from .render import Renderer
    from .source import DashboardSource

AUDIT_PAGE_SIZE = 50


def dashboard_actor(request: Request) -> Actor:
    """The user an authentication middleware put in the scope (``request.user``), else the
    client's address."""
    user: Any = request.scope.get("user")
    if user is not None and getattr(user, "is_authenticated", False):
        name = getattr(user, "display_name", "") or getattr(user, "identity", "")
        if name:
            return Actor(str(name), "dashboard")
    client = request.client
    return Actor(client.host if client is not None else "unknown client", "dashboard")


class AuditPage:
    def __init__(self, source: DashboardSource, renderer: Renderer) -> None:
        self.source = source
        self.renderer = renderer

    async def show(self, request: Request) -> Response:
        cursor = request.query_params.get("cursor") or None
        try:
            page = await self.source.queue.list_actions(limit=AUDIT_PAGE_SIZE, cursor=cursor)
        except NotImplementedError as exc:
            return self.renderer.page(
                request, "audit.html", nav="audit", entries=[], next_cursor=None,
                unsupported=str(exc), now=now_ms(),
            )  # fmt: skip
        except ValueError as exc:
            raise HTTPException(400, str(exc)) from None
        return self.renderer.page(
            request, "audit.html", nav="audit", entries=page.entries,
            next_cursor=page.next_cursor, unsupported=None, now=now_ms(),
        )  # fmt: skip
