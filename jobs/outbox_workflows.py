"""A workflow written through the outbox (``append_workflow``): one entry of type
``jobs.spi.WORKFLOW_ENTRY_TYPE`` holding the whole DAG, which ``JobOutboxPublisher`` hands over
as one ``JobQueue.enqueue_workflow``, under the entry's workflow id
(``jobs.spi.outbox_workflow_id``): the workflow exists if and only if the app's transaction
committed, and a relay that crashed after the hand-over and before marking the entry hands it
over again to find it stored (the jobs' ids derive from the workflow id): never twice, never
half of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .clock import to_datetime
from .errors import DriverError
from .new_job import NewJob
from .queue import JobQueue
from .spi.outbox_audit import outbox_workflow_id
from .spi.records import OutboxEntry
from .workflow import Workflow

__all__ = ["publish_workflow", "workflow_of_entry"]


def workflow_of_entry(payload: Mapping[str, Any], trace_context: str | None = None) -> Workflow:
    """The workflow an entry's payload describes (``WORKFLOW_ENTRY_TYPE``'s format), each job
    carrying the appending span's ``trace_context``."""
    workflow = Workflow()
    added: list[NewJob] = []
    for job in payload["jobs"]:
        run_at_ms = job.get("run_at_ms")
        new_job = NewJob(
            type=job["type"],
            payload=job.get("payload"),
            delay_ms=job.get("delay_ms"),
            run_at=None if run_at_ms is None else to_datetime(run_at_ms),
            max_attempts=job.get("max_attempts"),
            timeout_ms=job.get("timeout_ms"),
            priority=job.get("priority"),
            queue=job.get("queue"),
            trace_context=trace_context,
        )
        after = [added[index] for index in job.get("after", ())]
        added.append(workflow.add(new_job, after=after, on_failure=job.get("on_failure", "cancel")))
    return workflow


async def publish_workflow(queue: JobQueue, entry: OutboxEntry) -> None:
    """Store the entry's workflow, or find it stored by an earlier hand-over of the entry."""
    workflow_id = outbox_workflow_id(entry.id)
    try:
        workflow = workflow_of_entry(entry.payload, entry.trace_context)
        await queue.enqueue_workflow(workflow, workflow_id=workflow_id)
    except DriverError:
        if await queue.get_workflow(workflow_id) is None:
            raise
