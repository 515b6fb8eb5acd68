"""Browser fixtures (docs/web.md "Web client: tests"): the room in process (dealer, wallet,
table, tournament service), the gRPC-Web gateway (Envoy) in front of it serving web/dist on the
same origin, and Debian's Chromium driven by PyPI's Playwright. A machine without Chromium
FAILS here with what to install; these tests never skip."""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import message as pb_message
from google.protobuf import message_factory
from playwright.async_api import Browser, BrowserContext, Page, async_playwright, expect

from stud.v1 import dealer_pb2, table_pb2, tournament_pb2, wallet_pb2
from studtest.gateway import BIND_ATTEMPTS, running_gateway
from studtest.processes import restartable_port
from studtest.redis import TestRedis
from studtest.rigged_dealer import Corruption, RiggedDealing
from studtest.table import Room, player, running_room
from studtest.tournament_service import RunningTournament, running_tournament
from studtools.devkeys import DevKeys
from studtools.gateway import Gateway, GatewayError
from tournament.config import Settings as TournamentSettings

# Generous waits: CI's machine may be busy; a test never asserts on speed.
expect.set_options(timeout=20_000)
WAIT_MS = 20_000

ROOT = Path(__file__).resolve().parents[2]
WEB_DIST = ROOT / "web" / "dist"
BROWSERS = ("chromium", "chromium-browser")

# Records every gRPC-Web response body as it arrives (the tests read every network message,
# streams included): fetch is wrapped before the app's code runs.
CAPTURE = """
(() => {
  const orig = window.fetch.bind(window);
  window.__net = [];
  window.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input.url;
    const resp = await orig(input, init);
    if (!resp.body) return resp;
    const entry = { url, chunks: [] };
    window.__net.push(entry);
    const [mine, theirs] = resp.body.tee();
    (async () => {
      const reader = theirs.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          let text = "";
          for (const b of value) text += String.fromCharCode(b);
          entry.chunks.push(btoa(text));
        }
      } catch (e) { entry.error = String(e); }
    })();
    return new Response(mine, { status: resp.status, statusText: resp.statusText,
                                headers: resp.headers });
  };
})();
"""


def chromium_path() -> str:
    """Debian's Chromium, or a failure that says how to get it."""
    for name in (os.environ.get("STUD_CHROMIUM", ""), *BROWSERS):
        found = shutil.which(name) if name else None
        if found:
            return found
    pytest.fail("Debian's chromium is not installed: the browser tests need it (apt-get "
                "install chromium, as .ci/run does; or STUD_CHROMIUM=/path/to/chromium). "
                "They never skip.", pytrace=False)


def web_dist() -> Path:
    if not (WEB_DIST / "app.js").is_file():
        pytest.fail("web/dist is not built: run `make web` (make test builds it first)",
                    pytrace=False)
    return WEB_DIST


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    path = chromium_path()
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=path, headless=True,
                                            args=["--no-sandbox"])
        yield launched
        await launched.close()


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys,
               request: pytest.FixtureRequest) -> AsyncIterator[Room]:
    """A fresh room; ``@pytest.mark.parametrize("room", [Corruption.X], indirect=True)``
    gives it the rigged dealer."""
    kind = getattr(request, "param", Corruption.NONE)
    rig = RiggedDealing(kind) if kind != Corruption.NONE else None
    async with running_room(redis_server, redis_url, dev_keys, rig=rig) as running:
        yield running


@pytest.fixture
async def tournaments(room: Room, redis_server: TestRedis, redis_url: str,
                      dev_keys: DevKeys) -> AsyncIterator[RunningTournament]:
    from studtest.table import fast_settings
    url = (redis_server.server.url_for("tournament") if redis_server.server is not None
           else redis_url)
    settings = TournamentSettings(
        addr="127.0.0.1:0", redis_url=url, auth_keys=dev_keys.key_set(),
        service_key=dev_keys.service_key("tournament"),
        wallet_target=f"127.0.0.1:{room.wallet.port}",
        table_target=f"127.0.0.1:{room.table_port}", tick_s=0.05,
        table_settings=fast_settings())
    async with running_tournament(settings, dev_keys) as running:
        yield running


@pytest.fixture
def gateway(room: Room, tournaments: RunningTournament, tmp_path: Path) -> Iterator[Gateway]:
    """Envoy (studtest.gateway) in front of the room, serving web/dist on the same origin.

    On a port outside the kernel's ephemeral range (``restartable_port``): a test stops it
    and starts it again on the same address (test_web_client's cut), and while it is down
    the pages' reconnect attempts could take a port of that range as their source port."""
    upstreams = {"table": f"127.0.0.1:{room.table_port}",
                 "dealer": f"127.0.0.1:{room.dealer.port}",
                 "wallet": f"127.0.0.1:{room.wallet.port}",
                 "tournament": f"127.0.0.1:{tournaments.port}"}
    work_dir = tmp_path / "gateway"
    with contextlib.ExitStack() as stack:
        for attempt in range(BIND_ATTEMPTS):
            # (running_gateway does not move a port it is given: another one here instead,
            # should another process bind this one before Envoy does)
            try:
                gw = stack.enter_context(running_gateway(
                    upstreams, work_dir, web_root=web_dist(), port=restartable_port()))
                break
            except GatewayError as exc:
                if attempt == BIND_ATTEMPTS - 1 or "already in use" not in str(exc):
                    raise
                (work_dir / "envoy.log").unlink(missing_ok=True)
        yield gw


@dataclass
class Player:
    name: str
    context: BrowserContext
    page: Page

    def pane(self, table_id: str) -> Any:
        return self.page.get_by_role("region", name=f"Table {table_id}", exact=True)


Players = Callable[..., Any]


@pytest.fixture
async def players(browser: Browser, gateway: Gateway, room: Room
                  ) -> AsyncIterator[Callable[..., Any]]:
    """``await open_player(name, path="/", token=None)``: a browser context of its own signed
    in as ``name`` with the dev token in the link's fragment."""
    made: list[BrowserContext] = []

    async def open_player(name: str, path: str = "/", token: str | None = None,
                          width: int = 1200) -> Player:
        context = await browser.new_context(viewport={"width": width, "height": 900})
        context.set_default_timeout(WAIT_MS)
        made.append(context)
        await context.add_init_script(CAPTURE)
        page = await context.new_page()
        tok = token if token is not None else room.client.tokens.token(player(name))
        await page.goto(f"{gateway.url.rstrip('/')}{path}#token={tok}")
        return Player(name, context, page)

    yield open_player
    for context in made:
        await context.close()


# --- reading the network ---------------------------------------------------------------------

_SERVICES = {
    "stud.v1.TableService": table_pb2, "stud.v1.DealerService": dealer_pb2,
    "stud.v1.WalletService": wallet_pb2, "stud.v1.TournamentService": tournament_pb2,
}


def _response_type(url: str) -> type[pb_message.Message] | None:
    parts = url.split("?")[0].rstrip("/").split("/")
    if len(parts) < 2 or parts[-2] not in _SERVICES:
        return None
    module = _SERVICES[parts[-2]]
    service = module.DESCRIPTOR.services_by_name[parts[-2].split(".")[-1]]
    method = service.methods_by_name.get(parts[-1])
    return None if method is None else message_factory.GetMessageClass(method.output_type)


@dataclass
class Message:
    url: str
    message: pb_message.Message


async def network(page: Page) -> list[Message]:
    """Every gRPC-Web message the page has received so far, decoded."""
    entries = await page.evaluate("window.__net.map(e => ({url: e.url, chunks: e.chunks}))")
    out: list[Message] = []
    for entry in entries:
        kind = _response_type(entry["url"])
        if kind is None:
            continue
        data = b"".join(base64.b64decode(c) for c in entry["chunks"])
        at = 0
        while at + 5 <= len(data):
            flag = data[at]
            (size,) = struct.unpack(">I", data[at + 1:at + 5])
            body = data[at + 5:at + 5 + size]
            at += 5 + size
            if len(body) < size:
                break
            if flag & 0x80:
                continue  # trailers
            msg = kind()
            msg.ParseFromString(body)
            out.append(Message(entry["url"], msg))
    return out


# --- make screenshots --------------------------------------------------------------------------

SHOTS_ENV = "STUD_SCREENSHOTS"
"""A folder: the tests save their screenshots there (``make screenshots``: docs/web)."""


async def shoot(page: Page, name: str, *, full_page: bool = False) -> None:
    """Save a PNG of ``page`` as ``name``.png when STUD_SCREENSHOTS names a folder (each name
    once per run: the first moment that fits)."""
    folder = os.environ.get(SHOTS_ENV)
    if not folder:
        return
    path = Path(folder) / f"{name}.png"
    if path in _SHOT:
        return
    _SHOT.add(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(path), full_page=full_page)


_SHOT: set[Path] = set()
