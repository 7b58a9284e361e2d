"""Errors of the jobs package.

JobsError
 +-- PayloadError (ValueError)         a payload that would not round-trip as JSON, named by path
 |    +-- PayloadTooLargeError          the JSON text is over ``max_payload_bytes``
 |    +-- PayloadValidationError        a payload that does not fit its job definition's schema
 +-- JobTypeError (ValueError)         a job type or idempotency key that cannot be stored
 +-- JobOptionError (ValueError)       an option (delay_ms, run_at, timeout_ms, max_attempts,
 |                                      max_stalls, ...) of the wrong type or out of its range
 +-- DuplicateHandlerError             two handlers for one job type
 +-- ScheduleError (ValueError)        a cron expression or timezone that cannot be used
 +-- DriverError                       the store failed a call
 |    +-- StoreUnavailableError (ConnectionError)   the store cannot be reached
 |    +-- StoreSchemaError              the store's schema does not fit this version
 |    +-- StoreValueError (ValueError)  the store refused a value (out of its column's range)
 +-- JobTimeoutError (TimeoutError)    a handler ran past its timeout (recorded as the job's error)
 +-- LeaseExpiredError                 a job's lease ran out while its handler ran
 +-- StalledTooOftenError              a job's lease expired more than its max_stalls times
 +-- PermanentError                    raised by a handler: fail the job now, no more attempts
 |    +-- HandlerExitError              a handler raised SystemExit or KeyboardInterrupt
 +-- RetryLater                        raised by a handler: retry after ``delay_ms``
 +-- MissingExtraError (ImportError)   an integration used without its extra installed
"""

from __future__ import annotations

import importlib.util


class JobsError(Exception):
    """Root of every error the jobs package raises."""


class PayloadError(JobsError, ValueError):
    """A payload that is not JSON; the message names the path, e.g. ``payload["items"][2]``."""

    def __init__(self, message: str, path: str = "payload") -> None:
        self.path = path
        super().__init__(message)


class PayloadTooLargeError(PayloadError):
    """The payload's JSON text is larger than ``max_payload_bytes``."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"payload is {size} bytes of JSON, over the limit of {limit} bytes")


class PayloadValidationError(PayloadError):
    """A payload that does not fit the schema of its job definition."""


class JobTypeError(JobsError, ValueError):
    """A job type or key that is not a non-empty string of reasonable length."""


class JobOptionError(JobsError, ValueError):
    """An option of a job (``delay_ms``, ``run_at``, ``timeout_ms``, ``max_attempts``,
    ``max_stalls``, ...) of the wrong type or out of its range: the message names the option,
    the value and the range (``jobs.options``). Raised before any I/O."""

    def __init__(self, message: str, *, option: str, value: object) -> None:
        self.option = option
        self.value = value
        super().__init__(message)


class DuplicateHandlerError(JobsError):
    """Two handlers were registered for one job type."""

    def __init__(self, job_type: str, first: str, second: str) -> None:
        self.job_type = job_type
        super().__init__(
            f"job type {job_type!r} has two handlers: {first} and {second}; register one"
        )


class ScheduleError(JobsError, ValueError):
    """A schedule whose cron expression or timezone cannot be used."""


class DriverError(JobsError):
    """The job store failed a call."""


class StoreUnavailableError(DriverError, ConnectionError):
    """The job store cannot be reached (connection refused, lost or timed out)."""


class StoreSchemaError(DriverError):
    """The store's tables or keys do not have the shape this version expects."""


class StoreValueError(DriverError, ValueError):
    """The store refused a value of the call: out of its column's range or of the wrong type
    (a database's DataError). The queue's checks (``jobs.options``) keep such values from
    reaching a driver; this is what a driver says of one that came another way. The store is
    reachable: retrying the same call fails the same way."""


class JobTimeoutError(JobsError, TimeoutError):
    """A handler ran past its ``timeout_ms``."""


class LeaseExpiredError(JobsError):
    """A job's lease expired while its handler ran (the heartbeat found it gone)."""


class StalledTooOftenError(JobsError):
    """A job's lease expired without a settle more than its ``max_stalls`` times (each time a
    worker crashed, was killed or lost the job): it failed for good rather than run again.
    Stored as the job's error; a poison job that kills its workers stays bounded."""


class PermanentError(JobsError):
    """Raise from a handler to fail the job for good at once (its message is the error kept)."""


class ResultError(PermanentError):
    """A handler returned a value that cannot be kept as its job's result: not plain JSON, or
    larger than ``JobsSettings.max_result_bytes``. The job fails for good with this error (a
    retry would run the handler's effects again to return the same value)."""


class HandlerExitError(PermanentError):
    """A handler raised ``SystemExit`` or ``KeyboardInterrupt`` (``sys.exit()``, say): its job
    fails for good with this error, and the worker keeps serving the other jobs."""

    def __init__(self, raised: SystemExit | KeyboardInterrupt) -> None:
        self.raised = raised
        detail = f"({raised})" if str(raised) else "()"
        super().__init__(
            f"the handler raised {type(raised).__name__}{detail}: a handler cannot exit the "
            "worker; its job fails for good and the worker keeps running"
        )
        self.__cause__ = raised
        self.__traceback__ = raised.__traceback__


class RetryLater(JobsError):
    """Raise from a handler to retry the job after ``delay_ms`` instead of its backoff.

    It still ends the attempt as a failure: on the last attempt the job fails as usual.
    """

    def __init__(self, message: str = "retry later", *, delay_ms: int) -> None:
        from .options import check_delay_ms  # options imports this module

        self.delay_ms = check_delay_ms(delay_ms, "RetryLater")
        super().__init__(message)


class MissingExtraError(JobsError, ImportError):
    """An optional integration was used without the extra that installs it.

    The message is one line naming the extra, e.g. ``RedisJobDriver needs the redis extra:
    pip install 'neverlost[redis]'``. ``extra`` is the extra's name; ``name`` (ImportError's)
    the first module found missing.
    """

    def __init__(self, feature: str, extra: str, missing: str) -> None:
        self.feature = feature
        self.extra = extra
        super().__init__(
            f"{feature} needs the {extra} extra: pip install 'neverlost[{extra}]'", name=missing
        )


def require_extra(feature: str, extra: str, *modules: str) -> None:
    """Raise ``MissingExtraError`` when one of ``modules`` (top-level names) is not installed.

    Called where an integration is first used (a driver package's import, an engine's
    creation), before anything imports the modules themselves, so a missing extra fails with
    its one line rather than with the ``ModuleNotFoundError`` of a module deep inside. Looks the
    modules up without importing them.
    """
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(feature, extra, module)
