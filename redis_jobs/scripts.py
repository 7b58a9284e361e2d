"""The Lua scripts: loaded once from package resources, run one at a time or batched per tick.

Each transition is one call of one script in ``redis_jobs/lua/`` (complete and fail share
``finish.lua``; a header in each file lists its KEYS and ARGV); ``common.lua`` holds the
helpers every script starts with. The sources are read once, at import, into ``SOURCES``: a
fixed set, never built from input. Scripts run by EVALSHA on the driver's ``RedisWire``; a
NOSCRIPT reply (Redis restarted or ran SCRIPT FLUSH) loads the script and runs the call again,
which is safe: a command refused with NOSCRIPT did not run.

The enqueue, heartbeat, finish and retry scripts take a batch of jobs, and ``per_job``
coalesces the calls made in one event-loop tick into as few EVALSHAs as possible, written
together: one round trip. Each job still gets its own result.

Errors are translated at this boundary (``errors.translate``): a lost connection or a reply
that never came is StoreUnavailableError, a script's own refusal (``JOBSCRIPT ...``, raised
before any write) RedisScriptError, any other error reply DriverError.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from importlib.resources import files
from types import MappingProxyType
from typing import Any

from loguru import logger
from redis.asyncio import Redis

from jobs.errors import DriverError

from .errors import translate
from .resp import ReplyError, pack_command
from .wire import RedisWire

SCRIPT_NAMES = ("enqueue", "claim", "heartbeat", "finish", "retry", "get", "counts", "peek")
MAX_BATCH = 200
"""Jobs per batched script call: bounds how long one call keeps Redis busy."""

ScriptArg = str | int | float | bytes


def _load_sources() -> Mapping[str, str]:
    package = files("redis_jobs") / "lua"
    common = (package / "common.lua").read_text(encoding="utf-8")
    sources = {
        name: common + "\n" + (package / f"{name}.lua").read_text(encoding="utf-8")
        for name in SCRIPT_NAMES
    }
    return MappingProxyType(sources)


SOURCES: Mapping[str, str] = _load_sources()
"""Script name -> full Lua source (``common.lua`` followed by the script's own file)."""


@dataclass(slots=True)
class Script:
    """One script's source and the SHA1 that EVALSHA names it by."""

    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()


@dataclass(slots=True)
class _Job:
    keys: Sequence[str]
    args: Sequence[ScriptArg]
    future: asyncio.Future[Any] = field(repr=False)


@dataclass(slots=True)
class _Command:
    """One EVALSHA: a single call (``future``) or a batch of jobs, each with its own future."""

    script: Script
    keys: list[str]
    args: list[ScriptArg]
    future: asyncio.Future[Any] | None = None
    jobs: list[_Job] = field(default_factory=list)

    def settle(self, reply: Any) -> None:
        if self.future is not None:
            _resolve(self.future, result=reply)
            return
        if not isinstance(reply, list) or len(reply) != len(self.jobs):
            self.fail(DriverError(f"a batch of {len(self.jobs)} jobs got the reply {reply!r}"))
            return
        for job, result in zip(self.jobs, reply, strict=True):
            if isinstance(result, bytes):  # the refusal text of this job
                _resolve(job.future, error=translate(ReplyError(result.decode(errors="replace"))))
            else:
                _resolve(job.future, result=result)

    def fail(self, error: BaseException) -> None:
        if self.future is not None:
            _resolve(self.future, error=error)
        for job in self.jobs:
            _resolve(job.future, error=error)


_GroupKey = tuple[str, tuple[str, ...], tuple[ScriptArg, ...]]
Shared = tuple[Sequence[str], Sequence[ScriptArg]]
"""The leading KEYS and ARGV of a batch script call, shared by its jobs."""


class ScriptRunner:
    """The package's scripts, run on a RedisWire made with ``client``'s settings."""

    def __init__(self, client: Redis) -> None:
        self._wire = RedisWire(client)
        settings = client.connection_pool.connection_kwargs
        self.encoding: tuple[str, str] = (
            settings.get("encoding", "utf-8"),
            settings.get("encoding_errors", "strict"),
        )
        """The client's text encoding and error handler: arguments are sent, text read, in it."""
        self._scripts = {name: Script(source) for name, source in SOURCES.items()}
        self._pending: dict[_GroupKey, list[_Job]] = {}
        self._reloads: set[asyncio.Task[None]] = set()

    @property
    def scripts(self) -> Mapping[str, Script]:
        """The scripts by name (each knows its source and SHA1)."""
        return MappingProxyType(self._scripts)

    async def call(self, name: str, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        """Run one script now; its reply."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._send([_Command(self._scripts[name], list(keys), list(args), future=future)])
        return await future

    async def per_job(
        self,
        name: str,
        shared: Shared,
        keys: Sequence[str],
        args: Sequence[ScriptArg],
    ) -> Any:
        """Run a batch script (``for_each_job``) for one job; its result for that job.

        Calls made in the same event-loop tick with the same script and the same shared keys
        and args go out as one EVALSHA (up to ``MAX_BATCH`` jobs), and all of the tick's
        EVALSHAs in one write: one round trip. Each job is still checked and written on its
        own and gets its own result; a refused job raises RedisScriptError for its caller
        only. A caller cancelled while waiting does not cancel the call.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        group = (name, tuple(shared[0]), tuple(shared[1]))
        self._pending.setdefault(group, []).append(_Job(keys, args, future))
        return await future

    async def drain(self) -> None:
        """Wait for the calls already queued or sent (before the connection is closed)."""
        await asyncio.sleep(0)  # a flush scheduled in this tick sends its batch
        while self._reloads:
            await asyncio.gather(*self._reloads, return_exceptions=True)
        await self._wire.idle()

    async def close(self) -> None:
        await self._wire.close()

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        commands: list[_Command] = []
        for (name, shared_keys, shared_args), jobs in pending.items():
            for start in range(0, len(jobs), MAX_BATCH):
                chunk = jobs[start : start + MAX_BATCH]
                keys = [*shared_keys, *(key for job in chunk for key in job.keys)]
                args = [*shared_args, *(arg for job in chunk for arg in job.args)]
                commands.append(_Command(self._scripts[name], keys, args, jobs=chunk))
        self._send(commands)

    def _send(self, commands: list[_Command], *, reload: bool = True) -> None:
        self._wire.submit(
            (self._pack(command), partial(self._on_reply, command, reload)) for command in commands
        )

    def _pack(self, command: _Command) -> bytes:
        keys = command.keys
        return pack_command(
            ("EVALSHA", command.script.sha, len(keys), *keys, *command.args), *self.encoding
        )

    def _on_reply(self, command: _Command, reload: bool, reply: Any) -> None:
        if isinstance(reply, ReplyError) and reload and reply.text.startswith("NOSCRIPT"):
            task = asyncio.get_running_loop().create_task(
                self._reload(command), name="redis-jobs-script-load"
            )
            self._reloads.add(task)
            task.add_done_callback(self._reloads.discard)
        elif isinstance(reply, BaseException):
            command.fail(translate(reply))
        else:
            command.settle(reply)

    async def _reload(self, command: _Command) -> None:
        """Load a script Redis lost (NOSCRIPT), then run the refused call again."""
        logger.debug("Redis lost the job scripts (NOSCRIPT); loading them again")
        script = command.script
        try:
            sha = await self._wire.request(pack_command(("SCRIPT", "LOAD", script.source)))
        except Exception as exc:
            command.fail(exc)
            return
        if isinstance(sha, ReplyError):
            command.fail(translate(sha))
            return
        script.sha = sha.decode() if isinstance(sha, bytes) else str(sha)
        self._send([command], reload=False)


def _resolve(
    future: asyncio.Future[Any], *, result: Any = None, error: BaseException | None = None
) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
