"""The workflow checker: the total-queue rules per job, and the DAG's order read off the ledger.

Each job of each committed workflow is checked as ``check_jobs`` checks a job (completed, every
extra execution explained by a kill of the process that ran the earlier one: a callback runs
once, or again only after its runner was killed mid-handler). On top of that:

- **order**: a job with parents (a chain's next step, a group's callback) must start after
  every execution of each parent is over in the ledger, the completing one's ``end`` included.
  The ledger is one ``O_APPEND`` file written before each write returns, so its line order is
  the order events happened in: a parent's handler writes ``end`` before its runner settles
  it, and a dependent is released only by that settle, so a dependent's ``start`` above any
  line of a parent means it was released before that parent completed;
- **shape**: the store holds one job per step of the workflow as built, each with the parents
  the shape says (``depends_on``), and the ledger's ``wf``/``step`` of a job match the store's;
- **rolled back**: no job of a workflow whose outbox transaction rolled back runs (such a run
  is also unexpected: the store has no such job).

**lost** counts jobs: every job of every committed workflow must end completed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobs import JobInfo

from .checker import Verdict, _check_executions, _delivery, _left_in

__all__ = ["CommittedWorkflow", "check_workflows"]


@dataclass(frozen=True)
class CommittedWorkflow:
    """A workflow the run committed: its number ``n``, the parents of each step as built
    (``shapes.Shape.parents``), and its jobs as the store reports them (``get_workflow``;
    None when the store has none)."""

    n: int
    parents: tuple[tuple[int, ...], ...]
    stored: Sequence[JobInfo] | None


def check_workflows(
    committed: Sequence[CommittedWorkflow],
    rolled_back: Collection[int],
    events: Sequence[Mapping[str, Any]],
    killed: Collection[int],
) -> Verdict:
    verdict = Verdict(
        jobs=sum(len(w.parents) for w in committed),
        kills=len(killed),
        workflows=len(committed),
        callback_duplicates=0,
    )
    lines: dict[str, list[tuple[int, Mapping[str, Any]]]] = defaultdict(list)
    for position, event in enumerate(events, start=1):  # ledger lines count from 1
        if event["event"] in ("start", "end") and "wf" in event:
            lines[event["job"]].append((position, event))
    started = {job for job, seen in lines.items() if any(e["event"] == "start" for _, e in seen)}
    verdict.executions = sum(
        1 for seen in lines.values() for _, event in seen if event["event"] == "start"
    )
    for n in sorted({event["wf"] for seen in lines.values() for _, event in seen}):
        if n in set(rolled_back):
            verdict.problems.append(f"workflow {n} rolled back, yet a job of it ran")
    known: set[str] = set()
    for workflow in committed:
        known |= _check_workflow(workflow, lines, set(killed), verdict)
    verdict.unexpected = len(started - known)
    return verdict


def _check_workflow(
    workflow: CommittedWorkflow,
    lines: Mapping[str, list[tuple[int, Mapping[str, Any]]]],
    killed: set[int],
    verdict: Verdict,
) -> set[str]:
    """Check one committed workflow; the ids of its stored jobs."""
    n, parents = workflow.n, workflow.parents
    if workflow.stored is None:
        verdict.lost += len(parents)
        verdict.lost_jobs.append(f"workflow {n}: not in the store ({len(parents)} jobs)")
        return set()
    by_step = _jobs_by_step(workflow, verdict)
    for step in range(len(parents)):
        info = by_step.get(step)
        if info is None:
            verdict.lost += 1
            verdict.lost_jobs.append(f"workflow {n} step {step}: not in the store")
            continue
        name = f"workflow {n}'s {_role(parents[step])} (step {step}, job {info.id})"
        stored = sorted(_step_of(by_step, parent) for parent in info.depends_on)
        if stored != sorted(parents[step]):
            verdict.problems.append(
                f"{name}: the store runs it after steps {stored}, built after {list(parents[step])}"
            )
        for _, event in lines.get(info.id, []):
            if (event["wf"], event["step"]) != (n, step):
                verdict.problems.append(
                    f"{name}: the ledger ran it as workflow {event['wf']} step {event['step']}"
                )
                break
        if info.state != "completed":
            verdict.lost += 1
            verdict.lost_jobs.append(f"{name}: {_left_in(info)}")
            continue
        runs = [event for _, event in lines.get(info.id, []) if event["event"] == "start"]
        _check_executions(info.id, info, runs, killed, verdict, name)
        if len(parents[step]) > 1 and len(runs) > 1:
            verdict.callback_duplicates = (verdict.callback_duplicates or 0) + 1
        for parent in parents[step]:
            parent_info = by_step.get(parent)
            if parent_info is not None:
                _check_order(name, info.id, parent, parent_info.id, lines, verdict)
    return {info.id for info in workflow.stored}


def _jobs_by_step(workflow: CommittedWorkflow, verdict: Verdict) -> dict[int, JobInfo]:
    by_step: dict[int, JobInfo] = {}
    assert workflow.stored is not None
    for info in workflow.stored:
        step = info.payload.get("step") if isinstance(info.payload, dict) else None
        if not isinstance(step, int) or not 0 <= step < len(workflow.parents):
            verdict.problems.append(f"workflow {workflow.n}: a stored job {info.id} of no step")
        elif step in by_step:
            verdict.problems.append(
                f"workflow {workflow.n} step {step}: stored twice ({by_step[step].id}, {info.id})"
            )
        else:
            by_step[step] = info
    return by_step


def _step_of(by_step: Mapping[int, JobInfo], job_id: str) -> int:
    """The step of a stored parent id; -1 for an id that is no job of the workflow."""
    return next((step for step, info in by_step.items() if info.id == job_id), -1)


def _check_order(
    name: str,
    job_id: str,
    parent_step: int,
    parent_id: str,
    lines: Mapping[str, list[tuple[int, Mapping[str, Any]]]],
    verdict: Verdict,
) -> None:
    """The job's first start comes after every ledger line of its parent, the completing
    delivery's ``end`` among them."""
    starts = [position for position, event in lines.get(job_id, []) if event["event"] == "start"]
    seen = lines.get(parent_id, [])
    parent_starts = [event for _, event in seen if event["event"] == "start"]
    if not starts or not parent_starts:
        return  # no execution at all is reported by _check_executions
    completing = _delivery(max(parent_starts, key=_delivery))
    ends = [p for p, e in seen if e["event"] == "end" and _delivery(e) == completing]
    if not ends:
        verdict.problems.append(
            f"{name}: its parent step {parent_step} (job {parent_id}) completed, yet the "
            "completing execution never finished in the ledger"
        )
        return
    first_start, last_parent_line = min(starts), max(position for position, _ in seen)
    if first_start < last_parent_line:
        what = "finished" if last_parent_line == max(ends) else "ran again"
        verdict.problems.append(
            f"{name} started (ledger line {first_start}) before its parent step {parent_step} "
            f"(job {parent_id}) {what} (line {last_parent_line})"
        )


def _role(parents: tuple[int, ...]) -> str:
    if len(parents) > 1:
        return "callback"
    return "step" if parents else "first job"
