"""The Redis job driver: Lua scripts over sorted sets and hashes, namespaced."""

from .admin import delete_namespace
from .driver import RedisJobDriver
from .errors import RedisJobsError, RedisScriptError
from .keys import Keys

__all__ = [
    "RedisJobDriver",
    "Keys",
    "RedisJobsError",
    "RedisScriptError",
    "delete_namespace",
]
