"""A sign-in near its end (docs/web.md "Web client: signing in, resuming, tabs"): where the
room renews tokens (make run: studtools.devsignin behind the gateway's ``POST /auth/renew``)
the page renews its player's token before it ends and its streams, ended by the old token's
expiry, resume with the new one: the player plays on. Where it does not (production: the
identity provider signs players in), the page says so and what to do. The endpoint renews
only a live token."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from stud.v1 import table_pb2
from studkit.auth import Principal, Role
from studkit.commandwindow import new_id
from studtest.gateway import running_gateway
from studtest.table import Room, act_once, fast_settings, player
from studtest.tournament_service import RunningTournament
from studtools import devsignin
from studtools.gateway import Gateway

from .conftest import CAPTURE, Players, web_dist

pytestmark = pytest.mark.integration

TTL_S = 30
"""The short-lived token's life: renewed at a third of it before its end (10 s)."""


@pytest.fixture
def renewing_gateway(room: Room, tournaments: RunningTournament,
                     tmp_path: Path) -> Iterator[Gateway]:
    """The gateway as make run has it: /auth/renew routed to the dev renewal."""
    server = devsignin.start(room.keys.issuer(), room.keys.verifier())
    upstreams = {"table": f"127.0.0.1:{room.table_port}",
                 "dealer": f"127.0.0.1:{room.dealer.port}",
                 "wallet": f"127.0.0.1:{room.wallet.port}",
                 "tournament": f"127.0.0.1:{tournaments.port}"}
    try:
        with running_gateway(upstreams, tmp_path / "gw", web_root=web_dist(),
                             signin=f"127.0.0.1:{server.port}") as gw:
            yield gw
    finally:
        server.shutdown()


def renew(url: str, token: str, method: str = "POST") -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(f"{url.rstrip('/')}/auth/renew", method=method,
                                     headers={"authorization": f"Bearer {token}"}, data=b""
                                     if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        body = error.read()
        try:
            return error.code, json.loads(body or b"{}")
        except ValueError:
            return error.code, {}


async def test_the_page_renews_its_token_and_plays_on(room: Room, browser: Browser,
                                                     renewing_gateway: Gateway) -> None:
    table_id = await room.client.open_table("renew-1", settings=fast_settings(
        next_hand_delay_ms=300))
    for name, seat in (("alice", 1), ("bob", 2)):
        await room.fund(name, 100_000)
        await room.client.call("SitDown", table_pb2.SitDownRequest(
            table_id=table_id, command_id=new_id(f"{name}-renew"), seat=seat, buy_in=4_000),
            player(name))
    issued = time.time()
    token = room.keys.issuer().issue(Principal(role=Role.PLAYER, name="alice"),
                                     ttl_seconds=TTL_S)
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        await context.add_init_script(CAPTURE)
        page = await context.new_page()
        await page.goto(f"{renewing_gateway.url.rstrip('/')}/?table={table_id}#token={token}")
        pane = page.get_by_role("region", name=f"Table {table_id}", exact=True)
        await expect(pane.get_by_role("region", name="Your cards").locator(
            "[data-card]")).to_have_count(2, timeout=20_000)
        # Renewed a third of its life before its end; kept for the other tabs too.
        async with asyncio.timeout(TTL_S):
            while (kept := await page.evaluate("localStorage.getItem('stud.token')")) == token:
                await asyncio.sleep(0.2)
        assert time.time() - issued >= TTL_S * 2 / 3 - 2, "renewed long before its end"
        principal = room.keys.verifier().verify(kept)
        assert principal.subject == "player:alice"
        assert (principal.expires_at or 0) - time.time() > 3000
        # Past the old token's end (and the services' 5 s leeway): its streams were ended
        # token_expired and resumed with the new one; the player plays on.
        await asyncio.sleep(max(0.0, issued + TTL_S + 7 - time.time()))
        view = await room.client.view(table_id)
        assert await act_once(room.client, table_id, view, lambda actions: actions[0])
        server = await room.client.view(table_id, player("alice"))
        async with asyncio.timeout(20):
            while await page.evaluate(
                    "id => Number(window.stud.panes.get(id).current.version)",
                    table_id) < server.version:
                await asyncio.sleep(0.2)
        await expect(page.locator("#signin")).to_be_hidden()
        watches = await page.evaluate(
            "window.__net.filter(e => e.url.endsWith('/WatchTable')).length")
        cards = await page.evaluate(
            "window.__net.filter(e => e.url.endsWith('/WatchMyCards')).length")
        assert watches >= 2 and cards >= 2, (watches, cards)  # resumed, not refused
        await expect(pane.get_by_role("region", name="Your cards").locator(
            "[data-card]")).not_to_have_count(0)
    finally:
        await context.close()


async def test_without_renewal_the_page_says_what_to_do(room: Room, players: Players) -> None:
    """The tests' usual gateway, like a production one, routes /auth/renew nowhere: the page
    learns at load that its sign-in cannot be renewed, and says so two minutes ahead."""
    token = room.keys.issuer().issue(Principal(role=Role.PLAYER, name="alice"),
                                     ttl_seconds=60)
    p = await players("alice", token=token)
    notice = p.page.locator("#signin")
    await expect(notice).to_contain_text("Your sign-in ends in", timeout=10_000)
    await expect(notice).to_contain_text("this room does not renew sign-ins: sign in again "
                                         "where you signed in")


async def test_only_a_live_token_is_renewed(room: Room, renewing_gateway: Gateway) -> None:
    url = renewing_gateway.url
    live = room.keys.issuer().issue(Principal(role=Role.PLAYER, name="bob"), ttl_seconds=60)
    status, body = await asyncio.to_thread(renew, url, live)
    assert status == 200, body
    fresh = str(body["token"])
    assert room.keys.verifier().verify(fresh).subject == "player:bob"
    assert int(str(body["expires_at"])) - time.time() > 3000
    past = room.keys.issuer(clock=lambda: time.time() - 7200).issue(
        Principal(role=Role.PLAYER, name="bob"), ttl_seconds=60)
    assert await asyncio.to_thread(renew, url, past) == (401, {"reason": "token_expired"})
    status, body = await asyncio.to_thread(renew, url, live[:-4] + "AAAA")
    assert status == 401 and body["reason"] != "", body
    status, body = await asyncio.to_thread(renew, url, "")
    assert status == 401, body
    # Only a player's sign-in: the refusal's reason reaches the page through the gateway.
    ops = room.keys.issuer().issue(Principal(role=Role.OPERATOR, name="ops"), ttl_seconds=60)
    assert await asyncio.to_thread(renew, url, ops) == (403, {"reason": "not_renewable"})
    assert await asyncio.to_thread(renew, url, "", "GET") == (
        200, {"renews": True, "ttl_s": 3600})  # the page asks this at load
