"""Fleet-wide limits in the SQL job store's claim (``jobs.spi.limits``): count, choose and
record in the claim's own transaction.

A claim given ``ClaimLimits`` that apply to it runs ``limited_claim_steps``, statements in one
transaction (``sql/jobs_*.sql``: ``limit_usage``, ``limit_candidates``, ``claim_limited``):

1. PostgreSQL: the transaction opens with ``pg_advisory_xact_lock`` on each limit key, in
   ``ClaimLimits.keys`` order (``lock_script``), so two claims under one key run one after the
   other and never both take its last place. A statement of its own, before the count: READ
   COMMITTED takes a statement's snapshot when it starts, so a count that waited for the lock
   in the same statement would not see the claims of the transaction it waited for. SQLite
   needs no lock: its write transaction is the only one (``sqlite_writes``).
2. Count what each key holds and started (``limit_usage``; ``<prefix>limit_claims``: a row per
   job claimed under a key, its lease token and when), deleting the dead rows in passing.
3. ``plan_claim`` (the semantics shared with every driver).
4. Read the candidates in claim order, locked (``limit_candidates``): each capped type apart,
   at most its room, the others together, at most the plan's limit, so that a type at its cap
   does not crowd the others out; ``plan.pick`` chooses among them.
5. Lease exactly those (``claim_limited``: the plain claim's SET list, ``claim_lease``) and
   record each leased job under its keys.

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
    keyed = run.limits.keys(run.types, run.queue)
    windows = [[key, limit.per_ms] for key, limit in keyed]
    if postgres:
        keys: dict[str, Any] = {
            "keys": [key for key, _ in windows],
            "windows": [per_ms for _, per_ms in windows],
        }
    else:
        keys = {"keys": json.dumps(windows)}
        yield sql["limit_dead"], {**keys, "now": now}
    counted = yield sql["limit_usage"], {**keys, "now": now}
    usage, now_ms = _usage(counted)
    plan = run.plan = plan_claim(run.limit, run.types, run.queue, run.limits, usage, now_ms)
    if not plan.types or plan.limit <= 0:
        return []
    groups = _candidate_groups(plan)
    if postgres:
        candidates = yield sql["limit_candidates"], _group_params(groups, run.queue, now)
    else:
        candidates = yield from _sqlite_candidates(sql, groups, run.queue, now)
    chosen = [
        candidates[i] for i in plan.pick((i, row["type"]) for i, row in enumerate(candidates))
    ]
    if not chosen:
        return []
    ids = [row["id"] for row in chosen]
    keys_of = {row["id"]: plan.keys.get(row["type"], []) for row in chosen}
    params = {**run.claim_params, "now": now}
    if postgres:
        pairs = [(job_id, key) for job_id, keys_ in keys_of.items() for key in keys_]
        return (
            yield (
                sql["claim_limited"],
                {
                    **params,
                    "ids": ids,
                    "record_ids": [job_id for job_id, _ in pairs],
                    "record_keys": [key for _, key in pairs],
                },
            )
        )
    leased = yield sql["claim_limited"], {**params, "ids": json.dumps(ids)}
    records = [
        [key, row["id"], row["lease_token"]]
        for row in leased
        if row["state"] == "active"
        for key in keys_of[row["id"]]
    ]
    if records:
        yield sql["limit_record"], {"claims": json.dumps(records), "now": now}
    return leased


def _usage(rows: Sequence[Row]) -> tuple[dict[str, LimitUsage], int]:
    """``limit_usage``'s rows as ``plan_claim`` takes them, and the store's clock (each row
    carries it; there is a row per key, and a limited claim has a key)."""
    usage = {
        str(row["key"]): LimitUsage(
            held=int(row["held"] or 0),
            started=int(row["started"] or 0),
            oldest_start_ms=None if row["oldest_start"] is None else int(row["oldest_start"]),
        )
        for row in rows
    }
    return usage, int(rows[0]["now"])


def _candidate_groups(plan: LimitedClaim) -> list[tuple[list[str], int]]:
    """The candidates to read, as groups of types with how many of them: each capped type
    apart, at most its room (and the claim's limit); the others together, at most the
    limit. ``plan.pick`` over the merged groups takes what it would over every due job."""
    free = [t for t in plan.types if t not in plan.caps]
    groups = [([t], min(plan.caps[t], plan.limit)) for t in plan.types if t in plan.caps]
    if free:
        groups.append((free, plan.limit))
    return groups


def _group_params(groups: list[tuple[list[str], int]], queue: str, now: Any) -> dict[str, Any]:
    """PostgreSQL ``limit_candidates``: each type with its group's number (from 1), and the
    caps by group."""
    return {
        "now": now,
        "queue": queue,
        "types": [t for types, _ in groups for t in types],
        "groups": [n for n, (types, _) in enumerate(groups, 1) for _ in types],
        "caps": [cap for _, cap in groups],
    }


def _sqlite_candidates(
    sql: Mapping[str, Statement], groups: list[tuple[list[str], int]], queue: str, now: Any
) -> Steps:
    """SQLite ``limit_candidates``, a statement per group (no round trips to save), merged in
    claim order: the highest priority, then the earliest due."""
    found: list[Row] = []
    for types, cap in groups:
        params = {"now": now, "queue": queue, "types": json.dumps(types), "limit": cap}
        found.extend((yield sql["limit_candidates"], params))
    found.sort(key=lambda row: (-int(row["priority"]), int(row["due_at"])))
    return found
