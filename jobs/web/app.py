"""create_dashboard: the Starlette app, its templates, static files and routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from framework import ApplicationContext

from ..queue import JobQueue
from .actions import Actions
from .audit_page import AuditPage
from .guard import CsrfTokens, DashboardGuard
from .outbox_page import OutboxPage
from .pages import Pages
from .queues_page import QueuesPage
from .render import PACKAGE_DIR, Renderer
from .source import DashboardSource

DEFAULT_REFRESH_MS = 2_000


def create_dashboard(
    queue_or_context: JobQueue | ApplicationContext,
    *,
    allow_actions: bool = False,
    refresh_ms: int = DEFAULT_REFRESH_MS,
    title: str = "neverlost",
    csrf_secret: bytes | None = None,
    redact: Callable[[Any], Any] | None = None,
    banner: str | None = None,
    outbox: object = None,
) -> Starlette:
    """The dashboard as an ASGI app: mount it (``app.mount("/jobs", dashboard)``) or serve it.

    Read-only unless ``allow_actions``: then retry, cancel, delete and "retry all failed" are
    POSTs carrying a CSRF token. It has no authentication of its own: put it behind your app's.
    ``csrf_secret`` (bytes) lets several processes serving one dashboard accept each other's
    tokens; by default each app makes its own.

    ``redact`` maps a job's payload to what the job page shows (the stored payload is not
    changed): ``jobs.redaction.redact_keys(["password", "ssn"])`` shows those keys' values, at
    any depth, as ``"***"``. ``banner`` is a warning shown at the top of every page (``neverlost
    dashboard`` sets one when it listens beyond loopback).

    ``outbox`` is an outbox store to show (an ``ApplicationContext``'s bean ``outbox_store`` is
    found by itself): the overview's Outbox panel and the Outbox page (entries by state, a
    stuck one retried with actions on) need ``jobs.spi.OutboxOperations``.
    """
    if refresh_ms < 250:
        raise ValueError(
            f"refresh_ms must be at least 250 (a page poll per interval), got {refresh_ms}"
        )
    source = DashboardSource(queue_or_context, outbox=outbox)
    csrf = CsrfTokens(csrf_secret)
    renderer = Renderer(
        allow_actions=allow_actions, refresh_ms=refresh_ms, title=title, csrf=csrf, banner=banner,
        outbox=source.outbox is not None,
    )  # fmt: skip
    pages = Pages(source, renderer, redact=redact)
    actions = Actions(source, renderer, csrf)
    audit = AuditPage(source, renderer)
    outbox_page = OutboxPage(source, renderer, csrf)
    queues_page = QueuesPage(source, renderer, csrf)
    routes = [
        Route("/", pages.overview, name="overview"),
        Route("/jobs", pages.jobs, name="jobs"),
        Route("/job/{job_id:path}", pages.job, name="job"),
        Route("/workflow/{workflow_id:path}", pages.workflow, name="workflow"),
        Route("/schedules", pages.schedules, name="schedules"),
        Route("/audit", audit.show, name="audit"),
        Route("/queues", queues_page.show, name="queues"),
        Route("/actions/pause-queue", queues_page.pause, methods=["POST"], name="pause_queue"),
        Route("/actions/resume-queue", queues_page.resume, methods=["POST"], name="resume_queue"),
        Route("/outbox", outbox_page.show, name="outbox"),
        Route("/actions/outbox-retry", outbox_page.retry, methods=["POST"], name="outbox_retry"),
        Route("/actions/retry", actions.retry, methods=["POST"], name="retry"),
        Route("/actions/cancel", actions.cancel, methods=["POST"], name="cancel"),
        Route("/actions/delete", actions.delete, methods=["POST"], name="delete"),
        Route("/actions/retry-failed", actions.retry_failed, methods=["POST"], name="retry_failed"),
        Route("/actions/bulk", actions.bulk, methods=["POST"], name="bulk"),
        Mount("/static", StaticFiles(directory=PACKAGE_DIR / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(DashboardGuard, allow_actions=allow_actions)],
        exception_handlers={HTTPException: pages.error, Exception: pages.failure},
    )
