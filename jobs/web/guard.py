"""Request guard: read-only mode, the CSRF cookie, and headers that keep job data inert.

Every response (pages, errors, the read-only 403, static files) says: no framing by any page
(``X-Frame-Options: DENY`` and CSP ``frame-ancestors 'none'``, so no clickjacking of the action
buttons), no caching (``Cache-Control: no-store``: payloads and errors are not left in a
browser's or a proxy's cache), no MIME sniffing, no referrer sent off the dashboard.

CSRF: each browser gets a random cookie (HttpOnly, SameSite=Strict, scoped to the mount path);
a form carries HMAC(secret, cookie). A cross-site page can neither read the cookie nor compute
the token, and a cookie planted by a sibling subdomain is useless without the server's secret.
The Content-Security-Policy allows scripts and styles from the dashboard's own static files
only, so even markup that escaped escaping could not run.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSRF_COOKIE = "neverlost_csrf"
CSRF_FIELD = "csrf_token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


class CsrfTokens:
    """Derives and checks the form token of a browser's CSRF cookie."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret if secret is not None else secrets.token_bytes(32)

    def token_for(self, cookie: str) -> str:
        return hmac.new(self._secret, cookie.encode(), hashlib.sha256).hexdigest()

    def check(self, cookie: str | None, token: str | None) -> bool:
        if not cookie or not token:
            return False
        return hmac.compare_digest(self.token_for(cookie), token)


def csrf_cookie(request: Request) -> str:
    """The browser's CSRF cookie, or the one this response is about to set."""
    value: str = request.scope["neverlost.csrf_cookie"]
    return value


class DashboardGuard:
    """ASGI middleware around the dashboard's routes."""

    def __init__(self, app: ASGIApp, *, allow_actions: bool) -> None:
        self.app = app
        self.allow_actions = allow_actions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.allow_actions and scope["method"] not in SAFE_METHODS:
            response = PlainTextResponse(
                "This dashboard is read-only: create_dashboard(..., allow_actions=True) "
                "enables retry, cancel and delete.",
                status_code=403,
                headers=SECURITY_HEADERS,
            )
            await response(scope, receive, send)
            return
        existing = _cookie(scope, CSRF_COOKIE)
        scope["neverlost.csrf_cookie"] = existing or secrets.token_urlsafe(32)
        cookie_path = scope.get("root_path", "") or "/"
        secure = "; Secure" if scope.get("scheme") == "https" else ""

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
                if existing is None:
                    headers.append(
                        "set-cookie",
                        f"{CSRF_COOKIE}={scope['neverlost.csrf_cookie']}; Path={cookie_path}; "
                        f"HttpOnly; SameSite=Strict{secure}",
                    )
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed Cookie header: treat it as absent
                continue
            if name in jar:
                return jar[name].value or None
    return None
