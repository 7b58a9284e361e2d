"""What a driver package registers so a store can be opened from a URL.

A driver package names, in its ``pyproject.toml``, one entry point per URL scheme it serves in
the ``neverlost.drivers`` group, each pointing at a ``DriverFactory`` (or at any callable
taking ``(url, **options)`` and returning a ``JobDriver``)::

    [project.entry-points."neverlost.drivers"]
    "mystore" = "mystore_jobs.factory:FACTORY"

``neverlost --url mystore://...``, ``jobs.drivers.open_driver(url)`` and the chaos kit then find
it; the engine imports no driver. Options every factory takes (and may refuse with a
``ValueError`` naming the option): ``prefix`` (the store's isolation prefix: a key namespace or
a table prefix), ``create`` (False: create nothing, no file and no table: a read-only look), and
the store's own names for its prefix (``namespace``, ``table_prefix``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .driver import JobDriver
from .inbox import JobInbox
from .outbox import OutboxStore

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

__all__ = ["DRIVERS_GROUP", "DriverFactory", "SQLOutboxSite"]

DRIVERS_GROUP = "neverlost.drivers"
"""The entry-point group: URL scheme -> factory."""


class SQLOutboxSite(Protocol):
    """An outbox on a SQL database, opened from a URL (``DriverFactory.open_outbox``): the
    engine, transactions as the application opens them, the outbox store in them, and a job
    store sharing the engine. ``close()`` releases the engine."""

    @property
    def engine(self) -> AsyncEngine: ...

    @property
    def outbox(self) -> OutboxStore: ...

    def transaction(self) -> AbstractAsyncContextManager[AsyncSession]: ...

    def open_driver(self, **options: Any) -> JobDriver: ...

    def open_inbox(self, **options: Any) -> JobInbox:
        """An inbox on this database (``prefix=`` names its table), in ``transaction()``'s
        transactions (``jobs.spi.inbox``)."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True, kw_only=True)
class DriverFactory:
    """A driver package's factory, registered under each URL scheme it serves.

    ``open_driver(url, **options)`` makes a driver that owns its connection. ``drop(url,
    prefix)`` removes what a store wrote under an isolation prefix (tests, the chaos kit), and
    ``open_outbox(url, prefix=...)`` opens a ``SQLOutboxSite``, and ``prefixes(url)`` lists
    the isolation prefixes that hold a store at ``url`` (the CLI names them when the one asked
    for is empty): all optional. ``extra`` names the package extra the driver needs (for
    messages).
    """

    open_driver: Callable[..., JobDriver]
    drop: Callable[[str, str], Awaitable[None]] | None = None
    open_outbox: Callable[..., SQLOutboxSite] | None = None
    prefixes: Callable[[str], Awaitable[list[str]]] | None = None
    extra: str | None = None

    def __call__(self, url: str, **options: Any) -> JobDriver:
        return self.open_driver(url, **options)
