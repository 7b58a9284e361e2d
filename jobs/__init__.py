"""Background jobs: at-least-once delivery with leases, on any driver that passes the suite.

This is the user API. Driver and outbox-store authors import ``jobs.spi`` (records, protocols)
and ``jobs.spi.support``; the suite a driver passes is ``jobs.testing``.
"""

from loguru import logger as _logger

from ._version import __version__ as __version__
from .autoconfig import JobsAutoConfiguration
from .clock import Clock, ManualClock, SystemClock
from .context import AbortSignal, JobContext
from .definitions import JobDefinition, define_job
from .errors import (
    DriverError,
    DuplicateHandlerError,
    JobOptionError,
    JobsError,
    JobTimeoutError,
    JobTypeError,
    LeaseExpiredError,
    PayloadError,
    PayloadTooLargeError,
    PayloadValidationError,
    PermanentError,
    ResultError,
    RetryLater,
    ScheduleError,
    StalledTooOftenError,
    StoreSchemaError,
    StoreUnavailableError,
)
from .handlers import JobHandlerRegistry, job_handler
from .health import Health, LoopHealth
from .inprocess import InProcessJobDriver
from .logs import enable_logging
from .new_job import NewJob
from .outbox_relay import JobOutboxPublisher, OutboxRelay
from .queue import JobQueue
from .redaction import redact_url
from .retry import Backoff, exponential_backoff
from .runner import JobRunner
from .schedule import Schedule
from .scheduler import JobScheduler
from .settings import JobsSettings
from .spi import JobDriver, JobInfo, JobPage, JobState, JobTypeStats, OutboxStore, WorkerInfo
from .sync_queue import SyncJobQueue
from .tokens import (
    JOB_DRIVER,
    JOB_HANDLER_REGISTRY,
    JOB_QUEUE,
    JOB_RUNNER,
    JOB_SCHEDULER,
    JOBS_SETTINGS,
    OUTBOX_RELAY,
    OUTBOX_STORE,
)
from .worker_bundle import Worker

# A library's lines are off until the application asks (jobs.logs). The drivers import jobs
# first: their names are disabled here, so one imported after enable_logging() stays enabled.
_logger.disable("jobs")
_logger.disable("orm_sqlalchemy")
_logger.disable("redis_jobs")

__all__ = [
    # beans and tokens
    "JOB_DRIVER",
    "JOB_HANDLER_REGISTRY",
    "JOB_QUEUE",
    "JOB_RUNNER",
    "JOB_SCHEDULER",
    "JOBS_SETTINGS",
    "OUTBOX_RELAY",
    "OUTBOX_STORE",
    "JobsAutoConfiguration",
    "JobsSettings",
    # producing
    "JobQueue",
    "SyncJobQueue",
    "NewJob",
    "JobDefinition",
    "define_job",
    # handling and running
    "job_handler",
    "JobHandlerRegistry",
    "JobContext",
    "AbortSignal",
    "JobRunner",
    "Worker",
    "Backoff",
    "exponential_backoff",
    "Health",
    "LoopHealth",
    "Schedule",
    "JobScheduler",
    # what the queue reports
    "JobInfo",
    "JobState",
    "JobPage",
    "JobTypeStats",
    "WorkerInfo",
    # drivers and clocks
    "JobDriver",
    "InProcessJobDriver",
    "redact_url",
    "Clock",
    "ManualClock",
    "SystemClock",
    # the outbox
    "OutboxStore",
    "OutboxRelay",
    "JobOutboxPublisher",
    # the library's log lines
    "enable_logging",
    # errors
    "JobsError",
    "DriverError",
    "DuplicateHandlerError",
    "JobTimeoutError",
    "JobTypeError",
    "JobOptionError",
    "LeaseExpiredError",
    "StalledTooOftenError",
    "PayloadError",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PermanentError",
    "ResultError",
    "RetryLater",
    "ScheduleError",
    "StoreSchemaError",
    "StoreUnavailableError",
]
