"""``neverlost audit-loss``: the live loss auditor (``jobs.loss_audit``) from the shell.

Given APP, the jobs and, when the APP declares an ``OUTBOX_STORE``, the outbox are audited,
and the published entries looked back on stay within the APP's job retention; with ``--url``
the jobs alone. ``--once``: one pass, exit 1 on a finding (for cron or a probe); else a pass
every ``--interval`` until interrupted, a line each (JSON lines with ``--json``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from ..loss_audit import AuditReport, AuditSLOs, LossAuditor
from ..tokens import JOBS_SETTINGS, OUTBOX_STORE
from .durations import Duration, format_ms
from .errors import CliUsageError, CommandFailed
from .group import cli
from .render import console, json_option, print_json, table
from .running import run_on_target
from .target import Target, target_options, target_spec
from .terminal import terminal_text

_DEFAULTS = AuditSLOs()


def _slo_option(
    name: str, default: int, help: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        name, type=Duration(), default=default, show_default=format_ms(default), help=help
    )


@cli.command("audit-loss")
@target_options
@json_option
@click.option("--once", is_flag=True, help="One pass; exit 1 if it found anything.")
@click.option(
    "--interval", "interval_ms", type=Duration(), default=30_000, show_default="30s",
    help="Between passes (without --once).",
)  # fmt: skip
@_slo_option("--outbox-slo", _DEFAULTS.outbox_slo_ms, "An entry unpublished longer is flagged.")
@_slo_option("--due-slo", _DEFAULTS.due_slo_ms, "A type whose oldest due job waits longer.")
@_slo_option("--active-slo", _DEFAULTS.active_slo_ms, "An active job longer (or its own timeout).")
@_slo_option(
    "--lookback", _DEFAULTS.lookback_ms,
    "Published entries checked on the first pass (kept within the APP's job retention).",
)  # fmt: skip
@click.option(
    "--max-entries", type=click.IntRange(1, 10_000), default=_DEFAULTS.max_entries,
    show_default=True, help="Published entries looked up per pass.",
)  # fmt: skip
def audit_loss(
    as_json: bool, once: bool, interval_ms: int, outbox_slo: int, due_slo: int,
    active_slo: int, lookback: int, max_entries: int, **params: Any,
) -> None:  # fmt: skip
    """Check that nothing is lost: every committed outbox entry became a job, every job
    finished or is visibly progressing within its SLO.

    Findings: outbox_unpublished, outbox_job_missing, due_stuck, due_no_worker, active_stuck;
    each names the entry, job or type.
    """
    try:
        slos = AuditSLOs(
            outbox_slo_ms=outbox_slo, due_slo_ms=due_slo, active_slo_ms=active_slo,
            lookback_ms=lookback, max_entries=max_entries,
        )  # fmt: skip
    except ValueError as exc:
        raise CliUsageError(str(exc)) from None

    async def work(target: Target) -> bool:
        auditor = _auditor(target, slos)
        if once:
            report = await auditor.check()
            if as_json:
                print_json(report.to_json())
            else:
                _show(report, target)
            return report.ok
        if not as_json:
            what = "jobs and outbox" if auditor.checks_outbox else "jobs"
            click.echo(
                f"auditing the {what} of {target.description} every {format_ms(interval_ms)} "
                "(Ctrl-C stops)"
            )
        await auditor.run(interval_ms, _json_line if as_json else lambda r: _show(r, target))
        return True

    try:
        ok = run_on_target(target_spec(params), work, create=False)
    except KeyboardInterrupt:
        return
    if not ok:
        raise CommandFailed("the audit found something lost or stuck")


def _auditor(target: Target, slos: AuditSLOs) -> LossAuditor:
    outbox = None
    context = target.context
    if context is not None:
        if JOBS_SETTINGS.name in context:
            slos = slos.within_retention(context.get_value(JOBS_SETTINGS))
        if OUTBOX_STORE.name in context:
            outbox = context.get_value(OUTBOX_STORE)
    return LossAuditor(target.driver, outbox, slos=slos, log=False)  # it prints each pass


def _json_line(report: AuditReport) -> None:
    """One JSON document a line, a pass each (for a log shipper)."""
    click.echo(json.dumps(report.to_json(), ensure_ascii=True))


def _show(report: AuditReport, target: Target) -> None:
    checked = f"{report.entries_checked} published entries" if report.outbox_checked else ""
    looked = ", ".join(filter(None, [checked, f"{report.active_checked} active jobs"]))
    when = report.at.strftime("%H:%M:%S")
    if report.ok:
        click.echo(f"{when} ok: nothing lost or stuck ({looked} looked at)")
        return
    out = console()
    rows = [[f.check, f.target, f.message] for f in report.findings]
    title = f"{when} {len(report.findings)} finding(s) on {terminal_text(target.description)}"
    out.print(table(title, ("check", "target", "finding"), rows))
