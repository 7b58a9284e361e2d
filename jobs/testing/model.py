"""A pure-Python model of the driver SPI's rules: states, attempts, lease tokens, keys.

``jobs.testing.stateful`` runs random call sequences on a real driver and on this model side by
side and compares them after every step. The model is the SPI's contract in small: where the
SPI leaves a choice to the driver (which due jobs a short claim takes, whether an expired
lease past its stalls is failed by this claim or a later one), the model accepts what the
driver chose if the contract allows it, and says why not otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.spi import DEFAULT_MAX_STALLS, JOB_STATES, ClaimedJob, JobState, stalled_error


@dataclass(slots=True)
class ModelJob:
    id: str
    key: str | None
    max_attempts: int
    run_at: int
    state: JobState = "pending"
    attempts: int = 0
    token: str | None = None
    lease_until: int = 0
    errors: list[str] = field(default_factory=list)
    max_stalls: int = DEFAULT_MAX_STALLS
    stalls: int = 0

    @property
    def last_error(self) -> str | None:
        return self.errors[-1] if self.errors else None


class SpiModel:
    """The expected store. Each method returns what the driver must answer."""

    def __init__(self) -> None:
        self.jobs: dict[str, ModelJob] = {}
        self.keys: dict[str, str] = {}

    # -- producer ------------------------------------------------------------------------------

    def enqueue(
        self,
        job_id: str,
        key: str | None,
        max_attempts: int,
        run_at: int,
        max_stalls: int = DEFAULT_MAX_STALLS,
    ) -> bool:
        """Whether the job is stored (False: a live job holds ``key``)."""
        if key is not None and key in self.keys:
            return False
        self.jobs[job_id] = ModelJob(job_id, key, max_attempts, run_at, max_stalls=max_stalls)
        if key is not None:
            self.keys[key] = job_id
        return True

    # -- claim ---------------------------------------------------------------------------------

    def claimable(self, now: int) -> set[str]:
        """Jobs a claim may lease now: due pending ones and expired ones with stalls left."""
        due = {job.id for job in self.jobs.values() if job.state == "pending" and job.run_at <= now}
        return due | self._expired(now, exhausted=False)

    def exhausted(self, now: int) -> set[str]:
        """Expired leases whose next stall passes max_stalls: a claim fails them, now or
        later."""
        return self._expired(now, exhausted=True)

    def _expired(self, now: int, *, exhausted: bool) -> set[str]:
        return {
            job.id
            for job in self.jobs.values()
            if job.state == "active"
            and job.lease_until <= now
            and (job.stalls >= job.max_stalls) == exhausted
        }

    def check_claim(self, claimed: list[ClaimedJob], limit: int, now: int) -> None:
        """Raise AssertionError unless ``claimed`` is a claim the contract allows."""
        claimable = self.claimable(now)
        ids = [job.id for job in claimed]
        assert len(ids) == len(set(ids)), f"a claim returned a job twice: {ids}"
        assert len(ids) <= limit, f"a claim of {limit} returned {len(ids)} jobs"
        stray = set(ids) - claimable
        assert not stray, f"claimed jobs that were not claimable: {sorted(stray)}"
        if not self.exhausted(now):
            expected = min(limit, len(claimable))
            assert len(ids) == expected, f"claimed {len(ids)} of {len(claimable)} (limit {limit})"
        for job in claimed:
            model = self.jobs[job.id]
            reclaim = model.state == "active"
            attempt, stalls = model.attempts + 1, model.stalls
            if reclaim:
                attempt, stalls = model.attempts, model.stalls + 1
            assert job.attempt == attempt, f"{job.id}: attempt {job.attempt}, not {attempt}"
            assert job.stalls == stalls, f"{job.id}: stalls {job.stalls}, not {stalls}"
            assert job.reclaimed == reclaim, f"{job.id}: reclaimed {job.reclaimed}"
            assert job.max_attempts == model.max_attempts, f"{job.id}: max_attempts"
            assert job.key == model.key, f"{job.id}: key {job.key!r}"
            assert job.lease_token not in (None, "", model.token), f"{job.id}: token not new"

    def apply_claim(self, claimed: list[ClaimedJob], lease_ms: int, now: int) -> None:
        for job in claimed:
            model = self.jobs[job.id]
            if model.state == "active":
                model.stalls += 1
            else:
                model.attempts += 1
            model.state = "active"
            model.token = job.lease_token
            model.lease_until = now + lease_ms

    def expire(self, job_id: str) -> None:
        """The driver failed an expired lease past its stalls (it may, during any claim)."""
        job = self.jobs[job_id]
        job.stalls += 1
        self._finish(job, "failed", stalled_error(job.stalls, job.max_stalls))

    # -- the lease holder ----------------------------------------------------------------------

    def holds(self, job_id: str, token: str) -> bool:
        job = self.jobs.get(job_id)
        return job is not None and job.state == "active" and job.token == token

    def heartbeat(self, job_id: str, token: str, lease_ms: int, now: int) -> bool:
        if not self.holds(job_id, token):
            return False
        self.jobs[job_id].lease_until = now + lease_ms
        return True

    def complete(self, job_id: str, token: str) -> bool:
        if not self.holds(job_id, token):
            return False
        self._finish(self.jobs[job_id], "completed", None)
        return True

    def retry(
        self,
        job_id: str,
        token: str,
        delay_ms: int,
        error: str,
        now: int,
        count_attempt: bool = True,
    ) -> bool:
        if not self.holds(job_id, token):
            return False
        job = self.jobs[job_id]
        job.errors.append(error)
        job.state, job.token, job.run_at = "pending", None, now + delay_ms
        if not count_attempt:
            job.attempts -= 1
        return True

    def release(self, job_id: str, token: str, now: int) -> bool:
        if not self.holds(job_id, token):
            return False
        job = self.jobs[job_id]
        job.state, job.token, job.run_at = "pending", None, now
        job.attempts -= 1
        return True

    def fail(self, job_id: str, token: str, error: str) -> bool:
        if not self.holds(job_id, token):
            return False
        self._finish(self.jobs[job_id], "failed", error)
        return True

    # -- operations ----------------------------------------------------------------------------

    def cancel(self, job_id: str) -> bool:
        job = self.jobs.get(job_id)
        if job is None or job.state not in ("pending", "active"):
            return False
        self._finish(job, "cancelled", None)
        return True

    def requeue(self, job_id: str, now: int) -> bool:
        job = self.jobs.get(job_id)
        if job is None or job.state not in ("failed", "cancelled"):
            return False
        job.state, job.run_at, job.max_attempts = "pending", now, job.attempts + 1
        return True

    # -- views ---------------------------------------------------------------------------------

    def counts(self) -> dict[JobState, int]:
        counts = dict.fromkeys(JOB_STATES, 0)
        for job in self.jobs.values():
            counts[job.state] += 1
        return counts

    def _finish(self, job: ModelJob, state: JobState, error: str | None) -> None:
        job.state, job.token = state, None
        if error is not None:
            job.errors.append(error)
