"""Bean tokens of the jobs plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework import Token

if TYPE_CHECKING:
    from .handlers import JobHandlerRegistry
    from .outbox_relay import OutboxRelay
    from .queue import JobQueue
    from .runner import JobRunner
    from .scheduler import JobScheduler
    from .settings import JobsSettings
    from .spi.driver import JobDriver
    from .spi.outbox import OutboxStore

JOB_DRIVER: Token[JobDriver] = Token("job_driver")
JOB_QUEUE: Token[JobQueue] = Token("job_queue")
JOB_HANDLER_REGISTRY: Token[JobHandlerRegistry] = Token("job_handler_registry")
JOB_SCHEDULER: Token[JobScheduler] = Token("job_scheduler")
JOB_RUNNER: Token[JobRunner] = Token("job_runner")
JOBS_SETTINGS: Token[JobsSettings] = Token("jobs_settings")
OUTBOX_STORE: Token[OutboxStore] = Token("outbox_store")
OUTBOX_RELAY: Token[OutboxRelay] = Token("outbox_relay")
