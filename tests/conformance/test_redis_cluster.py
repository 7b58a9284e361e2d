"""The conformance suite on a private 3-master Redis Cluster (with a replica each).

The cluster is started once for the module (``topologies.PrivateCluster``) and each test uses a
fresh namespace, whose hash tag puts all of its keys in one slot; the driver is given a
``RedisCluster`` client, which routes every script to that slot's master.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jobs.testing import DriverConformance, DriverHarness
from tests.integration.redis.harness import RedisHarness, cluster_at
from tests.integration.redis.topologies import PrivateCluster

pytestmark = pytest.mark.cluster


class TestRedisClusterDriver(DriverConformance):
    @pytest.fixture
    async def driver_harness(self, cluster: PrivateCluster) -> AsyncIterator[DriverHarness]:
        harness = RedisHarness(connect=cluster_at(cluster.url))
        yield harness
        await harness.cleanup()
