"""The private redis-server of the fault tests now ships in jobs.testing (the chaos kit uses it)."""

from jobs.testing.redis_server import DURABLE, RedisServer, RedisServers, free_port

__all__ = ["DURABLE", "RedisServer", "RedisServers", "free_port"]
