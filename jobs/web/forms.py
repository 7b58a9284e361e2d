"""The dashboard's form helpers, shared by its single and bulk actions (``actions``, ``bulk``)."""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

__all__ = ["FETCH_HEADER", "answer", "back", "field"]

FETCH_HEADER = "x-dashboard-fetch"
"""The header the dashboard's script sends to get JSON back instead of a redirect."""


def field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def back(request: Request, form: FormData) -> str:
    """Where to return: the form's ``next`` if it is a path inside this dashboard, else its root."""
    root = request.scope.get("root_path", "")
    target = field(form, "next")
    if target.startswith(f"{root}/") and not target.startswith("//") and "\\" not in target:
        return target
    return f"{root}/"


def answer(
    request: Request, form: FormData, message: str, *, ok: bool, location: str | None = None
) -> Response:
    if request.headers.get(FETCH_HEADER):
        return JSONResponse({"ok": ok, "message": message, "location": location})
    return RedirectResponse(location or back(request, form), status_code=303)
