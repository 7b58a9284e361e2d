"""Background jobs: the driver SPI, the in-process driver, and (soon) queue, handlers, runner."""

from .clock import Clock, ManualClock, SystemClock
from .driver import (
    JOB_STATES,
    LEASE_EXPIRED_ERROR,
    ClaimedJob,
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
    ScheduleError,
    StoreSchemaError,
    StoreUnavailableError,
)
from .inprocess import InProcessJobDriver
from .payload import check_payload, encode_payload
from .settings import JobsSettings

__all__ = [
    "JOB_STATES",
    "LEASE_EXPIRED_ERROR",
    "ClaimedJob",
    "Clock",
    "InProcessJobDriver",
    "JobDriver",
    "JobInfo",
    "JobRequest",
    "JobState",
    "JobsSettings",
    "ManualClock",
    "SystemClock",
    "check_payload",
    "encode_payload",
    "DriverError",
    "DuplicateHandlerError",
    "JobsError",
    "JobTimeoutError",
    "JobTypeError",
    "LeaseExpiredError",
    "PayloadError",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "ScheduleError",
    "StoreSchemaError",
    "StoreUnavailableError",
]
