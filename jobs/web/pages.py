"""The dashboard's pages (GET): overview, jobs, job detail, schedules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ..errors import DriverError
from ..failures import describe_cause
from ..options import DEFAULT_QUEUE
from ..spi import JOB_STATES
from .formatting import now_ms, pretty_json

if TYPE_CHECKING:
    from .render import Renderer
    from .source import DashboardSource

COUNT_COLUMNS = ("due", "scheduled", "active", "completed", "failed", "cancelled")
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
MAX_SEARCH_LENGTH = 512
PAYLOAD_PREVIEW_CHARS = 20_000
"""A job page shows this much of a payload (pretty-printed) unless asked for all of it."""


@dataclass(frozen=True, slots=True)
class PayloadView:
    """A payload as the job page shows it: redacted, pretty-printed, maybe cut."""

    text: str
    total_chars: int
    cut: bool

    @property
    def shown_chars(self) -> int:
        return len(self.text)

    @classmethod
    def of(cls, payload: Any, *, whole: bool) -> PayloadView:
        text = pretty_json(payload)
        if whole or len(text) <= PAYLOAD_PREVIEW_CHARS:
            return cls(text, len(text), cut=False)
        return cls(text[:PAYLOAD_PREVIEW_CHARS], len(text), cut=True)


class Pages:
    def __init__(
        self,
        source: DashboardSource,
        renderer: Renderer,
        *,
        redact: Callable[[Any], Any] | None = None,
    ) -> None:
        self.source = source
        self.renderer = renderer
        self.redact = redact

    async def overview(self, request: Request) -> Response:
        stats = await self.source.stats()
        totals = {
            column: sum(getattr(row, column) for row in stats.values()) for column in COUNT_COLUMNS
        }
        ages = [
            row.oldest_due_age_ms for row in stats.values() if row.oldest_due_age_ms is not None
        ]
        return self.renderer.page(
            request,
            "overview.html",
            nav="overview",
            now=now_ms(),
            stats=sorted(stats.items()),
            totals=totals,
            oldest_due_age_ms=max(ages) if ages else None,
            columns=COUNT_COLUMNS,
            workers=await self.source.workers(),
            throughput=await self.source.throughput(),
            runtimes=await self.source.runtimes(),
            outbox=await self.source.outbox_status(),
        )

    async def jobs(self, request: Request) -> Response:
        params = request.query_params
        state = params.get("state") or None
        job_type = params.get("type") or None
        queue = params.get("queue") or None
        search = (params.get("q") or "").strip()
        if state is not None and state not in JOB_STATES:
            raise HTTPException(400, f"unknown state {state!r}: use one of {', '.join(JOB_STATES)}")
        limit = _page_size(params.get("limit"))
        if len(search) > MAX_SEARCH_LENGTH:
            raise HTTPException(400, f"search text is over {MAX_SEARCH_LENGTH} characters")
        cursor = params.get("cursor") or None
        if search:
            found = await self.source.search(search)
            rows, next_cursor = ([found] if found is not None else []), None
        else:
            try:
                rows, next_cursor = await self.source.page(
                    state=state, job_type=job_type, limit=limit, cursor=cursor, queue=queue
                )
            except ValueError as exc:  # a cursor or type the queue refuses, named in the message
                raise HTTPException(400, str(exc)) from None
        return self.renderer.page(
            request,
            "jobs.html",
            nav="jobs",
            now=now_ms(),
            rows=rows,
            next_cursor=next_cursor,
            state=state,
            job_type=job_type,
            queue=queue,
            queues=await self.source.queue_names(),
            show_queue=any(job.queue != DEFAULT_QUEUE for job in rows),  # else every row's
            search=search,
            limit=limit,
            paged=cursor is not None,
            states=JOB_STATES,
            types=sorted((await self.source.stats()).keys()),
        )

    async def job(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        job = await self.source.job(job_id)
        if job is None:
            raise HTTPException(404, "no such job: it never existed, or retention removed it")
        redact = self.redact
        payload = job.payload if redact is None else redact(job.payload)
        result = job.result if redact is None or job.result is None else redact(job.result)
        whole = request.query_params.get("payload") == "all"
        return self.renderer.page(
            request,
            "job.html",
            nav="jobs",
            now=now_ms(),
            job=job,
            payload=PayloadView.of(payload, whole=whole),
            result=None if result is None else PayloadView.of(result, whole=whole),
            errors=job.errors,
        )

    async def workflow(self, request: Request) -> Response:
        workflow_id = request.path_params["workflow_id"]
        try:
            workflow = await self.source.queue.get_workflow(workflow_id)
        except DriverError as exc:
            raise HTTPException(404, str(exc)) from exc
        if workflow is None:
            raise HTTPException(404, "no such workflow: unknown, or retention removed its jobs")
        positions = {job.id: index for index, job in enumerate(workflow.jobs, 1)}
        return self.renderer.page(
            request,
            "workflow.html",
            nav="jobs",
            now=now_ms(),
            workflow=workflow,
            positions=positions,
        )

    async def schedules(self, request: Request) -> Response:
        now = now_ms()
        return self.renderer.page(
            request,
            "schedules.html",
            nav="schedules",
            now=now,
            schedules=await self.source.schedules(now),
            known=self.source.scheduler is not None,
        )

    async def failure(self, request: Request, exc: Exception) -> Response:
        """Anything else (the store is down, most often): a 503 page naming it, not a blank 500."""
        detail = f"the job store failed this request: {describe_cause(exc)}"
        return await self.error(request, HTTPException(503, detail))

    async def error(self, request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail: Any = exc.detail if isinstance(exc, HTTPException) else "error"
        if request.method not in ("GET", "HEAD"):
            return Response(str(detail), status_code=status, media_type="text/plain")
        return self.renderer.page(
            request, "error.html", status_code=status, nav="", status=status, detail=str(detail)
        )


def _page_size(text: str | None) -> int:
    if not text:
        return DEFAULT_PAGE_SIZE
    try:
        size = int(text)
    except ValueError:
        raise HTTPException(400, f"limit must be a number, got {text!r}") from None
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise HTTPException(400, f"limit must be between 1 and {MAX_PAGE_SIZE}, got {size}")
    return size
