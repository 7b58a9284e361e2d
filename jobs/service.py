"""``BackgroundService``: the one lifecycle of the runner, the relay, the scheduler and a
worker's presence.

A service goes ``CREATED -> RUNNING -> STOPPING -> CLOSED``. ``start()`` and ``stop()`` are
plain methods called inside the running event loop, and idempotent; a stopped service may be
started again; ``await close()`` stops it and waits for what it does to end, once (a second call
returns at once). A service is ``CLOSED`` from the moment ``close()`` is called: starting it
then is a ``JobsError`` (build a new one). ``is_running`` is ``RUNNING`` only.

Its loops run under a ``Supervisor`` (``jobs.supervision``: restarted after a failure, reported
by ``health()``), its own or one it shares (a runner's presence shares the runner's). Its store
contact (``StoreContact``) records when the store last answered; ``_store_failed`` logs the
first failure of a store that never answered, naming the store, once. Subclasses fill in
``_on_start``, ``_on_stop``, ``_on_close`` and, for ``health()``, ``_health_window_ms``.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from loguru import logger

from .errors import JobsError
from .failures import describe_cause
from .health import Health, StoreContact, build_health, store_name
from .supervision import Supervisor

__all__ = ["BackgroundService", "ServiceState"]


class ServiceState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    STOPPING = "stopping"
    CLOSED = "closed"


class BackgroundService:
    """Base of a service with background loops; see the module docstring."""

    service: ClassVar[str] = "service"
    """How logs and ``health()`` name it ("job runner")."""

    def __init__(self, store: object, *, supervisor: Supervisor | None = None) -> None:
        self._store = store
        self._state = ServiceState.CREATED
        self._supervisor = supervisor if supervisor is not None else Supervisor(self.service)
        self._contact = StoreContact()

    # -- the lifecycle -------------------------------------------------------------------------

    @property
    def state(self) -> ServiceState:
        return self._state

    @property
    def is_running(self) -> bool:
        """Started and not stopping (``health()`` says whether it works)."""
        return self._state is ServiceState.RUNNING

    @property
    def _stopping(self) -> bool:
        """``stop()`` or ``close()`` was called since the last start."""
        return self._state is ServiceState.STOPPING or self._state is ServiceState.CLOSED

    def start(self) -> None:
        """Start (call from inside the running event loop). Idempotent; JobsError once closed."""
        if self._state is ServiceState.CLOSED:
            raise JobsError(f"the {self.service} is closed; build a new one")
        if self._state is ServiceState.RUNNING:
            return
        self._state = ServiceState.RUNNING
        self._on_start()

    def stop(self) -> None:
        """Stop starting new work; what is under way goes on (``close()`` waits for it).
        Idempotent."""
        if self._state is not ServiceState.RUNNING:
            return
        self._state = ServiceState.STOPPING
        self._on_stop()

    async def close(self) -> None:
        """Stop, and wait for what is under way to end. Idempotent."""
        if self._begin_close():
            await self._on_close()

    def _begin_close(self) -> bool:
        """Stop and mark the service closed; False if ``close()`` was called before."""
        if self._state is ServiceState.CLOSED:
            return False
        self.stop()
        self._state = ServiceState.CLOSED
        return True

    def _on_start(self) -> None:
        """Spawn the loops (the state is already RUNNING)."""

    def _on_stop(self) -> None:
        """Stop the loops that start new work (the state is already STOPPING)."""

    async def _on_close(self) -> None:
        """Wait for the work under way and the loops to end (the state is already CLOSED)."""

    # -- health --------------------------------------------------------------------------------

    def health(self) -> Health:
        """Running, the store answered within the service's window, every loop alive
        (``jobs.health``)."""
        return build_health(
            self.service,
            running=self.is_running,
            contact=self._health_contact(),
            window_ms=self._health_window_ms(),
            supervisor=self._supervisor,
            store_name=store_name(self._store),
            **self._health_details(),
        )

    def _health_window_ms(self) -> int:
        raise NotImplementedError

    def _health_contact(self) -> StoreContact:
        return self._contact

    def _health_details(self) -> dict[str, Any]:
        return {}

    def _store_failed(self, exc: Exception) -> None:
        """A store call failed: recorded for ``health()``; logged as an error, naming the
        store, when the store never answered (a wrong URL, a server that is down)."""
        if self._contact.last_answer is None and self._contact.last_error is None:
            logger.error(
                "{}: its store {} cannot be reached: {}",
                self.service,
                store_name(self._store),
                describe_cause(exc),
            )
        self._contact.failed(exc)
