"""Test support that ships: helpers for applications' tests, and the driver conformance suite.

An application's tests run jobs when they say so, on the in-process driver and a ManualClock
(the pytest plugin ``jobs.pytest_plugin`` offers them as fixtures)::

    async with await builder_for_tests([AppConfiguration], clock=clock).run() as context:
        await context.get_value(JOB_QUEUE).enqueue(SEND_RECEIPT, {"invoice_id": 7})
        await assert_enqueued(context, SEND_RECEIPT, {"invoice_id": 7})
        [run] = await run_jobs(context, advance_clock=True)   # through retries' backoffs
        assert run.state == "completed"

A third-party driver proves itself by subclassing ``DriverConformance`` in a pytest module and
providing a ``driver_harness`` fixture (needs pytest and pytest-asyncio)::

    class TestMyDriver(DriverConformance):
        @pytest.fixture
        async def driver_harness(self):
            harness = MyHarness()
            yield harness
            await harness.cleanup()
"""

from .app_context import (
    TEST_CLOCK,
    JobsTestConfiguration,
    builder_for_tests,
    run_schedules,
)
from .conformance import DriverConformance, DriverHarness
from .operations import OPERATIONS_CASES, OperationsConformance
from .requests import new_request
from .run import JobRun, RunJobsError, run_jobs
from .waiting import EnqueuedJob, assert_enqueued, enqueued

__all__ = [
    # application tests
    "builder_for_tests",
    "run_jobs",
    "run_schedules",
    "enqueued",
    "assert_enqueued",
    "JobRun",
    "EnqueuedJob",
    "RunJobsError",
    "JobsTestConfiguration",
    "TEST_CLOCK",
    # driver conformance
    "OPERATIONS_CASES",
    "DriverConformance",
    "DriverHarness",
    "OperationsConformance",
    "new_request",
]
