"""Rendering a page: the Jinja environment (autoescaped, strict) and the helpers of every page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from .formatting import FILTERS
from .guard import CSRF_FIELD, CsrfTokens, csrf_cookie
from .links import link

PACKAGE_DIR = Path(__file__).parent
ASSET_VERSION = "3"


class Renderer:
    """Renders templates with the helpers every page needs (links, the CSRF field, flags)."""

    def __init__(
        self,
        *,
        allow_actions: bool,
        refresh_ms: int,
        title: str,
        csrf: CsrfTokens,
        banner: str | None = None,
        outbox: bool = False,
    ):
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
        self.banner = banner
        self.outbox = outbox

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
            banner=self.banner,
            has_outbox=self.outbox,
        )
        return self.templates.TemplateResponse(request, template, context, status_code=status_code)
