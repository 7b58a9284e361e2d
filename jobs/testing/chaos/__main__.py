"""``python -m jobs.testing.chaos``: every scenario on every store, one table, exit 1 on a breach.

python -m jobs.testing.chaos                      # SQLite, the local PostgreSQL and Redis
python -m jobs.testing.chaos --short              # a quick variant (CI)
python -m jobs.testing.chaos --redis redis://host:6379/0 --only redis
python -m jobs.testing.chaos --scenario workflows  # the workflow runs only
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from loguru import logger
from rich.console import Console
from rich.table import Table

from jobs.logs import enable_logging

from .checker import Verdict
from .effects import EffectsTarget
from .fleet import WorkerOptions
from .scenarios import ChaosPlan, kill_outbox, kill_workers
from .server_faults import postgres_faults, redis_faults
from .stores import ChaosStore, store_kind
from .workflow_scenario import kill_workflows

Scenario = Callable[[ChaosStore, ChaosPlan, Path], Awaitable[Verdict]]

FULL = ChaosPlan(workers=3, jobs=2_000, kill_every_s=2.0, workflows=200)
SHORT = ChaosPlan(
    workers=2, jobs=300, kill_every_s=1.0, workflows=60,
    options=WorkerOptions(lease_ms=2_000, concurrency=4, handler_ms=30),
)  # fmt: skip


@dataclass(frozen=True)
class Run:
    scenario: str
    store: str
    verdict: Verdict | None
    seconds: float
    error: str | None = None


def _stores(args: argparse.Namespace, workdir: Path) -> dict[str, str]:
    urls = {
        "sqlite": args.sqlite or f"sqlite+aiosqlite:///{workdir / 'chaos.db'}",
        "postgres": args.postgres,
        "redis": args.redis,
    }
    return {kind: url for kind, url in urls.items() if kind in args.only}


@dataclass(frozen=True)
class Case:
    scenario: str
    store: str
    run: Callable[[ChaosPlan, Path], Awaitable[Verdict]]
    cleanup: Callable[[], Awaitable[None]] | None = None
    control: bool = False
    kills_faster: float = 1.0
    """Kill this many times as often as the plan says (the workflow runs are short)."""


def _on(store: ChaosStore, scenario: Scenario) -> Callable[[ChaosPlan, Path], Awaitable[Verdict]]:
    return lambda plan, workdir: scenario(store, plan, workdir)


def _with_effects(store: ChaosStore, effects: EffectsTarget) -> Scenario:
    async def run(_: ChaosStore, plan: ChaosPlan, workdir: Path) -> Verdict:
        return await kill_workers(store, plan, workdir, effects)

    return run


def _effects_url(kind: str, urls: dict[str, str], root: Path) -> str:
    """The effects' database: the jobs' own for a SQL store (completed in the inbox's
    transaction); PostgreSQL (else a SQLite file) beside Redis."""
    if kind in ("sqlite", "postgres"):
        return urls[kind]
    return urls.get("postgres") or f"sqlite+aiosqlite:///{root / 'effects.db'}"


def _matrix(urls: dict[str, str], root: Path) -> list[Case]:
    """Every scenario that fits the stores given; server faults start private servers."""
    cases: list[Case] = []
    for url in urls.values():
        for name, control in (("control: no kills", True), ("SIGKILL workers", False)):
            store = ChaosStore.fresh(url)
            cases.append(Case(name, store.label, _on(store, kill_workers), store.drop, control))
    for kind, url in urls.items():
        effects_url = _effects_url(kind, urls, root)
        for inbox in (True, False):
            store = ChaosStore.fresh(url)
            effects = EffectsTarget.fresh(effects_url, inbox=inbox)
            label = f"{store.label}, effects {store_kind(effects_url)}"
            name = "SIGKILL, effects: inbox" if inbox else "SIGKILL, effects: no inbox (control)"
            cases.append(Case(name, label, _on(store, _with_effects(store, effects)), store.drop))
    pairs = [(urls[kind], urls[kind]) for kind in ("sqlite", "postgres") if kind in urls]
    if "postgres" in urls and "redis" in urls:
        pairs.append((urls["postgres"], urls["redis"]))
    for outbox_url, job_url in pairs:
        store = ChaosStore.fresh(job_url, outbox_url)
        cases.append(Case("outbox: SIGKILL relays", store.label, _on(store, kill_outbox),
                          store.drop))  # fmt: skip
    cases += _workflow_cases(urls)
    if "postgres" in urls:
        cases.append(Case("terminate backends, restart", "postgres (private)", postgres_faults))
    if "redis" in urls:
        cases.append(Case("CLIENT KILL, PAUSE, restart", "redis (private)", redis_faults))
    return cases


def _workflow_cases(urls: dict[str, str]) -> list[Case]:
    """Per store, the workflow scenario and its control; half the workflows through the
    outbox on the store's own database (PostgreSQL beside Redis, when it is given)."""
    cases: list[Case] = []
    for kind, url in urls.items():
        outbox_url = url if kind in ("sqlite", "postgres") else urls.get("postgres")
        for name, control in (("workflows: no kills", True), ("workflows: SIGKILL workers", False)):
            store = ChaosStore.fresh(url, outbox_url)
            cases.append(Case(name, store.label, _on(store, kill_workflows), store.drop, control,
                              kills_faster=4.0))  # fmt: skip
    return cases


async def run_all(args: argparse.Namespace) -> list[Run]:
    plan = SHORT if args.short else FULL
    if args.jobs:
        plan = replace(plan, jobs=args.jobs)
    if args.workflows:
        plan = replace(plan, workflows=args.workflows)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="neverlost-chaos-") as tmp:
        root = Path(tmp)
        cases = _matrix(_stores(args, root), root)
        cases = [case for case in cases if args.scenario.lower() in case.scenario.lower()]
        for index, case in enumerate(cases):
            workdir = root / f"run-{index}"
            workdir.mkdir()
            every = 0.0 if case.control else plan.kill_every_s / case.kills_faster
            step = replace(plan, kill_every_s=every)
            started = time.monotonic()
            try:
                verdict: Verdict | None = await case.run(step, workdir)
                error = None
            except Exception as exc:  # a run that breaks is reported, the others still run
                verdict, error = None, f"{type(exc).__name__}: {exc}"
            finally:
                if case.cleanup is not None:
                    await case.cleanup()
            runs.append(Run(case.scenario, case.store, verdict, time.monotonic() - started, error))
            _print_progress(runs[-1])
    return runs


def _print_progress(run: Run) -> None:
    status = "ok" if run.verdict is not None and run.verdict.ok else "BREACH"
    print(f"  {run.scenario} on {run.store}: {status} ({run.seconds:.0f} s)", file=sys.stderr)


def render(runs: list[Run], console: Console) -> None:
    table = Table(title="chaos: at least once, checked")
    for column in ("scenario", "store", "jobs", "kills", "executions", "lost", "duplicates",
                   "stalls", "unexpected", "unexplained", "effects", "effect dups",
                   "workflows", "callback dups", "s"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("scenario", "store") else "right")
    for run in runs:
        if run.verdict is None:
            table.add_row(run.scenario, run.store, f"[red]{run.error}[/red]")
            continue
        row = run.verdict.as_row()
        verdict = run.verdict
        extras = [verdict.effects, verdict.effect_duplicates, verdict.workflows,
                  verdict.callback_duplicates]  # fmt: skip
        table.add_row(run.scenario, run.store, *(str(v) for v in row.values()),
                      *("-" if v is None else str(v) for v in extras),
                      f"{run.seconds:.0f}")  # fmt: skip
    console.print(table)
    for run in runs:
        for problem in (run.verdict.problems if run.verdict else [])[:10]:
            console.print(f"[red]{run.scenario} on {run.store}:[/red] {problem}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.testing.chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sqlite", help="a SQLite URL (default: a file in a temporary dir)")
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument(
        "--redis", default=os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument(
        "--only",
        default="sqlite,postgres,redis",
        type=lambda text: set(text.split(",")),
        help="stores to run, comma-separated (sqlite,postgres,redis)",
    )
    parser.add_argument(
        "--scenario", default="", help="only the scenarios whose name contains this (workflows)"
    )
    parser.add_argument("--short", action="store_true", help="the quick variant")
    parser.add_argument("--jobs", type=int, help="jobs per run (default 2000, short 300)")
    parser.add_argument(
        "--workflows", type=int, help="workflows per workflow run (default 200, short 60)"
    )
    args = parser.parse_args(argv)  # fmt: skip
    unknown = args.only - {"sqlite", "postgres", "redis"}
    if unknown:
        parser.error(f"--only: unknown store {', '.join(sorted(unknown))}")
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    enable_logging()  # the library's lines are off until an app enables them
    runs = asyncio.run(run_all(args))
    render(runs, Console(width=None if sys.stdout.isatty() else 120))
    return 0 if all(run.verdict is not None and run.verdict.ok for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
