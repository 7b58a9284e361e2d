"""Private Redis topologies for the tests: a Redis Cluster, and a Sentinel-watched primary.

Every server runs on a free loopback port in ``PORTS`` (a cluster node's bus port is +10000),
with its files under the test's directory, and is stopped at teardown; the shared server on
127.0.0.1:6379 is never touched. Setup waits on conditions with deadlines (cluster state ok,
replication links up, the sentinel seeing the replica), never on a fixed sleep.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from jobs.testing.redis_server import redis_server_binary

PORTS = range(7000, 7300)
BUS_OFFSET = 10_000
SETUP_TIMEOUT_S = 60.0
"""Generous: on a loaded 2-core machine a cluster can take tens of seconds to agree."""
SERVICE = "jobs-primary"


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


_next_port = PORTS.start


def take_ports(count: int, *, with_bus: bool = False) -> list[int]:
    """``count`` free ports of ``PORTS`` (and their bus ports free too, ``with_bus``)."""
    global _next_port
    found: list[int] = []
    for _ in range(len(PORTS)):
        port = _next_port
        _next_port = PORTS.start + (_next_port + 1 - PORTS.start) % len(PORTS)
        if port_free(port) and (not with_bus or port_free(port + BUS_OFFSET)):
            found.append(port)
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} free loopback ports in {PORTS}")


def wait_for(condition: Callable[[], bool], what: str, timeout: float = SETUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except (redis.ConnectionError, redis.ResponseError, redis.TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


class Process:
    """One redis-server (or sentinel) process on 127.0.0.1:``port``, files in ``directory``."""

    def __init__(self, directory: Path, port: int, args: list[str]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.port = port
        self.log = directory / "redis.log"
        self._process = subprocess.Popen(
            [redis_server_binary(), *args],
            cwd=directory,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def admin(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)

    def ask(self, *command: str) -> Any:
        """One command's reply, on a connection opened and closed for it."""
        admin = self.admin()
        try:
            return admin.execute_command(*command)
        finally:
            admin.close()

    def info(self, section: str) -> dict[str, Any]:
        admin = self.admin()
        try:
            return dict(admin.info(section))
        finally:
            admin.close()

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no log)"


def server_args(port: int, directory: Path, *extra: str) -> list[str]:
    return [
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
        "--save", "", "--appendonly", "no", "--daemonize", "no",
        "--logfile", str(directory / "redis.log"), *extra,
    ]  # fmt: skip


class PrivateCluster:
    """``masters`` masters with one replica each, slots spread by ``redis-cli --cluster``."""

    def __init__(self, directory: Path, masters: int = 3) -> None:
        self.directory = directory
        self.nodes: list[Process] = []
        ports = take_ports(masters * 2, with_bus=True)
        try:
            for port in ports:
                node_dir = directory / f"node-{port}"
                node_dir.mkdir(parents=True, exist_ok=True)
                args = server_args(
                    port, node_dir, "--cluster-enabled", "yes",
                    "--cluster-config-file", str(node_dir / "nodes.conf"),
                    "--cluster-node-timeout", "2000",
                )  # fmt: skip
                self.nodes.append(Process(node_dir, port, args))
            for node in self.nodes:
                wait_for(lambda node=node: bool(node.ask("PING")), f"node {node.port}")
            create = [
                _redis_cli(), "--cluster", "create",
                *(f"127.0.0.1:{port}" for port in ports),
                "--cluster-replicas", "1", "--cluster-yes",
            ]  # fmt: skip
            subprocess.run(create, check=True, capture_output=True, timeout=SETUP_TIMEOUT_S)
            wait_for(self.healthy, "the cluster to be ok with every replica in sync")
        except BaseException:
            self.stop()
            raise

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", node.port) for node in self.nodes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def node(self, port: int) -> Process:
        return next(node for node in self.nodes if node.port == port)

    def healthy(self) -> bool:
        for node in self.nodes:
            if "cluster_state:ok" not in node.ask("CLUSTER", "INFO"):
                return False
            info = node.info("replication")
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def master_of(self, slot: int) -> int:
        """The port of the master serving ``slot`` now."""
        for node in self.nodes:  # ask a node that is up and knows the new map
            try:
                slots = node.ask("CLUSTER", "SLOTS")
            except redis.ConnectionError:
                continue
            for start, end, master, *_ in slots:
                if start <= slot <= end:
                    return int(master[1])
        raise AssertionError(f"no master serves slot {slot}")

    def replica_of(self, master_port: int) -> int:
        return int(self.node(master_port).info("replication")["slave0"]["port"])

    def failover(self, slot: int) -> tuple[int, int]:
        """``CLUSTER FAILOVER`` on the replica of ``slot``'s master; (old, new) master ports."""
        old = self.master_of(slot)
        new = self.replica_of(old)
        self.node(new).ask("CLUSTER", "FAILOVER")
        wait_for(lambda: self.master_of(slot) == new, f"port {new} to take over slot {slot}")
        return old, new

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class PrivateSentinel:
    """A primary, one replica and one sentinel watching them as ``SERVICE``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        primary_port, replica_port, sentinel_port = take_ports(3)
        self.processes: list[Process] = []
        try:
            self.primary = self._server(primary_port)
            self.replica = self._server(replica_port, "--replicaof", "127.0.0.1", str(primary_port))
            sentinel_dir = directory / f"sentinel-{sentinel_port}"
            sentinel_dir.mkdir(parents=True, exist_ok=True)
            config = sentinel_dir / "sentinel.conf"
            config.write_text(
                f"port {sentinel_port}\nbind 127.0.0.1\ndir {sentinel_dir}\n"
                f"logfile {sentinel_dir / 'redis.log'}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 1\n"
                f"sentinel down-after-milliseconds {SERVICE} 1000\n"
                f"sentinel failover-timeout {SERVICE} 10000\n"
            )
            self.sentinel = Process(sentinel_dir, sentinel_port, [str(config), "--sentinel"])
            self.processes.append(self.sentinel)
            wait_for(self._replica_linked, "the replica to sync with the primary")
            wait_for(self._sentinel_sees_replica, "the sentinel to discover the replica")
        except BaseException:
            self.stop()
            raise

    @property
    def sentinels(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", self.sentinel.port)]

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/{SERVICE}"

    def primary_port(self) -> int:
        _, port = self.sentinel.ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(port)

    def failover(self) -> tuple[int, int]:
        """``SENTINEL FAILOVER``; (old, new) primary ports once the sentinel reports the new one."""
        old = self.primary_port()
        self.sentinel.ask("SENTINEL", "FAILOVER", SERVICE)
        wait_for(lambda: self.primary_port() != old, "the sentinel to promote the replica")
        return old, self.primary_port()

    def stop(self) -> None:
        for process in self.processes:
            process.stop()

    def _server(self, port: int, *extra: str) -> Process:
        directory = self.directory / f"server-{port}"
        directory.mkdir(parents=True, exist_ok=True)
        process = Process(directory, port, server_args(port, directory, *extra))
        self.processes.append(process)
        wait_for(lambda: bool(process.ask("PING")), f"redis-server on {port}")
        return process

    def _replica_linked(self) -> bool:
        return self.replica.info("replication").get("master_link_status") == "up"

    def _sentinel_sees_replica(self) -> bool:
        replicas = self.sentinel.ask("SENTINEL", "REPLICAS", SERVICE)
        return any("s_down" not in str(replica) for replica in replicas)


def _redis_cli() -> str:
    binary = shutil.which("redis-cli")
    if binary is None:
        raise AssertionError("redis-cli is not on PATH; the cluster tests need it")
    return binary
