"""Conformance: a malformed record planted behind the API's back fails alone (issue 27, item 1).

The queue checks every option before it writes (``conformance_options``); a store may still hold
a record no worker can use (a hand edit, another version, a bug). A claim must fail that one
record ('malformed job record: ...', naming the field) and lease its batch-mates as usual.

The harness plants the record: an optional method ``corrupt(job_id) -> str`` makes the stored
job ``job_id`` malformed in the store's own terms (e.g. a NaN ``timeout_ms``) and returns the
field's name. A harness without it (a driver with no way to hold such a record, such as the
in-process one, which stores what the queue hands it) skips these cases.
"""

from __future__ import annotations

import pytest

from .helpers import ALL, LEASE_MS, DriverHarness, enqueue, info_of


class MalformedRecordConformance:
    async def test_a_malformed_record_fails_alone_and_its_batch_mates_run(
        self, driver_harness: DriverHarness
    ) -> None:
        corrupt = getattr(driver_harness, "corrupt", None)
        if corrupt is None:
            pytest.skip("the harness has no corrupt(job_id): this store cannot hold one")
        driver = await driver_harness.driver()
        now = driver_harness.clock.now_ms()
        ids = [await enqueue(driver, run_at_ms=now - 3_000 + n, timeout_ms=1_000) for n in range(5)]
        bad = ids[2]
        field = await corrupt(bad)
        claimed = await driver.claim(10, LEASE_MS, ALL)
        assert sorted(job.id for job in claimed) == sorted(ids[:2] + ids[3:])
        assert all(job.timeout_ms == 1_000 for job in claimed)
        info = await info_of(driver, bad)
        assert info.state == "failed"
        assert info.last_error is not None
        assert info.last_error.startswith("malformed job record: ")
        assert field in info.last_error
        for job in claimed:
            assert await driver.complete(job.id, job.lease_token)
        listed = {job.id: job.state for job in (await driver.list_jobs(limit=10)).jobs}
        assert listed == {job_id: "failed" if job_id == bad else "completed" for job_id in ids}
        driver_harness.clock.advance(LEASE_MS)
        assert await driver.claim(10, LEASE_MS, ALL) == []
