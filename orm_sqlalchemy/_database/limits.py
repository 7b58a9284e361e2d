"""Fleet-wide limits in the SQL job store's claim (``jobs.spi.limits``): count, choose and
record in the claim's own transaction.

``<prefix>limit_claims`` holds a row per job claimed under a limit key (``type:<name>``,
``queue:<name>``): its lease token, when (``at``), and ``held``, 1 until a claim finds that the
job no longer holds that lease (settled, released, expired, reclaimed: never held again, as a
lease token is its claim's alone). A key's *held* count is its rows whose job still holds the
lease (active, the lease live); its *started* count, its rows younger than the rate's window.
Rows neither held nor in the window are deleted in passing, so the table holds about the
jobs held and the claims of one window.

A claim given ``ClaimLimits`` that apply to it runs ``limited_claim_steps``, statements in one
transaction (``sql/jobs_*.sql``):

1. PostgreSQL: the transaction opens with ``pg_advisory_xact_lock`` on each limit key, in
   ``ClaimLimits.keys`` order (``lock_script``, in the BEGIN's round trip), so two claims
   under one key run one after the other and never both take its last place. The count is a
   statement after it: READ COMMITTED takes a statement's snapshot when it starts, so a count
   that waited for the lock in its own statement would not see the claims of the
   transaction it waited for. SQLite needs no lock: its write transaction is the only one.
2. Count per key (``limit_usage``; SQLite: ``limit_ended`` and ``limit_dead`` first), and
   ``plan_claim``: the semantics every driver shares.
3. The candidates, in claim order, locked: each type with a limit apart, at most its cap,
   the others together, at most the claim's limit, so that a type at its cap does not crowd
   the others out; ``plan.pick`` chooses among them. PostgreSQL reads them in the count's
   statement (its snapshot allows it; the caps are not known yet, so each limited type at
   most the claim's limit): one round trip fewer. SQLite reads the plan's (``limit_candidates``).
4. Lease exactly those (``claim_limited``: the plain claim's SET list, ``claim_lease``) and
   record each leased job under its keys. PostgreSQL: BEGIN and the locks, the count and
   candidates, the lease and record, COMMIT: four round trips.

The plain claim (no limit applies) is untouched: one statement, as before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.spi import ClaimLimits, LimitedClaim, LimitUsage, plan_claim

from .connections import Row, Steps
from .statements import Statement

__all__ = ["LimitedRun", "limit_lock_keys", "limited_claim_steps", "lock_script"]


def limit_lock_keys(table: str, keys: Sequence[str]) -> list[int]:
    """The advisory lock of each limit key of the limits table ``table`` (its quoted name):
    a stable 64-bit hash, the same in every process and version."""
    locks = []
    for key in keys:
        digest = hashlib.sha256(f"neverlost-limit:{table}:{key}".encode()).digest()
        locks.append(int.from_bytes(digest[:8], "big", signed=True))
    return locks


def lock_script(table: str, keys: Sequence[str]) -> str:
    """The simple-query text that opens a limited claim's transaction on PostgreSQL: BEGIN,
    then one ``pg_advisory_xact_lock`` per key, in the order given (the locks are integers
    made here, never text from input). Transaction-scoped: nothing is left on the connection."""
    locks = "".join(
        f"; SELECT pg_advisory_xact_lock({lock})" for lock in limit_lock_keys(table, keys)
    )
    return f"BEGIN ISOLATION LEVEL READ COMMITTED{locks}"


@dataclass(slots=True)
class LimitedRun:
    """What a limited claim's steps need besides the statements, and the plan they made
    (``plan``: set by the last run of the steps; SQLite may run them again)."""

    limit: int
    types: Collection[str]
    queue: str
    limits: ClaimLimits
    claim_params: dict[str, Any]
    """The plain claim's lease parameters (lease_ms, stalled_*, max_errors, retain_failed_ms)."""
    plan: LimitedClaim | None = field(default=None)


def limited_claim_steps(
    sql: Mapping[str, Statement], run: LimitedRun, now: Any, *, postgres: bool
) -> Steps:
    """A limited claim's statements (see the module), in its transaction; the rows it leased.
    ``now`` is the bound ``:now`` (None on PostgreSQL without an injected clock)."""
    # A key without a rate counts no window: its claims are dead as soon as they are not held.
    windows = [
        (key, 0 if limit.rate is None else limit.per_ms)
        for key, limit in run.limits.keys(run.types, run.queue)
    ]
    if postgres:
        return (yield from _postgres_steps(sql, run, now, windows))
    return (yield from _sqlite_steps(sql, run, now, windows))


def _postgres_steps(
    sql: Mapping[str, Statement], run: LimitedRun, now: Any, windows: list[tuple[str, int]]
) -> Steps:
    """PostgreSQL: the count and the candidates in one statement (``limit_usage``: the
    candidates of every type of the claim, each limited type at most the claim's limit, as
    its cap is not known yet), then the lease (``claim_limited``, at the count's clock). The
    transaction's BEGIN took the locks (``lock_script``)."""
    limited = {t: run.limit for t in run.types if t in run.limits.types}
    groups = _candidate_groups(list(run.types), limited, run.limit)
    params = {
        "now": now,
        "keys": [key for key, _ in windows],
        "windows": [per_ms for _, per_ms in windows],
        "queue": run.queue,
        "types": [t for types, _ in groups for t in types],
        "groups": [n for n, (types, _) in enumerate(groups, 1) for _ in types],
        "caps": [cap for _, cap in groups],
    }
    rows = yield sql["limit_usage"], params
    counted = [row for row in rows if row["key"] is not None]
    plan = run.plan = _plan(run, counted)
    if not plan.types or plan.limit <= 0:
        return []
    chosen = _pick(plan, [row for row in rows if row["id"] is not None])
    if not chosen:
        return []
    pairs = [(row["id"], key) for row in chosen for key in plan.keys.get(row["type"], ())]
    leased = yield (
        sql["claim_limited"],
        {
            **run.claim_params,
            "now": counted[0]["now"],  # the count's clock, read after the locks
            "ids": [row["id"] for row in chosen],
            "record_ids": [job_id for job_id, _ in pairs],
            "record_keys": [key for _, key in pairs],
        },
    )
    return leased


def _sqlite_steps(
    sql: Mapping[str, Statement], run: LimitedRun, now: int, windows: list[tuple[str, int]]
) -> Steps:
    """SQLite: a statement each (no round trips to save), in one write transaction: mark the
    claims no longer held, delete the dead ones, count, read the candidates of the plan's
    types (a statement per group), lease, record."""
    keys = {"keys": json.dumps(windows), "now": now}
    yield sql["limit_ended"], keys
    for key, per_ms in windows:
        yield sql["limit_dead"], {"key": key, "before": now - per_ms}
    plan = run.plan = _plan(run, (yield sql["limit_usage"], keys))
    if not plan.types or plan.limit <= 0:
        return []
    candidates: list[Row] = []
    for types, cap in _candidate_groups(plan.types, plan.caps, plan.limit):
        params = {"now": now, "queue": run.queue, "types": json.dumps(types), "limit": cap}
        candidates.extend((yield sql["limit_candidates"], params))
    chosen = _pick(plan, candidates)
    if not chosen:
        return []
    ids = json.dumps([row["id"] for row in chosen])
    leased = yield sql["claim_limited"], {**run.claim_params, "now": now, "ids": ids}
    type_of = {row["id"]: row["type"] for row in chosen}
    records = [
        [key, row["id"], row["lease_token"]]
        for row in leased
        if row["state"] == "active"
        for key in plan.keys.get(type_of[row["id"]], ())
    ]
    if records:
        yield sql["limit_record"], {"claims": json.dumps(records), "now": now}
    return leased


def _plan(run: LimitedRun, counted: Sequence[Row]) -> LimitedClaim:
    """``plan_claim`` given ``limit_usage``'s rows (a row per key, each with the store's
    clock: a limited claim has a key)."""
    usage = {
        str(row["key"]): LimitUsage(
            held=int(row["held"] or 0),
            started=int(row["started"] or 0),
            oldest_start_ms=None if row["oldest_start"] is None else int(row["oldest_start"]),
        )
        for row in counted
    }
    now_ms = int(counted[0]["now"])
    return plan_claim(run.limit, run.types, run.queue, run.limits, usage, now_ms)


def _pick(plan: LimitedClaim, candidates: list[Row]) -> list[Row]:
    """The candidates ``plan.pick`` takes, the candidates put in claim order first (the
    highest priority, then the earliest due; read by groups, they come merged here)."""
    ordered = sorted(candidates, key=lambda row: (-int(row["priority"]), int(row["due_at"])))
    allowed = set(plan.types)
    eligible = [row for row in ordered if row["type"] in allowed]
    picked = plan.pick((i, row["type"]) for i, row in enumerate(eligible))
    return [eligible[i] for i in picked]


def _candidate_groups(
    types: Sequence[str], caps: Mapping[str, int], limit: int
) -> list[tuple[list[str], int]]:
    """The candidates to read, as groups of types with how many of them: each capped type
    apart, at most its cap (and ``limit``); the others together, at most ``limit``. ``pick``
    over the groups merged takes what it would over every due job of ``types``."""
    free = [t for t in types if t not in caps]
    groups = [([t], min(caps[t], limit)) for t in types if t in caps]
    if free:
        groups.append((free, limit))
    return groups
