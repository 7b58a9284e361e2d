"""Background jobs: at-least-once delivery with leases, on any driver that passes the suite."""

from .autoconfig import JobsAutoConfiguration
from .clock import Clock, ManualClock, SystemClock
from .context import AbortSignal, JobContext
from .definitions import JobDefinition, define_job
from .driver import (
    JOB_STATES,
    LEASE_EXPIRED_ERROR,
    MAX_ERRORS_KEPT,
    ClaimedJob,
    FailedAttempt,
    JobDriver,
    JobInfo,
    JobRequest,
    JobState,
)
from .errors import (
    DriverError,
    DuplicateHandlerError,
    JobsError,
    JobTimeoutError,
    JobTypeError,
    LeaseExpiredError,
    PayloadError,
    PayloadTooLargeError,
    PayloadValidationError,
    PermanentError,
    RetryLater,
    ScheduleError,
    StoreSchemaError,
    StoreUnavailableError,
)
from .failures import FailureStreak
from .handlers import JobHandlerRegistry, RegisteredHandler, job_handler
from .health import Health, LoopHealth
from .inprocess import InProcessJobDriver
from .operations import (
    JobPage,
    JobTypeStats,
    OperationsNotImplemented,
    WorkerInfo,
    WorkerRegistration,
)
from .outbox import JobOutboxPublisher, OutboxEntry, OutboxPublisher, OutboxStore
from .outbox_relay import OutboxRelay
from .payload import check_payload, encode_payload
from .queue import JobQueue, NewJob
from .redaction import redact_url
from .retry import Backoff, exponential_backoff
from .runner import JobRunner
from .schedule import Schedule
from .scheduler import JobScheduler, PassReport
from .settings import JobsSettings
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
    # producing and handling
    "JobQueue",
    "NewJob",
    "JobDefinition",
    "define_job",
    "job_handler",
    "JobHandlerRegistry",
    "RegisteredHandler",
    "JobContext",
    "AbortSignal",
    "JobRunner",
    "Health",
    "LoopHealth",
    "Schedule",
    "JobScheduler",
    "PassReport",
    "Backoff",
    "exponential_backoff",
    # the driver SPI
    "JobDriver",
    "JobRequest",
    "ClaimedJob",
    "JobInfo",
    "FailedAttempt",
    "FailureStreak",
    "JobState",
    "JOB_STATES",
    "LEASE_EXPIRED_ERROR",
    "MAX_ERRORS_KEPT",
    # operating it
    "JobPage",
    "JobTypeStats",
    "WorkerInfo",
    "WorkerRegistration",
    "OperationsNotImplemented",
    "InProcessJobDriver",
    "redact_url",
    "Clock",
    "ManualClock",
    "SystemClock",
    # the outbox
    "OutboxStore",
    "OutboxEntry",
    "OutboxPublisher",
    "OutboxRelay",
    "JobOutboxPublisher",
    # payloads
    "check_payload",
    "encode_payload",
    # errors
    "JobsError",
    "DriverError",
    "DuplicateHandlerError",
    "JobTimeoutError",
    "JobTypeError",
    "LeaseExpiredError",
    "PayloadError",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PermanentError",
    "RetryLater",
    "ScheduleError",
    "StoreSchemaError",
    "StoreUnavailableError",
]
