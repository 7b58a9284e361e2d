"""The package's functions (``library``), called one at a time or batched per event-loop tick.

Each transition is one ``FCALL`` of one function of the package's Redis Functions library
(``redis_jobs/lua/``, built by ``library``), through the client's public API, so a
``RedisCluster`` sends it to the namespace's slot and follows MOVED/ASK, and a Sentinel client
reaches the current primary. On a Cluster each FCALL names its node (the slot's master) itself:
redis-py would otherwise ask a node ``COMMAND GETKEYS`` for every FCALL to find its slot.

Loading: a call refused with "Function not found" (a server that never had the library, one
restarted without persistence, a node added to a Cluster or given the slot by a resharding, a
replica promoted before the library reached it, FUNCTION FLUSH) loads the library on the
node that refused (``FUNCTION LOAD REPLACE``) and runs the refused calls again, which is safe:
a refused FCALL ran nothing. So the library is loaded once per server, on first use.

The enqueue, heartbeat, finish and retry functions take a batch of jobs, and ``per_job``
coalesces the calls made in one event-loop tick into as few FCALLs as possible, sent in one
pipeline: one round trip (``ticks``). Each job still gets its own result. The FCALLs
themselves (one call, a tick's batch, a chunk of a bulk call) are ``calls``.

Durability (``replicas=N``): a pipeline that carries an acknowledged write (``durable``) ends
with ``WAIT N timeout`` on the same connection, still one round trip; unless N replicas
confirmed, its durable calls raise ReplicationTimeoutError (the write happened on the primary
but may not survive a failover). A call whose primary changed while it ran is not confirmed
either: the WAIT may have gone to the old one.

Redirects of a durable Cluster pipeline are followed here, not by redis-py: WAIT confirms the
writes of its own connection only, and redis-py would run a MOVED FCALL again on the new master
(another connection) while the WAIT, which has no key, stays with the old node, now a replica
("WAIT cannot be used with replica instances": a false ReplicationTimeoutError). A redirected
FCALL ran nothing, so the calls redirected are sent again, with a WAIT of their own, once the
client has learned the slot's new master (``Topology.relearn``). After ``REDIRECTS`` rounds the
last one lets redis-py follow them (a write then not confirmed, as before).

Errors are translated at this boundary (``errors.translate``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from loguru import logger
from redis import exceptions as redis_errors
from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterPipeline

from jobs.errors import DriverError

from .calls import (
    MAX_BATCH,
    NO_RESULT,
    Chunk,
    Command,
    Parts,
    ScriptArg,
    Sendable,
    Shared,
    given,
)
from .errors import ReplicationTimeoutError, translate
from .library import LIBRARY, SCRIPT_NAMES, Library
from .ticks import TickCoalescer
from .topology import Topology
from .wire import Wire

__all__ = ["MAX_BATCH", "SCRIPT_NAMES", "Parts", "ScriptArg", "ScriptRunner", "Shared"]

T = TypeVar("T")
REDIRECTS = 2
"""Rounds of redirected calls a durable Cluster pipeline sends again itself (see above)."""
FUNCTION_NOT_FOUND = "Function not found"
"""The start of Redis's error reply to an FCALL of a function it does not have."""

class ScriptRunner:
    """The package's functions, run through ``topology.client``; WAITs for ``replicas``."""

    def __init__(
        self,
        topology: Topology,
        *,
        replicas: int = 0,
        replica_timeout_ms: int = 1_000,
        library: Library = LIBRARY,
    ) -> None:
        self._topology = topology
        self._client = topology.client
        self._replicas = replicas
        self._replica_timeout_ms = replica_timeout_ms
        self._library = library
        self._functions = library.functions
        self._wire = Wire.of(self._client, topology.encoding)
        self._ticks = TickCoalescer(self._functions, self._run)

    @property
    def library(self) -> Library:
        """The library whose functions this runner calls."""
        return self._library

    async def call(
        self, name: str, keys: Sequence[str], args: Sequence[ScriptArg], *, durable: bool = False
    ) -> Any:
        """Run one script now, in the caller's task; its reply."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        command = Command(self._functions[name], list(keys), list(args), durable, future)
        await self._run([command])
        return future.result()

    def per_job(
        self,
        name: str,
        shared: Shared,
        keys: Sequence[str],
        args: Sequence[ScriptArg],
        *,
        durable: bool = True,
    ) -> Coroutine[Any, Any, Any]:
        """Run a batch script (``for_each_job``) for one job, coalesced with the calls of the
        same event-loop tick (``ticks.TickCoalescer.per_job``); await it for that job's result."""
        return self._ticks.per_job(name, shared, keys, args, durable=durable)

    async def batch(
        self,
        name: str,
        shared: Shared,
        jobs: Sequence[tuple[Sequence[str], Sequence[ScriptArg]]],
        *,
        durable: bool = True,
    ) -> list[Any]:
        """Run a batch script for ``jobs`` (keys, args) now, in one round trip; their results.

        Up to ``MAX_BATCH`` jobs go in one FCALL, the FCALLs in one pipeline. A refused
        job raises (the first refusal, after every job's result is in).
        """
        return await self.batch_of(name, shared, jobs, given, durable=durable)

    async def batch_of(
        self,
        name: str,
        shared: Shared,
        jobs: Sequence[T],
        parts: Parts[T],
        *,
        durable: bool = True,
    ) -> list[Any]:
        """``batch`` for ``jobs`` of any kind, ``parts(job, keys, args)`` adding each one's keys
        and args to its call's: called as each call is sent, while Redis runs the one before,
        and only for jobs validated before (it must not raise)."""
        function = self._functions[name]
        results: list[Any] = [NO_RESULT] * len(jobs)
        each = (jobs, parts, results)
        commands: list[Sendable] = [
            Chunk(function, shared, durable, each, first, min(MAX_BATCH, len(jobs) - first))
            for first in range(0, len(jobs), MAX_BATCH)
        ]
        await self._run(commands)
        for result in results:
            if isinstance(result, BaseException):
                raise result
            if result is NO_RESULT:
                raise DriverError("a batch call ended without a job's result")
        return results

    async def drain(self) -> None:
        """Wait for the calls already queued or sent, then hand the wire's kept connection
        back to the pool (before the client is closed)."""
        await self._ticks.drain()
        if self._wire is not None:
            await self._wire.release()

    async def _run(
        self, commands: list[Sendable], *, reload: bool = True, redirects: int = REDIRECTS
    ) -> None:
        """Send ``commands`` in one round trip and settle each; load a missing library once;
        send again those a durable Cluster pipeline was redirected with (``redirects`` rounds)."""
        try:
            replies = await self._execute(commands, follow_redirects=not redirects)
        except Exception as exc:
            error = translate(exc)
            for command in commands:
                command.fail(error)
            return
        lost: list[Sendable] = []
        moved: list[Sendable] = []
        for command, reply in zip(commands, replies, strict=True):
            if reload and _not_found(reply):
                lost.append(command)
            elif redirects and isinstance(reply, _REDIRECTS):
                moved.append(command)
            elif isinstance(reply, BaseException):
                command.fail(translate(reply))
            else:
                command.settle(reply)
        if moved:
            await self._follow(moved, reload=reload, redirects=redirects - 1)
        if lost:
            await self._reload(lost)

    async def _follow(self, commands: list[Sendable], *, reload: bool, redirects: int) -> None:
        """Learn the slot's master anew, then send the redirected calls again (they ran nothing)."""
        try:
            await self._topology.relearn()
        except Exception as exc:
            error = translate(exc)
            for command in commands:
                command.fail(error)
            return
        await self._run(commands, reload=reload, redirects=redirects)

    async def _execute(self, commands: list[Sendable], *, follow_redirects: bool) -> list[Any]:
        """One reply per command (an error reply as its exception), in one round trip.

        A durable Cluster pipeline follows no redirect unless ``follow_redirects``: the reply of
        a redirected call is its MOVED (ASK, TRYAGAIN) error, for ``_run`` to send it again.
        """
        client = self._client
        durable = self._replicas > 0 and any(command.durable for command in commands)
        wire = self._wire
        if wire is not None:
            primary = self._topology.where() if durable else None
            if primary is None and durable:
                primary = await self._topology.locate()
            replies = await wire.round_trip(
                self._packed(wire, commands, durable), len(commands) + durable
            )
        else:
            options = await self._node_options()
            if len(commands) == 1 and not durable:
                [command] = commands
                try:
                    reply = await client.execute_command(*command.fcall(), **options)
                except redis_errors.ResponseError as exc:
                    reply = exc
                self._topology.observe()
                return [reply]
            primary = self._topology.where()
            if primary is None and durable:
                primary = await self._topology.locate()
            pipe = client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command.fcall(), **options)
            if durable:
                wait = ("WAIT", self._replicas, self._replica_timeout_ms)
                pipe.execute_command(*wait, **options)
            if isinstance(pipe, ClusterPipeline):
                follow = follow_redirects or not durable
                sent = await pipe.execute(raise_on_error=False, allow_redirections=follow)
            else:
                sent = await pipe.execute(raise_on_error=False)
            replies = list(sent)
        self._topology.observe()
        if durable:
            confirmed = replies.pop()
            error = self._unconfirmed(confirmed, primary)
            if error is not None:
                replies = [
                    error if command.durable and not isinstance(reply, BaseException) else reply
                    for command, reply in zip(commands, replies, strict=True)
                ]
        return replies

    def _packed(self, wire: Wire, commands: list[Sendable], durable: bool) -> Iterator[bytes]:
        """The commands packed for ``wire``, one part a time; the WAIT goes with the last."""
        last = len(commands) - 1
        for index, command in enumerate(commands):
            packed = wire.pack(command.fcall())
            if durable and index == last:
                packed += wire.pack(("WAIT", self._replicas, self._replica_timeout_ms))
            yield packed

    async def _node_options(self) -> dict[str, Any]:
        """How to aim a call at the namespace's node (a Cluster: its slot's master, by name)."""
        client = self._client
        if isinstance(client, RedisCluster) and self._topology.where() is None:
            await client.initialize()  # no slot map yet
        return self._topology.node_options()

    def _unconfirmed(self, confirmed: Any, primary: str | None) -> BaseException | None:
        """The error for durable writes that ``WAIT``'s reply did not confirm, else None."""
        if isinstance(confirmed, BaseException):
            why = f"WAIT failed: {confirmed}"
        elif self._topology.where() != primary:
            why = f"the primary changed from {primary} to {self._topology.where()} during the call"
        elif int(confirmed) < self._replicas:
            why = f"{int(confirmed)} of {self._replicas} replicas confirmed it"
        else:
            return None
        error = ReplicationTimeoutError(
            f"Redis did not confirm the write on {self._replicas} replica(s) within "
            f"{self._replica_timeout_ms} ms ({why}); it may not survive a failover"
        )
        if isinstance(confirmed, BaseException):
            error.__cause__ = confirmed
        return error

    async def _reload(self, commands: list[Sendable]) -> None:
        """Load the library on the namespace's node, then run the refused calls again."""
        logger.debug(
            "Redis has no job function library {} (never loaded here, flushed, or a new "
            "primary); loading it",
            self._library.name,
        )
        try:
            options = await self._node_options()
            await self._client.execute_command(
                "FUNCTION", "LOAD", "REPLACE", self._library.code, **options
            )
        except Exception as exc:
            error = translate(exc)
            for command in commands:
                command.fail(error)
            return
        await self._run(commands, reload=False)


_REDIRECTS = (redis_errors.AskError, redis_errors.TryAgainError)
"""The replies of a Cluster call that ran nothing where it was sent (MovedError is an AskError)."""


def _not_found(reply: Any) -> bool:
    return isinstance(reply, redis_errors.ResponseError) and str(reply).startswith(
        FUNCTION_NOT_FOUND
    )
