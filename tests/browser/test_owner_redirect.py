"""The web client behind the gateway in front of two table replicas (docs/web.md "Web client:
table owners"): a page follows a table's ``not_owner`` refusal by repeating the call with the
``stud-owner`` header, for unary calls, commands and the live watch, and never loses or
doubles an event across a handover (the SDK's test: tests/integration/client/
test_gateway_redirect.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import grpc
import pytest
from playwright.async_api import Browser, expect

from stud.v1 import table_pb2, table_pb2_grpc
from studclient import Client
from studkit.auth import Principal
from studtest.gateway import OTHER_HOST, owned_by, replicas_behind_gateway
from studtest.redis import TestRedis
from studtest.table import OPERATOR, fast_settings, player
from studtools.devkeys import DevKeys

from .conftest import CAPTURE, WAIT_MS, Player, web_dist
from .test_table_play import click_one, sit

pytestmark = pytest.mark.integration


def upstreams_of(log: Path, method: str) -> set[object]:
    """The upstream hosts the gateway sent ``method``'s calls to (its JSON access log)."""
    lines = log.read_text().splitlines() if log.exists() else []
    return {e["upstream"] for e in map(json.loads, lines) if str(e["path"]).endswith(f"/{method}")}


async def received(p: Player, table_id: str) -> list[int]:
    return list(await p.page.evaluate(
        "id => window.stud.panes.get(id).received.map(Number)", table_id))


async def test_a_page_follows_its_table_to_the_owner_through_the_gateway(
        redis_server: TestRedis, redis_url: str, dev_keys: DevKeys, tmp_path: Path,
        browser: Browser) -> None:
    async with replicas_behind_gateway(redis_server, redis_url, dev_keys,
                                       tmp_path / "gateway", web_root=web_dist()) as two, \
            contextlib.AsyncExitStack() as stack:
        gateway = two.gateway
        log = two.log
        address = two.address
        tokens = two.tokens

        def connect(who: Principal) -> Client:
            client = Client.connect(address, address, address, lambda: tokens.token(who),
                                    via_gateway=True)
            stack.push_async_callback(client.close)
            return client

        async def open_page(name: str, path: str) -> Player:
            context = await browser.new_context(viewport={"width": 1200, "height": 900})
            stack.push_async_callback(context.close)
            context.set_default_timeout(WAIT_MS)
            await context.add_init_script(CAPTURE)
            page = await context.new_page()
            await page.goto(f"{gateway.url.rstrip('/')}{path}#token={tokens.token(player(name))}")
            return Player(name, context, page)

        async def routes_of(p: Player) -> dict[str, str]:
            return dict(await p.page.evaluate("Object.fromEntries(window.stud.routes)"))

        # A table that r1 will own, opened while r0 is alone (r0 owns it).
        table_id = owned_by("r1", ["r0", "r1"], "web-routed")
        ops = connect(OPERATOR)
        await ops.open_table(table_id, settings=fast_settings(next_hand_delay_ms=300))
        for name in ("alice", "bob"):
            await ops.create_account(name)
            await ops.deposit(name, 100_000)
        alice = await open_page("alice", f"/?table={table_id}")
        await sit(alice, table_id, 1)
        assert await alice.page.evaluate("window.stud.routes.size") == 0
        before = await received(alice, table_id)
        # r1 comes up on another address: the table is handed over to it mid-watch.
        r1 = await two.add_replica(OTHER_HOST)
        owner = r1.address
        assert table_id in r1.deps.app.actors
        # A page opened now is refused not_owner by the Service's replica and follows.
        bob = await open_page("bob", f"/?table={table_id}")
        await sit(bob, table_id, 2)
        await expect(alice.pane(table_id).get_by_role("region", name="Seat 2")).to_contain_text(
            "bob")
        watches = await alice.page.evaluate(
            "window.__net.filter(e => e.url.endsWith('/WatchTable')).length")
        assert watches >= 2, "alice's watch was never ended by the handover"
        for p in (alice, bob):
            assert await routes_of(p) == {table_id: owner}, p.name

        async def play_until(hand: int) -> None:
            """Click the offered actions in both pages until ``hand`` has ended."""
            async with asyncio.timeout(120):
                turn = 0
                while (await ops.get_table(table_id)).last_hand_result.hand_number < hand:
                    for p in (alice, bob):
                        if await click_one(p, table_id, turn):
                            turn += 1
                    await asyncio.sleep(0.1)

        await play_until(1)  # through the owner
        # r1 goes away: the gateway answers UNAVAILABLE for its address, the pages forget the
        # route, and r0 (the table Service's replica) takes the table over. A page may learn
        # r0's own address meanwhile (a not_owner of r0 while it took the table: r0 is the
        # owner then), never r1's again.
        await two.stop_replica(r1)  # its server is gone: the gateway cannot connect
        async with asyncio.timeout(30):
            while table_id not in two.replicas[0].deps.app.actors:
                await two.rebalance()
            for p in (alice, bob):
                while owner in (await routes_of(p)).values():
                    await asyncio.sleep(0.1)
        for p in (alice, bob):
            assert set((await routes_of(p)).values()) <= {two.replicas[0].address}, p.name
        await play_until(2)  # through the Service's replica
        version = (await ops.get_table(table_id)).version
        # The table's feed as alice may read it from the start, from its owner now.
        feed: list[int] = []
        async with asyncio.timeout(30), \
                grpc.aio.insecure_channel(two.replicas[0].address) as channel:
            stub = table_pb2_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
            async for record in stub.WatchTable(
                    table_pb2.WatchTableRequest(table_id=table_id, after_sequence=0),
                    metadata=(("authorization", f"Bearer {tokens.token(player('alice'))}"),)):
                feed.append(record.sequence)
                if record.sequence >= version:
                    break
        seen = {}
        for p in (alice, bob):
            async with asyncio.timeout(30):
                while (got := await received(p, table_id)) and got[-1] < version:
                    await asyncio.sleep(0.1)
            seen[p.name] = got
            assert got == sorted(set(got)), (p.name, got)  # nothing twice
            # nothing lost: every record from the page's first on, alice's across the handover,
            # up to the version the feed was read to (the table deals on meanwhile)
            upto = [s for s in got if s <= version]
            assert upto == [s for s in feed if got[0] <= s <= version], (p.name, got, feed)
        assert seen["alice"][:len(before)] == before and len(seen["alice"]) > len(before), seen
        for context in (alice.context, bob.context):
            await context.close()  # the streams' lines are logged once they end
        for _ in range(300):
            if all(owner in upstreams_of(log, m) for m in ("GetTable", "SitDown", "WatchTable")):
                break
            await asyncio.sleep(0.1)
        for method in ("GetTable", "SitDown", "WatchTable"):
            assert owner in upstreams_of(log, method), method
