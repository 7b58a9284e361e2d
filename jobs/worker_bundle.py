"""``Worker``: what a worker process runs, declared without the DI container.

``neverlost worker module:factory`` takes a function returning a ``Worker`` (or a ``Worker``
itself), and so do the operator commands (``stats``, ``jobs list``, ``dashboard``...)::

    # myapp/worker.py             neverlost worker myapp.worker:build
    @job_handler("email.send", max_attempts=5)
    def send_email(payload: dict) -> None: ...

    def build() -> Worker:
        return Worker(driver=os.environ["JOBS_URL"], handlers=[send_email])

The bundle becomes the same beans a configuration would declare (``worker_configuration``),
so the process is the one ``neverlost worker`` runs for a DI app: the runner, the outbox relay
when ``outbox`` is given, the scheduler for ``schedules`` and cron handlers, the drain on
SIGTERM, ``--health-port``. Its parts are closed with it: the outbox store first, then the
driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework import ApplicationContext, configuration, entry

from .definitions import JobDefinition
from .handlers import JobHandlerRegistry, handler_options
from .schedule import Schedule
from .settings import JobsSettings
from .spi.driver import JobDriver
from .spi.outbox import OutboxStore
from .tokens import JOB_DRIVER, JOB_HANDLER_REGISTRY, JOBS_SETTINGS, OUTBOX_STORE
from .urls import driver_from_url

__all__ = ["Handler", "Worker", "worker_configuration"]

Handler = Callable[..., Any] | tuple[str | JobDefinition[Any], Callable[..., Any]] | object
"""A function decorated with ``@job_handler(...)`` (its options as decorated), a pair
``(type_or_definition, function)`` (no options of its own), or an object whose methods are
decorated (as a bean's would be)."""


@dataclass(frozen=True, eq=False, kw_only=True)
class Worker:
    """A worker's parts: ``driver`` (a JobDriver, or a URL as ``--url`` takes it), the
    ``handlers``, an ``outbox`` store to relay (optional), ``schedules`` to queue, and
    ``settings`` (``JobsSettings()`` by default: concurrency, poll interval...).

    The handlers are checked when the bundle is made: a shape not listed in ``Handler``, or
    two handlers of one job type, is an error naming them.
    """

    driver: JobDriver | str
    handlers: Sequence[Handler] = ()
    outbox: OutboxStore | None = None
    schedules: Sequence[Schedule] = ()
    settings: JobsSettings = field(default_factory=JobsSettings)

    def __post_init__(self) -> None:
        if isinstance(self.driver, str):
            driver = driver_from_url(self.driver, owner="Worker(driver=...)")
            object.__setattr__(self, "driver", driver)
        elif not isinstance(self.driver, JobDriver):
            raise TypeError(f"Worker(driver=...) takes a JobDriver or a URL, got {self.driver!r}")
        if isinstance(self.handlers, str | bytes) or not isinstance(self.handlers, Sequence):
            raise TypeError("Worker(handlers=...) takes a list of handlers")
        for schedule in self.schedules:
            if not isinstance(schedule, Schedule):
                raise TypeError(f"Worker(schedules=...) takes Schedule objects, got {schedule!r}")
        self.registry()  # checks every handler now, before anything runs

    def registry(self, context: ApplicationContext | None = None) -> JobHandlerRegistry:
        """A handler registry of the bundle's handlers (a new one each call)."""
        registry = JobHandlerRegistry(context)
        for index, handler in enumerate(self.handlers):
            _add(registry, handler, index)
        return registry


def _add(registry: JobHandlerRegistry, handler: Handler, index: int) -> None:
    if isinstance(handler, tuple):
        if len(handler) != 2 or not callable(handler[1]):
            raise TypeError(
                f"Worker handler {index} is {handler!r}: a pair is (job type or definition, "
                "function)"
            )
        registry.register(handler[0], handler[1])
        return
    if callable(handler) and handler_options(handler) is not None:
        registry.add(handler)
        return
    before = len(registry.types)
    registry.scan(handler, name=type(handler).__name__)
    if len(registry.types) == before:
        raise TypeError(
            f"Worker handler {index} is {handler!r}, which handles no job type: give a function "
            "decorated with @job_handler(...), a (job type, function) pair, or an object with "
            "@job_handler methods"
        )


def worker_configuration(worker: Worker) -> type:
    """A ``@configuration`` class of ``worker``'s beans (beside ``JobsAutoConfiguration``)."""

    class WorkerConfiguration:
        @entry(JOBS_SETTINGS)
        def jobs_settings(self) -> JobsSettings:
            return worker.settings

        @entry(JOB_DRIVER)
        def job_driver(self) -> JobDriver:
            assert isinstance(worker.driver, JobDriver)
            return worker.driver

        @entry(JOB_HANDLER_REGISTRY)
        def job_handler_registry(self, context: ApplicationContext) -> JobHandlerRegistry:
            return worker.registry(context)

        @entry(OUTBOX_STORE, closes_before=(JOB_DRIVER,))
        def outbox_store(self, job_driver: JobDriver) -> OutboxStore:
            assert worker.outbox is not None
            return worker.outbox

        @entry()
        def worker_schedules(self) -> list[Schedule]:
            return list(worker.schedules)

    if worker.outbox is None:
        del WorkerConfiguration.outbox_store
    if not worker.schedules:
        del WorkerConfiguration.worker_schedules
    return configuration(WorkerConfiguration)
