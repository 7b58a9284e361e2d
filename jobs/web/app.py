"""create_dashboard: the Starlette app, its templates, static files and routes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from framework import ApplicationContext

from ..queue import JobQueue
from .actions import Actions
from .formatting import FILTERS
from .guard import CSRF_FIELD, CsrfTokens, DashboardGuard, csrf_cookie
from .links import link
from .pages import Pages
from .source import DashboardSource

PACKAGE_DIR = Path(__file__).parent
ASSET_VERSION = "1"
DEFAULT_REFRESH_MS = 2_000


class Renderer:
    """Renders templates with the helpers every page needs (links, the CSRF field, flags)."""

    def __init__(self, *, allow_actions: bool, refresh_ms: int, title: str, csrf: CsrfTokens):
        environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(PACKAGE_DIR / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        environment.filters.update(FILTERS)
        self.templates = Jinja2Templates(env=environment)
        self.allow_actions = allow_actions
        self.refresh_ms = refresh_ms
        self.title = title
        self.csrf = csrf

    def page(
        self, request: Request, template: str, status_code: int = 200, **context: Any
    ) -> Response:
        context.update(
            link=lambda name, query=None, **params: link(request, name, query, **params),
            static=lambda path: link(request, "static", {"v": ASSET_VERSION}, path=path),
            csrf_field=CSRF_FIELD,
            csrf_token=self.csrf.token_for(csrf_cookie(request)),
            allow_actions=self.allow_actions,
            refresh_ms=self.refresh_ms,
            title=self.title,
        )
        return self.templates.TemplateResponse(request, template, context, status_code=status_code)


def create_dashboard(
    queue_or_context: JobQueue | ApplicationContext,
    *,
    allow_actions: bool = False,
    refresh_ms: int = DEFAULT_REFRESH_MS,
    title: str = "neverlost",
    csrf_secret: bytes | None = None,
) -> Starlette:
    """The dashboard as an ASGI app: mount it (``app.mount("/jobs", dashboard)``) or serve it.

    Read-only unless ``allow_actions``: then retry, cancel, delete and "retry all failed" are
    POSTs carrying a CSRF token. It has no authentication of its own: put it behind your app's.
    ``csrf_secret`` (bytes) lets several processes serving one dashboard accept each other's
    tokens; by default each app makes its own.
    """
    if refresh_ms < 250:
        raise ValueError(
            f"refresh_ms must be at least 250 (a page poll per interval), got {refresh_ms}"
        )
    source = DashboardSource(queue_or_context)
    csrf = CsrfTokens(csrf_secret)
    renderer = Renderer(allow_actions=allow_actions, refresh_ms=refresh_ms, title=title, csrf=csrf)
    pages = Pages(source, renderer)
    actions = Actions(source, renderer, csrf)
    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/jobs", pages.jobs, name="jobs"),
        Route("/job/{job_id:path}", pages.job, name="job"),
        Route("/schedules", pages.schedules, name="schedules"),
        Route("/actions/retry", actions.retry, methods=["POST"], name="retry"),
        Route("/actions/cancel", actions.cancel, methods=["POST"], name="cancel"),
        Route("/actions/delete", actions.delete, methods=["POST"], name="delete"),
        Route("/actions/retry-failed", actions.retry_failed, methods=["POST"], name="retry_failed"),
        Mount("/static", StaticFiles(directory=PACKAGE_DIR / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(DashboardGuard, allow_actions=allow_actions)],
        exception_handlers={HTTPException: pages.error, Exception: pages.failure},
    )
