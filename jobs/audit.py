"""The audit trail of operators' actions: who retried, cancelled, deleted or purged what.

``JobQueue`` records each operation it is asked for (``record``) through the driver's
``AuditTrail`` (``jobs.spi``): the command line says ``source="cli"`` and the user and host,
the dashboard ``source="dashboard"`` and the client's address, code calling the queue
``source="api"`` and the process's user and host. ``MemoryAuditTrail`` is the reference
implementation the in-process driver keeps.

A failure to record does not undo the action (it happened): it is logged as an error naming
the action, so an operator's change is never silently unrecorded.
"""

from __future__ import annotations

import bisect
import getpass
import itertools
import os
import socket
import time
from dataclasses import dataclass
from functools import cache

from loguru import logger

from .clock import Clock, to_datetime
from .operations import check_limit, decode_cursor, encode_cursor
from .spi.driver import AuditTrail
from .spi.records import AUDIT_KEEP_MS, AUDIT_MAX_ENTRIES, AuditEntry, AuditPage

SOURCES = ("api", "cli", "dashboard")
MAX_FIELD_LENGTH = 500
"""An action's target and actor are cut to this many characters."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts, and through what: ``Actor("ann@ops-1", "cli")``."""

    name: str
    source: str = "api"


@cache
def process_actor_name() -> str:
    """``user@host`` of this process (``pid N@host`` when the user has no name)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"pid {os.getpid()}"
    return f"{user}@{socket.gethostname()}"


def default_actor() -> Actor:
    return Actor(process_actor_name(), "api")


async def record(driver: object, actor: Actor | None, action: str, target: str, count: int) -> None:
    """Append the action to the driver's audit trail (nothing when it has none); a failure is
    logged, never raised: the action itself happened."""
    if not isinstance(driver, AuditTrail):
        return
    who = actor or default_actor()
    try:
        await driver.record_action(
            action=action,
            target=target[:MAX_FIELD_LENGTH],
            actor=who.name[:MAX_FIELD_LENGTH],
            source=who.source,
            count=count,
        )
    except Exception as exc:  # the action is done; its record is lost, loudly
        logger.error(
            "audit trail: could not record {} of {} by {} ({}): {}: {}",
            action, target, who.name, who.source, type(exc).__name__, exc,
        )  # fmt: skip


_action_sequence = itertools.count()


def new_action_id() -> str:
    """An audit entry's id: 32 hex characters that sort in recording order within a process
    (milliseconds, a process-wide sequence, random bits). Entries recorded in the same
    millisecond list by (time, id), so the later action lists first, as an operator expects."""
    stamp = time.time_ns() // 1_000_000
    return f"{stamp:012x}{next(_action_sequence) % 0x100000000:08x}{os.urandom(6).hex()}"


def describe_age(ms: int) -> str:
    """``older_than_ms`` as an operator wrote it: ``7d``, ``12h``, ``30m``, ``45s``, ``500ms``."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


class MemoryAuditTrail:
    """The reference ``AuditTrail``: entries in a list kept in (at, id) order, bounded by
    ``max_entries`` and ``keep_ms``."""

    def __init__(
        self, clock: Clock, *, keep_ms: int = AUDIT_KEEP_MS, max_entries: int = AUDIT_MAX_ENTRIES
    ) -> None:
        self._clock = clock
        self._keep_ms = keep_ms
        self._max_entries = max_entries
        self._entries: list[tuple[int, str, AuditEntry]] = []  # ascending (at ms, id)

    async def record_action(
        self, *, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        now = self._clock.now_ms()
        entry = AuditEntry(
            id=new_action_id(), at=to_datetime(now), action=action, target=target,
            actor=actor, source=source, count=count,
        )  # fmt: skip
        bisect.insort(self._entries, (now, entry.id, entry))
        cutoff = now - self._keep_ms
        drop = max(len(self._entries) - self._max_entries, 0)
        while drop < len(self._entries) and self._entries[drop][0] < cutoff:
            drop += 1
        del self._entries[:drop]

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        check_limit(limit)
        end = len(self._entries)
        if cursor is not None:
            at_ms, entry_id = decode_cursor(cursor)
            end = bisect.bisect_left(self._entries, (at_ms, entry_id))
        start = max(end - limit, 0)
        chosen = [item[2] for item in reversed(self._entries[start:end])]
        next_cursor = None
        if start > 0 and chosen:
            last = self._entries[start]
            next_cursor = encode_cursor(last[0], last[1])
        return AuditPage(entries=chosen, next_cursor=next_cursor)
