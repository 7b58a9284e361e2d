"""Paths to the dashboard's routes under whatever path it is mounted at."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request


def link(request: Request, name: str, query: dict[str, Any] | None = None, **params: Any) -> str:
    """The path of route ``name`` under the mount path; path parts and query quoted.

    Starlette puts path parameters into a URL as they are; a job id (from the store) is quoted
    here so that nothing a job holds reaches a URL raw. Empty query values are left out.
    """
    safe = "/" if name == "static" else ""
    quoted = {key: quote(str(value), safe=safe) for key, value in params.items()}
    path = request.scope.get("root_path", "") + str(request.app.url_path_for(name, **quoted))
    pairs = {key: value for key, value in (query or {}).items() if value not in (None, "")}
    return f"{path}?{urlencode(pairs)}" if pairs else path
