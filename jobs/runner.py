"""JobRunner: claims jobs its handlers know and runs an attempt of each, concurrently.

The loop: claim as many jobs as there are free slots and free places among the ``prefetch``
ready ones, start an ``Attempt`` (``execution``) for each job that finds a slot, keep the others
ready, and when the store has nothing more, wait for the driver's wake-up (``poll_interval_ms``
at most), once the jobs just started took their first step (their handlers start before the
wait's store call is made). A slot whose handler returns starts the next ready job at once, in
the same step of the event loop, while its settle goes on beside it: the claim round trip
refills the ready jobs (when half of them went, so claims come in batches) instead of standing
between a free slot and its next job. A claim is sized once the jobs just started ran their
first step (those that return at once free their slots first), and while more jobs are settling
than a batch (the store is behind) it waits until it can take half a batch. Every claimed job is
leased from the claim: ready jobs' leases are kept like running ones, one refused (the job was
reclaimed or cancelled) drops the job unrun, and ``close()`` runs them as it drains.
Leases are kept by one ``LeaseKeeper`` (``leases``) and outcomes settled by one ``Settler``
(``settling``); dependencies run one way, from here down. A failing store call is logged and
retried with backoff where it happens. The claim, heartbeat and presence loops run under one
``Supervisor``: anything else that escapes one is logged with its cause and the loop restarts
after a backoff, ``health()`` red meanwhile. ``stop()`` ends claiming while attempts in flight
go on (heartbeats too); ``close()`` also waits for them (up to ``drain_timeout_ms``, after which
they are cancelled and their jobs, and the ready ones, handed back to the store at no cost:
``release``, neither an attempt nor a stall spent). While started, the runner is listed in
``workers()`` (``presence``).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from loguru import logger

from .clock import Clock, SystemClock
from .counters import OutcomeTally
from .errors import JobsError
from .execution import Attempt, AttemptServices, Outcome
from .failures import FailureStreak
from .fleet_limits import parse_queue_limits
from .handlers import JobHandlerRegistry
from .leases import Lease, LeaseKeeper
from .metrics import watch_queue
from .options import DEFAULT_QUEUE, QueueWeights, parse_queues
from .presence import WorkerPresence, new_worker_id
from .queue_order import ClaimOrder, served_queues
from .retry import DEFAULT_BACKOFF, Backoff
from .runner_limits import LIMIT_RECHECK_MS, RunnerLimits, held_of, merged
from .service import BackgroundService
from .settings import JobsSettings
from .settling import STORE_BACKOFF, Settler
from .spi.driver import ClockedDriver, JobDriver, ProgressReports, QueuePauses
from .spi.limits import ClaimedJobs
from .spi.records import ClaimedJob, WorkerRegistration

CLAIM_LOOP = "claim"
_SETTLE_STEPS = 4
"""Steps of the event loop a claim waits at most for the jobs just started to run theirs."""
HEARTBEAT_LOOP = "heartbeat"


class JobRunner(BackgroundService):
    """The worker engine (lifecycle phase 10). ``start()`` explicitly, or ``auto_start``."""

    phase = 10
    service = "job runner"

    def __init__(
        self,
        driver: JobDriver,
        registry: JobHandlerRegistry,
        settings: JobsSettings | None = None,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        queues: str | tuple[str, ...] | QueueWeights | None = None,
    ) -> None:
        super().__init__(driver)
        self.settings = settings or JobsSettings()
        self._queues_given = queues if queues is not None else self.settings.queues
        if self._queues_given is not None:
            parse_queues(self._queues_given, "the runner")  # JobOptionError here, not at start
        self._claim_order: ClaimOrder | None = None
        self._queue_limits = parse_queue_limits(self.settings.queue_limits)
        self._limits = RunnerLimits({}, {})  # with the handlers' at the first claim
        self._pauses = driver if isinstance(driver, QueuePauses) else None
        self._pauses_next = 0.0  # when the paused queues are read next (monotonic)
        self._paused: frozenset[str] = frozenset()  # the queues it serves that are paused
        self.driver = driver
        self.registry = registry
        self.backoff = backoff
        self.lease_ms = self.settings.lease_ms
        self.heartbeat_ms = self.settings.effective_heartbeat_ms
        self.executor = ThreadPoolExecutor(
            max_workers=self.settings.concurrency, thread_name_prefix="jobs-handler"
        )
        self.settler = Settler(driver, self.lease_ms, self._contact)
        self.leases = LeaseKeeper(driver, self.lease_ms, self.heartbeat_ms, self._contact)
        self._last_claim: float | None = None
        self.tally = OutcomeTally(_counting_clock(driver))
        self._services = AttemptServices(
            settler=self.settler,
            leases=self.leases,
            executor=self.executor,
            backoff=backoff,
            timeout_grace_ms=self.settings.timeout_grace_ms,
            default_timeout_ms=self.settings.default_timeout_ms,
            on_detach=self._detach,
            on_handler_done=self._free_slot,
            tally=self.tally,
            max_result_bytes=self.settings.max_result_bytes,
            progress_store=driver if isinstance(driver, ProgressReports) else None,
        )
        self.stats: dict[str, int] = dict.fromkeys(
            ("claimed", "completed", "retry", "failed", "lease_lost", "cancelled", "abandoned"),
            0,
        )
        self._attempts: dict[asyncio.Task[Outcome], Attempt] = {}
        self.prefetch = self.settings.effective_prefetch
        self._ready: deque[Lease] = deque()  # claimed jobs waiting for a slot, leases kept
        self._busy: set[Attempt] = set()  # attempts whose handler runs: they hold the slots
        self.worker_id = new_worker_id()
        self.presence = WorkerPresence(
            driver, self.heartbeat_ms, self._registration, self._supervisor, tally=self.tally
        )
        self._claim_failures = FailureStreak("claiming jobs")
        self._wait_failures = FailureStreak("waiting for jobs")
        self._slot_freed: asyncio.Event | None = None
        self._limited_freed: asyncio.Event | None = None  # a slot of a limited type freed
        self._launches = 0
        self._unwatch: Callable[[], None] = _nothing

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def auto_startup(self) -> bool:
        return self.settings.auto_start

    @property
    def running_handlers(self) -> int:
        """Handlers running now: each holds one of ``concurrency`` slots (a settle does not)."""
        return len(self._busy)

    @property
    def ready(self) -> int:
        """Jobs claimed ahead (``prefetch``), leased and waiting for a slot."""
        return len(self._ready)

    @property
    def in_flight(self) -> int:
        """Jobs this runner holds: running, settling, or claimed and ready to run."""
        return len(self._attempts) + len(self._ready)

    def _on_start(self) -> None:
        """Start claiming."""
        self._slot_freed = asyncio.Event()
        self._limited_freed = asyncio.Event()
        supervisor = self._supervisor
        supervisor.spawn(CLAIM_LOOP, self._claim_loop)
        if not supervisor.running(HEARTBEAT_LOOP):
            supervisor.spawn(HEARTBEAT_LOOP, self._beat_loop)
        self.presence.start()
        self._unwatch = watch_queue(self.driver)

    def _on_stop(self) -> None:
        """Stop claiming; jobs in flight go on."""
        self._supervisor.stop(CLAIM_LOOP)
        if self._slot_freed is not None:
            self._slot_freed.set()

    def _health_window_ms(self) -> int:
        """Three heartbeat intervals."""
        return 3 * self.heartbeat_ms

    def _health_details(self) -> dict[str, Any]:
        """How many jobs are in flight, when the last claim was, which handlers are stuck."""
        return {
            "in_flight": self.in_flight,
            "last_claim": self._last_claim,
            "stuck": self.stuck_handlers(),
        }

    def stuck_handlers(self) -> list[str]:
        """One line for each handler that is stuck (``jobs.health``): still running after it
        was interrupted and given the grace period, or past its timeout and the grace period
        (plus a sweep, for the default timeout) without having been interrupted."""
        if not self._busy:
            return []
        now = time.perf_counter()
        grace_s = self.settings.timeout_grace_ms / 1000
        late_s = grace_s + self.leases.sweep_interval_s
        stuck: list[str] = []
        for attempt in self._busy:
            if attempt.started <= 0:
                continue
            job = attempt.job
            where = "in a worker thread" if attempt.thread is not None else "on the event loop"
            if attempt.interrupted_at is not None:
                since_s = now - attempt.interrupted_at
                if since_s > grace_s:
                    stuck.append(
                        f"job {job.id} ({job.type}): its handler ignored its interruption "
                        f"({attempt.signal.reason}) and still runs {where} "
                        f"{int(since_s * 1000)} ms later, holding a slot"
                    )
            elif attempt.timeout_ms is not None:
                ran_s = now - attempt.started
                if ran_s > attempt.timeout_ms / 1000 + late_s:
                    stuck.append(
                        f"job {job.id} ({job.type}): its handler has run {int(ran_s * 1000)} ms "
                        f"{where}, past its timeout of {attempt.timeout_ms} ms"
                    )
        return stuck

    async def close(self, drain_timeout_ms: int | None = None) -> None:
        """Stop, then wait for jobs in flight; past the drain deadline, cancel them and hand
        them (and the ready ones) back to the store at no cost."""
        if not self._begin_close():
            return
        await self._supervisor.close(CLAIM_LOOP)
        deadline_ms = (
            drain_timeout_ms if drain_timeout_ms is not None else (self.settings.drain_timeout_ms)
        )
        loop = asyncio.get_running_loop()
        deadline = None if deadline_ms is None else loop.time() + deadline_ms / 1000
        self._fill_slots()
        # Ready jobs start as slots free, inside the wait: wait again until none is left.
        while pending := set(self._attempts):
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            _, late = await asyncio.wait(pending, timeout=timeout)
            if late:
                await self._hand_back(late)
                break
        await self._supervisor.close(HEARTBEAT_LOOP)
        await self.presence.close()
        self._unwatch()
        self.executor.shutdown(wait=False, cancel_futures=True)

    async def _hand_back(self, late: set[asyncio.Task[Outcome]]) -> None:
        """The drain deadline passed: cancel what runs, then hand every job held back to the
        store at no cost (``release``: no attempt, no stall spent), those running and those
        ready (claimed, never started). A job whose sync handler's thread still runs (a thread
        cannot be cancelled) is left to its lease instead: released, it could run twice at
        once."""
        ready = [lease.job for lease in self._ready]
        while self._ready:
            self.leases.release(self._ready.popleft())
        running = [attempt for task in late if (attempt := self._attempts.get(task))]
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        held = ready + [attempt.job for attempt in running if not attempt.handler_running]
        released = await self.settler.release(held)
        logger.warning(
            "{} job(s) still running and {} ready at the drain deadline: cancelled, and {} "
            "handed back to the store at no cost (the others run again after their leases)",
            len(running),
            len(ready),
            released,
        )

    def _registration(self) -> WorkerRegistration:
        host, pid, _ = self.worker_id.rsplit(":", 2)
        return WorkerRegistration(
            id=self.worker_id,
            host=host,
            pid=int(pid),
            types=tuple(sorted(self.registry.types)),
            concurrency=self.settings.concurrency,
            in_flight=self.in_flight,
            queues=self.queues.names,
        )

    # -- the claim loop ------------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        failures = self._claim_failures
        concurrency, prefetch = self.settings.concurrency, self.prefetch
        refill = max(1, prefetch // 2)
        batch = max(1, (concurrency + prefetch) // 2)
        seen = 0
        supervisor = self._supervisor
        while not supervisor.stopping():  # this loop's own stop: a successor may run
            if self._ready:
                self._fill_slots()
            if seen != self._launches:
                seen = await self._let_started_run(seen)
            free = self._to_claim(concurrency, prefetch)
            if free <= 0 or (
                free < refill if self._ready else (free < batch and self._settles_behind())
            ):
                await self._wait(self._wait_for_slot())
                continue
            types, room = self._claimable()
            if not types and room is not None:  # every type at its own concurrency
                await self._wait(self._wait_for_slot())
                continue
            try:
                jobs = await self._claim(free, types) if types else []
            except Exception as exc:
                self._contact.failed(exc)
                # Capped at the poll interval: a store back from an outage is claimed from
                # again within that, not after a backoff grown through the outage.
                delay_ms = min(STORE_BACKOFF(failures.count + 1), self.settings.poll_interval_ms)
                failures.failed(exc, retry_in_ms=delay_ms)
                await self._wait(asyncio.sleep(delay_ms / 1000))
                continue
            now = time.monotonic()  # one clock read for the batch
            self._contact.answered(now)
            self._last_claim = now
            failures.succeeded()
            taken = len(jobs)
            held = held_of(jobs)
            if room is not None:
                jobs = await self._within_room(jobs, room)
            self.stats["claimed"] += len(jobs)
            hold = self.leases.hold
            for job in jobs:
                lease = hold(job, self._lost_while_ready, now)
                if len(self._busy) < concurrency:
                    self._launch(lease)
                else:
                    self._ready.append(lease)
            if taken < free:
                if jobs:
                    # The jobs just started take their first step (their handlers start)
                    # before the wait's store call is made: it is not on their way.
                    await asyncio.sleep(0)
                # At most a heartbeat interval: an idle runner still hears from its store.
                timeout_ms = min(self.settings.poll_interval_ms, self.heartbeat_ms)
                await self._wait(
                    self._wait_for_work(types, timeout_ms)
                    if held is None
                    else self._wait_past_limits(types, held, timeout_ms)
                )
                seen = self._launches  # those started before the wait ran long ago

    @property
    def queues(self) -> QueueWeights:
        """The named queues this runner claims from: ``queues=`` or ``JobsSettings.queues``,
        else ``"default"`` and the queues its handlers name (as they are when it starts)."""
        if self._claim_order is not None:
            return self._claim_order.queues
        return served_queues(self._queues_given, self.registry.queues)

    def _claim(self, free: int, types: Collection[str]) -> Awaitable[list[ClaimedJob]]:
        """The driver's claim for ``free`` jobs of ``types`` from this runner's queues: one
        call (one round trip) when it serves one queue; else one per queue in this claim's
        order (``ClaimOrder``), the next only while the claim is short."""
        order = self._claim_order
        if order is None:
            order = self._claim_order = ClaimOrder(self.queues)
            self._limits = RunnerLimits(self.registry.fleet_limits, self._queue_limits)
        if self._pauses is not None and time.monotonic() >= self._pauses_next:
            return self._refresh_then_claim(free, types)
        if self._paused:  # a queue it serves is paused: claim the others
            return self._claim_queues(free, types)
        single = order.single
        if single is None:
            return self._claim_queues(free, types)
        limits = self._limits.of(single, types) if self._limits else None
        if limits is not None:
            return self.driver.claim(free, self.lease_ms, types, single, limits=limits)
        if single == DEFAULT_QUEUE:  # as before named queues: a driver of then serves it
            return self.driver.claim(free, self.lease_ms, types)
        return self.driver.claim(free, self.lease_ms, types, queue=single)

    async def _refresh_then_claim(self, free: int, types: Collection[str]) -> list[ClaimedJob]:
        await self._refresh_pauses()
        return await self._claim_queues(free, types)

    async def _refresh_pauses(self) -> None:
        """Read the paused queues (``QueuePauses``), at most once per poll interval: a pause
        holds on this runner within one poll interval of it."""
        assert self._pauses is not None
        self._pauses_next = time.monotonic() + self.settings.poll_interval_ms / 1000
        paused = await self._pauses.paused_queues()
        self._paused = frozenset(paused) & frozenset(self.queues.names)

    async def _claim_queues(self, free: int, types: Collection[str]) -> list[ClaimedJob]:
        parts: list[list[ClaimedJob]] = []
        taken = 0
        claim, lease_ms = self.driver.claim, self.lease_ms
        assert self._claim_order is not None
        paused, limited = self._paused, self._limits
        for queue in self._claim_order.next():
            if queue in paused:
                continue
            limits = limited.of(queue, types) if limited else None
            if limits is not None:
                part = await claim(free - taken, lease_ms, types, queue, limits=limits)
            elif queue == DEFAULT_QUEUE:
                part = await claim(free - taken, lease_ms, types)
            else:
                part = await claim(free - taken, lease_ms, types, queue=queue)
            parts.append(part)
            taken += len(part)
            if taken >= free:
                break
        return parts[0] if len(parts) == 1 else merged(parts)

    def _claimable(self) -> tuple[Collection[str], dict[str, int] | None]:
        """The types to claim, and the room left to each type with a concurrency of its own
        (None: no type has one). A type at its concurrency is left out of the claim."""
        types = self.registry.types
        limits = self.registry.limits
        if not limits:
            return types, None
        room = self._room(limits)
        return [job_type for job_type in types if room.get(job_type, 1) > 0], room

    def _wait_for_work(self, types: Collection[str], timeout_ms: int) -> Awaitable[None]:
        """The driver's ``wait_for_work``; cut short by a freed slot of a limited type when
        such a type was left out of the claim."""
        if len(types) < len(self.registry.types):
            return self._work_or_limited_slot(types, timeout_ms)
        return self._driver_wait(types, timeout_ms)

    def _wait_past_limits(
        self, types: Collection[str], held: ClaimedJobs, timeout_ms: int
    ) -> Awaitable[None]:
        """The wait after a claim a full limit held jobs back from: for work of the types it
        left alone, until the held limits may admit again (a rate window's turn, or
        ``LIMIT_RECHECK_MS`` for a full concurrency), so a runner neither spins on jobs it may
        not take nor sleeps past their turn."""
        recheck = held.retry_ms if held.retry_ms is not None else LIMIT_RECHECK_MS
        timeout_ms = max(1, min(timeout_ms, recheck))
        left = [job_type for job_type in types if job_type not in held.held]
        if not left:
            return asyncio.sleep(timeout_ms / 1000)
        return self._driver_wait(left, timeout_ms)

    def _driver_wait(self, types: Collection[str], timeout_ms: int) -> Awaitable[None]:
        """The driver's ``wait_for_work`` for this runner's queues (without ``queues`` when
        it serves ``"default"`` alone: as before named queues)."""
        names = self.queues.names
        if self._paused:
            names = tuple(name for name in names if name not in self._paused)
            if not names:  # every queue it serves is paused: look again after the timeout
                return asyncio.sleep(timeout_ms / 1000)
        if names == (DEFAULT_QUEUE,):
            return self.driver.wait_for_work(types, timeout_ms)
        return self.driver.wait_for_work(types, timeout_ms, queues=names)

    def _room(self, limits: dict[str, int]) -> dict[str, int]:
        """How many more jobs of each limited type this runner may hold: its ``concurrency``
        less the jobs of the type running or claimed and ready."""
        held = Counter(attempt.job.type for attempt in self._busy)
        held.update(lease.job.type for lease in self._ready)
        return {job_type: limit - held[job_type] for job_type, limit in limits.items()}

    async def _within_room(self, jobs: list[ClaimedJob], room: dict[str, int]) -> list[ClaimedJob]:
        """The claimed jobs this runner has room for; the others (a claim of several types may
        bring more of a limited type than its room) are handed back at once, at no cost
        (``release``: pending, due now, the attempt given back), for any runner to claim."""
        kept: list[ClaimedJob] = []
        extra: list[ClaimedJob] = []
        for job in jobs:
            left = room.get(job.type)
            if left is None:
                kept.append(job)
            elif left > 0:
                room[job.type] = left - 1
                kept.append(job)
            else:
                extra.append(job)
        if extra:
            try:
                await self.driver.release_many([(job.id, job.lease_token) for job in extra])
            except Exception as exc:  # they run again when their lease ends
                logger.warning(
                    "could not hand back {} job(s) past their type's concurrency: {}; they run "
                    "again after their lease",
                    len(extra),
                    exc,
                )
        return kept

    async def _work_or_limited_slot(self, types: Collection[str], timeout_ms: int) -> None:
        """``wait_for_work`` of the types with room, cut short when a job of a limited type
        frees its slot (its type may be claimed again)."""
        freed = self._limited_freed
        assert freed is not None
        freed.clear()
        work = asyncio.ensure_future(self._driver_wait(types, timeout_ms))
        slot = asyncio.ensure_future(freed.wait())
        try:
            await asyncio.wait((work, slot), return_when=asyncio.FIRST_COMPLETED)
        finally:
            work.cancel()
            slot.cancel()
        if work.done() and not work.cancelled():
            work.result()  # its error, for _wait's backoff

    async def _beat_loop(self) -> None:
        interval_s = self.leases.sweep_interval_s
        supervisor = self._supervisor
        default_timeout = self.settings.default_timeout_ms is not None
        while not supervisor.stopping(HEARTBEAT_LOOP):
            await supervisor.wait(asyncio.sleep(interval_s))
            self.leases.sweep(time.monotonic(), interval_s)
            if default_timeout and self._busy:
                self._time_out_overdue()

    def _time_out_overdue(self) -> None:
        """Interrupt the handlers past the default timeout (those with a timeout of their own
        have a timer): once a sweep, so at most half a heartbeat interval late."""
        now = time.perf_counter()
        for attempt in [attempt for attempt in self._busy if attempt.overdue(now)]:
            attempt.time_out()

    async def _wait(self, waiting: Awaitable[Any]) -> None:
        """Await something ``stop()`` may interrupt (through the supervisor)."""
        try:
            await self._supervisor.wait(waiting)
            self._wait_failures.succeeded()
        except Exception as exc:
            # Back off, then claim again: a wake-up broken by a store outage must not leave an
            # idle runner deaf for a whole poll interval once the store is back.
            failures = self._wait_failures
            delay_ms = min(STORE_BACKOFF(failures.count + 1), self.settings.poll_interval_ms)
            failures.failed(exc, then=f"claiming again in {delay_ms} ms")
            await self._supervisor.wait(asyncio.sleep(delay_ms / 1000))

    async def _let_started_run(self, seen: int) -> int:
        """Before a claim is sized, let the jobs just started run their first step (a few steps
        at most, while more start): a handler that returns at once frees its slot first, so
        the claim takes the whole batch instead of a few now and the rest one round trip later.
        ``seen``: the launch count the last call returned."""
        for _ in range(_SETTLE_STEPS):
            if seen == self._launches:
                break
            seen = self._launches
            await asyncio.sleep(0)
        return seen

    def _to_claim(self, concurrency: int, prefetch: int) -> int:
        """Free slots plus free places among the ready jobs; a slot frees when its handler
        returns and its settle goes on beside the next jobs, ``concurrency + prefetch`` of
        those at most (one claimed batch settling while the next runs)."""
        busy = len(self._busy)
        behind = len(self._attempts) - busy - concurrency - prefetch  # settles past a batch
        free = concurrency + prefetch - busy - len(self._ready)
        return free - behind if behind > 0 else free

    def _settles_behind(self) -> bool:
        """More jobs settling than a claimed batch: the store is behind with the settles, so a
        claim waits for them (a slot freed, or a settle done) until it can take half a batch,
        rather than sending a statement for a few jobs."""
        return self._settling() > self.settings.concurrency + self.prefetch

    def _settling(self) -> int:
        """Attempts whose handler returned and whose settle is still going on."""
        return len(self._attempts) - len(self._busy)

    def _fill_slots(self) -> None:
        """Start ready jobs while there are free slots; one whose lease may have lapsed while
        it waited (the store unreachable) is dropped unrun: it may be another worker's now."""
        ready, concurrency = self._ready, self.settings.concurrency
        now: float | None = None
        while ready and len(self._busy) < concurrency:
            lease = ready.popleft()
            now = now or time.monotonic()
            if self.leases.lapsed(lease, now):
                self._drop_lapsed(lease)
                continue
            self._launch(lease)

    def _drop_lapsed(self, lease: Lease) -> None:
        self.leases.release(lease)
        self.stats["lease_lost"] += 1
        job = lease.job
        logger.bind(job_id=job.id, job_type=job.type).warning(
            "job {} ({}) waited for a slot past its lease with no heartbeat taken (the store "
            "could not be reached); not run here, it runs again after its lease",
            job.type,
            job.id,
        )

    def _lost_while_ready(self, reason: str) -> None:
        """A ready job's lease was refused (reclaimed, or cancelled): drop it unrun."""
        for lease in self._ready:
            if lease.lost:
                self._ready.remove(lease)
                self.leases.release(lease)
                self.stats["cancelled" if reason == "cancelled" else "lease_lost"] += 1
                break
        if self._slot_freed is not None:
            self._slot_freed.set()

    async def _wait_for_slot(self) -> None:
        assert self._slot_freed is not None
        await self._slot_freed.wait()
        self._slot_freed.clear()

    def _launch(self, lease: Lease) -> None:
        job = lease.job
        handler = self.registry.get(job.type)
        if handler is None:  # registered types only are claimed; this is a defect, not input
            self.leases.release(lease)
            raise JobsError(f"claimed job type {job.type!r} has no handler")
        attempt = Attempt(job, handler, self._services, lease)
        self._launches += 1
        self._busy.add(attempt)
        attempt.task = self._track(attempt, attempt.run())

    def _track(self, attempt: Attempt, work: Coroutine[Any, Any, Outcome]) -> asyncio.Task[Outcome]:
        task = asyncio.get_running_loop().create_task(work)
        self._attempts[task] = attempt
        task.add_done_callback(self._on_attempt_done)
        return task

    def _free_slot(self, attempt: Attempt) -> None:
        if attempt in self._busy:
            self._busy.discard(attempt)
            self._freed_limited(attempt)
            if self._ready:
                self._fill_slots()
            if self._slot_freed is not None:
                self._slot_freed.set()

    def _on_attempt_done(self, task: asyncio.Task[Outcome]) -> None:
        attempt = self._attempts.pop(task, None)
        if attempt is not None and attempt in self._busy and not attempt.handler_running:
            self._busy.discard(attempt)
            self._freed_limited(attempt)
            self._fill_slots()
        if self._slot_freed is not None:
            self._slot_freed.set()
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            logger.opt(exception=error).error("a job attempt failed inside the runner")
        elif attempt is not None:  # a detached attempt was counted when it was settled
            self.stats[task.result()] += 1

    def _freed_limited(self, attempt: Attempt) -> None:
        if self._limited_freed is not None and attempt.job.type in self.registry.limits:
            self._limited_freed.set()

    # -- detached attempts ---------------------------------------------------------------------

    def _detach(self, attempt: Attempt) -> None:
        """Settle an attempt whose handler ignored cancellation; its slot stays busy until the
        handler returns (``health()`` names it meanwhile)."""
        job = attempt.job
        self.stats["abandoned"] += 1
        logger.bind(job_id=job.id, job_type=job.type).error(
            "the handler of job {} ({}) ignored cancellation; settled without it",
            job.type,
            job.id,
        )
        if attempt.task is not None:
            self._attempts.pop(attempt.task, None)
        self._track(attempt, attempt.finish(attempt.interruption_error()))


def _nothing() -> None:
    pass


def _counting_clock(driver: object) -> Clock:
    """The clock the counters' minutes follow: the one a driver was given (``ClockedDriver``:
    tests' ManualClock), else this host's."""
    given = driver.clock if isinstance(driver, ClockedDriver) else None
    return given if given is not None else SystemClock()
