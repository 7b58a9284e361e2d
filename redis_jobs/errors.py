"""Errors of the redis_jobs package.

RedisJobsError
 +-- RedisScriptError       a script refused a call because a key had the wrong type or shape
                            (nothing was written)
Connection failures are raised as the jobs package's ``StoreUnavailableError``.
"""

from __future__ import annotations

from jobs.errors import DriverError


class RedisJobsError(DriverError):
    """Root of the errors raised by redis_jobs."""


class RedisScriptError(RedisJobsError):
    """A Lua script found a key of the wrong type or a malformed record and wrote nothing."""
