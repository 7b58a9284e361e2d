"""``NewJob``: one job to enqueue, as a value (a batch's, a workflow's, the relay's).

Its own module, below ``jobs.queue`` and ``jobs.workflow``, which both build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .definitions import JobDefinition

__all__ = ["NewJob"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """One job of a batch for ``JobQueue.enqueue_many``; the fields are ``enqueue``'s, checked
    by ``enqueue_many`` (an error names the job's index in the batch)."""

    type: str | JobDefinition[Any]
    payload: Any = None
    delay_ms: int | None = None
    run_at: datetime | None = None
    max_attempts: int | None = None
    timeout_ms: int | None = None
    key: str | None = None
    trace_context: str | None = None
    """A W3C traceparent to carry (an outbox entry's); None: the caller's current span."""
    priority: int | None = None
    """None: the handler's, else the definition's default, else 0."""
    queue: str | None = None
    """None: the handler's, else the definition's default, else ``"default"``."""
