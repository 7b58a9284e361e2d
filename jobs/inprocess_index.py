"""The in-process driver's listing index: sorted lists that make a page and the stats cheap.

Every job sits in four lists ordered by (created_at, id): all jobs, its state's, its type's and
its (state, type)'s, so a newest-first page is one bisect and a slice whatever the store holds.
Pending jobs also sit in a per-type list ordered by run_at, which splits them into due and
scheduled with one bisect. The driver removes a job before it changes the fields the index reads
(state, type, run_at) and adds it back after.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from typing import Protocol

from .driver import JOB_STATES, JobState, JobStateCounts
from .operations import JobTypeStats

_ListKey = tuple[JobState | None, str | None]
_Entry = tuple[int, str]


class Indexed(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def state(self) -> JobState: ...
    @property
    def created_at(self) -> int: ...
    @property
    def run_at(self) -> int: ...


class JobIndex:
    def __init__(self) -> None:
        self._lists: dict[_ListKey, list[_Entry]] = {}
        self._pending_by_run_at: dict[str, list[_Entry]] = {}

    def add(self, job: Indexed) -> None:
        entry = (job.created_at, job.id)
        for key in _keys(job):
            insort(self._lists.setdefault(key, []), entry)
        if job.state == "pending":
            insort(self._pending_by_run_at.setdefault(job.type, []), (job.run_at, job.id))

    def remove(self, job: Indexed) -> None:
        entry = (job.created_at, job.id)
        for key in _keys(job):
            _discard(self._lists.get(key), entry)
        if job.state == "pending":
            _discard(self._pending_by_run_at.get(job.type), (job.run_at, job.id))

    def page(
        self, state: JobState | None, job_type: str | None, limit: int, before: _Entry | None
    ) -> tuple[list[str], _Entry | None]:
        """Up to ``limit`` ids newest first, strictly older than ``before``; and the last entry
        when more remain (the next page's ``before``)."""
        entries = self._lists.get((state, job_type), [])
        end = len(entries) if before is None else bisect_left(entries, before)
        start = max(0, end - limit)
        chosen = entries[start:end]
        chosen.reverse()
        return [job_id for _, job_id in chosen], chosen[-1] if start > 0 and chosen else None

    def ids(self, state: JobState, job_type: str | None) -> Iterator[str]:
        """The ids in ``state`` (of ``job_type``), oldest first, from a snapshot."""
        return (job_id for _, job_id in list(self._lists.get((state, job_type), [])))

    def counts(self) -> JobStateCounts:
        return {state: len(self._lists.get((state, None), ())) for state in JOB_STATES}

    def stats(self, now: int) -> dict[str, JobTypeStats]:
        result: dict[str, JobTypeStats] = {}
        for (state, job_type), entries in self._lists.items():
            if state is not None or job_type is None or not entries:
                continue
            size = {s: len(self._lists.get((s, job_type), ())) for s in JOB_STATES}
            pending = self._pending_by_run_at.get(job_type, [])
            due = bisect_right(pending, now, key=lambda entry: entry[0])
            result[job_type] = JobTypeStats(
                type=job_type,
                due=due,
                scheduled=len(pending) - due,
                active=size["active"],
                completed=size["completed"],
                failed=size["failed"],
                cancelled=size["cancelled"],
                oldest_due_age_ms=now - pending[0][0] if due else None,
            )
        return dict(sorted(result.items()))


def _keys(job: Indexed) -> tuple[_ListKey, ...]:
    return ((None, None), (job.state, None), (None, job.type), (job.state, job.type))


def _discard(entries: list[_Entry] | None, entry: _Entry) -> None:
    if not entries:
        return
    at = bisect_left(entries, entry)
    if at < len(entries) and entries[at] == entry:
        del entries[at]
