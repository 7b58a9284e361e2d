"""Workflows on the SQL job store (``jobs.spi.WorkflowStore``): what the store's statements
need besides the rows (``sql/jobs_*.sql``: ``enqueue_workflow``, ``workflow_release`` and the
statements that end in it).

A workflow job is a row of the job table with ``workflow_id``, its place in the workflow
(``workflow_seq``), its parents' ids (``depends_on``, JSON) and how many of them are still
unfinished (``waiting``); while ``waiting`` > 0 its ``due_at`` is NULL, so no claim sees it. The
edge table holds one row per (parent, child) until the parent settles: the statement that
settles a parent (complete, fail for good, cancel, delete, purge) deletes its edges and, in its
own transaction, counts its children down (due at 0) or, when it did not complete, cancels
those not on a ``continue`` edge, and theirs, down the DAG.

The hot path pays nothing for this: the claim marks a workflow job's lease token (a ``w``
after the attempt; the random part is lowercase hex, which has none), and ``complete`` and
``fail`` pick the statement that settles dependents only for such a token. On PostgreSQL that
statement is one statement (data-modifying CTEs, so one round trip, one transaction); on
SQLite, which has none, it is a few statements in one write transaction (``release_steps``).
A workflow job whose lease expired more often than its max_stalls is not failed by the claim
in place (as a plain job is) but leased, and failed by the store through ``finish`` right after,
with its dependents in that one step: a crash between leaves it leased, and the claim after the
lease fails it again. The prune's sweep (``settle_workflow_parents``) still settles the
dependents of any parent that ended without them (a hand edit, an older version).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from jobs.spi import WorkflowJob, workflow_cancelled_error

from .statements import Statement

__all__ = [
    "Step",
    "Steps",
    "cancelled_error_parts",
    "is_workflow_token",
    "release_steps",
    "workflow_params",
]

Row = Mapping[str, Any]
Step = tuple[Statement, dict[str, Any]]
Steps = Generator[Step, list[Row], list[Row]]
"""Statements run in one transaction, each sent the rows of the one before (SQLite)."""


def cancelled_error_parts() -> tuple[str, str, str, str]:
    """``(head, middle, state, tail)`` with ``head + id + middle + type + state + ended + tail
    == workflow_cancelled_error(id, type, ended)``, for a statement to build it."""
    marked = workflow_cancelled_error("\x01", "\x02", "\x03")
    head, _, rest = marked.partition("\x01")
    middle, _, rest = rest.partition("\x02")
    state, _, tail = rest.partition("\x03")
    return head, middle, state, tail


def is_workflow_token(lease_token: str) -> bool:
    """Whether the claim marked this lease token as a workflow job's."""
    return "w" in lease_token


def workflow_params(
    workflow_id: str, jobs: Sequence[WorkflowJob], *, postgres: bool
) -> dict[str, Any]:
    """``enqueue_workflow``'s parameters: the jobs (PostgreSQL: one array per column; SQLite:
    one JSON array per job) and the edges."""
    rows = [
        (job.request.id, job.request.type, job.request.payload, job.request.max_attempts,
         job.request.run_at_ms, job.request.delay_ms, job.request.timeout_ms,
         job.request.trace_context, job.request.keep_until_ms, job.request.max_stalls,
         job.request.priority, json.dumps(list(job.depends_on)), len(set(job.depends_on)),
         job.request.queue)
        for job in jobs
    ]  # fmt: skip
    edges = [
        (parent, job.request.id, int(parent in job.continue_after))
        for job in jobs
        for parent in dict.fromkeys(job.depends_on)
    ]
    if not postgres:
        return {"workflow_id": workflow_id, "jobs": json.dumps(rows), "edges": json.dumps(edges)}
    names = ("ids", "types", "payloads", "max_attempts", "run_ats", "delays", "timeouts",
             "trace_contexts", "keep_untils", "max_stalls", "priorities", "depends_ons",
             "waitings", "queues")  # fmt: skip
    params: dict[str, Any] = {"workflow_id": workflow_id}
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    params.update({name: list(values) for name, values in zip(names, columns, strict=True)})
    parents, children, proceeds = zip(*edges, strict=True) if edges else ((), (), ())
    params.update(parents=list(parents), children=list(children), proceeds=list(proceeds))
    return params


def release_steps(
    sql: Mapping[str, Statement], settled: Sequence[Row], params: Mapping[str, Any]
) -> Steps:
    """SQLite's ``workflow_release``: settle the dependents of ``settled`` (rows of id, type,
    state: how each ended, "deleted" for one deleted unfinished) in the caller's transaction.
    ``params`` holds ``now``, ``max_errors`` and ``retain_cancelled_ms``. Returns the
    dependents it made due (id, type)."""
    ended = {row["id"]: row["state"] for row in settled}
    if not ended:
        return []
    parents = [[row["id"], row["type"], row["state"]] for row in settled]
    found = yield sql["workflow_doomed"], {"settled": json.dumps(parents)}
    doomed: dict[str, str] = {}
    for row in sorted(found, key=lambda row: (row["id"], row["cause_id"])):
        doomed.setdefault(
            row["id"],
            workflow_cancelled_error(row["cause_id"], row["cause_type"], row["cause_state"]),
        )
    if doomed:
        yield sql["workflow_cancel"], {**params, "jobs": json.dumps(list(doomed.items()))}
    unlinked = yield sql["workflow_unlink"], {"ids": json.dumps([*ended, *doomed])}
    counts = Counter(
        row["child_id"]
        for row in unlinked
        if row["child_id"] not in doomed
        and (row["proceed"] or ended.get(row["parent_id"]) == "completed")
    )
    if not counts:
        return []
    released = yield sql["workflow_release"], {**params, "jobs": json.dumps(list(counts.items()))}
    return [row for row in released if row["due_at"] is not None]
