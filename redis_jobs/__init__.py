"""The Redis job driver: Lua scripts over sorted sets and hashes, namespaced.

Needs the ``redis`` extra (redis-py and hiredis): ``pip install 'neverlost[redis]'``.
"""

from . import _extra  # noqa: F401  (first: without redis-py, one line naming the extra)
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
