"""The driver conformance suite on SQLAlchemyJobStore: a SQLite file, PostgreSQL, and
PostgreSQL through PgBouncer in transaction mode (the README's "Behind PgBouncer" URL)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jobs.testing import OPERATIONS_CASES, DriverConformance, DriverHarness
from tests.integration.sql_store.support import StoreHarness

IMPLEMENTED = {
    "test_job_info_records_created_and_finished_times",
    "test_job_info_keeps_the_trace_context_of_the_enqueue",
    "test_list_jobs_pages_newest_first",
    "test_list_jobs_ties_break_by_id_descending",
    "test_list_jobs_paging_is_stable_while_jobs_arrive",
    "test_find_job_by_key",
    "test_purge_deletes_jobs_in_states_and_frees_their_keys",
    "test_purge_by_type_and_age",
    "test_delete_removes_a_job_in_any_state_but_active_and_frees_its_key",
    "test_delete_refuses_an_active_job_and_unknown_ids",
    "test_a_delete_racing_a_claim_has_one_winner",
    "test_cancel_a_pending_job",
    "test_cancel_an_active_job_revokes_its_lease",
    "test_cancel_refuses_finished_and_unknown_jobs",
    "test_a_cancel_racing_a_complete_has_one_winner",
    "test_a_cancel_racing_a_claim_leaves_the_job_cancelled",
    "test_stats_count_each_type_by_state",
    "test_list_jobs_filters_by_state_and_type",
    "test_requeue_of_a_cancelled_job",
    "test_requeue_refuses_every_other_state",
    "test_requeue_failed_moves_every_failed_job_of_a_type",
    "test_an_operator_retry_racing_a_claim_has_one_outcome",
    "test_a_purge_racing_a_retry_has_one_winner",
    "test_two_operator_retries_give_one_attempt",
    "test_unknown_ids_are_none_or_false",
    "test_requeue_gives_a_failed_job_exactly_one_more_attempt",
    "test_errors_keep_every_failed_attempt_newest_last",
    "test_a_lease_expiring_with_no_attempts_left_is_an_error_of_its_attempt",
    "test_a_reclaimed_delivery_says_so",
}
"""The operations cases the SQL store passes so far: list, find, requeue, cancel, purge,
delete, stats, the errors history (issue 10)."""


class TestSQLAlchemyJobStore(DriverConformance):
    skipped_cases = dict.fromkeys(
        (case for case in OPERATIONS_CASES if case not in IMPLEMENTED),
        "operations SPI not yet implemented on this driver (issue 10)",
    )

    @pytest.fixture(
        params=[
            pytest.param("sqlite", id="sqlite"),
            pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
            pytest.param(
                "pgbouncer", id="pgbouncer", marks=[pytest.mark.postgres, pytest.mark.pgbouncer]
            ),
        ]
    )
    async def driver_harness(
        self, request: pytest.FixtureRequest, tmp_path: Path
    ) -> AsyncIterator[DriverHarness]:
        url = request.getfixturevalue("pgbouncer").url if request.param == "pgbouncer" else None
        harness = StoreHarness(request.param, tmp_path, url=url)
        yield harness
        await harness.cleanup()
