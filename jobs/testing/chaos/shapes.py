"""The workflows a chaos run enqueues: chains, groups with a callback, and a fan-out/fan-in.

Workflow ``n`` of a run has the shape ``SHAPES[n % len(SHAPES)]``; each of its jobs is a
``chaos.step`` whose payload names the workflow (``wf``) and the job's place in it (``step``,
its index in the shape). The shapes are written out as parent lists, apart from the builders
that make them with ``chain``, ``group(...).then`` and ``Workflow().add``: the checker holds
what the store kept against these lists, not against what the builders produced.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jobs.new_job import NewJob
from jobs.workflow import Workflow, chain, group

from .worker import STEP

__all__ = ["SHAPES", "SLOWER", "Shape", "build_workflow", "shape_of"]


@dataclass(frozen=True)
class Shape:
    name: str
    parents: tuple[tuple[int, ...], ...]
    """Per step, the indexes of the steps it runs after."""
    build: Callable[[list[NewJob]], Workflow]
    slow: int | None = None
    """The step whose handler runs ``SLOWER`` times as long (a fan-in's last parent): a
    callback released before that parent completed would start while it still runs, where
    the ledger shows it, instead of in the few milliseconds parents that end together
    leave."""

    def __len__(self) -> int:
        return len(self.parents)


def _chain(jobs: list[NewJob]) -> Workflow:
    return chain(*jobs)


def _group_then(jobs: list[NewJob]) -> Workflow:
    return group(*jobs[:-1]).then(jobs[-1])


def _fan_out_in(jobs: list[NewJob]) -> Workflow:
    """One job, three after it side by side, one after those three."""
    workflow = Workflow()
    root = workflow.add(jobs[0])
    middle = [workflow.add(job, after=[root]) for job in jobs[1:4]]
    workflow.add(jobs[4], after=middle)
    return workflow


SLOWER = 4

SHAPES = (
    Shape("chain of 4", ((), (0,), (1,), (2,)), _chain),
    Shape("group of 4, then a callback", ((), (), (), (), (0, 1, 2, 3)), _group_then, slow=3),
    Shape("1, then 3, then a callback", ((), (0,), (0,), (0,), (1, 2, 3)), _fan_out_in, slow=3),
)


def shape_of(n: int) -> Shape:
    return SHAPES[n % len(SHAPES)]


def build_workflow(n: int) -> Workflow:
    """Workflow ``n`` of a run, its jobs in step order."""
    shape = shape_of(n)
    jobs = []
    for step in range(len(shape)):
        payload = {"wf": n, "step": step}
        if step == shape.slow:
            payload["slower"] = SLOWER
        jobs.append(NewJob(type=STEP, payload=payload))
    return shape.build(jobs)
