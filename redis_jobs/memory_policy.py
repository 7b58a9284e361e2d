"""The memory-policy check: warn when Redis may evict job keys (RELIABILITY S16).

Under any ``maxmemory-policy`` but ``noeviction`` Redis evicts keys when it reaches maxmemory,
and an evicted job is lost without an error. The driver reads the policy once, on first use.
"""

from __future__ import annotations

from loguru import logger
from redis import exceptions as redis_errors

from .topology import Topology

SAFE_MEMORY_POLICY = "noeviction"
"""The only ``maxmemory-policy`` under which Redis never drops job keys to free memory."""


async def check_memory_policy(topology: Topology) -> bool:
    """Log the policy (a warning unless it is safe); False when Redis could not be reached.

    A server that refuses CONFIG (managed Redis, a renamed command) is skipped quietly.
    """
    try:
        reply = await topology.client.config_get("maxmemory-policy", **topology.node_options())
    except (redis_errors.ConnectionError, redis_errors.TimeoutError):
        return False
    except Exception as exc:
        logger.debug("could not read Redis maxmemory-policy ({}); not checked", exc)
        return True
    encoding = topology.encoding

    def text(value: object) -> str:
        return value.decode(*encoding) if isinstance(value, bytes) else str(value)

    policy = {text(name): text(value) for name, value in reply.items()}.get("maxmemory-policy")
    if policy is None or policy == SAFE_MEMORY_POLICY:
        logger.debug("Redis maxmemory-policy is {!r}", policy)
    else:
        logger.warning(
            "Redis maxmemory-policy is {!r}, not {!r}: when Redis reaches maxmemory it may "
            "evict job keys, and those jobs are lost without an error; set "
            "maxmemory-policy {} on the server the job driver uses",
            policy,
            SAFE_MEMORY_POLICY,
            SAFE_MEMORY_POLICY,
        )
    return True
