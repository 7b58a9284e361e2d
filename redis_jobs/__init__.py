"""The Redis job driver: Lua scripts over sorted sets and hashes, namespaced."""

from .admin import delete_namespace
from .driver import RedisJobDriver
from .errors import (
    RedisJobsError,
    RedisOutOfMemoryError,
    RedisReplicaError,
    RedisScriptError,
    ReplicationTimeoutError,
)
from .keys import Keys
from .topology import RedisClient, client_from_url

__all__ = [
    "RedisJobDriver",
    "Keys",
    "RedisJobsError",
    "RedisScriptError",
    "RedisReplicaError",
    "RedisOutOfMemoryError",
    "ReplicationTimeoutError",
    "RedisClient",
    "client_from_url",
    "delete_namespace",
]
