"""The total-queue checker: what a chaos run's ledger and store say, held against the rules.

Like Jepsen's total-queue checker, it compares what was acknowledged with what came out:

- **lost**: an acknowledged job (or committed order) that did not complete;
- **unexpected**: an execution of a job nobody enqueued (or of an order that rolled back);
- **duplicates**: jobs executed more than once: at-least-once allows them, but each earlier
  execution must be explained by a kill of the process that ran it;
- **unexplained**: anything else out of rule: a duplicate whose earlier runner was not killed,
  one delivery run twice (the same attempt and stall count: a lease fenced nothing), a
  completed job whose store attempts differ from its last execution's attempt, a job that ran
  again without a stall counted for it, an attempt spent by a fault (the chaos handlers never
  fail: every job completes on attempt 1, kills and outages cost stalls only), claims that
  never started in a run without kills.

A delivery is told by its attempt and its stall count (``ctx.attempt``, ``ctx.stalls``): a
reclaim after a kill runs the same attempt with one more stall.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs import JobInfo


@dataclass
class Verdict:
    jobs: int = 0
    kills: int = 0
    lost: int = 0
    unexpected: int = 0
    duplicates: int = 0
    executions: int = 0
    stalls: int = 0
    """Stalls the store counted over the jobs checked: each kill of a worker holding a job."""
    problems: list[str] = field(default_factory=list)
    lost_jobs: list[str] = field(default_factory=list)
    """Each lost job (or order) and the state the store left it in, for the failure message."""
    effects: int | None = None
    """The effects variant: effect rows committed (one per job when each committed once)."""
    effect_duplicates: int | None = None
    """Jobs whose effect was committed more than once (0 through an inbox)."""
    workflows: int | None = None
    """The workflow variant: the committed workflows checked (``jobs`` counts their jobs)."""
    callback_duplicates: int | None = None
    """The workflow variant: callbacks (jobs with several parents) that ran more than once,
    each explained by a kill or counted unexplained: how often a kill hit one mid-handler."""

    @property
    def unexplained(self) -> int:
        return len(self.problems)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.unexpected == 0 and self.unexplained == 0

    def as_row(self) -> dict[str, int]:
        return {
            "jobs": self.jobs,
            "kills": self.kills,
            "executions": self.executions,
            "lost": self.lost,
            "duplicates": self.duplicates,
            "stalls": self.stalls,
            "unexpected": self.unexpected,
            "unexplained": self.unexplained,
        }


def _starts_by_job(events: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    starts: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for event in events:
        if event["event"] == "start":
            starts[event["job"]].append(event)
    return starts


def check_jobs(
    acknowledged: Collection[str],
    infos: Mapping[str, JobInfo | None],
    events: Sequence[Mapping[str, Any]],
    killed: Collection[int],
    ambiguous: Collection[str] = (),
) -> Verdict:
    """Check a job run: every acknowledged job completed, each execution accounted for.

    ``ambiguous`` jobs are those whose enqueue raised: the store may or may not have them, so
    running them is not unexpected (and not running them is not lost).
    """
    verdict = Verdict(jobs=len(acknowledged), kills=len(killed))
    starts = _starts_by_job(events)
    verdict.executions = sum(len(runs) for runs in starts.values())
    verdict.unexpected = len(set(starts) - set(acknowledged) - set(ambiguous))
    for job_id in acknowledged:
        info = infos.get(job_id)
        if info is None or info.state != "completed":
            verdict.lost += 1
            verdict.lost_jobs.append(f"job {job_id}: {_left_in(info)}")
            continue
        _check_executions(job_id, info, starts.get(job_id, []), set(killed), verdict)
    return verdict


def _check_executions(
    job_id: str,
    info: JobInfo,
    runs: list[Mapping[str, Any]],
    killed: set[int],
    verdict: Verdict,
    name: str | None = None,
) -> None:
    """One completed job's executions against the rules; ``name`` is how problems name the
    job (``job <id>`` by default)."""
    name = name or f"job {job_id}"
    if not runs:
        verdict.problems.append(f"{name} completed without an execution in the ledger")
        return
    if len(runs) > 1:
        verdict.duplicates += 1
    verdict.stalls += info.stalls
    deliveries = [_delivery(run) for run in runs]
    if len(set(deliveries)) != len(deliveries):
        verdict.problems.append(
            f"{name}: one delivery ran twice (attempt, stalls: {sorted(deliveries)})"
        )
    last = max(runs, key=_delivery)
    for run in runs:
        if run is not last and run["pid"] not in killed:
            verdict.problems.append(
                f"{name}: attempt {run['attempt']} ran in pid {run['pid']}, which was "
                f"not killed, and the job ran again (attempt {last['attempt']})"
            )
    if info.attempts != last["attempt"]:
        verdict.problems.append(
            f"{name}: the store counts {info.attempts} attempts, the last execution "
            f"was attempt {last['attempt']}"
        )
    if info.attempts > 1:
        verdict.problems.append(
            f"{name} spent {info.attempts} attempts, though its handler never fails: a "
            "kill or an outage cost it an attempt, not a stall"
        )
    if info.stalls < len(runs) - 1:
        verdict.problems.append(f"{name} ran {len(runs)} times with {info.stalls} stall(s) counted")
    if not killed and info.attempts != len(runs):
        verdict.problems.append(f"{name}: {info.attempts} claims, {len(runs)} executions")


def check_effects(
    verdict: Verdict, acknowledged: Collection[str], counts: Mapping[str, int], inbox: bool
) -> None:
    """The effects variant: every acknowledged job committed its effect, and, through an
    inbox, exactly once (without one, a duplicate is the at-least-once the inbox prevents)."""
    verdict.effects = sum(counts.values())
    verdict.effect_duplicates = sum(1 for count in counts.values() if count > 1)
    expected = set(acknowledged)
    missing = [job_id for job_id in acknowledged if counts.get(job_id, 0) == 0]
    for job_id in missing[:10]:
        verdict.problems.append(f"job {job_id}: no effect committed")
    for job_id in sorted(set(counts) - expected)[:10]:
        verdict.problems.append(f"an effect of job {job_id}, which nobody enqueued")
    if inbox:
        for job_id, count in sorted(counts.items()):
            if count > 1:
                verdict.problems.append(
                    f"job {job_id}: its effect committed {count} times through the inbox"
                )


def check_orders(
    committed: Collection[int],
    rolled_back: Collection[int],
    infos: Mapping[str, JobInfo | None],
    events: Sequence[Mapping[str, Any]],
    killed: Collection[int],
) -> Verdict:
    """Check an outbox run: each committed order has exactly one completed job, others none."""
    verdict = Verdict(jobs=len(committed), kills=len(killed))
    starts = _starts_by_job(events)
    verdict.executions = sum(len(runs) for runs in starts.values())
    jobs_of: dict[int, set[str]] = defaultdict(set)
    for job_id, runs in starts.items():
        for run in runs:
            jobs_of[run["order"]].add(job_id)
    verdict.unexpected = sum(1 for order in jobs_of if order not in set(committed))
    for order in set(rolled_back) & set(jobs_of):
        verdict.problems.append(f"order {order} rolled back, yet its job ran")
    for order in committed:
        job_ids = jobs_of.get(order, set())
        if len(job_ids) > 1:
            verdict.problems.append(f"order {order} has {len(job_ids)} jobs: {sorted(job_ids)}")
        done = [job_id for job_id in job_ids if _completed(infos.get(job_id))]
        if not done:
            verdict.lost += 1
            left = "; ".join(_left_in(infos.get(job_id)) for job_id in sorted(job_ids))
            verdict.lost_jobs.append(f"order {order}: {left or 'no job ran'}")
            continue
        info = infos[done[0]]
        assert info is not None
        _check_executions(done[0], info, starts[done[0]], set(killed), verdict)
    return verdict


def _delivery(run: Mapping[str, Any]) -> tuple[int, int]:
    """A delivery's attempt and stall count (a ledger from before stalls: 0 stalls)."""
    return int(run["attempt"]), int(run.get("stalls", 0))


def _left_in(info: JobInfo | None) -> str:
    if info is None:
        return "not in the store"
    error = f", {info.last_error}" if info.last_error else ""
    return (
        f"{info.state} after {info.attempts}/{info.max_attempts} attempts and "
        f"{info.stalls}/{info.max_stalls} stalls{error}"
    )


def _completed(info: JobInfo | None) -> bool:
    return info is not None and info.state == "completed"
