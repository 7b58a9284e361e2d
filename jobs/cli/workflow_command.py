"""``neverlost workflows show [APP] ID``: a workflow's jobs in dependency order, with their
states, progress and results (``JobQueue.get_workflow``)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import DriverError
from .errors import CliUsageError, CommandFailed
from .group import cli
from .render import console, json_option, one_line, print_json, table
from .running import run_on_target
from .target import Target, id_target_options, target_spec


@cli.group()
def workflows() -> None:
    """Show a workflow (``jobs.workflow``)."""


@workflows.command("show")
@id_target_options
@json_option
def show_workflow(job_ids: tuple[str, ...], as_json: bool, **params: Any) -> None:
    """A workflow's jobs in dependency order: state, attempts, parents, progress, result."""
    if len(job_ids) != 1:
        raise CliUsageError("give one workflow ID")
    (workflow_id,) = job_ids

    async def work(target: Target) -> None:
        try:
            info = await target.queue.get_workflow(workflow_id)
        except DriverError as exc:
            raise CommandFailed(str(exc)) from exc
        if info is None:
            raise CommandFailed(f"no workflow {workflow_id!r}")
        if as_json:
            print_json(info)
            return
        position = {job.id: index for index, job in enumerate(info.jobs, 1)}
        rows = [
            [
                str(index),
                job.type,
                job.state,
                ", ".join(f"#{position[p]}" for p in job.depends_on if p in position) or None,
                None if job.progress is None else f"{job.progress.fraction * 100:.0f}%",
                None if job.result is None else one_line(_compact(job.result), 40),
                job.id,
            ]
            for index, job in enumerate(info.jobs, 1)
        ]
        columns = ["#", "type", "state", "after", "progress", "result", "id"]
        console().print(table(f"workflow {info.id}: {info.state}", columns, rows))

    run_on_target(target_spec(params), work, create=False)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
