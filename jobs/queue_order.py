"""Which named queues a runner claims from, and in what order for each claim.

Strict order (no weights): every claim tries the first queue, then the next only while the
claim is short, so a later queue waits until the ones before it have nothing due. Weights
(``critical=3,default=1``): each claim draws the order at random, a queue coming first in
proportion to its weight (then the rest, likewise), as Sidekiq's weighted queues do: no queue
starves, a heavier one is drained more often. A runner given no queues serves ``"default"``
then the queues its handlers name.
"""

from __future__ import annotations

import random
from collections.abc import Collection

from .options import DEFAULT_QUEUE, QueueWeights, parse_queues

__all__ = ["ClaimOrder", "served_queues"]


def served_queues(configured: object, named_by_handlers: Collection[str]) -> QueueWeights:
    """The queues a runner serves: ``configured`` (parsed) when given, else ``"default"`` then
    ``named_by_handlers`` in strict order."""
    if configured is not None:
        return parse_queues(configured, "the runner")
    others = tuple(name for name in named_by_handlers if name != DEFAULT_QUEUE)
    return QueueWeights((DEFAULT_QUEUE, *others))


class ClaimOrder:
    """The order of the queues one claim tries."""

    __slots__ = ("_names", "_random", "_weights", "queues", "single")

    def __init__(self, queues: QueueWeights, rng: random.Random | None = None) -> None:
        self.queues = queues
        self._names = queues.names
        self._weights = queues.weights
        self._random = rng or random.Random()
        self.single: str | None = queues.names[0] if len(queues.names) == 1 else None
        """The one queue served, or None when there are several."""

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def next(self) -> tuple[str, ...]:
        """The queues, in the order this claim tries them."""
        weights = self._weights
        if weights is None:
            return self._names
        names, left = list(self._names), list(weights)
        order: list[str] = []
        choose = self._random.choices
        while names:
            index = choose(range(len(names)), weights=left)[0]
            order.append(names.pop(index))
            left.pop(index)
        return tuple(order)
