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
pipeline: one round trip. Each job still gets its own result.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from loguru import logger
from redis import exceptions as redis_errors
from redis.asyncio import RedisCluster
from redis.asyncio.cluster import ClusterPipeline

from jobs.errors import DriverError

from ._compat import ready_queue_empty
from .errors import ReplicationTimeoutError, refusal, translate
from .library import LIBRARY, SCRIPT_NAMES, Library
from .topology import Topology
from .wire import Wire

__all__ = ["MAX_BATCH", "SCRIPT_NAMES", "Parts", "ScriptArg", "ScriptRunner", "Shared"]

MAX_BATCH = 200
REDIRECTS = 2
"""Rounds of redirected calls a durable Cluster pipeline sends again itself (see above)."""
"""Jobs per batched function call: bounds how long one call keeps Redis busy."""
FUNCTION_NOT_FOUND = "Function not found"
"""The start of Redis's error reply to an FCALL of a function it does not have."""

ScriptArg = str | int | float | bytes
T = TypeVar("T")
Shared = tuple[Sequence[str], Sequence[ScriptArg]]
"""The leading KEYS and ARGV of a batch script call, shared by its jobs."""
Parts = Callable[[T, list[str], list[ScriptArg]], None]
"""Adds a job's KEYS and ARGV to those of its batch call."""


@dataclass(slots=True)
class _Job:
    keys: Sequence[str]
    args: Sequence[ScriptArg]
    future: asyncio.Future[Any] = field(repr=False)


@dataclass(slots=True)
class _Command:
    """One FCALL: a single call (``future``) or a batch of jobs, each with its own future."""

    function: str
    keys: list[str]
    args: list[ScriptArg]
    durable: bool
    future: asyncio.Future[Any] | None = None
    jobs: list[_Job] = field(default_factory=list)

    def fcall(self) -> tuple[Any, ...]:
        keys = self.keys
        return ("FCALL", self.function, len(keys), *keys, *self.args)

    def settle(self, reply: Any) -> None:
        if self.future is not None:
            _resolve(self.future, result=reply)
            return
        results = _per_job(reply, len(self.jobs))
        if isinstance(results, DriverError):
            self.fail(results)
            return
        for job, result in zip(self.jobs, results, strict=True):
            if isinstance(result, BaseException):
                _resolve(job.future, error=result)
            else:
                _resolve(job.future, result=result)

    def fail(self, error: BaseException) -> None:
        if self.future is not None:
            _resolve(self.future, error=error)
        for job in self.jobs:
            _resolve(job.future, error=error)


class _Chunk(Generic[T]):
    """One FCALL of a ``batch`` call: ``count`` of its jobs from ``first``, whose results go to
    the call's ``results`` at their positions (a refused job's: its RedisScriptError).

    Its arguments are made when it is first sent (``fcall``), so Redis runs the chunk before
    while this one is made: a bulk enqueue's client and server work overlap. No object is made
    per job: its keys and arguments go straight into the chunk's lists (``parts``).
    """

    __slots__ = ("_call", "_count", "_first", "_function", "_jobs", "_parts", "_results",
                 "_shared", "durable")  # fmt: skip

    def __init__(
        self,
        function: str,
        shared: Shared,
        durable: bool,
        batch: tuple[Sequence[T], Parts[T], list[Any]],
        first: int,
        count: int,
    ) -> None:
        self._function = function
        self._shared = shared
        self.durable = durable
        self._jobs, self._parts, self._results = batch
        self._first = first
        self._count = count
        self._call: tuple[Any, ...] | None = None

    def fcall(self) -> tuple[Any, ...]:
        call = self._call
        if call is None:
            shared_keys, shared_args = self._shared
            keys, args = list(shared_keys), list(shared_args)
            parts, jobs, first = self._parts, self._jobs, self._first
            for index in range(first, first + self._count):
                parts(jobs[index], keys, args)
            call = self._call = ("FCALL", self._function, len(keys), *keys, *args)
        return call

    def settle(self, reply: Any) -> None:
        results = _per_job(reply, self._count)
        if isinstance(results, DriverError):
            self.fail(results)
            return
        self._results[self._first : self._first + self._count] = results

    def fail(self, error: BaseException) -> None:
        self._results[self._first : self._first + self._count] = [error] * self._count


_GroupKey = tuple[str, tuple[str, ...], tuple[ScriptArg, ...], bool]
_Sendable = _Command | _Chunk[Any]
_NO_RESULT: Any = object()
"""A ``batch`` job's result until its call's reply is in."""


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
        self._pending: dict[_GroupKey, list[_Job]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._lone: set[asyncio.Future[Any]] = set()

    @property
    def library(self) -> Library:
        """The library whose functions this runner calls."""
        return self._library

    async def call(
        self, name: str, keys: Sequence[str], args: Sequence[ScriptArg], *, durable: bool = False
    ) -> Any:
        """Run one script now, in the caller's task; its reply."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        command = _Command(self._functions[name], list(keys), list(args), durable, future)
        await self._run([command])
        return future.result()

    async def per_job(
        self,
        name: str,
        shared: Shared,
        keys: Sequence[str],
        args: Sequence[ScriptArg],
        *,
        durable: bool = True,
    ) -> Any:
        """Run a batch script (``for_each_job``) for one job; its result for that job.

        Calls made in the same event-loop tick with the same script and the same shared keys
        and args go out as one FCALL (up to ``MAX_BATCH`` jobs), and all of the tick's
        FCALLs in one pipeline: one round trip. Each job is still checked and written on its
        own and gets its own result; a refused job raises RedisScriptError for its caller
        only. Calls that share a round trip run in a task of their own, which a caller
        cancelled while waiting does not cancel; a call alone in its tick runs in its caller's
        task (no task to start and wake it: the one-by-one case), so cancelling that caller
        may cut it short, as it would any redis-py call.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending
        lead = not pending
        group = (name, tuple(shared[0]), tuple(shared[1]), durable)
        jobs = pending.get(group)
        if jobs is None:
            pending[group] = [_Job(keys, args, future)]
        else:
            jobs.append(_Job(keys, args, future))
        if lead:
            await self._lead(future, ready_queue_empty(loop))
        return await future

    async def _lead(self, future: asyncio.Future[Any], last: bool) -> None:
        """The first call of a tick: let the tick's other calls join (unless ``last``: none
        can), then send them all."""
        if not last:
            try:
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                self._flush()
                raise
        pending = self._pending
        if len(pending) != 1:
            self._flush()
            return
        [(group, jobs)] = pending.items()
        if len(jobs) != 1:
            self._flush()
            return
        self._pending = {}
        name, shared_keys, shared_args, durable = group
        self._lone.add(future)
        try:
            await self._run(self._commands(name, shared_keys, shared_args, durable, jobs))
        finally:
            self._lone.discard(future)
            future.cancel()  # unless settled: its caller was cancelled and awaits it no more

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
        return await self.batch_of(name, shared, jobs, _given, durable=durable)

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
        results: list[Any] = [_NO_RESULT] * len(jobs)
        each = (jobs, parts, results)
        commands: list[_Sendable] = [
            _Chunk(function, shared, durable, each, first, min(MAX_BATCH, len(jobs) - first))
            for first in range(0, len(jobs), MAX_BATCH)
        ]
        await self._run(commands)
        for result in results:
            if isinstance(result, BaseException):
                raise result
            if result is _NO_RESULT:
                raise DriverError("a batch call ended without a job's result")
        return results

    async def drain(self) -> None:
        """Wait for the calls already queued or sent, then hand the wire's kept connection
        back to the pool (before the client is closed)."""
        await asyncio.sleep(0)  # a flush scheduled in this tick sends its batch
        while self._running or self._lone:
            await asyncio.wait([*self._running, *self._lone])
        if self._wire is not None:
            await self._wire.release()

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        commands: list[_Sendable] = []
        for (name, shared_keys, shared_args, durable), jobs in pending.items():
            commands += self._commands(name, shared_keys, shared_args, durable, jobs)
        task = asyncio.get_running_loop().create_task(self._run(commands), name="redis-jobs-calls")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _commands(
        self,
        name: str,
        shared_keys: Sequence[str],
        shared_args: Sequence[ScriptArg],
        durable: bool,
        jobs: list[_Job],
    ) -> list[_Sendable]:
        """The FCALLs of a batch function for ``jobs``, ``MAX_BATCH`` a call."""
        function = self._functions[name]
        if len(jobs) == 1:
            [job] = jobs
            keys = [*shared_keys, *job.keys]
            return [_Command(function, keys, [*shared_args, *job.args], durable, jobs=jobs)]
        commands: list[_Sendable] = []
        for start in range(0, len(jobs), MAX_BATCH):
            chunk = jobs[start : start + MAX_BATCH]
            keys = list(shared_keys)
            args = list(shared_args)
            for job in chunk:
                keys += job.keys
                args += job.args
            commands.append(_Command(function, keys, args, durable, jobs=chunk))
        return commands

    async def _run(
        self, commands: list[_Sendable], *, reload: bool = True, redirects: int = REDIRECTS
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
        lost: list[_Sendable] = []
        moved: list[_Sendable] = []
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

    async def _follow(self, commands: list[_Sendable], *, reload: bool, redirects: int) -> None:
        """Learn the slot's master anew, then send the redirected calls again (they ran nothing)."""
        try:
            await self._topology.relearn()
        except Exception as exc:
            error = translate(exc)
            for command in commands:
                command.fail(error)
            return
        await self._run(commands, reload=reload, redirects=redirects)

    async def _execute(self, commands: list[_Sendable], *, follow_redirects: bool) -> list[Any]:
        """One reply per command (an error reply as its exception), in one round trip.

        A durable Cluster pipeline follows no redirect unless ``follow_redirects``: the reply of
        a redirected call is its MOVED (ASK, TRYAGAIN) error, for ``_run`` to send it again.
        """
        client = self._client
        durable = self._replicas > 0 and any(command.durable for command in commands)
        wire = self._wire
        if wire is not None:
            primary = self._topology.where() if durable else None
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

    def _packed(self, wire: Wire, commands: list[_Sendable], durable: bool) -> Iterator[bytes]:
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

    async def _reload(self, commands: list[_Sendable]) -> None:
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


def _per_job(reply: Any, count: int) -> list[Any] | DriverError:
    """A batch FCALL's reply as one result per job, in place: a refused job's refusal text
    (what ``for_each_job`` returns for it) as its error (``refusal``); a DriverError when the
    reply is not one result for each of the ``count`` jobs."""
    if not isinstance(reply, list) or len(reply) != count:
        return DriverError(f"a batch of {count} jobs got the reply {reply!r}")
    for position, result in enumerate(reply):
        if isinstance(result, bytes | str):
            text = result.decode(errors="replace") if isinstance(result, bytes) else result
            reply[position] = refusal(text)
    return reply


_Given = tuple[Sequence[str], Sequence[ScriptArg]]


def _given(job: _Given, keys: list[str], args: list[ScriptArg]) -> None:
    """``Parts`` of a job given as its (keys, args)."""
    keys += job[0]
    args += job[1]


def _not_found(reply: Any) -> bool:
    return isinstance(reply, redis_errors.ResponseError) and str(reply).startswith(
        FUNCTION_NOT_FOUND
    )


def _resolve(
    future: asyncio.Future[Any], *, result: Any = None, error: BaseException | None = None
) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
