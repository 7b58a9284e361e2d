"""Workflows: jobs that run after other jobs (a DAG), enqueued as one unit.

``chain(a, b, c)`` runs b after a and c after b; ``group(a, b, c)`` runs them side by side and
``group(...).then(cb)`` runs ``cb`` once all of them completed; ``Workflow().add(job,
after=[...])`` builds any DAG. A job runs only after each of its parents completed; its
handler reads their results in ``ctx.parent_results``. When a parent fails for good or is
cancelled, its dependents end ``cancelled`` with a reason naming it, unless the edge says
``on_failure="continue"`` (the dependent then runs once that parent finished, whatever the end).

A workflow is checked whole before any write (``steps``): a parent that is not a job of this
workflow, a repeated job, a cycle, or a keyed job (a key already held would drop one job of the
DAG) is refused. ``JobQueue.enqueue_workflow`` then stores every job in one driver call
(``jobs.spi.WorkflowStore``): the workflow exists whole or not at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from .errors import JobsError
from .new_job import NewJob

__all__ = ["OnFailure", "Step", "Workflow", "WorkflowError", "chain", "group"]

OnFailure = Literal["cancel", "continue"]


class WorkflowError(JobsError, ValueError):
    """A workflow that cannot be enqueued: a cycle, an unknown parent, a repeated or keyed job."""


@dataclass(frozen=True, slots=True)
class Step:
    """A job of a workflow and its parents (``on_failure`` applies to each of its edges)."""

    job: NewJob
    after: tuple[int, ...] = ()
    on_failure: OnFailure = "cancel"


class Workflow:
    """A DAG of jobs. ``add`` returns the job's handle for later ``after=`` lists."""

    def __init__(self) -> None:
        self._steps: list[Step] = []
        self._handles: dict[int, int] = {}  # id(NewJob) -> index

    def add(
        self,
        job: NewJob,
        *,
        after: Iterable[NewJob] = (),
        on_failure: OnFailure = "cancel",
    ) -> NewJob:
        """Add ``job`` to run after each job of ``after`` (added to this workflow before)."""
        if on_failure not in ("cancel", "continue"):
            raise WorkflowError(f"on_failure must be 'cancel' or 'continue', got {on_failure!r}")
        if id(job) in self._handles:
            raise WorkflowError(f"job {_name(job)} is in this workflow already")
        parents = []
        for parent in after:
            index = self._handles.get(id(parent))
            if index is None or self._steps[index].job is not parent:
                raise WorkflowError(
                    f"job {_name(job)} is to run after {_name(parent)}, which is not a job of "
                    "this workflow (add it first)"
                )
            parents.append(index)
        self._handles[id(job)] = len(self._steps)
        self._steps.append(Step(job, tuple(dict.fromkeys(parents)), on_failure))
        return job

    def then(self, callback: NewJob, *, on_failure: OnFailure = "cancel") -> Workflow:
        """Add ``callback`` after every job that no other job runs after (the group's jobs, a
        chain's last): it runs once all of them completed, exactly once."""
        leaves = self.leaves()
        self.add(callback, after=[self._steps[i].job for i in leaves], on_failure=on_failure)
        return self

    def leaves(self) -> list[int]:
        """The indexes of the jobs no other job runs after."""
        parents = {index for step in self._steps for index in step.after}
        return [index for index in range(len(self._steps)) if index not in parents]

    def steps(self) -> Sequence[Step]:
        """The jobs in an order where each comes after its parents; WorkflowError for an empty
        workflow, a keyed job or a cycle (checked before any write)."""
        steps = self._steps
        if not steps:
            raise WorkflowError("a workflow needs at least one job")
        for step in steps:
            if step.job.key is not None:
                raise WorkflowError(
                    f"job {_name(step.job)} has a key: a workflow's jobs are unkeyed (a taken "
                    "key would drop one job of the DAG); key the workflow's outbox entry instead"
                )
        _check_acyclic(steps)
        return tuple(steps)

    def __len__(self) -> int:
        return len(self._steps)


def chain(*jobs: NewJob) -> Workflow:
    """Each job after the one before it."""
    workflow = Workflow()
    previous: NewJob | None = None
    for job in jobs:
        previous = workflow.add(job, after=[] if previous is None else [previous])
    return workflow


def group(*jobs: NewJob) -> Workflow:
    """The jobs side by side; ``.then(callback)`` runs a callback after all of them."""
    workflow = Workflow()
    for job in jobs:
        workflow.add(job)
    return workflow


def _check_acyclic(steps: Sequence[Step]) -> None:
    """WorkflowError naming a job on a cycle (Kahn's algorithm). ``add`` only links to jobs
    added before, so a cycle means a workflow built some other way: checked all the same."""
    remaining = {index: len(set(step.after)) for index, step in enumerate(steps)}
    children: dict[int, list[int]] = {}
    for index, step in enumerate(steps):
        for parent in step.after:
            children.setdefault(parent, []).append(index)
    ready = [index for index, count in remaining.items() if count == 0]
    seen = 0
    while ready:
        index = ready.pop()
        seen += 1
        for child in children.get(index, ()):
            remaining[child] -= 1
            if remaining[child] == 0:
                ready.append(child)
    if seen != len(steps):
        stuck = next(index for index, count in remaining.items() if count > 0)
        raise WorkflowError(f"the workflow has a cycle through job {_name(steps[stuck].job)}")


def _name(job: NewJob) -> str:
    kind = job.type if isinstance(job.type, str) else job.type.type
    return repr(kind)
