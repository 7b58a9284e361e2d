"""The redis extra's check, imported first by the package: without redis-py or hiredis,
``import redis_jobs`` fails with one line naming the extra, not deep in a module."""

from jobs.errors import require_extra

require_extra("RedisJobDriver", "redis", "redis", "hiredis")
