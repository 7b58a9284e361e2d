"""The dashboard's multi-select actions (POST ``/actions/bulk``): retry, cancel or delete the
jobs ticked on a job list, and the confirmation every Delete asks for.

A form names its ``action`` and any number of ``job_id`` fields (at most ``MAX_BULK``). Each
job is changed on its own, as the single actions do, and each change goes to the audit trail
with the dashboard's actor. A Delete without ``confirmed=yes`` answers with a confirmation page
(the script asks with a dialog first, then sends it): a deleted job and its key are gone for
good. The answer returns to the list the form came from, its filters kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loguru import logger
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from .audit_page import dashboard_actor
from .forms import answer, back, field
from .links import link

if TYPE_CHECKING:
    from .render import Renderer
    from .source import DashboardSource

MAX_BULK = 200
"""Jobs one bulk action changes at most (a job list page holds up to 200)."""

VERBS = {
    "retry": ("retried", "not failed or cancelled"),
    "cancel": ("cancelled", "not pending or active"),
    "delete": ("deleted", "active or already gone"),
}


def job_ids(form: FormData) -> list[str]:
    ids = [value.strip() for value in form.getlist("job_id") if isinstance(value, str)]
    return list(dict.fromkeys(job_id for job_id in ids if job_id))


async def bulk(
    request: Request, form: FormData, source: DashboardSource, renderer: Renderer
) -> Response:
    """One bulk action on the jobs ticked in ``form`` (its CSRF token already checked)."""
    action = field(form, "action")
    if action not in VERBS:
        raise HTTPException(400, f"unknown action {action!r}: use one of {', '.join(VERBS)}")
    ids = job_ids(form)
    if not ids:
        return answer(request, form, "No job selected: tick the jobs first", ok=False)
    if len(ids) > MAX_BULK:
        raise HTTPException(400, f"{len(ids)} jobs selected; one action takes {MAX_BULK} at most")
    if action == "delete" and field(form, "confirmed") != "yes":
        return renderer.page(
            request, "confirm_delete.html", nav="", job_ids=ids, back=back(request, form),
            action_url="bulk",
        )  # fmt: skip
    change = {
        "retry": source.retry,
        "cancel": source.cancel,
        "delete": source.delete,
    }[action]
    actor = dashboard_actor(request)
    moved = [job_id for job_id in ids if await change(job_id, actor)]
    done, refused = VERBS[action]
    logger.info("dashboard: {} {} of {} selected jobs", done, len(moved), len(ids))
    message = f"{len(moved)} of {len(ids)} selected jobs {done}"
    if len(moved) < len(ids):
        message += f"; {len(ids) - len(moved)} {refused}: unchanged"
    location = None
    if action == "delete" and moved and "/job/" in back(request, form):
        location = link(request, "jobs")  # the page it came from was a deleted job's
    return answer(request, form, message, ok=bool(moved), location=location)
