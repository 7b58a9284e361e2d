"""Live workers kept in memory with a time to live (the in-process driver's worker registry)."""

from __future__ import annotations

from dataclasses import dataclass

from .clock import Clock, to_datetime
from .spi.records import WorkerInfo, WorkerRegistration


@dataclass(slots=True)
class _Worker:
    registration: WorkerRegistration
    started_at: int
    last_seen: int
    expires_at: int


class WorkerTable:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._workers: dict[str, _Worker] = {}

    def register(self, worker: WorkerRegistration, ttl_ms: int) -> None:
        now = self._clock.now_ms()
        known = self._workers.get(worker.id)
        started = known.started_at if known is not None and known.expires_at > now else now
        self._workers[worker.id] = _Worker(worker, started, now, now + ttl_ms)

    def deregister(self, worker_id: str) -> None:
        self._workers.pop(worker_id, None)

    def live(self) -> list[WorkerInfo]:
        now = self._clock.now_ms()
        for worker_id in [w for w, known in self._workers.items() if known.expires_at <= now]:
            del self._workers[worker_id]
        live = sorted(self._workers.values(), key=lambda w: (w.started_at, w.registration.id))
        return [_info(worker) for worker in live]


def _info(worker: _Worker) -> WorkerInfo:
    registration = worker.registration
    return WorkerInfo(
        id=registration.id,
        host=registration.host,
        pid=registration.pid,
        types=registration.types,
        concurrency=registration.concurrency,
        in_flight=registration.in_flight,
        started_at=to_datetime(worker.started_at),
        last_seen=to_datetime(worker.last_seen),
        queues=registration.queues,
    )
