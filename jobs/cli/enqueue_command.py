"""``neverlost enqueue TYPE --payload JSON``: a job from the shell, as the application would
enqueue it.

Given APP, the type must be one the APP handles (a typo is named with a did-you-mean;
``--any-type`` enqueues a type the APP does not know, for a handler deployed elsewhere), and a
type whose handler takes a job definition has its payload validated against the definition's
model before anything is written (the error names the field). With ``--url`` the payload is
checked as JSON only: the handlers' models are in the application.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import JobOptionError, PayloadError
from ..options import MAX_PRIORITY, MIN_PRIORITY
from ..tokens import JOB_HANDLER_REGISTRY
from .durations import Duration, format_ms
from .errors import CliUsageError
from .group import cli
from .hints import did_you_mean, known_types
from .render import json_option, print_json
from .running import run_on_target
from .target import Target, target_options, target_spec
from .terminal import terminal_text


def read_payload(text: str | None) -> Any:
    """The payload a ``--payload`` names: JSON text, ``@path`` (a file of JSON) or ``-``
    (stdin); None (JSON null) when not given."""
    if text is None:
        return None
    source = "--payload"
    if text == "-":
        text, source = sys.stdin.read(), "--payload - (stdin)"
    elif text.startswith("@"):
        path = Path(text[1:])
        try:
            text, source = path.read_text(encoding="utf-8"), f"--payload {text}"
        except OSError as exc:
            raise CliUsageError(f"--payload {text}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliUsageError(
            f"{source} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}); "
            """write e.g. --payload '{"invoice_id": 7}'"""
        ) from None


async def _check_type(target: Target, job_type: str) -> None:
    """Given APP: CliUsageError for a type it has no handler for (a typo, most likely)."""
    if target.context is None or JOB_HANDLER_REGISTRY.name not in target.context:
        return
    handled = target.context.get_value(JOB_HANDLER_REGISTRY).types
    if job_type in handled:
        return
    hint = did_you_mean(job_type, handled | await known_types(target))
    raise CliUsageError(
        f"the APP has no handler for job type {job_type!r}{hint} "
        "(--any-type enqueues it anyway, for a worker of another application)"
    )


@cli.command()
@click.argument("job_type", metavar="TYPE")
@target_options
@json_option
@click.option(
    "--payload", "payload_text", metavar="JSON",
    help="The payload: JSON text, @FILE (a JSON file) or - (stdin). [null]",
)  # fmt: skip
@click.option("--key", help="Idempotency key: nothing is enqueued while a job holds it.")
@click.option("--delay", type=Duration(), help="Run it this much later (30s, 5m, 2h).")
@click.option("--max-attempts", type=int, help="Attempts before it fails for good.")
@click.option("--timeout", "timeout_ms", type=Duration(), help="Cancel an attempt after this.")
@click.option(
    "--priority", type=int,
    help=f"{MIN_PRIORITY}..{MAX_PRIORITY}: among due jobs a higher one runs first. "
    "[the handler's, else 0]",
)  # fmt: skip
@click.option(
    "--queue", "queue_name", metavar="QUEUE",
    help="The named queue it waits in (only workers serving it run it). "
    "[the handler's, else default]",
)  # fmt: skip
@click.option(
    "--any-type", is_flag=True,
    help="With APP: enqueue a type the APP has no handler for (a worker elsewhere runs it).",
)  # fmt: skip
def enqueue(
    job_type: str, as_json: bool, payload_text: str | None, key: str | None,
    delay: int | None, max_attempts: int | None, timeout_ms: int | None,
    priority: int | None, queue_name: str | None, any_type: bool, **params: Any,
) -> None:  # fmt: skip
    """Enqueue a job of TYPE: prints its id (or, when --key is held, the job holding it).

    Given APP, the payload is validated against the job's definition (the model its handler
    takes) before anything is written.
    """
    spec = target_spec(params)
    payload = read_payload(payload_text)

    async def work(target: Target) -> None:
        if not any_type:
            await _check_type(target, job_type)
        try:  # the APP's queue validates a type name against its registered definition
            job_id = await target.queue.enqueue(
                job_type, payload, delay_ms=delay, max_attempts=max_attempts,
                timeout_ms=timeout_ms, key=key, priority=priority, queue=queue_name,
            )  # fmt: skip
        except (PayloadError, JobOptionError, ValueError) as exc:
            raise CliUsageError(" ".join(str(exc).split())) from None
        holder = None
        if job_id is None and key is not None:
            found = await target.queue.find_job(key=key)
            holder = found.id if found is not None else None
        if as_json:
            print_json({"id": job_id, "key": key, "held_by": holder})
            return
        if job_id is None:
            by = f" by job {terminal_text(holder)}" if holder else ""
            click.echo(f"not enqueued: key {terminal_text(key)!r} is held{by}")
            return
        when = f", due in {format_ms(delay)}" if delay else ""
        click.echo(f"enqueued {terminal_text(job_type)} {job_id}{when}")

    run_on_target(spec, work)
