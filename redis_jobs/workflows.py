"""Workflows on Redis (``jobs.spi.WorkflowStore``): a DAG of jobs stored by one script.

``enqueue_workflow`` sends every job of the workflow in one FCALL (``lua/enqueue_workflow.lua``),
which checks them all before its first write: the workflow is stored whole or not at all. A job
with parents is stored pending but in no ready zset, with the count of parents it waits for;
each parent holds its dependents. The scripts that end a job (finish, claim's stall failure,
cancel, purge) read one field more of it, ``workflow``, and only for a workflow's job release
or cancel its dependents, down the DAG, in the same script (the workflow helpers in
``lua/common.lua``). ``workflow_jobs`` reads the workflow's hash (``Keys.workflow``): its job ids
in stored order, then their records, in one read-only script.

Bound: a workflow holds at most ``MAX_WORKFLOW_JOBS`` jobs. Its enqueue is one script, and so is
a settle that cancels a whole workflow's worth of dependents: the bound keeps either from holding
Redis for long (each job some 100-200k instructions: 1,000 jobs, tens of milliseconds).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from jobs.errors import DriverError
from jobs.spi import JobInfo, WorkflowJob, workflow_cancelled_error
from jobs.spi.support import check_workflow_jobs

from .keys import Keys
from .records import fields_of, job_info
from .scripts import ScriptArg, ScriptRunner
from .tuning import SIGNAL_CAP, SIGNAL_TTL_MS

MAX_WORKFLOW_JOBS = 1_000
"""The most jobs one workflow may hold (see the module's docstring)."""


def cancelled_error_parts() -> tuple[str, str, str, str]:
    """The four texts around parent id, type and state of ``workflow_cancelled_error``, which
    the scripts join: every store writes the same words."""
    marks = ("\x00id\x00", "\x00type\x00", "\x00state\x00")
    head, _, rest = workflow_cancelled_error(*marks).partition(marks[0])
    middle, _, rest = rest.partition(marks[1])
    last, _, tail = rest.partition(marks[2])
    return head, middle, last, tail


ERROR_PARTS = json.dumps(cancelled_error_parts())


class RedisWorkflows:
    """The WorkflowStore SPI over one namespace's keys and scripts (held by RedisJobDriver)."""

    __slots__ = ("_keys", "_now", "_scripts", "_text")

    def __init__(
        self,
        *,
        keys: Keys,
        scripts: ScriptRunner,
        now: Callable[[], str],
        text: Callable[[Any], str],
    ) -> None:
        self._keys = keys
        self._scripts = scripts
        self._now = now
        self._text = text

    async def enqueue_workflow(self, workflow_id: str, jobs: Sequence[WorkflowJob]) -> None:
        """Every job in one script: all or nothing; DriverError, before any I/O, for what the
        script would refuse too (a repeated id, a parent not stored before, a keyed job, more
        than ``MAX_WORKFLOW_JOBS``); RedisScriptError (a DriverError) for an existing id."""
        check_workflow(workflow_id, jobs)
        keys = self._keys
        args: list[ScriptArg] = [self._now(), SIGNAL_CAP, SIGNAL_TTL_MS, ERROR_PARTS]
        for job in jobs:
            request = job.request
            run_at, timeout, keep_until = (
                request.run_at_ms,
                request.timeout_ms,
                request.keep_until_ms,
            )
            args += (
                request.id,
                request.type,
                request.payload,
                request.max_attempts,
                request.delay_ms,
                "" if run_at is None else run_at,
                "" if timeout is None else timeout,
                "" if keep_until is None else keep_until,
                request.trace_context or "",
                request.max_stalls,
                request.priority,
                json.dumps(list(job.depends_on)) if job.depends_on else "",
                json.dumps(list(job.continue_after)) if job.continue_after else "",
                request.queue,
            )
        names = [keys.prefix, keys.workflow(workflow_id)]
        await self._scripts.call("enqueue_workflow", names, args, durable=True)

    async def workflow_jobs(self, workflow_id: str) -> list[JobInfo]:
        keys = self._keys
        names = [keys.prefix, keys.workflow(workflow_id)]
        reply = await self._scripts.call("workflow_jobs", names, [self._now()])
        return [
            job_info(self._text(reply[i]), fields_of(reply[i + 1], self._text))
            for i in range(0, len(reply), 2)
        ]


def check_workflow(workflow_id: str, jobs: Sequence[WorkflowJob]) -> None:
    """DriverError for a workflow the script would refuse (the script checks all the same)."""
    if not workflow_id or not jobs:
        raise DriverError("a workflow has an id and at least one job")
    if len(jobs) > MAX_WORKFLOW_JOBS:
        raise DriverError(
            f"a workflow holds at most {MAX_WORKFLOW_JOBS} jobs on Redis, got {len(jobs)}"
        )
    check_workflow_jobs(jobs)
