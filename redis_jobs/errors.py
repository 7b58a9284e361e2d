"""Errors of the redis_jobs package, and the translation of redis-py's errors into them.

RedisJobsError (DriverError)
 +-- RedisScriptError           a script refused a call because a key had the wrong type or shape
 |                              (nothing was written)
 +-- RedisReplicaError          the server is a read-only replica (StoreUnavailableError too)
 +-- RedisOutOfMemoryError      Redis is at maxmemory and refuses writes (StoreUnavailableError)
 +-- ReplicationTimeoutError    fewer replicas than ``replicas=`` confirmed a write in time
                                (StoreUnavailableError): it may not survive a failover

Every "not ready, gone or full" condition is a ``StoreUnavailableError`` (the jobs package's), so
a caller that retries on it rides through a restart or a failover: a lost connection or timeout,
``LOADING`` (a restart reading its data), ``BUSY`` (a script running past its time limit),
``OOM``, ``READONLY`` (a demoted primary), ``UNBLOCKED`` (a BLPOP ended by a failover),
``MASTERDOWN``, ``CLUSTERDOWN``, ``TRYAGAIN`` and a
cluster whose slot map cannot be read. redis-py drops a connection that failed, so the next call
gets a fresh one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis import exceptions as redis_errors

from jobs.errors import DriverError, StoreUnavailableError

REFUSAL_CODE = "JOBSCRIPT"
"""How a script's own refusal starts (raised before any write)."""
UNAVAILABLE_CODES = ("BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "LOADING", "UNBLOCKED")
"""Error replies, by their first word, that say the server cannot serve the call right now."""


class RedisJobsError(DriverError):
    """Root of the errors raised by redis_jobs."""


class RedisScriptError(RedisJobsError):
    """A Lua script found a key of the wrong type or a malformed record and wrote nothing."""


class RedisReplicaError(RedisJobsError, StoreUnavailableError):
    """The server refused a write because it is a read-only replica."""


class RedisOutOfMemoryError(RedisJobsError, StoreUnavailableError):
    """Redis is at ``maxmemory`` (with ``noeviction``) and refuses writes until memory frees."""


class ReplicationTimeoutError(RedisJobsError, StoreUnavailableError):
    """A write was not confirmed by ``replicas`` replicas within ``replica_timeout_ms``."""


@contextmanager
def translate_errors() -> Iterator[None]:
    """Raise redis-py's errors as the jobs package's (``from`` the original)."""
    try:
        yield
    except (redis_errors.RedisError, redis_errors.RedisClusterException) as exc:
        raise translate(exc) from exc


def translate(exc: BaseException) -> BaseException:
    """The jobs-package error for a Redis error (caused by it); other exceptions unchanged."""
    error: BaseException
    text = str(exc)
    if isinstance(exc, redis_errors.AskError):  # MOVED or ASK reached us: not a cluster client
        error = RedisJobsError(
            f"the server is a Redis Cluster node and the namespace's slot is served by another "
            f"({text}); give the driver a redis.asyncio.RedisCluster client, or "
            "url='redis+cluster://host:port'"
        )
    elif isinstance(exc, redis_errors.ReadOnlyError):
        error = RedisReplicaError(
            f"Redis refused a write: the server is a read-only replica ({text}); point the "
            "driver at the primary, or give it a Sentinel master_for(...) client or a "
            "RedisCluster, which find the primary themselves"
        )
    elif isinstance(exc, redis_errors.OutOfMemoryError):
        error = RedisOutOfMemoryError(
            f"Redis is out of memory and refuses writes ({text}); free memory or raise "
            "maxmemory on the server"
        )
    elif isinstance(
        exc,
        redis_errors.ConnectionError
        | redis_errors.TimeoutError
        | redis_errors.ClusterError
        | redis_errors.TryAgainError
        | redis_errors.RedisClusterException,
    ) or text.startswith(UNAVAILABLE_CODES):
        error = StoreUnavailableError(f"Redis is unavailable: {text or type(exc).__name__}")
    elif isinstance(exc, redis_errors.ResponseError) and text.startswith(REFUSAL_CODE):
        error = RedisScriptError(text.removeprefix(REFUSAL_CODE).strip())
    elif isinstance(exc, redis_errors.RedisError):
        error = DriverError(f"Redis failed the call: {text}")
    else:
        return exc
    error.__cause__ = exc
    return error


def refusal(text: str) -> BaseException:
    """The error of one job's refusal inside a batch reply (``JOBSCRIPT ...`` text)."""
    return translate(redis_errors.ResponseError(text))
