"""Redis server CPU per job: what one namespace costs the one core that serves its slot.

A namespace lives in one Cluster slot, so one Redis core bounds its throughput whatever the
number of clients. This row measures the server's own CPU (``used_cpu_sys_main_thread`` +
``used_cpu_user_main_thread`` of ``INFO cpu``) per job, a figure the noise of a shared machine
barely moves, on a private redis-server started for the row (loopback port, scratch dir, no
persistence) so that no other client's commands are counted; it is stopped afterwards.

Phases, each read between two INFO snapshots: ``n`` enqueues one call at a time
(``JobQueue.enqueue``), ``n`` enqueues in batches of ``batch`` (``enqueue_many``), then a
``JobRunner`` (concurrency 10, no-op handler) draining all ``2 n`` (claim + complete, and
whatever else the runner sends while it drains: wake-up peeks, worker registration).

References measured in the same run on the same server: the floor of any script call (an
EVALSHA of a one-HSET script, one call at a time), and a bare Lua queue with the fewest commands
a job can take in this design (enqueue: HSET + ZADD, one call per job, one at a time or
``batch`` pipelined; claim 10 at a time: ZRANGE, then HSET +
ZREM + ZADD per job; complete: HSET + ZREM + PEXPIRE per job, the completes of one claim in one
pipeline), which checks nothing and keeps no index, counter or dedupe key.

Also printed per phase: the script calls (FCALL, EVALSHA) per job, their ``usec`` of ``INFO
commandstats`` per job (time inside the scripts) and the Redis commands the scripts called per
job (commandstats counts the calls made from Lua).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger
from redis.asyncio import Redis

from jobs import JobQueue, NewJob
from jobs.logs import enable_logging
from jobs.testing.redis_server import RedisServer

from .scenarios import JOB_TYPE, PAYLOAD, drain

TARGET_ENQUEUE_US = 60
TARGET_DRAINED_US = 90
BARE_CLAIM = 10
SERVER_OPTIONS = ("--appendonly", "no")
"""No persistence, as the shared server runs: fsyncs would only add noise to the figure."""

BARE_PAYLOAD = '{"order_id": 12345, "email": "customer@example.com", "items": [1, 2, 3]}'
CLIENT_COMMANDS = frozenset(
    {
        "evalsha",
        "eval",
        "fcall",
        "fcall_ro",
        "function|load",
        "info",
        "script|load",
        "script|exists",
    }
    | {"blpop", "config|get", "hello"}
)
"""Commands the clients send themselves: the others counted were called from the scripts."""

_HSET = "return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])"
_BARE_ENQUEUE = """
redis.call('HSET', KEYS[1], 'payload', ARGV[2], 'state', 'pending')
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""
_BARE_CLAIM = """
local due = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[2])
local reply = {}
for _, id in ipairs(due) do
  redis.call('HSET', KEYS[3] .. id, 'state', 'active', 'lease_until', ARGV[1] + 30000)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', KEYS[2], ARGV[1] + 30000, id)
  reply[#reply + 1] = id
end
return reply
"""
_BARE_FINISH = """
redis.call('HSET', KEYS[1], 'state', 'completed')
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], 60000)
return 1
"""


@dataclass(frozen=True, slots=True)
class Snapshot:
    cpu_s: float
    commands: dict[str, tuple[int, int]]
    """commandstats: command -> (calls, usec)."""


@dataclass(frozen=True, slots=True)
class Cost:
    """Server cost of one phase, per job."""

    cpu_us: float
    evalsha: float
    script_us: float
    inner: float


async def snapshot(admin: Redis) -> Snapshot:
    cpu = await admin.info("cpu")
    stats = await admin.info("commandstats")
    commands = {
        name.removeprefix("cmdstat_"): (int(value["calls"]), int(value["usec"]))
        for name, value in stats.items()
    }
    user = cpu.get("used_cpu_user_main_thread", cpu["used_cpu_user"])
    system = cpu.get("used_cpu_sys_main_thread", cpu["used_cpu_sys"])
    return Snapshot(float(user) + float(system), commands)


def cost(before: Snapshot, after: Snapshot, jobs: int) -> Cost:
    def delta(name: str) -> tuple[int, int]:
        calls, usec = after.commands.get(name, (0, 0))
        was_calls, was_usec = before.commands.get(name, (0, 0))
        return calls - was_calls, usec - was_usec

    scripts = [delta(name) for name in ("evalsha", "eval", "fcall", "fcall_ro")]
    inner = sum(
        delta(name)[0]
        for name in after.commands
        if name not in CLIENT_COMMANDS and not name.startswith("client|")
    )
    return Cost(
        cpu_us=(after.cpu_s - before.cpu_s) * 1e6 / jobs,
        evalsha=sum(calls for calls, _ in scripts) / jobs,
        script_us=sum(usec for _, usec in scripts) / jobs,
        inner=inner / jobs,
    )


async def measured(admin: Redis, jobs: int, work: Callable[[], Awaitable[Any]]) -> Cost:
    before = await snapshot(admin)
    await work()
    return cost(before, await snapshot(admin), jobs)


@dataclass(frozen=True, slots=True)
class RunCosts:
    hset: Cost
    bare_enqueue: Cost
    bare_pipelined: Cost
    bare_drained: Cost
    one_by_one: Cost
    batched: Cost
    drained: Cost


async def ours(admin: Redis, url: str, n: int, batch: int) -> tuple[Cost, Cost, Cost]:
    """Our enqueue one by one, in batches, and the drain of both, on a fresh namespace."""
    from redis_jobs import RedisJobDriver, delete_namespace

    namespace = f"bench-cpu-{uuid.uuid4().hex[:8]}"
    driver = RedisJobDriver(url=url, namespace=namespace)
    queue = JobQueue(driver)
    try:
        await queue.enqueue(JOB_TYPE, PAYLOAD)  # warm: scripts loaded, connection open
        await drain(driver, 1)

        async def one_by_one() -> None:
            for _ in range(n):
                await queue.enqueue(JOB_TYPE, PAYLOAD)

        async def batched() -> None:
            for start in range(0, n, batch):
                size = min(batch, n - start)
                await queue.enqueue_many([NewJob(type=JOB_TYPE, payload=PAYLOAD)] * size)

        single = await measured(admin, n, one_by_one)
        many = await measured(admin, n, batched)
        drained = await measured(admin, 2 * n, lambda: drain(driver, 2 * n))
        return single, many, drained
    finally:
        await driver.close()
        await delete_namespace(admin, namespace)


class BareQueue:
    """The references' scripts on one client, under a hash tag of their own."""

    def __init__(self, client: Redis) -> None:
        self.client = client
        self.tag = "{bench-ref-" + uuid.uuid4().hex[:8] + "}:"
        self.ready, self.leased = self.tag + "ready", self.tag + "leased"
        self.sha: dict[str, str] = {}

    async def load(self) -> None:
        sources = {"hset": _HSET, "enqueue": _BARE_ENQUEUE, "claim": _BARE_CLAIM}
        sources["finish"] = _BARE_FINISH
        for name, source in sources.items():
            self.sha[name] = str(await self.client.script_load(source))

    async def hset_loop(self, n: int) -> None:
        for index in range(n):
            await self.client.evalsha(self.sha["hset"], 1, self.tag + "h", index, "x")

    def _enqueue_args(self, index: int, now: int) -> tuple[Any, ...]:
        job = self.tag + "job:" + str(index)
        return (self.sha["enqueue"], 2, job, self.ready, index, BARE_PAYLOAD, now)

    async def enqueue_loop(self, n: int) -> None:
        now = int(time.time() * 1000)
        for index in range(n):
            await self.client.evalsha(*self._enqueue_args(index, now))

    async def enqueue_pipelined(self, first: int, n: int, batch: int) -> None:
        now = int(time.time() * 1000)
        for start in range(first, first + n, batch):
            pipe = self.client.pipeline(transaction=False)
            for index in range(start, min(first + n, start + batch)):
                pipe.evalsha(*self._enqueue_args(index, now))
            await pipe.execute()

    async def drain(self) -> None:
        while True:
            now = int(time.time() * 1000)
            ids = await self.client.evalsha(
                self.sha["claim"], 3, self.ready, self.leased, self.tag + "job:", now, BARE_CLAIM
            )
            if not ids:
                return
            pipe = self.client.pipeline(transaction=False)
            for job_id in ids:
                job = self.tag + "job:" + job_id.decode()
                pipe.evalsha(self.sha["finish"], 2, job, self.leased, job_id)
            await pipe.execute()

    async def delete(self, admin: Redis) -> None:
        keys = [key async for key in admin.scan_iter(match=self.tag.replace("{", "\\{") + "*")]
        for start in range(0, len(keys), 1_000):
            await admin.delete(*keys[start : start + 1_000])


async def references(admin: Redis, url: str, n: int, batch: int) -> tuple[Cost, ...]:
    """The one-HSET script call, and the bare Lua queue's enqueues and drained job."""
    client = Redis.from_url(url)
    bare = BareQueue(client)
    try:
        await bare.load()
        return (
            await measured(admin, n, lambda: bare.hset_loop(n)),
            await measured(admin, n, lambda: bare.enqueue_loop(n)),
            await measured(admin, n, lambda: bare.enqueue_pipelined(n, n, batch)),
            await measured(admin, 2 * n, bare.drain),
        )
    finally:
        await bare.delete(admin)
        await client.aclose()


async def measure_runs(runs: int, n: int, batch: int) -> list[RunCosts]:
    """``runs`` runs of the references and ours, on one private redis-server."""
    with tempfile.TemporaryDirectory(prefix="redis-cpu-") as scratch:
        server = RedisServer(Path(scratch), SERVER_OPTIONS)
        await server.start()
        admin = server.admin()
        try:
            results = []
            for _ in range(runs):
                refs = await references(admin, server.url, n, batch)
                single, many, drained = await ours(admin, server.url, n, batch)
                hset, bare_one, bare_many, bare_drained = refs
                costs = (single, many, drained)
                results.append(RunCosts(hset, bare_one, bare_many, bare_drained, *costs))
            return results
        finally:
            await admin.aclose()
            await server.stop()


def _median(costs: list[Cost], field: str) -> float:
    return float(statistics.median(getattr(cost, field) for cost in costs))


def _row(*cells: object) -> None:
    print("| " + " | ".join(str(cell) for cell in cells) + " |", flush=True)


async def redis_cpu_rows(runs: int, n: int = 2_000, batch: int = 1_000) -> None:
    print(
        f"\nRedis server CPU per job (private redis-server, main-thread used_cpu deltas): "
        f"{n:,} enqueues one by one, {n:,} in batches of {batch:,}, then a runner "
        f"(concurrency 10) draining all {2 * n:,}; beside a one-HSET script call and a bare Lua "
        f"queue in the same run. Targets: <= {TARGET_ENQUEUE_US} us per enqueue, "
        f"<= {TARGET_DRAINED_US} us per drained job\n"
    )
    _row(
        "phase", "ours us/job", "script calls/job", "in-script us/job", "commands/job",
        "bare Lua queue us/job", "one-HSET script us/call", "ours/bare", "target us",
    )  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    try:
        results = await measure_runs(runs, n, batch)
    except Exception as exc:  # a missing redis-server must not hide the other rows
        _row("redis", f"unavailable: {type(exc).__name__}: {exc}", *([""] * 7))
        return
    hset = _median([r.hset for r in results], "cpu_us")
    phases = (
        ("enqueue 1-by-1", "one_by_one", "bare_enqueue", TARGET_ENQUEUE_US),
        (f"enqueue batched ({batch:,})", "batched", "bare_pipelined", TARGET_ENQUEUE_US),
        ("drained job (claim + complete)", "drained", "bare_drained", TARGET_DRAINED_US),
    )
    for label, field, bare_field, target in phases:
        costs = [getattr(r, field) for r in results]
        bare = [getattr(r, bare_field) for r in results]
        ratio = statistics.median(
            getattr(r, field).cpu_us / getattr(r, bare_field).cpu_us for r in results
        )
        _row(
            label,
            f"{_median(costs, 'cpu_us'):.1f}",
            f"{_median(costs, 'evalsha'):.3f}",
            f"{_median(costs, 'script_us'):.1f}",
            f"{_median(costs, 'inner'):.1f}",
            f"{_median(bare, 'cpu_us'):.1f}",
            f"{hset:.1f}",
            f"{ratio:.2f}",
            f"<= {target}",
        )


if __name__ == "__main__":
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    enable_logging()  # the library's lines are off until an app enables them
    asyncio.run(redis_cpu_rows(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
