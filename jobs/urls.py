"""A driver from a URL, for the APIs that take one (``SyncJobQueue``, ``Worker``).

The driver is the one registered for the URL's scheme (``jobs.drivers``: the
``neverlost.drivers`` entry points), as for the command line's ``--url``; bad input is a
ValueError naming the owner and the URL (redacted): ``UnknownSchemeError`` is one.
"""

from __future__ import annotations

from typing import Any

from .drivers import UnknownSchemeError, open_driver
from .errors import MissingExtraError
from .redaction import redact_url
from .spi.driver import JobDriver

__all__ = ["driver_from_url"]


def driver_from_url(
    url: str, *, namespace: str | None = None, table_prefix: str | None = None, owner: str
) -> JobDriver:
    """A driver owning its connections for ``url``; ValueError (naming ``owner``) if it is
    not one a registered driver takes, MissingExtraError if its package's extra is missing."""
    options: dict[str, Any] = {}
    if namespace is not None:
        options["namespace"] = namespace
    if table_prefix is not None:
        options["table_prefix"] = table_prefix
    try:
        return open_driver(url, **options)
    except UnknownSchemeError as exc:
        raise UnknownSchemeError(f"{owner}: {exc}") from None
    except MissingExtraError:
        raise
    except ValueError as exc:
        raise ValueError(f"{owner}: {redact_url(url)!r}: {exc}") from None
