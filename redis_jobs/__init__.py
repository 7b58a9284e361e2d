"""The Redis job driver: Lua scripts over sorted sets and hashes, namespaced."""

from .errors import RedisJobsError, RedisScriptError

__all__ = [
    "RedisJobsError",
    "RedisScriptError",
]
