"""Shared fixtures. Levels: ``tests/unit`` and ``tests/property`` are pure (no I/O);
``tests/integration`` uses a real Redis and real in-process gRPC servers; ``tests/e2e`` starts
the services as separate processes and talks to them only through their gRPC APIs."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from studkit.redis_client import connect_sync
from studtest.postgres import HistoryDsns, TestPostgres, test_postgres
from studtest.redis import RedisSource, TestRedis, test_redis
from studtools.devkeys import DevKeys

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.register_profile("long", deadline=None, max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

SERVICE_PASSWORDS = {
    "table": "table-test-pw",
    "dealer": "dealer-test-pw",
    "wallet": "wallet-test-pw",
    "tournament": "tournament-test-pw",
    "archiver": "archiver-test-pw",
    "auditor": "auditor-test-pw",
}


@pytest.fixture(scope="session")
def redis_server() -> Iterator[TestRedis]:
    """A real Redis for the whole session (see ``studtest.redis``)."""
    with test_redis(os.environ, SERVICE_PASSWORDS) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: TestRedis) -> Iterator[str]:
    """Admin URL of the session's Redis, flushed before each test."""
    if redis_server.source is RedisSource.ENV and not os.environ.get("STUD_TEST_ALLOW_FLUSH"):
        pytest.fail("REDIS_URL is set: the tests would FLUSHALL that Redis. Set "
                    "STUD_TEST_ALLOW_FLUSH=1 if it is a throwaway instance.")
    client = connect_sync(redis_server.url)
    client.flushall()
    client.close()
    yield redis_server.url


@pytest.fixture(scope="session")
def postgres() -> Iterator[TestPostgres]:
    """A real PostgreSQL for the session, started only when a test asks for it (see
    ``studtest.postgres``)."""
    with test_postgres() as server:
        yield server


@pytest.fixture
def history_dsns(postgres: TestPostgres) -> Iterator[HistoryDsns]:
    """A fresh, migrated archive database for one test, as each role reaches it."""
    dsns = postgres.fresh()
    yield dsns
    postgres.drop(dsns)


@pytest.fixture(scope="session")
def dev_keys() -> DevKeys:
    """Generated Ed25519 keys for the session: the issuer's and one per service."""
    return DevKeys.generate()
