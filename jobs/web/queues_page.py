"""The dashboard's Queues page: each named queue (``JobQueue.list_queues``), paused or not, with
its due, scheduled, active and failed jobs; with actions on, pause and resume (POSTs carrying
the CSRF token, like every action), recorded in the audit trail as ``pause_queue`` and
``resume_queue`` like ``neverlost queues pause|resume``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loguru import logger
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..errors import JobOptionError
from .audit_page import dashboard_actor
from .formatting import now_ms
from .forms import answer, field
from .guard import CSRF_FIELD, CsrfTokens, csrf_cookie

if TYPE_CHECKING:
    from .render import Renderer
    from .source import DashboardSource


class QueuesPage:
    def __init__(self, source: DashboardSource, renderer: Renderer, csrf: CsrfTokens) -> None:
        self.source = source
        self.renderer = renderer
        self.csrf = csrf

    async def show(self, request: Request) -> Response:
        try:
            queues, unsupported = await self.source.queue.list_queues(), None
        except NotImplementedError as exc:
            queues, unsupported = [], str(exc)
        return self.renderer.page(
            request, "queues.html", nav="queues", queues=queues, unsupported=unsupported,
            now=now_ms(),
        )  # fmt: skip

    async def pause(self, request: Request) -> Response:
        return await self._change(request, pause=True)

    async def resume(self, request: Request) -> Response:
        return await self._change(request, pause=False)

    async def _change(self, request: Request, *, pause: bool) -> Response:
        form = await request.form()
        if not self.csrf.check(csrf_cookie(request), field(form, CSRF_FIELD)):
            raise HTTPException(
                403, "missing or stale CSRF token: reload the dashboard page and submit again"
            )
        name = field(form, "queue")
        queue = self.source.queue
        change = queue.pause_queue if pause else queue.resume_queue
        try:
            changed = await change(name, actor=dashboard_actor(request))
        except JobOptionError as exc:
            raise HTTPException(400, str(exc)) from None
        except NotImplementedError as exc:
            raise HTTPException(404, str(exc)) from None
        done = "paused" if pause else "resumed"
        logger.info("dashboard: {} queue {!r}: {}", done, name, changed)
        if changed:
            message = f"queue {name} {done}: workers see it within one poll interval"
        else:
            message = f"queue {name} was {'already paused' if pause else 'not paused'}"
        return answer(request, form, message, ok=changed)
