"""RedisJobDriver: the JobDriver SPI as Lua scripts over sorted sets and hashes, per namespace.

Every transition (enqueue, claim, heartbeat, complete, retry, fail) is one Lua function call,
so its check and change are one atomic step (see ``redis_jobs/lua/``; the functions are one
Redis Functions library, loaded on a server the first time it lacks it: Redis >= 7, whose user
may run FUNCTION LOAD and FCALL). Pending jobs wait in a sorted
set per type scored by ``run_at``, active ones in a sorted set per type scored by lease expiry;
``claim`` takes the earliest due of both for the types it is given (an expired lease is due at
its expiry) and leases them in one call.

Clock: the scripts read Redis ``TIME``, the one clock for due-ness and lease expiry of every
process; a driver given ``clock=`` passes that clock's time instead (tests). Reading TIME
before writing is safe on Redis 7, which replicates scripts by their effects.

Lease tokens read ``<attempt>:<random>.<n>:<type>``. Carrying the type lets heartbeat,
complete, retry, fail and release name the job's per-type sets in KEYS without a lookup; a
token is compared whole, so a forged or stale one matches nothing and writes nothing. A
reclaim (an expired lease: a *stall*) keeps the attempt and counts ``stalls``; past
``max_stalls`` the claim fails the job.

Wake-up: enqueue and retry push a signal on ``{ns}:signal:<type>`` (at most ``SIGNAL_CAP``
kept) and ``wait_for_work`` blocks on those lists with BLPOP, on a connection held for waits
(a pool connection, or on a Cluster one of the slot's node: ``waiter``). One push wakes one
blocked waiter: across processes the woken runner claims the job and the others go on waiting
(or poll), so a single job does not wake every runner; a burst of N jobs wakes up to N waiters.
Before blocking, one script reads when the next job is due (the wait is shortened to it) and,
if nothing is due, clears the signals in the same atomic step, so a signal is never lost between
that check and the BLPOP. Redis times BLPOP out on its own timer, up to ~100 ms late (hz 10).

Memory policy: on first use the driver reads ``maxmemory-policy`` once (CONFIG GET, in the
background) and logs a warning naming it unless it is ``noeviction``: any other policy lets Redis
evict job keys under memory pressure, and those jobs vanish without an error. A server that
refuses CONFIG (managed services) is skipped quietly; an unreachable one is asked again on a
later call.

Retention: a finished job lives while ``now < max(finished_at + retain, keep_until)`` by the
script clock (get_job, counts and key dedupe all judge so); its record and key index also get a
PEXPIRE of that span plus ``EXPIRY_MARGIN_MS`` of real time, so nothing is kept without bound.

Concurrent enqueue, heartbeat, complete, retry and fail calls made in one event-loop tick share
one round trip: their scripts take batches of jobs (``ScriptRunner.per_job``), and each job is
still checked and written on its own and gets its own result.

Topologies: the client may be a ``Redis``, a Sentinel ``master_for(...)`` client or a
``RedisCluster`` (see ``topology``); every key a script is given is under one queue's hash tag
(the default queue's ``{ns}``, a named queue's ``{ns|queue}``: ``keys``), so one queue lives in
one Cluster slot and each script runs on the slot's master; a named queue's calls go to a
driver of its space (``spaces``), which this driver makes and routes to.
Keys a script finds while it runs (the records of claimed jobs, a key index) are spelled from a
prefix it is given in KEYS, under the same tag, so they are in the same slot. After a failover
the client reaches the new primary (Cluster: MOVED and a slot-map refresh; Sentinel: a fresh
discovery) and the driver logs one line naming it.

Fleet limits (``jobs.spi.limits``): a claim given ``ClaimLimits`` that apply passes the claim
script each limit key's ``{ns}:limit:held:<key>`` hash and ``{ns}:limit:starts:<key>`` zset,
and the script counts, chooses and records in the claim's own atomic step (see claim.lua). A
holder counts while its job still holds the lease that claim gave it, checked lazily by the
claim (and only when the limit is near full), so complete, retry, fail and heartbeat stay as
they are. A claim without limits passes none and runs the plain claim.

Workflows (``jobs.spi.WorkflowStore``, ``workflows``): ``enqueue_workflow`` stores a DAG in one
script; a job waiting for parents is pending in no ready zset, and the script that ends a parent
releases or cancels its dependents (see the workflow helpers in ``lua/common.lua``).

Durability: with ``replicas=N`` every acknowledged write (enqueue, complete, fail, retry) is
followed by ``WAIT N replica_timeout_ms`` in the same round trip and raises
``ReplicationTimeoutError`` (a StoreUnavailableError) unless N replicas have it. Claims and
heartbeats do not wait: losing one in a failover only lets the job run again (at least once).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Collection, Sequence
from typing import Any

from redis.asyncio import RedisCluster

from jobs.errors import DriverError
from jobs.spi import (
    DEFAULT_MAX_STALLS,
    JOB_STATES,
    AuditPage,
    ClaimedJob,
    ClaimedJobs,
    ClaimLimits,
    JobInfo,
    JobPage,
    JobRequest,
    JobState,
    JobStateCounts,
    JobTypeStats,
    OutcomeCount,
    QueueStats,
    WorkerInfo,
    WorkerRegistration,
    WorkflowJob,
    type_key,
)
from jobs.spi.support import (
    DEFAULT_QUEUE,
    Clock,
    Retention,
    check_request,
    stalled_error_parts,
)

from .keys import Keys
from .memory_policy import check_memory_policy
from .operations import RedisOperations
from .records import fields_of, job_info, parents_of
from .scripts import ScriptArg, ScriptRunner, Shared
from .spaces import QueueSpaces
from .topology import RedisClient, Topology, client_from_url
from .tuning import EXPIRY_MARGIN_MS, SIGNAL_CAP, SIGNAL_TTL_MS
from .waiter import Waiter, cancel_requests
from .workflows import RedisWorkflows

STALLED_PARTS = stalled_error_parts()
MAX_CLAIM = 1_000
"""Jobs one claim call leases at most: bounds how long one script keeps Redis busy."""
DEFAULT_REPLICA_TIMEOUT_MS = 1_000


class RedisJobDriver:
    """Jobs in Redis under one namespace; borrows ``connection`` or owns a client from ``url``."""

    def __init__(
        self,
        connection: RedisClient | None = None,
        *,
        url: str | None = None,
        namespace: str = "jobs",
        clock: Clock | None = None,
        retain_completed_ms: int | None = None,
        retain_failed_ms: int | None = None,
        replicas: int = 0,
        replica_timeout_ms: int = DEFAULT_REPLICA_TIMEOUT_MS,
        _queue: str = DEFAULT_QUEUE,
    ) -> None:
        """``_queue`` is internal: the named queue whose space (``spaces``) a driver serves,
        made by the namespace's driver, which serves the default queue and routes the rest."""
        if (connection is None) == (url is None):
            raise ValueError("RedisJobDriver takes a redis.asyncio client or url=, exactly one")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ValueError(f"replicas is a count of replicas (0 or more), got {replicas!r}")
        if not isinstance(replica_timeout_ms, int) or replica_timeout_ms <= 0:
            raise ValueError(
                f"replica_timeout_ms is a positive number of ms, got {replica_timeout_ms!r}"
            )
        self._keys = Keys(namespace, _queue)
        self._retention = Retention.of(retain_completed_ms, retain_failed_ms)
        client = connection if connection is not None else client_from_url(url or "")
        self._topology = Topology(client, self._keys)
        self._client = client
        self._owns_client = connection is None
        self._clock = clock
        self._scripts = ScriptRunner(
            self._topology, replicas=replicas, replica_timeout_ms=replica_timeout_ms
        )
        self._waiter = Waiter(self._topology)
        self._operations = RedisOperations(
            client=client,
            keys=self._keys,
            scripts=self._scripts,
            retention=self._retention,
            now=self._now,
            text=self._text,
            get_job=self.get_job,
        )
        self._workflows = RedisWorkflows(
            keys=self._keys, scripts=self._scripts, now=self._now, text=self._text
        )
        self._spaces: QueueSpaces[RedisJobDriver] | None = None
        if _queue == DEFAULT_QUEUE:
            self._spaces = QueueSpaces(
                client=client,
                keys=self._keys,
                make=lambda queue: RedisJobDriver(
                    client,
                    namespace=namespace,
                    clock=clock,
                    retain_completed_ms=retain_completed_ms,
                    retain_failed_ms=retain_failed_ms,
                    replicas=replicas,
                    replica_timeout_ms=replica_timeout_ms,
                    _queue=queue,
                ),
                text=self._text,
                replicas=replicas,
                replica_timeout_ms=replica_timeout_ms,
                home_node=self._home_node,
            )
        self._closing = asyncio.Event()
        self._closed = False
        self._policy_check: asyncio.Task[None] | None = None
        keys = self._keys
        self._enqueue_constants: Shared = (
            (
                keys.job_prefix,
                keys.completed,
                keys.failed,
                keys.cancelled,
                keys.state_prefix,
                keys.types,
            ),
            ("", SIGNAL_CAP, SIGNAL_TTL_MS),
        )
        """The enqueue script's shared KEYS and ARGV (its clock argument "": Redis TIME)."""
        self._finish_constants: dict[str, Shared] = {
            state: self._finish_shared(state, "") for state in ("completed", "failed")
        }

    def __repr__(self) -> str:
        return f"RedisJobDriver({self._topology.describe()}, namespace {self.namespace!r})"

    @property
    def namespace(self) -> str:
        return self._keys.namespace

    @property
    def keys(self) -> Keys:
        return self._keys

    @property
    def clock(self) -> Clock | None:
        """The clock given in place of Redis TIME (``ClockedDriver``), or None."""
        return self._clock

    # -- producer ------------------------------------------------------------------------------

    async def enqueue(self, job: JobRequest) -> str | None:
        """Store ``job``; JobOptionError, before any I/O, for a number out of its range
        (``check_request``: a NaN or 1e20 would be stored as a run_at of -2^63)."""
        self._check_open()
        if job.queue != DEFAULT_QUEUE and self._spaces is not None:
            return await self._spaces.enqueue(job)  # the queue's own slot (``spaces``)
        check_request(job)
        job_keys, job_args = self._enqueue_parts(job)
        status = await self._scripts.per_job("enqueue", self._enqueue_shared(), job_keys, job_args)
        return _enqueued(job, status)

    async def enqueue_many(self, jobs: Sequence[JobRequest]) -> list[str | None]:
        """The batch in one round trip: one enqueue script per ``MAX_BATCH`` jobs, pipelined.

        The script checks and stores the jobs one by one in order, so a key taken by an earlier
        job of the batch drops the later one (None), as a live job's key does. A batch spanning
        queues is one call per queue (``spaces``), atomic per queue only.
        """
        self._check_open()
        if not jobs:
            return []
        if self._spaces is not None and any(job.queue != DEFAULT_QUEUE for job in jobs):
            return await self._spaces.enqueue_many(jobs, self._enqueue_many_here)
        return await self._enqueue_many_here(jobs)

    async def _enqueue_many_here(self, jobs: Sequence[JobRequest]) -> list[str | None]:
        for job in jobs:
            check_request(job)
        statuses = await self._scripts.batch_of(
            "enqueue", self._enqueue_shared(), jobs, self._enqueue_into
        )
        return [_enqueued(job, status) for job, status in zip(jobs, statuses, strict=True)]

    def _enqueue_shared(self) -> Shared:
        if self._clock is None:
            return self._enqueue_constants
        return (self._enqueue_constants[0], (self._now(), SIGNAL_CAP, SIGNAL_TTL_MS))

    def _enqueue_parts(self, job: JobRequest) -> tuple[list[str], list[ScriptArg]]:
        job_keys: list[str] = []
        job_args: list[ScriptArg] = []
        self._enqueue_into(job, job_keys, job_args)
        return job_keys, job_args

    def _enqueue_into(self, job: JobRequest, keys: list[str], args: list[ScriptArg]) -> None:
        """Adds the enqueue script's KEYS and ARGV of ``job`` (see enqueue.lua)."""
        names = self._keys
        key, trace, job_type, queue = job.key, job.trace_context, job.type, job.queue
        keys += (
            names.job(job.id),
            names.ready(job_type, queue),
            names.signal(job_type),
            names.index_prefix if key is None else names.index(key),
        )
        run_at, timeout, keep_until = job.run_at_ms, job.timeout_ms, job.keep_until_ms
        args += (
            job.id,
            job_type,
            job.payload,
            job.max_attempts,
            job.delay_ms,
            "" if run_at is None else run_at,
            "" if timeout is None else timeout,
            "" if keep_until is None else keep_until,
            ("" if key is None else "k") + ("" if trace is None else "t"),
            key or "",
            trace or "",
            job.max_stalls,
            job.priority,
            "" if queue == DEFAULT_QUEUE else queue,
        )

    async def enqueue_workflow(self, workflow_id: str, jobs: Sequence[WorkflowJob]) -> None:
        """The workflow's jobs in one script, all or nothing (``workflows``), in the space of
        their one queue: DriverError for a workflow whose jobs span queues (``spaces``)."""
        self._check_open()
        if self._spaces is None:
            await self._workflows.enqueue_workflow(workflow_id, jobs)
            return
        await self._spaces.enqueue_workflow(workflow_id, jobs, self._workflows.enqueue_workflow)

    async def workflow_jobs(self, workflow_id: str) -> list[JobInfo]:
        self._check_open()
        here = self._workflows.workflow_jobs(workflow_id)
        if self._spaces is None:
            return await here
        found = await self._spaces.first(here, lambda space: space.workflow_jobs(workflow_id))
        return found or []

    # -- consumer ------------------------------------------------------------------------------

    async def claim(
        self,
        limit: int,
        lease_ms: int,
        types: Collection[str],
        queue: str = DEFAULT_QUEUE,
        limits: ClaimLimits | None = None,
    ) -> list[ClaimedJob]:
        """One claim script; with ``limits`` that apply, the same script counts, honours and
        records them (``_claim_limited``), else it is the plain claim."""
        self._check_open()
        if queue != DEFAULT_QUEUE and self._spaces is not None:
            return await self._spaces.of(queue).claim(limit, lease_ms, types, queue, limits)
        wanted = list(dict.fromkeys(types))
        if limit <= 0 or not wanted:
            return [] if limits is None else ClaimedJobs()
        keys = self._keys
        names = [keys.job_prefix, keys.index_prefix, keys.failed, keys.state_prefix]
        for job_type in wanted:
            names += [keys.ready(job_type, queue), keys.leased(job_type, queue)]
        args: list[ScriptArg] = [self._now(), lease_ms, min(limit, MAX_CLAIM)]
        random = os.urandom(8).hex()
        args.append(random if queue == DEFAULT_QUEUE else f"{random}~{queue.encode().hex()}")
        args += [self._retention.failed_ms, EXPIRY_MARGIN_MS, *STALLED_PARTS]
        if limits is not None and limits.applies(wanted):
            return await self._claim_limited(names, args, wanted, queue, limits)
        args += [DEFAULT_MAX_STALLS, 0, *wanted]
        reply = await self._scripts.call("claim", names, args)
        jobs = [_claimed(fields) for fields in json.loads(reply)]
        return jobs if limits is None else ClaimedJobs(jobs)

    async def _claim_limited(
        self,
        names: list[str],
        args: list[ScriptArg],
        wanted: list[str],
        queue: str,
        limits: ClaimLimits,
    ) -> ClaimedJobs:
        """The claim script given the claim's limit keys (``ClaimLimits.keys``): each one's
        held hash and starts zset, which type it limits (its index; none for the queue's key)
        and its numbers. It replies ``[jobs, held type indexes, retry_ms or -1]``."""
        keys = self._keys
        keyed = limits.keys(wanted, queue)
        scopes = {type_key(job_type): index for index, job_type in enumerate(wanted, 1)}
        args += [DEFAULT_MAX_STALLS, len(keyed), *wanted]
        for limit_key, fleet_limit in keyed:
            names += [keys.limit_held(limit_key), keys.limit_starts(limit_key)]
            concurrency, rate = fleet_limit.concurrency, fleet_limit.rate
            args += [
                scopes.get(limit_key, ""),
                "" if concurrency is None else concurrency,
                "" if rate is None else rate,
                fleet_limit.per_ms,
            ]
        reply = await self._scripts.call("claim", names, args)
        jobs, held, retry_ms = json.loads(reply)
        return ClaimedJobs(
            [_claimed(fields) for fields in jobs],
            frozenset(wanted[index - 1] for index in held),
            None if retry_ms < 0 else int(retry_ms),
        )

    async def heartbeat(self, job_id: str, lease_token: str, lease_ms: int) -> bool:
        self._check_open()
        lane = _token_lane(lease_token)
        if lane is None:
            return False
        if lane[1] != DEFAULT_QUEUE and self._spaces is not None:
            return await self._spaces.of(lane[1]).heartbeat(job_id, lease_token, lease_ms)
        job_keys = [self._keys.job(job_id), self._keys.leased(*lane)]
        shared: Shared = ([], [self._now()])
        job_args: list[ScriptArg] = [job_id, lease_token, lease_ms]
        return bool(
            await self._scripts.per_job("heartbeat", shared, job_keys, job_args, durable=False)
        )

    async def set_progress(self, job_id: str, lease_token: str, progress: str) -> bool:
        self._check_open()
        lane = _token_lane(lease_token)
        if lane is None:
            return False
        if lane[1] != DEFAULT_QUEUE and self._spaces is not None:
            return await self._spaces.of(lane[1]).set_progress(job_id, lease_token, progress)
        job_keys = [self._keys.job(job_id), self._keys.leased(*lane)]
        shared: Shared = ([], [""])
        job_args: list[ScriptArg] = [job_id, lease_token, progress]
        return bool(
            await self._scripts.per_job("progress", shared, job_keys, job_args, durable=False)
        )

    async def complete(self, job_id: str, lease_token: str, result: str | None = None) -> bool:
        return await self._finish(job_id, lease_token, "completed", result)

    async def complete_many(
        self, jobs: Sequence[tuple[str, str]], results: Sequence[str | None] | None = None
    ) -> list[bool]:
        """The batch in one round trip (``ScriptRunner.batch``), each job's result in its own
        arguments; a token that names no type is stale without a call."""
        self._check_open()
        done = [False] * len(jobs)
        keys = self._keys
        positions: list[int] = []
        parts: list[tuple[list[str], list[ScriptArg]]] = []
        elsewhere: dict[str, list[int]] = {}
        for position, (job_id, token) in enumerate(jobs):
            lane = _token_lane(token)
            if lane is not None and lane[1] != DEFAULT_QUEUE and self._spaces is not None:
                elsewhere.setdefault(lane[1], []).append(position)
            elif lane is not None:
                positions.append(position)
                result = "" if results is None else results[position] or ""
                parts.append(([keys.job(job_id), keys.leased(*lane)], [job_id, token, result]))
        if elsewhere:
            await self._settle_elsewhere(elsewhere, done, jobs, results)
        if parts:
            statuses = await self._scripts.batch("finish", self._finish_of("completed"), parts)
            for position, status in zip(positions, statuses, strict=True):
                done[position] = bool(status)
        return done

    async def _settle_elsewhere(
        self,
        places: dict[str, list[int]],
        done: list[bool],
        jobs: Sequence[tuple[str, str]],
        results: Sequence[str | None] | None,
        *,
        release: bool = False,
    ) -> None:
        """``complete_many`` (with ``results``) or ``release_many`` (``release``) of the jobs of
        named queues at ``places``, each queue's space one batch."""
        assert self._spaces is not None
        spaces = self._spaces

        async def one(queue: str, positions: list[int]) -> list[bool]:
            batch = [jobs[position] for position in positions]
            if release:
                return await spaces.of(queue).release_many(batch)
            texts = None if results is None else [results[position] for position in positions]
            return await spaces.of(queue).complete_many(batch, texts)

        answers = await asyncio.gather(*(one(queue, at) for queue, at in places.items()))
        for positions, answer in zip(places.values(), answers, strict=True):
            for position, status in zip(positions, answer, strict=True):
                done[position] = status

    async def fail(self, job_id: str, lease_token: str, *, error: str) -> bool:
        return await self._finish(job_id, lease_token, "failed", error)

    async def retry(
        self,
        job_id: str,
        lease_token: str,
        *,
        delay_ms: int,
        error: str,
        count_attempt: bool = True,
    ) -> bool:
        self._check_open()
        lane = _token_lane(lease_token)
        if lane is not None and lane[1] != DEFAULT_QUEUE and self._spaces is not None:
            space = self._spaces.of(lane[1])
            return await space.retry(
                job_id, lease_token, delay_ms=delay_ms, error=error, count_attempt=count_attempt
            )
        flags = "" if count_attempt else "u"
        parts = self._retry_parts(job_id, lease_token, delay_ms, error, flags)
        if parts is None:
            return False
        return bool(await self._scripts.per_job("retry", self._retry_shared(), *parts))

    async def release(self, job_id: str, lease_token: str) -> bool:
        return (await self.release_many([(job_id, lease_token)]))[0]

    async def release_many(self, jobs: Sequence[tuple[str, str]]) -> list[bool]:
        """The batch in one round trip (the retry function, flagged as a release)."""
        self._check_open()
        results = [False] * len(jobs)
        positions: list[int] = []
        calls: list[tuple[list[str], list[ScriptArg]]] = []
        elsewhere: dict[str, list[int]] = {}
        for position, (job_id, token) in enumerate(jobs):
            lane = _token_lane(token)
            if lane is not None and lane[1] != DEFAULT_QUEUE and self._spaces is not None:
                elsewhere.setdefault(lane[1], []).append(position)
                continue
            parts = self._retry_parts(job_id, token, 0, "", "ur")
            if parts is not None:
                positions.append(position)
                calls.append(parts)
        if elsewhere:
            await self._settle_elsewhere(elsewhere, results, jobs, None, release=True)
        if calls:
            statuses = await self._scripts.batch("retry", self._retry_shared(), calls)
            for position, status in zip(positions, statuses, strict=True):
                results[position] = bool(status)
        return results

    def _retry_shared(self) -> Shared:
        return ([self._keys.state_prefix], [self._now(), SIGNAL_CAP, SIGNAL_TTL_MS])

    def _retry_parts(
        self, job_id: str, token: str, delay_ms: int, error: str, flags: str
    ) -> tuple[list[str], list[ScriptArg]] | None:
        """The retry function's KEYS and ARGV of one job; None when the token names no type
        (stale without a call)."""
        lane = _token_lane(token)
        if lane is None:
            return None
        keys = self._keys
        job_keys = [
            keys.job(job_id),
            keys.leased(*lane),
            keys.ready(*lane),
            keys.signal(lane[0]),
        ]
        return job_keys, [job_id, token, delay_ms, error, flags]

    # -- inspection ----------------------------------------------------------------------------

    async def get_job(self, job_id: str) -> JobInfo | None:
        self._check_open()
        if self._spaces is None:
            return await self._get_job_here(job_id)
        here = self._get_job_here(job_id)
        return await self._spaces.first(here, lambda space: space.get_job(job_id))

    async def _get_job_here(self, job_id: str) -> JobInfo | None:
        reply = await self._scripts.call("get", [self._keys.job(job_id)], [self._now()])
        if reply is None:
            return None
        return job_info(job_id, fields_of(reply, self._text))

    async def counts(self) -> JobStateCounts:
        self._check_open()
        if self._spaces is None:
            return await self._counts_here()
        return await self._spaces.counts(self._counts_here())

    async def _counts_here(self) -> JobStateCounts:
        keys = self._keys
        names = [keys.state_prefix, keys.completed, keys.failed, keys.cancelled]
        reply = await self._scripts.call("counts", names, [self._now()])
        counts = dict.fromkeys(JOB_STATES, 0)
        counts.update(zip(JOB_STATES, (int(value) for value in reply), strict=False))
        return counts

    # -- operations: RedisOperations, once the driver is open ---------------------------------

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        job_type: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        queue: str | None = None,
    ) -> JobPage:
        operations = self._open_operations()
        spaces = self._spaces
        if spaces is None or queue == DEFAULT_QUEUE:
            return await operations.list_jobs(
                state=state, job_type=job_type, limit=limit, cursor=cursor, queue=queue
            )
        if queue is not None:  # the queue's space holds its jobs and no other's
            space = spaces.of(queue)
            return await space.list_jobs(state=state, job_type=job_type, limit=limit, cursor=cursor)
        return await spaces.list_jobs(
            operations.list_jobs, state=state, job_type=job_type, limit=limit, cursor=cursor
        )

    async def find_job(self, key: str) -> JobInfo | None:
        here = self._open_operations().find_job(key)
        if self._spaces is None:
            return await here
        return await self._spaces.first(here, lambda space: space.find_job(key))

    async def requeue(self, job_id: str) -> bool:
        here = self._open_operations().requeue(job_id)
        if self._spaces is None:
            return await here
        return await self._spaces.any(here, lambda space: space.requeue(job_id))

    async def requeue_failed(self, job_type: str | None = None) -> int:
        here = self._open_operations().requeue_failed(job_type)
        if self._spaces is None:
            return await here
        return await self._spaces.total(here, lambda space: space.requeue_failed(job_type))

    async def cancel(self, job_id: str) -> bool:
        here = self._open_operations().cancel(job_id)
        if self._spaces is None:
            return await here
        return await self._spaces.any(here, lambda space: space.cancel(job_id))

    async def purge(
        self,
        states: Collection[JobState],
        job_type: str | None = None,
        older_than_ms: int | None = None,
    ) -> int:
        here = self._open_operations().purge(states, job_type, older_than_ms)
        if self._spaces is None:
            return await here
        return await self._spaces.total(
            here, lambda space: space.purge(states, job_type, older_than_ms)
        )

    async def delete(self, job_id: str) -> bool:
        here = self._open_operations().delete(job_id)
        if self._spaces is None:
            return await here
        return await self._spaces.any(here, lambda space: space.delete(job_id))

    async def stats(self) -> dict[str, JobTypeStats]:
        here = self._open_operations().stats()
        return await (here if self._spaces is None else self._spaces.stats(here))

    async def queue_stats(self) -> dict[str, QueueStats]:
        here = self._open_operations().queue_stats()
        if self._spaces is None:
            return await here
        return await self._spaces.queue_stats(here, self._counts_here())

    async def pause_queue(self, queue: str) -> bool:
        return await self._open_operations().pause_queue(queue)

    async def resume_queue(self, queue: str) -> bool:
        return await self._open_operations().resume_queue(queue)

    async def paused_queues(self) -> set[str]:
        return await self._open_operations().paused_queues()

    async def register_worker(self, worker: WorkerRegistration, ttl_ms: int) -> None:
        await self._open_operations().register_worker(worker, ttl_ms)

    async def deregister_worker(self, worker_id: str) -> None:
        await self._open_operations().deregister_worker(worker_id)

    async def list_workers(self) -> list[WorkerInfo]:
        return await self._open_operations().list_workers()

    async def add_counts(self, counts: Sequence[OutcomeCount]) -> None:
        await self._open_operations().add_counts(counts)

    async def read_counts(self, since_ms: int, job_type: str | None = None) -> list[OutcomeCount]:
        return await self._open_operations().read_counts(since_ms, job_type)

    async def record_action(
        self, *, action: str, target: str, actor: str, source: str, count: int
    ) -> None:
        operations = self._open_operations()
        await operations.record_action(
            action=action, target=target, actor=actor, source=source, count=count
        )

    async def list_actions(self, *, limit: int = 50, cursor: str | None = None) -> AuditPage:
        return await self._open_operations().list_actions(limit=limit, cursor=cursor)

    # -- wake-up and close ---------------------------------------------------------------------

    async def wait_for_work(
        self, types: Collection[str], timeout_ms: int, queues: Collection[str] = (DEFAULT_QUEUE,)
    ) -> None:
        self._check_open()
        if self._spaces is not None and any(queue != DEFAULT_QUEUE for queue in queues):
            await self._spaces.wait_any(self._wait_here, types, timeout_ms, queues)
            return
        await self._wait_here(types, timeout_ms, queues)

    async def _wait_here(
        self, types: Collection[str], timeout_ms: int, queues: Collection[str]
    ) -> None:
        """``wait_for_work`` in this driver's space (its queues' keys are all in it)."""
        wanted = list(dict.fromkeys(types))
        if not wanted:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), max(timeout_ms, 0) / 1000)
            return
        cancels = cancel_requests()  # a cancel the peek's send drops is raised by the wait
        keys = self._keys
        names = [
            name
            for queue in queues
            for job_type in wanted
            for name in (
                keys.ready(job_type, queue),
                keys.leased(job_type, queue),
                keys.signal(job_type),
            )
        ]
        now, due = await self._scripts.call("peek", names, [self._now()])
        wait_ms = timeout_ms if due < 0 else min(timeout_ms, due - now)
        if wait_ms <= 0:
            return
        signals = [keys.signal(job_type) for job_type in wanted]
        await self._waiter.wait(signals, wait_ms / 1000, cancels)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        if self._spaces is not None:
            await self._spaces.close()
        policy_check = self._policy_check
        if policy_check is not None and not policy_check.done():
            policy_check.cancel()
            await asyncio.gather(policy_check, return_exceptions=True)
        await self._waiter.close()  # a BLPOP in flight ends here
        await self._scripts.drain()
        if self._owns_client:
            await self._topology.close_client()

    # -- internals -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise DriverError("the Redis job driver is closed")
        if self._policy_check is None and self._spaces is not None:
            # first use: once per driver (a queue's space leaves it to its namespace's driver),
            # off the caller's path
            self._policy_check = asyncio.get_running_loop().create_task(
                self._check_memory_policy(), name="redis-jobs-memory-policy"
            )

    def _open_operations(self) -> RedisOperations:
        self._check_open()
        return self._operations

    async def _check_memory_policy(self) -> None:
        if not await check_memory_policy(self._topology):
            self._policy_check = None  # unreachable now: ask again on a later call

    async def _home_node(self) -> dict[str, Any]:
        """How to aim a keyless command at the namespace's node (a Cluster: its slot's master)."""
        if isinstance(self._client, RedisCluster):
            return {"target_nodes": await self._topology.slot_node()}
        return {}

    def _now(self) -> str:
        return "" if self._clock is None else str(self._clock.now_ms())

    def _text(self, value: Any) -> str:
        return value.decode(*self._topology.encoding) if isinstance(value, bytes) else str(value)

    async def _finish(self, job_id: str, token: str, state: JobState, text: str | None) -> bool:
        """Complete (``text``: the result) or fail (``text``: the error) a held job."""
        self._check_open()
        lane = _token_lane(token)
        if lane is None:
            return False
        if lane[1] != DEFAULT_QUEUE and self._spaces is not None:
            return await self._spaces.of(lane[1])._finish(job_id, token, state, text)
        job_keys = [self._keys.job(job_id), self._keys.leased(*lane)]
        job_args: list[ScriptArg] = [job_id, token, text or ""]
        shared = self._finish_of(state)
        return bool(await self._scripts.per_job("finish", shared, job_keys, job_args))

    def _finish_of(self, state: JobState) -> Shared:
        """The finish function's shared keys and args for ``state`` (prebuilt unless a clock
        was given, whose reading is one of them)."""
        shared = self._finish_constants.get(state) if self._clock is None else None
        return shared if shared is not None else self._finish_shared(state, self._now())

    def _finish_shared(self, state: JobState, now: str) -> Shared:
        keys = self._keys
        return (
            (keys.finished(state), keys.index_prefix, keys.state_prefix, keys.types),
            (now, state, self._retention.of_state(state), EXPIRY_MARGIN_MS),
        )


def _claimed(fields: list[Any]) -> ClaimedJob:
    job_id, job_type, payload, attempt, max_attempts, token, timeout, key, trace = fields[:9]
    reclaimed, run_at, stalls, depends_on = fields[9:13]
    return ClaimedJob(
        id=job_id,
        type=job_type,
        payload=payload,
        attempt=int(attempt),
        max_attempts=int(max_attempts),
        lease_token=token,
        timeout_ms=None if timeout is False else int(timeout),
        key=None if key is False else key,
        trace_context=None if trace is False else trace,
        reclaimed=bool(reclaimed),
        run_at_ms=int(run_at),
        stalls=int(stalls),
        depends_on=parents_of(depends_on),
    )


def _enqueued(job: JobRequest, status: Any) -> str | None:
    if status == -1:
        raise DriverError(f"job id {job.id!r} already exists")
    return job.id if status == 1 else None


def _token_lane(token: str) -> tuple[str, str] | None:
    """The (type, queue) a lease token names: ``<attempt>:<random>.<n>:<type>`` in the default
    queue, ``<attempt>:<random>~<queue as hex>.<n>:<type>`` in another; None: none (stale)."""
    parts = token.split(":", 2)
    if len(parts) != 3:
        return None
    middle = parts[1]
    if "~" not in middle:
        return parts[2], DEFAULT_QUEUE
    try:
        queue = bytes.fromhex(middle.split("~", 1)[1].split(".", 1)[0]).decode()
    except ValueError:
        return None
    return parts[2], queue
