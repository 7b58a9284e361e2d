"""Secrets out of what is shown: URLs in messages, logs, pages, health reports and spans.

``redact_url(url)`` is the one function every message that shows a store's URL goes through
(the worker's ready line, the dashboard, driver errors, ``/healthz``, spans, the CLI). It keeps
what tells an operator where the store is (scheme, user name, host, port, database, harmless
query options) and replaces with ``***``:

- the password of the userinfo (``user:***@host``), wherever the last ``@`` before the host is:
  a password holding ``/``, ``@``, ``:`` or ``?`` unencoded is still all hidden;
- the value of every query key that names a secret (``password``, ``pass``, ``pwd``,
  ``secret``, ``token``, ``sslpassword``, ``api_key``, ... ; any case, ``-``/``_`` ignored,
  percent-encoded or not, see ``is_secret_key``).

Mistyped separators (``postgresql:/u:pw@h/db``, ``redis:/:pw@h``, no scheme at all) are read
the same way. Where a URL is ambiguous (an ``@`` in the query of a URL with a port), more is
hidden rather than less. It never raises: anything that is not text is shown through ``str``.

``redact_text(text)`` applies the same to every URL inside a longer text (an exception's
message); ``redact_keys(keys)`` makes the payload hook of the dashboard and ``jobs show``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_plus

__all__ = ["MASK", "SECRET_KEY_PARTS", "is_secret_key", "redact_keys", "redact_text", "redact_url"]

MASK = "***"

SECRET_KEY_PARTS = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "credential",
    "signature",
)
"""A query key holding one of these (lowercase, ``-``/``_``/``.`` removed) is a secret."""

_SECRET_KEYS = frozenset({"pass", "pwd", "pw", "auth", "sig", "key", "apikey", "sslpassword"})
"""Short keys that are secrets only as a whole (``key=``, but not ``sslkey=``, a file path)."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:/+")
_QUERY_KEY = re.compile(r"[?&;]([^=&;?#]*)=")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:/+\S*?(?=[)\]}'\">,.;:]*(?:\s|$))")
"""A URL in a text: up to the next whitespace, less the punctuation that closes a sentence or
a quote (``(see postgresql://h/db)``, ``'redis://h'.``)."""


def is_secret_key(key: str) -> bool:
    """Whether a query (or payload) key names a secret: ``password``, ``PGPASSWORD``,
    ``api-key``, ``access_token``, ``client_secret``, ``pwd``, ``pass``, ``sig``..."""
    name = re.sub(r"[-_.\s]", "", unquote_plus(key)).lower()
    return name in _SECRET_KEYS or any(part in name for part in SECRET_KEY_PARTS)


def redact_url(url: object) -> str:
    """``url`` as text, with its userinfo password and secret query values replaced by
    ``***`` (see the module docstring); never raises."""
    try:
        text = url if isinstance(url, str) else str(url)
    except Exception:  # an object whose str() fails: nothing of it is shown
        return f"<{type(url).__name__}>"
    scheme = _SCHEME.match(text)
    start = scheme.end() if scheme else 0
    # "scheme:/" or "scheme:" with one slash or none is mistyped: its colon may be the one
    # between user and password (``redis:/pw@h``, the user left out), so it may start one.
    mistyped = scheme is not None and not text.startswith("//", text.index(":") + 1)
    loose = text.index(":") if mistyped else None
    spans = sorted([*_userinfo_password(text, start, loose), *_secret_values(text, start)])
    merged: list[list[int]] = []  # the union of both readings' secrets is masked
    for begin, end in spans:
        if merged and begin <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([begin, end])
    parts: list[str] = []
    shown = 0
    for begin, end in merged:
        parts += (text[shown:begin], MASK)
        shown = end
    parts.append(text[shown:])
    return "".join(parts)


def redact_text(text: str) -> str:
    """``text`` with every URL in it (``scheme:/...`` up to the next whitespace) redacted by
    ``redact_url``; text without ``:/`` is returned as it is, at the cost of one search."""
    if ":/" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda match: redact_url(match.group(0)), text)


def _userinfo_password(text: str, start: int, loose: int | None) -> list[tuple[int, int]]:
    """Where the password of ``user:password@host`` is: from the first ``:`` (after the
    scheme's, or that one when ``loose``) to the last ``@`` (unencoded ``/ @ : ?`` in it
    included)."""
    at = text.rfind("@", start)
    if at < 0:
        return []
    colon = text.find(":", start, at)
    if colon < 0:
        colon = -1 if loose is None else loose
    if colon < 0 or colon + 1 == at:
        return []
    return [(colon + 1, at)]


def _secret_values(text: str, start: int) -> list[tuple[int, int]]:
    """Where each secret query key's value is: up to the next ``&name=`` or ``;name=`` (a
    ``?`` does not end it), or to the end."""
    keys = list(_QUERY_KEY.finditer(text, start))
    spans = []
    for index, match in enumerate(keys):
        if not is_secret_key(match.group(1)):
            continue
        later = (k.start() for k in keys[index + 1 :] if text[k.start()] != "?")
        end = next(later, len(text))
        if match.end() < end:
            spans.append((match.end(), end))
    return spans


def redact_keys(keys: Iterable[str]) -> Callable[[Any], Any]:
    """A payload hook (``create_dashboard(redact=...)``, ``jobs show --redact-keys``): a copy
    of the payload with the value of every key in ``keys`` (any case), at any depth, shown as
    ``"***"``."""
    wanted = frozenset(key.strip().lower() for key in keys if key.strip())

    def redact(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: MASK if str(key).lower() in wanted else redact(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [redact(item) for item in value]
        return value

    return redact
