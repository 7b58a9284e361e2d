"""Errors of the redis_jobs package, and the translation of Redis's errors into them.

RedisJobsError
 +-- RedisScriptError       a script refused a call because a key had the wrong type or shape
                            (nothing was written)
Connection failures are raised as the jobs package's ``StoreUnavailableError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis import exceptions as redis_errors

from jobs.errors import DriverError, StoreUnavailableError

from .resp import ReplyError

REFUSAL_CODE = "JOBSCRIPT"
"""How a script's own refusal starts (raised before any write)."""


class RedisJobsError(DriverError):
    """Root of the errors raised by redis_jobs."""


class RedisScriptError(RedisJobsError):
    """A Lua script found a key of the wrong type or a malformed record and wrote nothing."""


@contextmanager
def translate_errors() -> Iterator[None]:
    """Raise redis-py's errors as the jobs package's (``from`` the original)."""
    try:
        yield
    except redis_errors.RedisError as exc:
        raise translate(exc) from exc


def translate(exc: BaseException) -> BaseException:
    """The jobs-package error for a Redis error (caused by it); other exceptions unchanged.

    Connection failures and timeouts become StoreUnavailableError, a script's refusal
    (``JOBSCRIPT ...``) RedisScriptError, any other error reply or redis-py error DriverError.
    """
    error: BaseException
    if isinstance(exc, redis_errors.ConnectionError | redis_errors.TimeoutError):
        error = StoreUnavailableError(f"Redis is unavailable: {exc}")
    elif isinstance(exc, ReplyError | redis_errors.ResponseError) and str(exc).startswith(
        REFUSAL_CODE
    ):
        error = RedisScriptError(str(exc).removeprefix(REFUSAL_CODE).strip())
    elif isinstance(exc, ReplyError | redis_errors.RedisError):
        error = DriverError(f"Redis failed the call: {exc}")
    else:
        return exc
    error.__cause__ = exc
    return error
