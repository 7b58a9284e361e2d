"""Key names of one namespace: the default queue's space under the hash tag ``{ns}``, each
named queue's under ``{ns|<queue>}``, so a Redis Cluster spreads queues over its masters.

A queue's *space* holds everything a job of that queue touches atomically: records, ready and
leased sets, state indexes, finished sets, the key index, signals, workflows. The default
queue's space is ``{ns}`` (the names it always had: data stored before queues had slots stays
readable); a named queue ``Q``'s is ``{ns|Q}`` ('|' is in no queue name, ``check_queue``, and in
no namespace, ``validate_namespace``, so two spaces are never spelled alike). Namespace-level
keys (workers, audit, counters, pauses, the set of named queues in use) stay in ``{ns}``.
``Keys(ns)`` names the default space and the namespace's keys, ``Keys(ns, queue=Q)`` Q's
space (its namespace-level names are unused). Every key below is ``<space prefix><name>``::

    {ns}:job:<id>        hash    the job record
    {ns}:ready:<type>    zset    pending jobs of a type, score = run_at (epoch ms)
    {ns}:leased:<type>   zset    active jobs of a type, score = lease expiry (epoch ms)
    {ns}:qready:<queue>/<type>   zset  the same, of a named queue other than "default"
    {ns}:qleased:<queue>/<type>  zset  (a queue name holds no '/'; in the queue's space)
    {ns}:types:lanes     set     '<queue>/<type>' of every named queue's jobs (stats walks it)
    {ns}:lane:live:<queue>/<type>     zset  a named queue's pending and active jobs of a type,
                                            score = created_at (list_jobs(queue=) pages it)
    {ns}:lane:<state>:<queue>/<type>  zset  its completed, failed or cancelled ones, likewise
                                            (queue_stats counts them; pruned with the state
                                            indexes). The default queue has no lane index.
    {ns}:signal:<type>   list    wake-up signals for idle runners of a type (trimmed, short TTL)
    {ns}:key:<key>       string  idempotency key -> id of the job holding it
    {ns}:completed       zset    completed jobs, score = end of retention (epoch ms)
    {ns}:failed          zset    failed jobs, likewise
    {ns}:cancelled       zset    cancelled jobs, likewise
    {ns}:state:<state>   zset    jobs in a state, score = created_at (list_jobs pages these)
    {ns}:state:<state>:<type>    zset    jobs of a type in a state, likewise
    {ns}:types           set     the job types ever enqueued (stats walks them)
    {ns}:workflow:<id>   hash    a workflow's job ids in order, how many are open, what its
                                 settles need (see the workflow helpers in lua/common.lua)
    {ns}:limit:held:<key>    hash  a fleet limit's holders: job id -> the leased zset and lease
                                   token of the claim that took it (``type:<t>``/``queue:<q>``
                                   keys of ``jobs.spi.limits``; pruned by claims, expires)
    {ns}:limit:starts:<key>  zset  a fleet limit's claims: lease token, score = claimed at
                                   (trimmed to its window by claims, expires); both in the
                                   claiming queue's space, so a type's limit counts per queue

and, in ``{ns}`` only (the namespace's)::

    {ns}:paused          set     the paused named queues (runners leave them out of claims)
    {ns}:queues          set     the named queues that have a space (look-ups by id, key or
                                 workflow, listings and counts walk them: ``spaces``)
    {ns}:workers         hash    worker id -> its registration (JSON)
    {ns}:workers:seen    zset    worker id, score = when its registration expires
    {ns}:audit           zset    operators' actions (JSON, id first), score = at (epoch ms)
    {ns}:counts          zset    the minutes that have outcome counters, score = the minute
    {ns}:counts:<minute> hash    ["type", "outcome", "count"|"duration_ms"|bucket] -> number

States never hold ':', so ``state:<state>`` and ``state:<state>:<type>`` cannot collide.

Ids, types and keys after the tag may hold any characters: the kind segment (``job:``,
``ready:`` ...) keeps the spaces apart. The namespace may not hold ``{``, ``}`` (which would
move the hash tag and let one namespace's keys be spelled as another's) or ``|`` (which would
let a namespace's default space be spelled as another's queue space).
"""

from __future__ import annotations

import re

from jobs.spi.support import DEFAULT_QUEUE

MAX_NAMESPACE_LENGTH = 200
SPACE_MARK = "|"
"""Separates the namespace from a named queue in the queue's hash tag, ``{ns|queue}``."""
_GLOB_SPECIAL = re.compile(r"([\\*?\[\]])")


def validate_namespace(namespace: str) -> str:
    """The namespace, or ValueError if it cannot name a key space."""
    if not isinstance(namespace, str) or not namespace:
        raise ValueError("a Redis job namespace must be a non-empty string")
    if "{" in namespace or "}" in namespace or SPACE_MARK in namespace:
        raise ValueError(
            f"a Redis job namespace may not contain '{{', '}}' or '{SPACE_MARK}' (it is the "
            f"key's hash tag; '{SPACE_MARK}' separates a queue's space), got {namespace!r}"
        )
    if len(namespace) > MAX_NAMESPACE_LENGTH:
        raise ValueError(f"a Redis job namespace is at most {MAX_NAMESPACE_LENGTH} characters")
    return namespace


def escape_glob(text: str) -> str:
    """``text`` with the glob characters of SCAN MATCH / KEYS patterns escaped."""
    return _GLOB_SPECIAL.sub(r"\\\1", text)


class Keys:
    """The key names of one namespace."""

    __slots__ = (
        "audit",
        "cancelled",
        "completed",
        "counts",
        "failed",
        "index_prefix",
        "job_prefix",
        "namespace",
        "paused",
        "prefix",
        "queue",
        "queues",
        "state_prefix",
        "types",
        "workers",
        "workers_seen",
    )

    def __init__(self, namespace: str, queue: str = DEFAULT_QUEUE) -> None:
        self.namespace = validate_namespace(namespace)
        self.queue = queue
        """The queue whose space these keys name ("default": the namespace's own ``{ns}``)."""
        tag = namespace if queue == DEFAULT_QUEUE else namespace + SPACE_MARK + queue
        self.prefix = "{" + tag + "}:"
        self.job_prefix = self.prefix + "job:"
        self.index_prefix = self.prefix + "key:"
        self.completed = self.prefix + "completed"
        self.failed = self.prefix + "failed"
        self.cancelled = self.prefix + "cancelled"
        self.state_prefix = self.prefix + "state:"
        self.types = self.prefix + "types"
        self.workers = self.prefix + "workers"
        self.workers_seen = self.prefix + "workers:seen"
        self.audit = self.prefix + "audit"
        self.counts = self.prefix + "counts"
        self.paused = self.prefix + "paused"
        self.queues = self.prefix + "queues"

    def job(self, job_id: str) -> str:
        return self.job_prefix + job_id

    def ready(self, job_type: str, queue: str = DEFAULT_QUEUE) -> str:
        if queue == DEFAULT_QUEUE:
            return self.prefix + "ready:" + job_type
        return self.prefix + "qready:" + queue + "/" + job_type

    def leased(self, job_type: str, queue: str = DEFAULT_QUEUE) -> str:
        if queue == DEFAULT_QUEUE:
            return self.prefix + "leased:" + job_type
        return self.prefix + "qleased:" + queue + "/" + job_type

    def lane(self, what: str, queue: str, job_type: str) -> str:
        """A named queue's lane index: ``what`` is 'live' or a finished state."""
        return self.prefix + "lane:" + what + ":" + queue + "/" + job_type

    def signal(self, job_type: str) -> str:
        return self.prefix + "signal:" + job_type

    def workflow(self, workflow_id: str) -> str:
        return self.prefix + "workflow:" + workflow_id

    def index(self, key: str) -> str:
        return self.index_prefix + key

    def limit_held(self, limit_key: str) -> str:
        """The holders counted by a fleet limit (``jobs.spi.limits.type_key``/``queue_key``)."""
        return self.prefix + "limit:held:" + limit_key

    def limit_starts(self, limit_key: str) -> str:
        """The claims a fleet limit's rate counts."""
        return self.prefix + "limit:starts:" + limit_key

    def finished(self, state: str) -> str:
        return {"completed": self.completed, "cancelled": self.cancelled}.get(state, self.failed)

    def state(self, state: str, job_type: str | None = None) -> str:
        name = self.state_prefix + state
        return name if job_type is None else name + ":" + job_type

    @property
    def pattern(self) -> str:
        """A SCAN MATCH pattern for every key of this space and no other."""
        return escape_glob(self.prefix) + "*"

    @property
    def namespace_pattern(self) -> str:
        """A SCAN MATCH pattern for every key of the namespace, its queues' spaces included
        (``{ns}:...`` and ``{ns|<queue>}:...``), and no other namespace's."""
        return escape_glob("{" + self.namespace) + "[}" + SPACE_MARK + "]*"

    def of_queue(self, queue: str) -> Keys:
        """The keys of ``queue``'s space in this namespace."""
        return Keys(self.namespace, queue)
