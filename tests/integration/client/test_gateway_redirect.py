"""The SDK through the gRPC-Web gateway (the real Envoy, ``studtest.gateway``) in front of two
table replicas: connected only to the gateway (``via_gateway=True``), it follows a
``not_owner`` redirect by repeating the call to the gateway with the ``stud-owner`` header,
never by dialing the owner, for unary calls, commands and the live watch."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from studclient import Client, RetryPolicy, StudError
from studclient.client import TLS_CA_ENV, VIA_GATEWAY_ENV
from studkit.auth import Principal
from studtest.gateway import OTHER_HOST, owned_by, replicas_behind_gateway
from studtest.redis import TestRedis
from studtest.table import OPERATOR, fast_settings, player
from studtools.devkeys import DevKeys

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def entries(log: Path) -> list[dict[str, object]]:
    """The gateway's access log (JSON lines)."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def logged(log: Path, done: Callable[[list[dict[str, object]]], bool]
                 ) -> list[dict[str, object]]:
    """The access log once ``done`` holds of it (Envoy writes it out every ten seconds)."""
    for _ in range(300):
        if done(found := entries(log)):
            return found
        await asyncio.sleep(0.1)
    return found


def upstreams_of(found: list[dict[str, object]], method: str) -> set[object]:
    """The upstream hosts the gateway sent ``method``'s calls to."""
    return {e["upstream"] for e in found if str(e["path"]).endswith(f"/{method}")}


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_the_sdk_follows_not_owner_through_the_gateway(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, tls: bool) -> None:
    """Over plain HTTP/2 (make run's gateway) and over TLS (Kubernetes'), the roots to
    trust given by the environment (``STUD_TLS_CA``: its self-signed certificate)."""
    async with replicas_behind_gateway(redis_server, redis_url, dev_keys,
                                       tmp_path / "gateway", tls=tls) as two, \
            contextlib.AsyncExitStack() as stack:
        gateway = two.gateway
        if tls:
            assert gateway.settings.tls_cert is not None
            monkeypatch.setenv(TLS_CA_ENV, gateway.settings.tls_cert)
        log = two.log
        address = two.address
        tokens = two.tokens

        def connect(who: Principal, via_gateway: bool | None = None) -> Client:
            client = Client.connect(address, address, address,
                                    lambda: tokens.token(who), via_gateway=via_gateway)
            stack.push_async_callback(client.close)
            return client

        # A table that r1 will own, opened while r0 is alone (r0 owns it) and watched.
        table_id = owned_by("r1", ["r0", "r1"], "gw-routed")
        ops = connect(OPERATOR, via_gateway=True)
        await ops.open_table(table_id, settings=fast_settings())
        await ops.create_account("ann")
        await ops.deposit("ann", 100_000)
        watcher = connect(player("ann"), via_gateway=True)
        sequences: list[int] = []
        async with asyncio.timeout(60), watcher.watch(
                table_id, cards=False,
                on_event=lambda record: sequences.append(record.sequence)) as watch:
            assert watcher.route(table_id) is None
            # r1 comes up on another address: the table is handed over to it, and the
            # watch's stream, ended by r0 (not_owner or table_moved), is resumed (after its
            # last sequence) through the gateway with the owner's header.
            r1 = await two.add_replica(OTHER_HOST)
            owner = r1.address
            assert table_id in r1.deps.app.actors
            # A command and a unary call of a client told by the environment (stud play,
            # stud bots), from the Service's replica's not_owner to the owner.
            monkeypatch.setenv(VIA_GATEWAY_ENV, "1")
            ann = connect(player("ann"))
            assert ann.via_gateway
            await ann.sit(table_id, 1, 10_000)
            assert ann.route(table_id) == owner
            assert any(s.player_id == "ann" for s in (await ann.get_table(table_id)).seats)
            async for view in watch.views():
                if any(s.player_id == "ann" for s in view.seats):
                    break
            assert watch.last_sequence == (await ann.get_table(table_id)).version
            assert watcher.route(table_id) == owner and watch.resumes >= 1
        assert sequences == sorted(set(sequences)), sequences  # nothing twice
        await watcher.close()  # the stream's line is logged once it ends
        # Without via_gateway (and no environment), the client dials the owner itself.
        monkeypatch.delenv(VIA_GATEWAY_ENV)
        direct = connect(player("ann"))
        assert (await direct.get_table(table_id)).table_id == table_id
        assert direct.route(table_id) == owner and not direct.via_gateway
        assert direct.table_stub(table_id) is not direct.table_stub()
        for client in (ops, ann, watcher):
            assert client.table_stub(table_id) is client.table_stub()
        if tls:  # the gateway serves TLS alone: a plaintext client does not get in
            plain = Client.connect(address, token=tokens.token(player("ann")), tls=False,
                                   retry=RetryPolicy(attempts=1, patience_s=0, timeout_s=2))
            stack.push_async_callback(plain.close)
            with pytest.raises(StudError):
                await plain.get_table(table_id)
        # The owner got the calls through the gateway (never dialed by the clients): the
        # gateway's log names it as the upstream of each kind of call.
        methods = ("GetTable", "SitDown", "WatchTable")
        found = await logged(log, lambda found: all(
            owner in upstreams_of(found, m) for m in methods))
        for method in methods:
            assert owner in upstreams_of(found, method), (method, found)
