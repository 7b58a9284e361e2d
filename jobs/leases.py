"""Keeping leases: one heartbeat sweep for every job a runner holds.

Each held job gets a ``Lease``. Every half ``heartbeat_ms`` the keeper beats each lease not
beaten for that long (one sweep for all, instead of a timer per job), so beats are spaced
between half and one ``heartbeat_ms``, well inside the lease. A beat the store refuses means
the job was reclaimed or cancelled (one look at the job tells which): the lease's ``on_lost``
callback runs with the reason, "lease lost" or "cancelled". Before settling, the holder calls
``settling()``, which stops further beats and gives the beat in flight to wait for, so a late
beat never lands after the job was settled (with none in flight, it releases the lease).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from loguru import logger

from .failures import FailureStreak
from .health import StoreContact
from .spi.driver import JobDriver
from .spi.records import ClaimedJob


def _ignore(reason: str) -> None:
    pass


class Lease:
    """The lease of one claimed job, beaten by a ``LeaseKeeper``."""

    __slots__ = ("_beat_task", "confirmed", "job", "last_beat", "lost", "on_lost", "settling")

    def __init__(self, job: ClaimedJob, on_lost: Callable[[str], None], now: float) -> None:
        self.job = job
        self.on_lost = on_lost
        self.last_beat = now
        self.confirmed = now
        """When the store last granted the lease (held from the claim, then each beat it took:
        the beat's send time): it lasts ``lease_ms`` from about then."""
        self.settling = False
        self.lost = False
        self._beat_task: asyncio.Task[None] | None = None


class LeaseKeeper:
    """Extends the leases of held jobs until they are released."""

    def __init__(
        self,
        driver: JobDriver,
        lease_ms: int,
        heartbeat_ms: int,
        contact: StoreContact | None = None,
    ) -> None:
        self.driver = driver
        self.contact = contact or StoreContact()
        self.lease_ms = lease_ms
        self.heartbeat_ms = heartbeat_ms
        self._leases: set[Lease] = set()
        self._failures = FailureStreak("extending leases", level="WARNING")

    def hold(
        self, job: ClaimedJob, on_lost: Callable[[str], None], now: float | None = None
    ) -> Lease:
        """Start beating ``job``'s lease, granted at ``now`` (``time.monotonic()``, read here if
        not given: a claimed batch reads it once); ``on_lost`` runs if the store refuses a
        beat."""
        lease = Lease(job, on_lost, time.monotonic() if now is None else now)
        self._leases.add(lease)
        return lease

    def lapsed(self, lease: Lease, now: float) -> bool:
        """Whether ``lease`` may have run out at the store: no beat was taken for nine tenths
        of ``lease_ms`` (the store could not be reached; the tenth covers the claim's and the
        beat's round trips), so another worker may hold the job by now."""
        return now - lease.confirmed >= 0.9 * self.lease_ms / 1000

    def release(self, lease: Lease) -> None:
        """Stop beating ``lease`` (idempotent).

        Its ``on_lost`` is dropped: it is usually a method of the lease's holder, which holds
        the lease, and the cycle would leave every attempt to the garbage collector (measured
        on the in-process no-op drain: about 3 us a job)."""
        lease.settling = True
        lease.on_lost = _ignore
        self._leases.discard(lease)

    def settling(self, lease: Lease) -> Awaitable[None] | None:
        """No more beats for ``lease``; what to await for the one in flight, None if there is
        none (the common case: no coroutine is made for it, and the lease is released here).
        With one in flight, ``on_lost`` still hears its answer: release the lease after it."""
        lease.settling = True
        beat = lease._beat_task
        if beat is not None and not beat.done():
            return asyncio.shield(beat)
        lease.on_lost = _ignore
        self._leases.discard(lease)
        return None

    @property
    def sweep_interval_s(self) -> float:
        """How often the holder should call ``sweep``: half a heartbeat interval."""
        return self.heartbeat_ms / 2000

    def sweep(self, now: float, interval_s: float) -> None:
        """Send a beat for every lease whose last beat is at least ``interval_s`` old (``now``:
        ``time.monotonic()``, the clock leases are held by)."""
        loop = asyncio.get_running_loop()
        for lease in list(self._leases):
            if lease.settling or now - lease.last_beat < interval_s:
                continue
            beat = lease._beat_task
            if beat is None or beat.done():
                lease.last_beat = now
                lease._beat_task = loop.create_task(
                    self._beat(lease), name=f"jobs.runner.heartbeat:{lease.job.id}"
                )

    async def _beat(self, lease: Lease) -> None:
        job, sent = lease.job, lease.last_beat
        try:
            held = await self.driver.heartbeat(job.id, job.lease_token, self.lease_ms)
        except Exception as exc:
            self.contact.failed(exc)
            self._failures.failed(exc, then=f"job {job.id} keeps running; the next beat retries")
            return
        self.contact.answered()
        self._failures.succeeded()
        if held:
            lease.confirmed = sent
        else:
            reason = await self._why_refused(job)
            logger.bind(job_id=job.id, job_type=job.type).warning(
                "job {} ({}): {}; its handler is interrupted",
                job.type,
                job.id,
                "cancelled by an operator" if reason == "cancelled" else "lost its lease",
            )
            lease.lost = True
            lease.on_lost(reason)

    async def _why_refused(self, job: ClaimedJob) -> str:
        try:
            info = await self.driver.get_job(job.id)
        except Exception:
            return "lease lost"
        return "cancelled" if info is not None and info.state == "cancelled" else "lease lost"
