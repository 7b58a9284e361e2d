"""Health of a service (runner, relay, scheduler): is its store answering, are its loops alive.

``health()`` on ``JobRunner``, ``OutboxRelay`` and ``JobScheduler`` returns a ``Health``: the
same shape for each, stable, documented here, and JSON-ready through ``as_dict()`` (what a
``/healthz`` endpoint serves). Healthy means all of:

* the service was started and is not stopping (``is_running`` says only that much);
* its store answered within the last ``store_window_ms`` (three heartbeat intervals for the
  runner, three poll intervals for the relay, three pass intervals for the scheduler);
* every supervised loop is alive (none is down after a failure, waiting to restart);
* (the runner) no handler is stuck: none has run past its timeout plus the grace period, and
  none still runs after it was interrupted and its job settled without it (a sync handler's
  thread that ignored its timeout, an async handler that swallowed its cancellation). Such a
  handler keeps its slot until it returns; ``stuck_handlers`` counts them and ``reasons``
  names each job (id and type).

Otherwise ``reasons`` says why, one line each. A store that refuses every call turns the
service red within that window, since only answers move ``store_answered_ms_ago``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .failures import describe_cause
from .redaction import redact_text
from .supervision import LoopHealth, Supervisor

__all__ = ["Health", "LoopHealth", "StoreContact", "build_health", "store_name"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """A service's health at one moment (times in milliseconds, ``None`` when never)."""

    service: str
    healthy: bool
    reasons: tuple[str, ...]
    running: bool
    store_answered_ms_ago: int | None
    store_window_ms: int
    store_error: str | None
    loops: dict[str, LoopHealth] = field(default_factory=dict)
    in_flight: int | None = None
    last_claim_ms_ago: int | None = None
    stuck_handlers: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``reasons`` a list, each loop a dict)."""
        data = asdict(self)
        data["reasons"] = list(self.reasons)
        return data


class StoreContact:
    """When a service's store last answered, and the last error it gave."""

    __slots__ = ("last_answer", "last_error")

    def __init__(self) -> None:
        self.last_answer: float | None = None
        self.last_error: str | None = None

    def answered(self, now: float | None = None) -> None:
        """The store answered (``now``: ``time.monotonic()``, read here if not given)."""
        self.last_answer = time.monotonic() if now is None else now
        self.last_error = None

    def failed(self, error: BaseException) -> None:
        self.last_error = describe_cause(error)

    def ms_ago(self, moment: float | None) -> int | None:
        return None if moment is None else int((time.monotonic() - moment) * 1000)


def build_health(
    service: str,
    *,
    running: bool,
    contact: StoreContact,
    window_ms: int,
    supervisor: Supervisor,
    store_name: str,
    in_flight: int | None = None,
    last_claim: float | None = None,
    stuck: Sequence[str] | None = None,
) -> Health:
    """Judge a service's health from what it knows (see the module docstring)."""
    reasons: list[str] = []
    if not running:
        reasons.append(f"the {service} is not running (not started, stopping or closed)")
    answered_ago = contact.ms_ago(contact.last_answer)
    if answered_ago is None or answered_ago > window_ms:
        since = "never answered" if answered_ago is None else f"last answered {answered_ago} ms ago"
        cause = f": {contact.last_error}" if contact.last_error else ""
        reasons.append(f"its store {store_name} {since} (window {window_ms} ms){cause}")
    reasons.extend(supervisor.down())
    if stuck:
        reasons.extend(stuck)
    return Health(
        service=service,
        healthy=not reasons,
        reasons=tuple(reasons),
        running=running,
        store_answered_ms_ago=answered_ago,
        store_window_ms=window_ms,
        store_error=contact.last_error,
        loops=supervisor.health(),
        in_flight=in_flight,
        last_claim_ms_ago=contact.ms_ago(last_claim),
        stuck_handlers=None if stuck is None else len(stuck),
    )


def store_name(store: object) -> str:
    """The store's own ``repr`` when it has one (SQL stores show their URL), any URL in it
    through ``redact_url``; else its class name."""
    if type(store).__repr__ is object.__repr__:
        return type(store).__name__
    return redact_text(repr(store))
