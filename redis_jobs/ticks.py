"""Per-tick coalescing of the Redis driver's one-job calls (``ScriptRunner.per_job``).

The calls of one batch function made in one event-loop tick, with the same shared keys and
args, go out as one FCALL (up to ``MAX_BATCH`` jobs), and all the tick's FCALLs in one pipeline
(``ScriptRunner._run``): one round trip. A call alone in its tick is sent in its caller's task,
without waiting the pass when no other call can join it (``_compat.ready_queue_empty``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from ._compat import ready_queue_empty
from .calls import MAX_BATCH, Command, Job, ScriptArg, Sendable, Shared

__all__ = ["TickCoalescer"]

_GroupKey = tuple[str, tuple[str, ...], tuple[ScriptArg, ...], bool]


class TickCoalescer:
    """Gathers a tick's ``per_job`` calls into FCALLs and hands them to ``run`` (one round
    trip); ``functions`` maps a script's name to its library function."""

    def __init__(
        self,
        functions: Mapping[str, str],
        run: Callable[[list[Sendable]], Coroutine[Any, Any, None]],
    ) -> None:
        self._functions = functions
        self._run = run
        self._pending: dict[_GroupKey, list[Job]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._lone: set[asyncio.Future[Any]] = set()

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
            pending[group] = [Job(keys, args, future)]
        else:
            jobs.append(Job(keys, args, future))
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

    async def drain(self) -> None:
        """Wait for the calls already queued or sent."""
        await asyncio.sleep(0)  # a flush scheduled in this tick sends its batch
        while self._running or self._lone:
            await asyncio.wait([*self._running, *self._lone])

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        commands: list[Sendable] = []
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
        jobs: list[Job],
    ) -> list[Sendable]:
        """The FCALLs of a batch function for ``jobs``, ``MAX_BATCH`` a call."""
        function = self._functions[name]
        if len(jobs) == 1:
            [job] = jobs
            keys = [*shared_keys, *job.keys]
            return [Command(function, keys, [*shared_args, *job.args], durable, jobs=jobs)]
        commands: list[Sendable] = []
        for start in range(0, len(jobs), MAX_BATCH):
            chunk = jobs[start : start + MAX_BATCH]
            keys = list(shared_keys)
            args = list(shared_args)
            for job in chunk:
                keys += job.keys
                args += job.args
            commands.append(Command(function, keys, args, durable, jobs=chunk))
        return commands
