"""Model-based test of the driver SPI: Hypothesis stateful testing against ``SpiModel``.

Random sequences of enqueue (with keys), claim, heartbeat, complete, retry (counting the
attempt or not), release, fail, cancel, operator retry (``requeue``) and clock advances run on
a real driver and on the model; after every step each job's state, attempts, stalls,
max_attempts, max_stalls, run_at, key and errors, and the counts, must agree. Hypothesis
shrinks a failure to a minimal sequence of calls. A third-party driver runs it with its
conformance harness (needs ``hypothesis``)::

    def test_my_driver_follows_the_model():
        run_spi_model(MyHarness, max_examples=20)

Each example gets a fresh harness (a fresh store) and its own event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Protocol, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from jobs.spi import JobDriver

from .helpers import DriverHarness
from .model import SpiModel
from .requests import new_request

LEASE_MS = 10_000
TYPES = ("t",)
KEYS = (None, None, "k1", "k2", "k3")

T = TypeVar("T")


class CleanableHarness(DriverHarness, Protocol):
    async def cleanup(self) -> None:
        """Close every driver opened and remove the store."""
        ...


class SpiStateMachine(RuleBasedStateMachine):
    """The machine; ``spi_state_machine`` makes a subclass bound to a harness factory."""

    make_harness: ClassVar[Callable[[], CleanableHarness]]
    operations: ClassVar[bool] = True
    jobs = Bundle("jobs")
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.harness = type(self).make_harness()
        self.driver: JobDriver = self.run(self.harness.driver())
        self.model = SpiModel()
        self.errors = 0

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(call)

    @property
    def now(self) -> int:
        return self.harness.clock.now_ms()

    def teardown(self) -> None:
        try:
            self.run(self.harness.cleanup())
        finally:
            self.loop.close()

    # -- steps ---------------------------------------------------------------------------

    @rule(
        target=jobs,
        key=st.sampled_from(KEYS),
        delay_ms=st.sampled_from([0, 0, 1_000, 5_000]),
        max_attempts=st.integers(1, 3),
        max_stalls=st.sampled_from([0, 1, 2, 10]),
    )
    def enqueue(self, key: str | None, delay_ms: int, max_attempts: int, max_stalls: int) -> str:
        request = new_request(
            key=key, delay_ms=delay_ms, max_attempts=max_attempts, max_stalls=max_stalls
        )
        stored = self.run(self.driver.enqueue(request))
        expected = self.model.enqueue(
            request.id, key, max_attempts, self.now + delay_ms, max_stalls
        )
        assert stored == (request.id if expected else None), f"enqueue returned {stored}"
        return request.id  # one never stored stands for an unknown id

    @rule(target=leases, limit=st.integers(1, 3))
    def claim(self, limit: int) -> Any:
        now = self.now
        exhausted = self.model.exhausted(now)
        claimed = self.run(self.driver.claim(limit, LEASE_MS, TYPES))
        self.model.check_claim(claimed, limit, now)
        self.model.apply_claim(claimed, LEASE_MS, now)
        for job_id in exhausted:
            info = self.run(self.driver.get_job(job_id))
            if info is not None and info.state == "failed":
                self.model.expire(job_id)
        return multiple(*[(job.id, job.lease_token) for job in claimed])

    @rule(lease=leases)
    def heartbeat(self, lease: tuple[str, str]) -> None:
        held = self.run(self.driver.heartbeat(*lease, LEASE_MS))
        assert held == self.model.heartbeat(*lease, LEASE_MS, self.now)

    @rule(lease=leases)
    def complete(self, lease: tuple[str, str]) -> None:
        assert self.run(self.driver.complete(*lease)) == self.model.complete(*lease)

    @rule(lease=leases, delay_ms=st.sampled_from([0, 500, 3_000]), counted=st.booleans())
    def retry(self, lease: tuple[str, str], delay_ms: int, counted: bool) -> None:
        error = self._error()
        done = self.run(
            self.driver.retry(*lease, delay_ms=delay_ms, error=error, count_attempt=counted)
        )
        assert done == self.model.retry(*lease, delay_ms, error, self.now, counted)

    @rule(lease=leases)
    def release(self, lease: tuple[str, str]) -> None:
        assert self.run(self.driver.release(*lease)) == self.model.release(*lease, self.now)

    @rule(held=st.lists(leases, max_size=3, unique_by=lambda lease: lease[0]))
    def release_many(self, held: list[tuple[str, str]]) -> None:
        done = self.run(self.driver.release_many(held))
        assert done == [self.model.release(*lease, self.now) for lease in held]

    @rule(lease=leases)
    def fail(self, lease: tuple[str, str]) -> None:
        error = self._error()
        done = self.run(self.driver.fail(*lease, error=error))
        assert done == self.model.fail(*lease, error)

    @precondition(lambda self: self.operations)
    @rule(job_id=jobs)
    def cancel(self, job_id: str) -> None:
        assert self.run(self.driver.cancel(job_id)) == self.model.cancel(job_id)

    @precondition(lambda self: self.operations)
    @rule(job_id=jobs)
    def requeue(self, job_id: str) -> None:
        assert self.run(self.driver.requeue(job_id)) == self.model.requeue(job_id, self.now)

    @rule(ms=st.sampled_from([1, 999, 2_500, LEASE_MS // 2, LEASE_MS, LEASE_MS * 2]))
    def advance(self, ms: int) -> None:
        self.harness.clock.advance(ms)

    def _error(self) -> str:
        self.errors += 1
        return f"RuntimeError: step {self.errors}"

    # -- after every step ----------------------------------------------------------------

    @invariant()
    def driver_agrees_with_the_model(self) -> None:
        for job_id, job in self.model.jobs.items():
            info = self.run(self.driver.get_job(job_id))
            assert info is not None, f"{job_id} vanished"
            seen = (info.state, info.attempts, info.max_attempts, info.key, info.last_error,
                    info.stalls, info.max_stalls)  # fmt: skip
            wanted = (job.state, job.attempts, job.max_attempts, job.key, job.last_error,
                      job.stalls, job.max_stalls)  # fmt: skip
            assert seen == wanted, f"{job_id}: driver {seen}, model {wanted}"
            if job.state == "pending":
                run_at = round(info.run_at.timestamp() * 1000)
                assert run_at == job.run_at, f"{job_id}: run_at {run_at}, model {job.run_at}"
            if self.operations:
                errors = [error.error for error in info.errors]
                assert errors == job.errors[-20:], f"{job_id}: errors {errors}"
        assert self.run(self.driver.counts()) == self.model.counts()
        if self.operations:
            for key, job_id in self.model.keys.items():
                found = self.run(self.driver.find_job(key))
                assert (found.id if found else None) == job_id, f"find_job({key!r}): {found}"


def spi_state_machine(
    make_harness: Callable[[], CleanableHarness], *, operations: bool = True
) -> type[SpiStateMachine]:
    """The state machine class for drivers from ``make_harness``.

    ``operations=False`` leaves out cancel and requeue and the checks of ``JobInfo.errors``, for
    a driver that does not implement the operations SPI yet.
    """
    name = "SpiStateMachineOf" + getattr(make_harness, "__name__", "Harness")
    namespace = {"make_harness": staticmethod(make_harness), "operations": operations}
    return type(name, (SpiStateMachine,), namespace)


def run_spi_model(
    make_harness: Callable[[], CleanableHarness],
    *,
    operations: bool = True,
    max_examples: int = 10,
    steps: int = 30,
) -> None:
    """Run ``max_examples`` random sequences of up to ``steps`` calls; raise on a mismatch."""
    machine = spi_state_machine(make_harness, operations=operations)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=max_examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
