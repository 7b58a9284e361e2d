"""What the live loss auditor (``jobs.loss_audit``) reads of an outbox store: optional, the
auditor checks the outbox only when the store has it (``SQLAlchemyOutboxStore`` does).

Two bounded reads, each one statement on an index: the unpublished entries older than an SLO
(oldest first), and the entries published after a mark (in publishing order), so that each
pass of the auditor picks up where the last one stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = [
    "WORKFLOW_ENTRY_TYPE",
    "OutboxAuditReads",
    "OverdueEntry",
    "PublishedEntry",
    "outbox_job_key",
    "outbox_workflow_id",
]

WORKFLOW_ENTRY_TYPE = "neverlost.workflow"
"""The type of an outbox entry holding a whole workflow (``append_workflow``), which the relay
hands over as one ``enqueue_workflow``. Its payload: ``{"jobs": [...]}``, one object per job in
the workflow's order (parents first): ``type``, ``payload``, ``after`` (the indexes of its
parents), ``on_failure`` ("cancel" or "continue"), and ``delay_ms``, ``run_at_ms``,
``max_attempts``, ``priority``, ``timeout_ms`` (each None when not given)."""


def outbox_workflow_id(entry_id: str) -> str:
    """The id of the workflow an entry of ``WORKFLOW_ENTRY_TYPE`` becomes: one per entry (its
    jobs' ids derive from it), so a second hand-over of the entry finds it stored."""
    return f"outbox:{entry_id}"


def outbox_job_key(entry_id: str, key: str | None) -> str:
    """The key of the job an entry becomes (``JobOutboxPublisher``): the entry's own key, else
    ``outbox:<entry id>``."""
    return key if key is not None else f"outbox:{entry_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class OverdueEntry:
    """An unpublished entry older than the auditor's SLO; ``age_ms`` by the store's clock;
    ``leased``: a relay holds it now; ``last_error``: its last failed hand-over, if any."""

    id: str
    type: str
    key: str | None
    created_at: datetime
    age_ms: int
    attempts: int
    last_error: str | None
    leased: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedEntry:
    """A published entry: enough to find its job (``job_key``) and to mark where a walk is."""

    id: str
    type: str
    key: str | None
    created_at: datetime
    published_at_ms: int

    @property
    def job_key(self) -> str:
        return outbox_job_key(self.id, self.key)


@runtime_checkable
class OutboxAuditReads(Protocol):
    async def overdue_entries(self, older_than_ms: int, limit: int) -> list[OverdueEntry]:
        """Up to ``limit`` unpublished entries appended more than ``older_than_ms`` ago (by the
        store's clock), oldest first."""
        ...

    async def published_entries(
        self, *, after_ms: int, after_id: str = "", limit: int
    ) -> list[PublishedEntry]:
        """Up to ``limit`` entries published after the mark ``(after_ms, after_id)`` (epoch ms
        by the store's clock, then the id), ordered by ``(published_at, id)``: the next call
        passes the last one's ``published_at_ms`` and ``id``."""
        ...
