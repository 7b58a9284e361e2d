"""What an inbox needs of the engine and of a job store (``@job_handler(..., inbox=...)``).

An inbox records the identity of each job whose effects committed, in the transaction of the
effects themselves, so a re-run of the job (delivery is at least once) finds the record and
skips them. The engine gives a handler's context an ``AttemptSettlement``: the attempt's job,
its lease token and the store holding it. A store that can complete a job inside a transaction
the app opened on the store's own database implements ``CompletesInTransaction``; an inbox on
that database then completes the job in its transaction, fenced by the lease token, and marks
the settlement, and the runner's settle after the handler makes no store call. Every other
store is settled by the runner as usual, after the commit: a crash in between re-runs the job,
and the inbox skips its effects.

A sync (``def``) handler runs in a worker thread: an inbox that can open a transaction there
implements ``SyncJobInbox`` (``once_sync``), and a store completes the job through the app's
sync connection with ``complete_in_sync``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "AttemptSettlement",
    "CompletesInTransaction",
    "InboxJob",
    "JobInbox",
    "SyncJobInbox",
]


def _nothing() -> None:
    return None


class AttemptSettlement:
    """One attempt's settle, offered to an inbox (``JobContext.settlement``).

    ``store`` is the job store (the runner's driver) holding ``job_id`` under ``lease_token``.
    ``mark_completed()`` says the job was completed in the app's transaction, which committed:
    the runner then settles nothing and counts the attempt completed.
    """

    __slots__ = ("completed", "job_id", "lease_token", "on_completed", "result", "store")

    def __init__(self, store: object, job_id: str, lease_token: str) -> None:
        self.store = store
        self.job_id = job_id
        self.lease_token = lease_token
        self.completed = False
        self.result: str | None = None
        """The attempt's result (JSON text), when the engine has it before the inbox's block
        ends (``@job_handler(..., inbox=...)``): an inbox completing the job keeps it."""
        self.on_completed: Callable[[], None] = _nothing
        """Set by the attempt: stop beating the lease (the job is no longer active)."""

    def mark_completed(self) -> None:
        if not self.completed:
            self.completed = True
            self.on_completed()


@runtime_checkable
class CompletesInTransaction(Protocol):
    """A job store that can complete a job in a transaction the app opened (optional SPI)."""

    def completes_in(self, bind: Any) -> bool:
        """Whether a transaction on ``bind`` (a SQLAlchemy ``Engine`` for SQL stores, or
        whatever the store's kind of connection is) reaches this store's table: the same
        database. False when unsure: the runner then settles the job as usual."""
        ...

    async def complete_in(
        self, connection: Any, job_id: str, lease_token: str, result: str | None = None
    ) -> bool:
        """Complete the job through ``connection`` (the app's open transaction), as ``complete``
        would (keeping ``result``, JSON text): False, and no write, when ``lease_token`` no
        longer holds the job. The change commits or rolls back with that transaction."""
        ...

    def complete_in_sync(
        self, connection: Any, job_id: str, lease_token: str, result: str | None = None
    ) -> bool:
        """``complete_in`` through a sync ``connection`` (a SQLAlchemy ``Connection`` in the
        app's transaction), from the handler's thread: no event loop is touched."""
        ...


class InboxJob(Protocol):
    """What an inbox reads of a handler's context (``jobs.JobContext``)."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def key(self) -> str | None: ...
    @property
    def attempt(self) -> int: ...
    @property
    def settlement(self) -> AttemptSettlement | None: ...


class JobInbox(Protocol):
    """``@job_handler(..., inbox=...)``: runs the whole handler in ``once(ctx)``, and the
    handler only when ``once`` yields True (no earlier execution of the job committed)."""

    def once(self, ctx: InboxJob) -> AbstractAsyncContextManager[bool]: ...


@runtime_checkable
class SyncJobInbox(Protocol):
    """``@job_handler(..., inbox=...)`` on a ``def`` handler: the handler's thread runs it in
    ``once_sync(ctx)``, a transaction the inbox opens there."""

    def once_sync(self, ctx: InboxJob) -> AbstractContextManager[bool]: ...
