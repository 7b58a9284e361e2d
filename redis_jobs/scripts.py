"""The Lua scripts: loaded once from package resources, run one at a time or batched per tick.

Each transition is one call of one script in ``redis_jobs/lua/`` (complete and fail share
``finish.lua``; a header in each file lists its KEYS and ARGV); ``common.lua`` holds the
helpers every script starts with. The sources are read once, at
import, into ``SOURCES``: a fixed set, never built from input. ``ScriptRunner`` registers them
on a client as redis-py ``AsyncScript`` objects (EVALSHA, with SCRIPT LOAD on NOSCRIPT).

The enqueue, heartbeat, finish and retry scripts take a batch of jobs, and ``per_job``
coalesces the calls made in one event-loop tick into as few EVALSHAs as possible, sent in one
pipeline round trip; each job still gets its own result. Inside a pipeline, NOSCRIPT replies
are reloaded and rerun here (a command refused with NOSCRIPT did not run, so rerunning it is
safe).

Errors are translated at this boundary: connection failures and timeouts become
``StoreUnavailableError``, a script's own refusal (``JOBSCRIPT ...``, raised before any write)
becomes ``RedisScriptError``, anything else from Redis a ``DriverError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.resources import files
from types import MappingProxyType
from typing import Any

from loguru import logger
from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from jobs.errors import DriverError, StoreUnavailableError

from .errors import RedisScriptError

SCRIPT_NAMES = ("enqueue", "claim", "heartbeat", "finish", "retry", "get", "counts", "peek")
REFUSAL_CODE = "JOBSCRIPT"
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


@contextmanager
def translate_errors() -> Iterator[None]:
    """Raise redis-py's errors as the jobs package's (``from`` the original)."""
    try:
        yield
    except redis_errors.RedisError as exc:
        raise translate(exc) from exc


def translate(exc: BaseException) -> BaseException:
    """The jobs-package error for a redis-py error (caused by it); other exceptions unchanged."""
    error: BaseException
    if isinstance(exc, redis_errors.ConnectionError | redis_errors.TimeoutError):
        error = StoreUnavailableError(f"Redis is unavailable: {exc}")
    elif isinstance(exc, redis_errors.ResponseError) and str(exc).startswith(REFUSAL_CODE):
        error = RedisScriptError(str(exc).removeprefix(REFUSAL_CODE).strip())
    elif isinstance(exc, redis_errors.RedisError):
        error = DriverError(f"Redis failed the call: {exc}")
    else:
        return exc
    error.__cause__ = exc
    return error


@dataclass(slots=True)
class _Job:
    keys: Sequence[str]
    args: Sequence[ScriptArg]
    future: asyncio.Future[Any] = field(repr=False)


@dataclass(slots=True)
class _Command:
    """One EVALSHA carrying the batch of jobs ``jobs``."""

    script: AsyncScript
    keys: list[str]
    args: list[ScriptArg]
    jobs: list[_Job]

    def settle(self, reply: Any) -> None:
        for job, result in zip(self.jobs, reply, strict=True):
            if isinstance(result, bytes | str):
                text = result.decode(errors="replace") if isinstance(result, bytes) else result
                _resolve(job.future, error=translate(redis_errors.ResponseError(text)))
            else:
                _resolve(job.future, result=result)

    def fail(self, error: BaseException) -> None:
        for job in self.jobs:
            _resolve(job.future, error=error)


_GroupKey = tuple[str, tuple[str, ...], tuple[ScriptArg, ...]]
Shared = tuple[Sequence[str], Sequence[ScriptArg]]
"""The leading KEYS and ARGV of a batch script call, shared by its jobs."""


class ScriptRunner:
    """The package's scripts registered on one client."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._scripts = {name: client.register_script(source) for name, source in SOURCES.items()}
        self._pending: dict[_GroupKey, list[_Job]] = {}
        self._sends: set[asyncio.Task[None]] = set()

    @property
    def scripts(self) -> Mapping[str, AsyncScript]:
        """The registered scripts by name (each knows its SHA1 and source)."""
        return MappingProxyType(self._scripts)

    async def call(self, name: str, keys: Sequence[str], args: Sequence[ScriptArg]) -> Any:
        """Run one script now, in its own round trip."""
        with translate_errors():
            return await self._scripts[name](keys=keys, args=args)

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
        EVALSHAs as one pipeline: one round trip. Each job is still checked and written on
        its own and gets its own result; a refused job raises RedisScriptError for its caller
        only. A caller cancelled while waiting does not cancel the round trip.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        group = (name, tuple(shared[0]), tuple(shared[1]))
        self._pending.setdefault(group, []).append(_Job(keys, args, future))
        return await future

    async def drain(self) -> None:
        """Wait for the batches already queued or sent (before the client is closed)."""
        await asyncio.sleep(0)  # a flush scheduled in this tick creates its task
        while self._sends:
            await asyncio.gather(*self._sends, return_exceptions=True)

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        commands: list[_Command] = []
        for (name, shared_keys, shared_args), jobs in pending.items():
            for start in range(0, len(jobs), MAX_BATCH):
                chunk = jobs[start : start + MAX_BATCH]
                keys = [*shared_keys, *(key for job in chunk for key in job.keys)]
                args = [*shared_args, *(arg for job in chunk for arg in job.args)]
                commands.append(_Command(self._scripts[name], keys, args, chunk))
        task = asyncio.get_running_loop().create_task(
            self._send(commands), name="redis-jobs-script-batch"
        )
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send(self, commands: list[_Command]) -> None:
        try:
            if len(commands) == 1:
                command = commands[0]
                replies: list[Any] = [await command.script(keys=command.keys, args=command.args)]
            else:
                replies = await self._pipeline(commands, reload=True)
            for command, reply in zip(commands, replies, strict=True):
                if isinstance(reply, BaseException):
                    command.fail(translate(reply))
                else:
                    command.settle(reply)
        except Exception as exc:
            error = translate(exc)
            if error is exc:
                error = DriverError(f"a batch of job scripts failed: {exc!r}")
                error.__cause__ = exc
            for command in commands:
                command.fail(error)
        finally:
            for command in commands:  # cancelled: no caller may wait forever
                command.fail(DriverError("the job script batch was cancelled"))

    async def _pipeline(self, commands: list[_Command], *, reload: bool) -> list[Any]:
        """The replies (or errors) of ``commands`` sent as one pipeline; reloads on NOSCRIPT."""
        pipe = self._client.pipeline(transaction=False)
        for command in commands:
            pipe.evalsha(command.script.sha, len(command.keys), *command.keys, *command.args)
        replies = await pipe.execute(raise_on_error=False)
        missing = [
            index
            for index, reply in enumerate(replies)
            if reload and isinstance(reply, redis_errors.NoScriptError)
        ]
        if missing:
            logger.debug("Redis lost the job scripts (NOSCRIPT); loading them again")
            for script in {id(commands[i].script): commands[i].script for i in missing}.values():
                script.sha = await self._client.script_load(script.script)
            again = await self._pipeline([commands[i] for i in missing], reload=False)
            for index, reply in zip(missing, again, strict=True):
                replies[index] = reply
        return list(replies)


def _resolve(
    future: asyncio.Future[Any], *, result: Any = None, error: BaseException | None = None
) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
