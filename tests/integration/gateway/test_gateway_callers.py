"""Behind the gateway many browsers share one upstream connection, and still each has its own
budgets: one browser's bad tokens never refuse another's calls (issue 29 G6), through the
real Envoy, which appends each browser's address to ``x-forwarded-for`` for the services to
believe (``STUD_TRUSTED_PROXIES``). The module's stack of its own refills one refused token
in 20 s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from stud.v1 import table_pb2
from studtest.gateway import (
    Stack,
    WebReply,
    gateway_stack,
    loopback_sources,
    running_gateway,
    web_call,
)
from studtest.redis import TestRedis
from studtools.devkeys import DevKeys

from .conftest import url_for

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PATH = "/stud.v1.TableService/ListTables"
REFUSED_PER_CONNECTION = "0.05"
"""Refused tokens a second per client, with one second of burst: one (max(1, 0.05)), and 20 s
to refill it. One bad call spends a client's budget, and it is still spent at the last
assertion even on a slow machine (at conftest's 0.2, a refill after 5 s could serve it)."""


@pytest.fixture(scope="module")
async def stack(module_redis: TestRedis, dev_keys: DevKeys,
                tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    """The services behind the gateway, as conftest's stack, with budgets that refill slower."""
    async with gateway_stack(url_for(module_redis), dev_keys,
                             tmp_path_factory.mktemp("gateway-callers"),
                             extra_env={"STUD_RATE_REFUSED_PER_CONNECTION":
                                        REFUSED_PER_CONNECTION}) as running:
        yield running


def list_tables(base_url: str, token: str, source: str,
                headers: dict[str, str] | None = None) -> WebReply:
    return web_call(base_url, PATH, table_pb2.ListTablesRequest(), token=token, source=source,
                    headers=headers)


def spend_the_refused_budget(base_url: str, source: str, forged: str) -> list[int]:
    """Bad tokens from ``source`` (claiming to be ``forged`` in its own x-forwarded-for)
    until the service refuses before looking at them."""
    codes = []
    for _ in range(4):
        reply = list_tables(base_url, "bad-token", source, {"x-forwarded-for": forged})
        codes.append(reply.status)
        if reply.status == 8:  # RESOURCE_EXHAUSTED: the budget is spent
            break
    return codes


async def test_one_browsers_bad_tokens_never_refuse_anothers(stack: Stack) -> None:
    flooder, other, third = loopback_sources(3)
    codes = spend_the_refused_budget(stack.gateway.url, flooder, forged=other)
    assert codes[0] == 16 and codes[-1] == 8, codes  # UNAUTHENTICATED, then refused at once
    # Another browser, whose token the service never saw, on the same upstream connection:
    # served (its address is its own budget; the flooder's forged hop was not believed).
    reply = list_tables(stack.gateway.url, stack.token("fresh-browser"), other)
    assert reply.status == 0, (reply.status, reply.message)
    # Its bad token is refused for what it is, not for the flooder's.
    assert list_tables(stack.gateway.url, "bad-too", third).status == 16
    # The flooder is still refused, whatever token it shows now.
    assert list_tables(stack.gateway.url, stack.token("flooder-good"), flooder).status == 8


async def test_without_the_gateway_believed_one_browser_refuses_all(stack: Stack,
                                                                    tmp_path: Path) -> None:
    """The control: a gateway the services do not believe (it connects from 127.0.0.1, not
    from the trusted 127.0.0.2): the budgets are the shared upstream connection's."""
    flooder, other = loopback_sources(5)[3:]
    with running_gateway(stack.targets, tmp_path / "untrusted",
                         upstream_source="127.0.0.1") as gateway:
        codes = spend_the_refused_budget(gateway.url, flooder, forged=other)
        assert codes[-1] == 8, codes
        reply = list_tables(gateway.url, stack.token("fresh-behind-untrusted"), other)
        assert reply.status == 8, "the control should share the flooder's budget"
