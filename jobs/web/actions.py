"""The dashboard's actions (POST): retry, cancel, delete one job; retry every failed job of a type.

Each checks the CSRF token first and changes nothing without it. A browser without JavaScript
gets a 303 back to the page it came from; the dashboard's script asks for JSON instead and
refreshes the page's live parts in place. A bulk action first answers with a confirmation page
unless the form says ``confirmed=yes`` (the script asks with a dialog, then sends that).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from loguru import logger
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..audit import Actor
from .audit_page import dashboard_actor
from .bulk import MAX_BULK, bulk
from .forms import answer as _answer
from .forms import back as _back
from .forms import field as _field
from .guard import CSRF_FIELD, CsrfTokens, csrf_cookie
from .links import link

if TYPE_CHECKING:
    from .render import Renderer
    from .source import DashboardSource

MAX_FORM_FIELDS = MAX_BULK + 20


class Actions:
    def __init__(self, source: DashboardSource, renderer: Renderer, csrf: CsrfTokens) -> None:
        self.source = source
        self.renderer = renderer
        self.csrf = csrf

    async def retry(self, request: Request) -> Response:
        return await self._one(
            request,
            self.source.retry,
            done="queued to run again",
            refused="is not failed or cancelled",
        )

    async def cancel(self, request: Request) -> Response:
        return await self._one(
            request, self.source.cancel, done="cancelled", refused="is not pending or active"
        )

    async def delete(self, request: Request) -> Response:
        form = await self._checked_form(request)
        if _field(form, "confirmed") != "yes":  # the script asked already; a plain form asks here
            job_id = _field(form, "job_id")
            if not job_id:
                raise HTTPException(400, "the form names no job (field job_id)")
            return self.renderer.page(
                request, "confirm_delete.html", nav="", job_ids=[job_id],
                back=_back(request, form), action_url="bulk",
            )  # fmt: skip
        return await self._one(
            request,
            self.source.delete,
            done="deleted",
            refused="is active or already gone",
            gone=True,
        )

    async def bulk(self, request: Request) -> Response:
        return await bulk(request, await self._checked_form(request), self.source, self.renderer)

    async def retry_failed(self, request: Request) -> Response:
        form = await self._checked_form(request)
        job_type = _field(form, "type") or None
        if _field(form, "confirmed") != "yes":
            stats = await self.source.stats()
            failed = sum(
                row.failed for name, row in stats.items() if job_type is None or name == job_type
            )
            return self.renderer.page(
                request,
                "confirm.html",
                nav="",
                job_type=job_type,
                failed=failed,
                back=_back(request, form),
            )
        moved = await self.source.retry_failed(job_type, dashboard_actor(request))
        logger.info("dashboard: retried {} failed jobs of type {!r}", moved, job_type)
        scope = f"of type {job_type}" if job_type else "of every type"
        return _answer(request, form, f"{moved} failed jobs {scope} queued to run again", ok=True)

    async def _one(
        self,
        request: Request,
        change: Callable[[str, Actor], Awaitable[bool]],
        *,
        done: str,
        refused: str,
        gone: bool = False,
    ) -> Response:
        form = await self._checked_form(request)
        job_id = _field(form, "job_id")
        if not job_id:
            raise HTTPException(400, "the form names no job (field job_id)")
        moved = await change(job_id, dashboard_actor(request))
        logger.info("dashboard: {} job {!r}: {}", change.__name__, job_id, moved)
        message = f"job {job_id} {done}" if moved else f"job {job_id} {refused}: nothing changed"
        location = None
        back = _back(request, form)
        if moved and gone and "/job/" in back:  # its own page is gone: to the list
            location = link(request, "jobs")
        return _answer(request, form, message, ok=moved, location=location)

    async def _checked_form(self, request: Request) -> FormData:
        form = await request.form(max_fields=MAX_FORM_FIELDS)
        if not self.csrf.check(csrf_cookie(request), _field(form, CSRF_FIELD)):
            raise HTTPException(
                403,
                "missing or stale CSRF token: reload the dashboard page and submit again",
            )
        return form
