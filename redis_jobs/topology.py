"""Which Redis the driver talks to: a server, a Sentinel-managed primary, or a Cluster.

The driver only ever uses redis-py's public client API, so routing, redirects (MOVED/ASK),
slot-map refreshes and Sentinel reconnection are redis-py's. What this module adds is what the
driver needs to know of the topology around it:

- ``where()``: the address that serves the namespace's writes now (a Cluster: the master of the
  namespace's slot; Sentinel: the primary it last discovered; else the configured server), so
  the driver can log one line when a failover moved it;
- ``node_options()``: how to aim ``WAIT`` at the connection that made the writes (on a Cluster
  WAIT has no key, so it is sent to the slot's node explicitly, in the same node pipeline);
- the client's encoding and socket timeout.

``client_from_url`` makes the client for ``url=``: ``redis://``, ``rediss://``, ``unix://``;
``redis+cluster://host:port`` (any node: a ``RedisCluster`` discovers the rest); and
``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]`` (``rediss+...``
for TLS), each with a few quick retries of a command on a dropped connection.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

from loguru import logger
from redis.asyncio import Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisClusterException, RedisError

from jobs.spi.support import redact_url

from .keys import Keys

RedisClient = Redis | RedisCluster
"""A client the driver takes: ``Redis`` (also a Sentinel ``master_for`` one) or ``RedisCluster``."""

OWNED_CLIENT_RETRIES = 3
"""Retries of a command on a dropped connection, 20, 40, 80 ms apart, by a client made from url."""
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


class Topology:
    """What the driver knows of the deployment behind ``client`` for the namespace ``keys``."""

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        if not isinstance(client, Redis | RedisCluster):
            raise TypeError(
                "RedisJobDriver takes a redis.asyncio.Redis (also a Sentinel master_for(...) "
                f"client) or a redis.asyncio.RedisCluster, got {type(client).__name__}"
            )
        self.client = client
        self._slot_key = keys.prefix
        encoder = client.get_encoder()
        self.encoding: tuple[str, str] = (encoder.encoding, encoder.encoding_errors)
        """The client's text encoding and error handler, to read text replies in."""
        if isinstance(client, RedisCluster):
            self.kind = "cluster"
            settings: dict[str, Any] = dict(client.get_connection_kwargs())
        else:
            pool = client.connection_pool
            self.kind = "sentinel" if isinstance(pool, SentinelConnectionPool) else "server"
            settings = pool.connection_kwargs
        self.socket_timeout: float | None = settings.get("socket_timeout")
        self._address = _address(settings)
        self._db = settings.get("db", 0)
        self._namespace = keys.namespace
        self._seen: str | None = None

    def where(self) -> str | None:
        """The address serving the namespace's writes, as far as the client knows now."""
        if isinstance(self.client, RedisCluster):
            node = self.known_node()
            return None if node is None else str(node.name)
        pool = self.client.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            address = pool.master_address
            return None if address is None else f"{address[0]}:{address[1]}"
        return self._address

    async def locate(self) -> str | None:
        """``where()``, asking the sentinel first when a Sentinel client has not connected yet
        (``where()`` is None until then). A durable call compares the primary before and after
        it to catch a failover in between; "not known yet" before a driver's first call must not
        read as a change, or the first durable write of every new driver fails unconfirmed."""
        pool = getattr(self.client, "connection_pool", None)
        if isinstance(pool, SentinelConnectionPool) and pool.master_address is None:
            await pool.get_master_address()  # type: ignore[no-untyped-call]
        return self.where()

    def describe(self) -> str:
        """Where the client points, for messages: ``host:port db N``, Sentinel or Cluster."""
        if isinstance(self.client, RedisCluster):
            node = self.client.get_default_node()
            return f"Redis Cluster via {node.name if node is not None else 'its startup nodes'}"
        if isinstance(self.client.connection_pool, SentinelConnectionPool):
            service = self.client.connection_pool.service_name
            return f"Sentinel service {service!r} (primary {self.where() or 'not yet found'})"
        return f"{self._address or '?'} db {self._db}"

    def observe(self) -> None:
        """After a call that went through: log one line if the namespace's primary moved (a
        plain server's address is fixed: nothing to look up after each of its calls)."""
        if self.kind == "server":
            return
        now = self.where()
        if now is None or now == self._seen:
            return
        if self._seen is not None:
            logger.warning(
                "Redis failover: the job namespace {!r} is now served by {} (was {}); the "
                "driver follows it",
                self._namespace,
                now,
                self._seen,
            )
        self._seen = now

    async def close_client(self) -> None:
        """Close the client (one the driver owns), and for Sentinel the sentinels' clients."""
        await self.client.aclose()
        if isinstance(self.client, Redis):
            pool = self.client.connection_pool
            if isinstance(pool, SentinelConnectionPool):
                for sentinel in pool.sentinel_manager.sentinels:
                    await sentinel.aclose()

    async def relearn(self) -> None:
        """After a call was redirected: let the client learn where the namespace's slot is now.

        One keyed read of the namespace's slot through the client (redis-py follows its MOVED
        and updates its slot map), so ``where()`` and ``node_options()`` name the new master.
        Nothing to learn off a Cluster.
        """
        if isinstance(self.client, RedisCluster):
            await self.client.exists(self._slot_key)

    def known_node(self) -> ClusterNode | None:
        """On a Cluster, the node the client knows as the namespace slot's master now."""
        if not isinstance(self.client, RedisCluster):
            return None
        try:
            node: ClusterNode | None = self.client.get_node_from_key(self._slot_key)
        except (RedisClusterException, RedisError):  # no slot map yet
            return None
        return node

    async def slot_node(self) -> ClusterNode:
        """On a Cluster, the namespace slot's master (the slot map learned first if need be)."""
        assert isinstance(self.client, RedisCluster)
        node = self.known_node()
        if node is None:
            await self.client.initialize()
            node = self.client.get_node_from_key(self._slot_key)
        if node is None:
            raise RedisClusterException(f"no node serves the slot of {self._slot_key!r}")
        return node

    def node_options(self) -> dict[str, Any]:
        """Options that aim a keyless command (WAIT, CONFIG) at the namespace's node."""
        if isinstance(self.client, RedisCluster):
            return {"target_nodes": self.client.get_node_from_key(self._slot_key)}
        return {}


def client_from_url(url: str) -> Redis | RedisCluster:
    """A client for ``url`` (see the module docstring), with retries on dropped connections.

    A URL redis-py cannot read is a ValueError that shows it through ``redact_url``; redis-py's
    own message is added only for a URL without userinfo, since it may quote a piece of it (a
    password holding a ``/`` is read as a port: "Port could not be cast ... as 'pa'").
    """
    scheme, _, rest = url.partition("://")
    if scheme in SENTINEL_SCHEMES:
        return _sentinel_client(url)
    try:
        if scheme in CLUSTER_SCHEMES:
            base = scheme.removesuffix("+cluster")
            return RedisCluster.from_url(f"{base}://{rest}", retry=owned_retry())
        return Redis.from_url(url, retry=owned_retry())
    except ValueError as exc:
        why = " ".join(str(exc).split()) if "@" not in url else "it cannot be read"
    raise ValueError(  # out of the except block: redis-py's error is not kept as the context
        f"malformed Redis url {redact_url(url)!r} ({why}): it reads "
        "redis://[[user]:password@]host[:port][/db][?option=value] (or rediss://, unix://, "
        "redis+cluster://, redis+sentinel://), reserved characters (/ ? # @ :) in a password "
        "percent-encoded"
    )


def owned_retry() -> Retry:
    """The retry policy of a client the driver makes from ``url``.

    ``Redis.from_url`` clients retry nothing by default, and redis-py 8 hands out a pooled
    connection the server closed (its EOF check is skipped while maintenance notifications are
    on): after a Redis restart, each pooled connection would fail one command while Redis is up.
    A few quick retries reconnect it; a real outage still fails fast, as StoreUnavailableError.
    Rerunning a script whose reply was lost keeps the guarantees: enqueue recognises its own job
    (same id, type and payload); a rerun complete/retry/fail finds the job settled and returns
    False; a rerun claim leases other jobs and leaves the first batch to its lease, as a lost
    reply without a retry would.
    """
    return Retry(ExponentialBackoff(cap=0.1, base=0.01), OWNED_CLIENT_RETRIES)


def _sentinel_client(url: str) -> Redis:
    """The Sentinel-managed primary's client. A malformed URL's error quotes no piece of it
    (a piece could be part of a password holding a reserved character), only ``redact_url``."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced "[" (IPv6)
        raise _malformed(url, "its address cannot be read") from None
    netloc = parts.netloc.rsplit("@", 1)
    credentials = netloc[0] if len(netloc) == 2 else ""
    hosts = netloc[-1]
    path = [unquote(segment) for segment in parts.path.split("/") if segment]
    if not hosts or not path or len(path) > 2:
        raise _malformed(url, "it names no sentinel or no service")
    sentinels = []
    for number, host in enumerate(hosts.split(","), start=1):
        name, _, port = host.rpartition(":")
        if not name or not port.isdigit():
            raise _malformed(url, f"sentinel address {number} is not host:port")
        sentinels.append((name.strip("[]"), int(port)))
    options: dict[str, Any] = {"retry": owned_retry()}
    if credentials:
        user, _, password = credentials.partition(":")
        if user:
            options["username"] = unquote(user)
        if password:
            options["password"] = unquote(password)
    if len(path) == 2:
        if not path[1].isdigit():
            raise _malformed(url, "the db after the service name is not a number")
        options["db"] = int(path[1])
    if parts.scheme == "rediss+sentinel":
        options["ssl"] = True
    sentinel = Sentinel(sentinels, **options)
    client: Redis = sentinel.master_for(path[0])
    return client


def _malformed(url: str, why: str) -> ValueError:
    return ValueError(
        f"malformed Sentinel url {redact_url(url)!r} ({why}): it reads "
        "redis+sentinel://[user:password@]host:port[,host:port...]/service_name[/db], reserved "
        "characters (/ ? # @ :) in a password percent-encoded"
    )


def _address(settings: dict[str, Any]) -> str | None:
    if settings.get("path"):
        return f"unix:{settings['path']}"
    if settings.get("host"):
        return f"{settings['host']}:{settings.get('port', 6379)}"
    return None
