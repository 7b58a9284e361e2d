"""The in-process listing index against a brute-force reading of the same jobs, through
batches of changes large and small (bulk rebuilds and single removals alike)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from jobs.inprocess_index import JobIndex
from jobs.spi import JobState

STATES: tuple[JobState, ...] = ("pending", "active", "completed", "failed", "cancelled")


@dataclass
class Job:
    id: str
    type: str
    state: JobState
    created_at: int
    run_at: int
    queue: str = "default"


def expected_page(jobs: dict[str, Job], state: JobState | None, job_type: str | None) -> list[str]:
    chosen = [
        job
        for job in jobs.values()
        if (state is None or job.state == state) and (job_type is None or job.type == job_type)
    ]
    chosen.sort(key=lambda job: (job.created_at, job.id), reverse=True)
    return [job.id for job in chosen]


@pytest.mark.parametrize("batch", [1, 7, 400])
def test_pages_counts_and_scheduled_match_the_jobs_after_any_batch_of_changes(
    batch: int,
) -> None:
    rng = random.Random(batch)
    index = JobIndex()
    jobs: dict[str, Job] = {}
    now = 1_000
    for step in range(3_000):
        roll = rng.random()
        if roll < 0.35 or not jobs:
            job = Job(f"{step:08d}", rng.choice("ab"), "pending", step, now + rng.choice((0, 50)))
            jobs[job.id] = job
            index.enter(job, now)
        elif roll < 0.9:
            job = jobs[rng.choice(list(jobs))]
            job.state = rng.choice(STATES)
            job.run_at = now + rng.choice((-5, 0, 30))
            index.enter(job, now)
        else:
            job = jobs.pop(rng.choice(list(jobs)))
            index.leave(job)
        if step % batch == 0:
            for state in (None, *STATES):
                for job_type in (None, "a", "b"):
                    ids, _ = index.page(state, job_type, 10_000, None)
                    assert ids == expected_page(jobs, state, job_type)
            counts = index.counts()
            for state in STATES:
                assert counts[state] == sum(job.state == state for job in jobs.values())
            stats = index.stats(now, lambda job_type: None)
            for job_type, row in stats.items():
                assert row.scheduled == sum(
                    job.type == job_type and job.state == "pending" and job.run_at > now
                    for job in jobs.values()
                )
