"""How redis-py's errors read as the jobs package's: every 'not ready, gone or full' condition is
a StoreUnavailableError (or a named subclass), a script's refusal a RedisScriptError."""

from __future__ import annotations

import pytest
from redis import exceptions as redis_errors

from jobs.errors import DriverError, StoreUnavailableError
from redis_jobs import RedisOutOfMemoryError, RedisReplicaError, RedisScriptError
from redis_jobs.errors import translate

UNAVAILABLE = [
    redis_errors.ConnectionError("Connection closed by server."),
    redis_errors.TimeoutError("Timeout reading from socket"),
    redis_errors.BusyLoadingError("Redis is loading the dataset in memory"),
    redis_errors.ResponseError("BUSY Redis is busy running a script."),
    redis_errors.MasterDownError("Link with MASTER is down and replica-serve-stale-data is no"),
    redis_errors.ClusterDownError("The cluster is down"),
    redis_errors.TryAgainError("Multiple keys request during rehashing of slot"),
    redis_errors.ResponseError("UNBLOCKED force unblock from blocking operation"),
    redis_errors.RedisClusterException("Redis Cluster cannot be connected."),
]


@pytest.mark.parametrize("error", UNAVAILABLE, ids=lambda error: str(error)[:30])
def test_not_ready_or_gone_is_store_unavailable(error: Exception) -> None:
    translated = translate(error)
    assert isinstance(translated, StoreUnavailableError)
    assert translated.__cause__ is error


def test_out_of_memory_is_a_named_store_unavailable_error() -> None:
    error = redis_errors.OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")
    translated = translate(error)
    assert isinstance(translated, RedisOutOfMemoryError)
    assert isinstance(translated, StoreUnavailableError)
    assert "maxmemory" in str(translated)


def test_a_read_only_replica_says_so() -> None:
    error = redis_errors.ReadOnlyError("You can't write against a read only replica.")
    translated = translate(error)
    assert isinstance(translated, RedisReplicaError)
    assert isinstance(translated, StoreUnavailableError)
    assert "point the driver at the primary" in str(translated)


def test_a_script_refusal_and_other_errors_are_not_unavailability() -> None:
    refused = translate(redis_errors.ResponseError("JOBSCRIPT key {ns}:x holds a list"))
    assert isinstance(refused, RedisScriptError)
    assert str(refused) == "key {ns}:x holds a list"
    other = translate(redis_errors.ResponseError("ERR unknown command 'NOPE'"))
    assert isinstance(other, DriverError)
    assert not isinstance(other, StoreUnavailableError)
    assert translate(ValueError("not redis")).__class__ is ValueError
