"""The floor for driver and outbox-store authors: the records, the ``JobDriver`` protocol (and
its parts), the outbox protocols. What a driver may use of the engine is in ``jobs.spi.support``;
errors are ``jobs.errors``; ``jobs.testing.DriverConformance`` is the suite a driver passes.

A driver package imports only ``jobs.spi`` (with ``jobs.spi.support``) and ``jobs.errors``, and
registers a ``DriverFactory`` for its URL schemes in the ``neverlost.drivers`` entry-point group
(``docs/reference/driver-spi.md``).
"""

from .driver import (
    AuditTrail,
    ClockedDriver,
    JobDriver,
    JobOperations,
    JobStore,
    OutcomeCounters,
    ProgressReports,
    QueueOperations,
    QueuePauses,
    WorkerRegistry,
    WorkflowStore,
)
from .factories import DRIVERS_GROUP, DriverFactory, SQLOutboxSite
from .inbox import (
    AttemptSettlement,
    CompletesInTransaction,
    InboxJob,
    JobInbox,
    SyncJobInbox,
)
from .outbox import OutboxOperations, OutboxPublisher, OutboxStore
from .outbox_audit import (
    WORKFLOW_ENTRY_TYPE,
    OutboxAuditReads,
    OverdueEntry,
    PublishedEntry,
    outbox_workflow_id,
)
from .records import (
    AUDIT_KEEP_MS,
    AUDIT_MAX_ENTRIES,
    COUNTED_OUTCOMES,
    COUNTERS_KEEP_MS,
    DEFAULT_MAX_STALLS,
    DURATION_BOUNDS_MS,
    FINISHED_STATES,
    JOB_STATES,
    MAX_ERRORS_KEPT,
    OUTBOX_ENTRY_STATES,
    AuditEntry,
    AuditPage,
    ClaimedJob,
    FailedAttempt,
    JobInfo,
    JobPage,
    JobProgress,
    JobRequest,
    JobState,
    JobStateCounts,
    JobTypeStats,
    OutboxEntry,
    OutboxEntryInfo,
    OutboxEntryPage,
    OutboxStats,
    OutcomeCount,
    QueueStats,
    RelayInfo,
    RelayRegistration,
    WorkerInfo,
    WorkerRegistration,
    WorkflowInfo,
    WorkflowJob,
    stalled_error,
    workflow_cancelled_error,
)

__all__ = [
    # the driver protocol and its parts
    "JobDriver",
    "JobStore",
    "JobOperations",
    "WorkerRegistry",
    "AuditTrail",
    "OutcomeCounters",
    "ProgressReports",
    "QueueOperations",
    "QueuePauses",
    "WorkflowStore",
    "ClockedDriver",
    # records
    "JobRequest",
    "ClaimedJob",
    "JobInfo",
    "JobProgress",
    "FailedAttempt",
    "JobState",
    "JOB_STATES",
    "FINISHED_STATES",
    "JobStateCounts",
    "DEFAULT_MAX_STALLS",
    "MAX_ERRORS_KEPT",
    "stalled_error",
    "workflow_cancelled_error",
    "WorkflowJob",
    "WorkflowInfo",
    "JobPage",
    "JobTypeStats",
    "QueueStats",
    "WorkerRegistration",
    "WorkerInfo",
    # the audit trail
    "AuditEntry",
    "AuditPage",
    "AUDIT_KEEP_MS",
    "AUDIT_MAX_ENTRIES",
    # outcome counters
    "OutcomeCount",
    "COUNTERS_KEEP_MS",
    "DURATION_BOUNDS_MS",
    "COUNTED_OUTCOMES",
    # the outbox
    "OutboxStore",
    "OutboxPublisher",
    "OutboxEntry",
    "OutboxAuditReads",
    "OverdueEntry",
    "PublishedEntry",
    "WORKFLOW_ENTRY_TYPE",
    "outbox_workflow_id",
    "OutboxOperations",
    "OutboxStats",
    "RelayRegistration",
    "RelayInfo",
    "OutboxEntryInfo",
    "OutboxEntryPage",
    "OUTBOX_ENTRY_STATES",
    # the inbox (effects exactly once)
    "JobInbox",
    "SyncJobInbox",
    "InboxJob",
    "AttemptSettlement",
    "CompletesInTransaction",
    # opened from a URL (the neverlost.drivers entry points)
    "DRIVERS_GROUP",
    "DriverFactory",
    "SQLOutboxSite",
]
