"""Pausing and resuming named queues, and the queues at a glance (issue 30, item 5).

A pause is held in the store (``jobs.spi.QueuePauses``): every runner reads the paused queues
once per poll interval and leaves them out of its claims, so a pause holds on every worker
within one poll interval; the jobs running finish, and enqueues still succeed (the jobs wait).
Each pause and resume is recorded in the audit trail (``jobs.audit``) like every operator
action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import audit
from .audit import Actor
from .options import DEFAULT_QUEUE, check_queue
from .spi.driver import QueueOperations, QueuePauses, WorkerRegistry
from .spi.limits import FleetLimit

__all__ = ["QueueInfo", "list_queues", "pause_queue", "resume_queue"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueInfo:
    """A named queue as ``JobQueue.list_queues`` reports it: paused or not, and its jobs by
    state (``failed`` is counted by every built-in driver; None only from a third-party driver
    that does not count finished jobs per queue)."""

    name: str
    paused: bool
    due: int = 0
    scheduled: int = 0
    active: int = 0
    failed: int | None = 0
    workers: int = 0
    """Live workers serving it (a worker that registered no queues serves "default")."""
    limits: FleetLimit | None = None
    """Its fleet-wide limits as this app's settings say (``JobsSettings.queue_limits``)."""


def _pauses(driver: object) -> QueuePauses:
    if not isinstance(driver, QueuePauses):
        raise NotImplementedError(f"{type(driver).__name__} cannot pause queues")
    return driver


async def pause_queue(driver: object, queue: str, actor: Actor | None) -> bool:
    """Pause ``queue``; False (and nothing recorded but the attempt) if it was paused."""
    name = check_queue(queue)
    changed = await _pauses(driver).pause_queue(name)
    await audit.record(driver, actor, "pause_queue", f"queue {name}", int(changed))
    return changed


async def resume_queue(driver: object, queue: str, actor: Actor | None) -> bool:
    """Resume ``queue``; False if it was not paused."""
    name = check_queue(queue)
    changed = await _pauses(driver).resume_queue(name)
    await audit.record(driver, actor, "resume_queue", f"queue {name}", int(changed))
    return changed


async def list_queues(
    driver: object, limits: Mapping[str, FleetLimit] | None = None
) -> list[QueueInfo]:
    """Every queue holding a live job, every paused one, every one a live worker serves, every
    one ``limits`` names, and ``"default"``, by name."""
    limits = limits or {}
    stats = await driver.queue_stats() if isinstance(driver, QueueOperations) else {}
    paused = await driver.paused_queues() if isinstance(driver, QueuePauses) else set()
    live = await driver.list_workers() if isinstance(driver, WorkerRegistry) else []
    serving = [worker.queues or (DEFAULT_QUEUE,) for worker in live]
    names = sorted({DEFAULT_QUEUE, *stats, *paused, *limits, *(q for qs in serving for q in qs)})
    queues = []
    for name in names:
        row = stats.get(name)
        queues.append(
            QueueInfo(
                name=name,
                paused=name in paused,
                due=row.due if row else 0,
                scheduled=row.scheduled if row else 0,
                active=row.active if row else 0,
                failed=row.failed if row else 0,
                workers=sum(name in queues for queues in serving),
                limits=limits.get(name),
            )
        )
    return queues
