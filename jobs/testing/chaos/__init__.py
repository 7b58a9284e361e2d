"""A fault-injection kit that ships: prove at-least-once on your own store, like we do on ours.

``python -m jobs.testing.chaos`` (``make chaos``) runs every scenario on SQLite, PostgreSQL and
Redis and prints one table; point it at your own stores with ``--sqlite``, ``--postgres``,
``--redis`` URLs. Each scenario starts worker processes on a fresh namespace, injects faults,
and checks the ledger the handlers wrote against the store (see ``checker``): lost = 0,
unexpected = 0, and every duplicate explained by a kill of the process that held the job.
The effects variant (``EffectsTarget``) has the handlers commit an effect row each, through an
inbox or not: effect duplicates = 0 through the inbox, while executions still repeat.
The workflow scenario (``kill_workflows``) runs chains and groups with callbacks, enqueued or
appended through the outbox with some transactions rolled back: every job of a committed
workflow completes, each after its parents (by the ledger's order), none of a rolled-back one
runs (``check_workflows``).
"""

from .checker import Verdict, check_effects, check_jobs, check_orders
from .effects import EffectsTarget
from .fleet import Fleet, WorkerOptions
from .ledger import Ledger
from .scenarios import ChaosPlan, ChaosTimeoutError, kill_outbox, kill_workers
from .stores import ChaosStore, drop_store
from .workflow_checker import CommittedWorkflow, check_workflows
from .workflow_scenario import kill_workflows

__all__ = [
    "ChaosPlan",
    "ChaosStore",
    "ChaosTimeoutError",
    "CommittedWorkflow",
    "EffectsTarget",
    "Fleet",
    "Ledger",
    "Verdict",
    "WorkerOptions",
    "check_effects",
    "check_jobs",
    "check_orders",
    "check_workflows",
    "drop_store",
    "kill_outbox",
    "kill_workers",
    "kill_workflows",
]
