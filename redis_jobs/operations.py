"""The operations SPI on Redis: list, find, requeue, cancel, purge, delete, stats, workers.

Each change is one script call per job (``redis_jobs/lua/``: cancel, requeue, purge), fenced
like every transition: the script checks the job's state itself, so a requeue racing a claim,
a cancel racing a complete or a purge racing a requeue leave the job in one state and the loser
gets 0 (False, not counted). Bulk calls (``requeue_failed``, ``purge``) read the state index a
chunk at a time and send each chunk as one batch call (one round trip), each job its own atomic
step. ``list_jobs`` pages the state indexes (``{ns}:state:<state>[:<type>]``, by created_at) and,
of a named queue, its lanes' indexes (``{ns}:lane:<live|state>:<queue>/<type>``), so a page
costs the same however many jobs are stored; ``stats`` reads per-type sorted sets
in one script. Worker registrations live in ``{ns}:workers`` and expire with their ttl.

``RedisJobDriver`` holds one ``RedisOperations`` and hands each operation to it once it has
checked that it is open: the object is given what it reads and nothing of the driver's (the
client, the namespace's keys, the script runner, retention, the script clock, the reply decoder,
and the driver's ``get_job`` for ``find_job``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any

from jobs.spi import (
    AUDIT_KEEP_MS,
    AUDIT_MAX_ENTRIES,
    COUNTERS_KEEP_MS,
    DURATION_BOUNDS_MS,
    AuditEntry,
    AuditPage,
    JobInfo,
    JobPage,
    JobState,
    JobTypeStats,
    OutcomeCount,
    QueueStats,
    WorkerInfo,
    WorkerRegistration,
)
from jobs.spi.support import (
    Retention,
    decode_cursor,
    encode_cursor,
    new_action_id,
    to_datetime,
    to_epoch_ms,
)

from .errors import translate_errors
from .keys import Keys
from .records import fields_of, job_info
from .scripts import ScriptArg, ScriptRunner, Shared
from .tuning import EXPIRY_MARGIN_MS, SIGNAL_CAP, SIGNAL_TTL_MS

CHUNK = 500
"""Jobs a bulk call reads from an index and changes per round trip."""
TIES = 100
"""``list_actions`` reads this many more actions than a page: those of the cursor's own
millisecond that precede it are skipped."""
ANY_STATE_BUT_ACTIVE = "pending,completed,failed,cancelled"
LAST, RESUME = 0, 2
"""list.lua's first reply value: the last page, or a page stopped short (1: more may follow)."""
LIST_CALLS = 20
"""Script calls a ``list_jobs`` page makes at most: each reads a bounded number of index
entries, and only entries a page skips (the named queues' jobs among a default queue's page,
records past retention not yet pruned) make it call again; past this many the page answers
short, with the cursor of where it stopped."""


class RedisOperations:
    """The operations SPI over one namespace's keys and scripts (held by ``RedisJobDriver``).

    ``now`` gives the scripts' clock argument ("" for Redis TIME), ``text`` decodes a reply
    value with the client's encoding, ``get_job`` reads a job by id (``find_job`` follows the
    key index to it).
    """

    __slots__ = ("_client", "_get_job", "_keys", "_now", "_retention", "_scripts", "_text")

    def __init__(
        self,
        *,
        client: Any,
        keys: Keys,
        scripts: ScriptRunner,
        retention: Retention,
        now: Callable[[], str],
        text: Callable[[Any], str],
        get_job: Callable[[str], Awaitable[JobInfo | None]],
    ) -> None:
        self._client = client
        self._keys = keys
        self._scripts = scripts
        self._retention = retention
        self._now = now
        self._text = text
        self._get_job = get_job

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        job_type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        after = decode_cursor(cursor) if cursor is not None else None
        jobs: list[JobInfo] = []
        last: tuple[int, str] | None = None
        for _ in range(LIST_CALLS):
            args: list[ScriptArg] = [
                self._now(),
                state or "",
                job_type or "",
                limit - len(jobs),
                "" if after is None else after[0],
                "" if after is None else after[1],
                queue or "",
            ]
            reply = await self._scripts.call("list", [self._keys.prefix], args)
            for i in range(3, len(reply), 2):
                job_id, record = self._text(reply[i]), fields_of(reply[i + 1], self._text)
                jobs.append(job_info(job_id, record))
                last = (int(record.get("created_at", record["run_at"])), job_id)
            flag = int(reply[0])
            if flag != RESUME:
                more = flag != LAST and last is not None
                next_cursor = encode_cursor(*last) if more and last else None
                return JobPage(jobs=jobs, next_cursor=next_cursor)
            # the script stopped short where an index was read no further (see list.lua): the
            # rest of the page follows that entry
            after = (int(self._text(reply[1])), self._text(reply[2]))
        return JobPage(jobs=jobs, next_cursor=encode_cursor(*after) if after else None)

    async def find_job(self, key: str) -> JobInfo | None:
        holder = await self._client.get(self._keys.index(key))
        if holder is None:
            return None
        info = await self._get_job(self._text(holder))
        return info if info is not None and info.key == key else None

    async def requeue(self, job_id: str) -> bool:
        keys = self._keys
        return bool(
            await self._scripts.per_job(
                "requeue", self._requeue_shared(), [keys.job(job_id)], [job_id]
            )
        )

    async def requeue_failed(self, job_type: str | None = None) -> int:
        return await self._each_listed(
            self._keys.state("failed", job_type), "requeue", self._requeue_shared()
        )

    async def cancel(self, job_id: str) -> bool:
        keys = self._keys
        args: list[ScriptArg] = [self._now(), job_id, self._retention.failed_ms, EXPIRY_MARGIN_MS]
        reply = await self._scripts.call(
            "cancel", [keys.prefix, keys.job(job_id)], args, durable=True
        )
        return bool(reply)

    async def purge(
        self,
        states: Collection[JobState],
        job_type: str | None = None,
        older_than_ms: int | None = None,
    ) -> int:
        wanted = [state for state in dict.fromkeys(states) if state != "active"]
        shared: Shared = (
            [self._keys.prefix],
            [
                self._now(),
                ",".join(wanted),
                job_type or "",
                "" if older_than_ms is None else older_than_ms,
                self._retention.failed_ms,
                EXPIRY_MARGIN_MS,
            ],
        )
        purged = 0
        for state in wanted:
            purged += await self._each_listed(self._keys.state(state, job_type), "purge", shared)
        return purged

    async def delete(self, job_id: str) -> bool:
        shared: Shared = (
            [self._keys.prefix],
            [
                self._now(),
                ANY_STATE_BUT_ACTIVE,
                "",
                "",
                self._retention.failed_ms,
                EXPIRY_MARGIN_MS,
            ],
        )
        [deleted] = await self._scripts.batch(
            "purge", shared, [([self._keys.job(job_id)], [job_id])]
        )
        return bool(deleted)

    async def stats(self) -> dict[str, JobTypeStats]:
        reply = json.loads(await self._scripts.call("stats", [self._keys.prefix], [self._now()]))
        result = {}
        for job_type in sorted(reply):
            due, scheduled, active, completed, failed, cancelled, oldest = reply[job_type]
            result[job_type] = JobTypeStats(
                type=job_type,
                due=int(due),
                scheduled=int(scheduled),
                active=int(active),
                completed=int(completed),
                failed=int(failed),
                cancelled=int(cancelled),
                oldest_due_age_ms=None if oldest < 0 else int(oldest),
            )
        return result

    async def queue_stats(self) -> dict[str, QueueStats]:
        """Per queue, as ``stats`` per type (a named queue's finished jobs from its lanes'
        indexes, the default queue's from the state indexes less those: see stats.lua)."""
        call = self._scripts.call("stats", [self._keys.prefix], [self._now(), "queues"])
        reply = json.loads(await call)
        result = {}
        for queue in sorted(reply):
            due, scheduled, active, completed, failed, cancelled, oldest = reply[queue]
            result[queue] = QueueStats(
                queue=queue,
                due=int(due),
                scheduled=int(scheduled),
                active=int(active),
                completed=int(completed),
                failed=int(failed),
                cancelled=int(cancelled),
                oldest_due_age_ms=None if oldest < 0 else int(oldest),
            )
        return result

    async def pause_queue(self, queue: str) -> bool:
        with translate_errors():  # a Redis that is down: StoreUnavailableError, as elsewhere
            return bool(await self._client.sadd(self._keys.paused, queue))

    async def resume_queue(self, queue: str) -> bool:
        with translate_errors():
            return bool(await self._client.srem(self._keys.paused, queue))

    async def paused_queues(self) -> set[str]:
        with translate_errors():
            names = await self._client.smembers(self._keys.paused)
        return {self._text(name) for name in names}

    async def register_worker(self, worker: WorkerRegistration, ttl_ms: int) -> None:
        registration = json.dumps(
            {
                "id": worker.id,
                "host": worker.host,
                "pid": worker.pid,
                "types": list(worker.types),
                "queues": list(worker.queues),
                "concurrency": worker.concurrency,
                "in_flight": worker.in_flight,
            }
        )
        args: list[ScriptArg] = [self._now(), "register", worker.id, registration, ttl_ms]
        await self._scripts.call("workers", self._worker_keys(), args)

    async def deregister_worker(self, worker_id: str) -> None:
        args: list[ScriptArg] = [self._now(), "deregister", worker_id]
        await self._scripts.call("workers", self._worker_keys(), args)

    async def list_workers(self) -> list[WorkerInfo]:
        reply = await self._scripts.call("workers", self._worker_keys(), [self._now(), "list"])
        workers = [_worker(record) for record in json.loads(reply)]
        return sorted(workers, key=lambda worker: (worker.started_at, worker.id))

    # -- outcome counters: {ns}:counts:<minute> hashes, indexed by the {ns}:counts zset -------

    async def add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        with translate_errors():  # a Redis that is down: StoreUnavailableError, as elsewhere
            await self._add_counts(counts)

    async def _add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        if not counts:
            return
        index = self._keys.counts
        pipe = self._client.pipeline(transaction=False)
        for row in counts:
            key = f"{index}:{row.minute_ms}"
            fields = {"count": row.count, "duration_ms": row.duration_ms}
            fields.update({str(n): value for n, value in enumerate(row.buckets) if value})
            for name, value in fields.items():
                pipe.hincrby(key, json.dumps([row.type, row.outcome, name]), value)
            pipe.pexpireat(key, row.minute_ms + COUNTERS_KEEP_MS)
            pipe.zadd(index, {str(row.minute_ms): row.minute_ms})
        newest = max(row.minute_ms for row in counts)
        pipe.zremrangebyscore(index, "-inf", f"({newest - COUNTERS_KEEP_MS}")
        pipe.pexpire(index, COUNTERS_KEEP_MS)
        await pipe.execute()

    async def read_counts(self, since_ms: int, job_type: str | None = None) -> list[OutcomeCount]:
        with translate_errors():
            return await self._read_counts(since_ms, job_type)

    async def _read_counts(self, since_ms: int, job_type: str | None) -> list[OutcomeCount]:
        minutes = [
            int(self._text(m))
            for m in await self._client.zrangebyscore(self._keys.counts, since_ms, "+inf")
        ]
        if not minutes:
            return []
        pipe = self._client.pipeline(transaction=False)
        for minute in minutes:
            pipe.hgetall(f"{self._keys.counts}:{minute}")
        rows: list[OutcomeCount] = []
        buckets = len(DURATION_BOUNDS_MS) + 1
        for minute, fields in zip(minutes, await pipe.execute(), strict=True):
            numbers: dict[tuple[str, str], dict[str, int]] = {}
            for name, value in fields.items():
                row_type, outcome, field = json.loads(self._text(name))
                if job_type is None or row_type == job_type:
                    numbers.setdefault((row_type, outcome), {})[field] = int(self._text(value))
            for (row_type, outcome), values in sorted(numbers.items()):
                rows.append(
                    OutcomeCount(
                        minute_ms=minute,
                        type=row_type,
                        outcome=outcome,
                        count=values.get("count", 0),
                        duration_ms=values.get("duration_ms", 0),
                        buckets=tuple(values.get(str(n), 0) for n in range(buckets)),
                    )
                )
        return rows

    # -- the audit trail: {ns}:audit, a zset by time, trimmed by each record -----------------

    async def record_action(
        self, *, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        with translate_errors():
            await self._record_action(action, target, actor, source, count)

    async def _record_action(
        self, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        now_text = self._now()
        if now_text:
            now = int(now_text)
        else:  # the store's clock, as every transition uses
            seconds, micros = await self._client.time()
            now = int(seconds) * 1000 + int(micros) // 1000
        member = json.dumps(
            {"id": new_action_id(), "action": action, "target": target, "actor": actor,
             "source": source, "count": count}  # the id first: ties in one ms sort by it
        )  # fmt: skip
        key = self._keys.audit
        pipe = self._client.pipeline(transaction=False)
        pipe.zadd(key, {member: now})
        pipe.zremrangebyscore(key, "-inf", f"({now - AUDIT_KEEP_MS}")
        pipe.zremrangebyrank(key, 0, -(AUDIT_MAX_ENTRIES + 1))
        pipe.pexpire(key, AUDIT_KEEP_MS)
        await pipe.execute()

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        with translate_errors():
            return await self._list_actions(limit, cursor)

    async def _list_actions(self, limit: int, cursor: str | None) -> AuditPage:
        before = decode_cursor(cursor) if cursor is not None else None
        top: str | int = "+inf" if before is None else before[0]
        reply = await self._client.zrevrangebyscore(
            self._keys.audit, top, "-inf", start=0, num=limit + 1 + TIES, withscores=True
        )
        entries = []
        for member, score in reply:
            record = json.loads(self._text(member))
            at_ms = int(score)
            if before is not None and (at_ms, record["id"]) >= before:
                continue
            entries.append(
                AuditEntry(
                    id=record["id"],
                    at=to_datetime(at_ms),
                    action=record["action"],
                    target=record["target"],
                    actor=record["actor"],
                    source=record["source"],
                    count=int(record["count"]),
                )
            )
        page = entries[:limit]
        next_cursor = None
        if len(entries) > limit:
            last = page[-1]
            next_cursor = encode_cursor(to_epoch_ms(last.at), last.id)
        return AuditPage(entries=page, next_cursor=next_cursor)

    # -- internals -----------------------------------------------------------------------------

    def _requeue_shared(self) -> Shared:
        return ([self._keys.prefix], [self._now(), SIGNAL_CAP, SIGNAL_TTL_MS])

    def _worker_keys(self) -> list[str]:
        return [self._keys.workers, self._keys.workers_seen]

    async def _each_listed(self, index: str, script: str, shared: Shared) -> int:
        """Run ``script`` on every job listed in ``index``, a chunk a round trip; how many moved.

        A job the script leaves alone stays listed, so the next chunk starts past the kept ones.
        """
        moved = 0
        offset = 0
        while True:
            members = await self._client.zrange(index, offset, offset + CHUNK - 1)
            if not members:
                return moved
            ids = [self._text(member) for member in members]
            results = await self._scripts.batch(
                script, shared, [([self._keys.job(job_id)], [job_id]) for job_id in ids]
            )
            changed = sum(1 for result in results if result)
            moved += changed
            offset += len(ids) - changed


def _worker(record: dict[str, Any]) -> WorkerInfo:
    types = record.get("types") or []
    queues = record.get("queues") or []
    return WorkerInfo(
        id=str(record["id"]),
        host=str(record["host"]),
        pid=int(record["pid"]),
        types=tuple(types) if isinstance(types, list) else (),  # cjson writes [] as {}
        concurrency=int(record["concurrency"]),
        in_flight=int(record["in_flight"]),
        started_at=to_datetime(int(record["started_at"])),
        last_seen=to_datetime(int(record["last_seen"])),
        queues=tuple(queues) if isinstance(queues, list) else (),
    )
