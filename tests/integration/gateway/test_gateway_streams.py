"""Streams through the real Envoy: a table's watch lives past the unary calls' timeout, a
quiet one is reset only after the idle timeout set on purpose and resumes with
``after_sequence`` (nothing lost, nothing twice), and four tables' streams are open at once."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from stud.v1 import table_pb2, wallet_pb2
from studkit.commandwindow import new_id
from studtest.gateway import Stack, StreamCut, WebStream, running_gateway, web_call

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def sit(stack: Stack, table_id: str, player: str, seat: int, base_url: str | None = None
        ) -> table_pb2.CommandReply:
    stack.fund(player)
    reply = web_call(base_url or stack.gateway.url, "/stud.v1.TableService/SitDown",
                     table_pb2.SitDownRequest(table_id=table_id, command_id=new_id(f"sit-{player}"),
                                              seat=seat, buy_in=5_000),
                     token=stack.token(player))
    return reply.one(table_pb2.CommandReply)


def watch(base_url: str, stack: Stack, table_id: str, after: int = 0,
          who: str = "watcher") -> WebStream:
    return WebStream(base_url, "/stud.v1.TableService/WatchTable",
                     table_pb2.WatchTableRequest(table_id=table_id, after_sequence=after),
                     token=stack.token(who), timeout=30)


async def test_a_stream_outlives_the_unary_timeout_and_resumes_after_the_idle_one(
        stack: Stack, tmp_path: Path) -> None:
    table = "gw-quiet"
    stack.open_table(table)
    # The idle timeout (8 s) leaves the quiet spell (2.5 s, past the unary timeout) and then
    # the sit-down and its records 5.5 s before Envoy would reset the stream.
    with running_gateway(stack.targets, tmp_path / "short", unary_timeout_s=1,
                         stream_idle_s=8) as gateway:
        stream = watch(gateway.url, stack, table)
        first = stream.next_as(table_pb2.TableEventRecord)
        assert first is not None and first.event.WhichOneof("event") == "table_opened"
        # Quiet for more than the unary calls' timeout: the stream is still there.
        await asyncio.sleep(2.5)
        sat = sit(stack, table, "quinn", 3)
        record = stream.next_as(table_pb2.TableEventRecord)
        assert record is not None and record.sequence > first.sequence
        assert record.sequence == sat.events[0].sequence
        seen = [first.sequence, record.sequence]
        while record is not None and record.sequence < sat.version:
            record = stream.next_as(table_pb2.TableEventRecord)
            if record is not None:
                seen.append(record.sequence)
        # Then quiet for longer than the idle timeout: Envoy resets the stream (no status:
        # the connection ends mid-answer), which a client resumes. Its idle clock started
        # when it sent the last record, a little before it was read here: the reset comes
        # up to 8 s after `started`, and well after the unary timeout's 1 s.
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(StreamCut):
            while stream.next() is not None or not stream.reply.trailers:
                pass
        assert loop.time() - started >= 6, "reset before the idle timeout"
        stream.close()
        sat_out = web_call(stack.gateway.url, "/stud.v1.TableService/SitOut",
                           table_pb2.SitOutRequest(table_id=table, command_id=new_id("out-quinn"),
                                                   seat=3), token=stack.token("quinn"))
        assert sat_out.status == 0, (sat_out.message, sat_out.reason)
        with watch(gateway.url, stack, table, after=seen[-1]) as resumed:
            again = resumed.next_as(table_pb2.TableEventRecord)
        assert again is not None and again.sequence > seen[-1]
        assert again.event.WhichOneof("event") == "player_sat_out"


def quiet_reality_checks(base_url: str, stack: Stack, player: str, wait_s: float) -> str:
    """Watch ``player``'s reality checks for ``wait_s`` (their interval is an hour: nothing
    comes): "open" when the stream was still there at the end, else how it ended."""
    try:
        with WebStream(base_url, "/stud.v1.WalletService/WatchRealityChecks",
                       wallet_pb2.WatchRealityChecksRequest(player_id=player),
                       token=stack.token(player), timeout=wait_s) as stream:
            if stream.reply.http_status != 200:
                return f"answered {stream.reply.http_status}"
            body = stream.next()
            return f"ended: {body!r} {stream.reply.trailers}"
    except TimeoutError:
        return "open"
    except (StreamCut, ConnectionError) as cut:
        return f"cut: {cut!r}"


async def test_reality_checks_outlive_the_streams_idle_timeout(
        stack: Stack, tmp_path: Path) -> None:
    """A reminder comes every interval, up to 1,440 minutes, and nothing in between: the
    reality checks' route is idle far longer than the other streams' (issue 34), so a quiet
    WatchRealityChecks lives past stream_idle_s (and is reset at its own idle timeout)."""
    player = "gw-reminded"
    stack.fund(player)
    set_check = web_call(stack.gateway.url, "/stud.v1.WalletService/SetRealityCheck",
                         wallet_pb2.SetRealityCheckRequest(player_id=player,
                                                           interval_minutes=60),
                         token=stack.token(player))
    assert set_check.status == 0, (set_check.message, set_check.reason)
    with running_gateway(stack.targets, tmp_path / "idle", stream_idle_s=2) as gateway:
        # Three of the ordinary idle timeouts without a message: still open.
        outcome = await asyncio.to_thread(quiet_reality_checks, gateway.url, stack, player, 6)
        assert outcome == "open", outcome
    with running_gateway(stack.targets, tmp_path / "both", stream_idle_s=2,
                         reality_check_idle_s=2) as gateway:
        # The same stream on a gateway whose reality checks' idle timeout is as short: reset.
        outcome = await asyncio.to_thread(quiet_reality_checks, gateway.url, stack, player, 6)
        assert outcome != "open", outcome


async def test_four_tables_streams_are_open_at_once(stack: Stack) -> None:
    tables = [f"gw-multi-{i}" for i in range(4)]
    for table in tables:
        stack.open_table(table)
    streams = [watch(stack.gateway.url, stack, t, who="multi") for t in tables]
    try:
        for stream in streams:
            opened = stream.next_as(table_pb2.TableEventRecord)
            assert opened is not None and opened.event.WhichOneof("event") == "table_opened"
        # Every stream is live at once: an event at each table arrives on its own stream.
        for i, table in enumerate(tables):
            sit(stack, table, f"multi{i}", 1 + i)
        for i, stream in enumerate(streams):
            record = stream.next_as(table_pb2.TableEventRecord)
            assert record is not None
            assert record.event.WhichOneof("event") == "player_seated", record
            assert record.event.player_seated.player_id == f"multi{i}"
    finally:
        for stream in streams:
            stream.close()


OPEN_STREAMS_JS = """
async ({bodies, token, waitMs}) => {
  window.stud_readers = [];
  const open = bodies.map(async (b64) => {
    const body = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
    const answer = await fetch("/stud.v1.TableService/WatchTable", {
      method: "POST", body,
      headers: {"content-type": "application/grpc-web+proto", "x-grpc-web": "1",
                "authorization": "Bearer " + token}});
    const reader = answer.body.getReader();
    window.stud_readers.push(reader);  // kept open: the stream stays live
    let got = 0;
    while (got < 5) {
      const {value, done} = await reader.read();
      if (done) break;
      got += value.length;
    }
    return got;
  });
  const timer = new Promise(r => setTimeout(() => r("timeout"), waitMs));
  const got = await Promise.race([Promise.all(open), timer]);
  return {got, protocol: performance.getEntriesByType("navigation")[0].nextHopProtocol};
}
"""


async def test_a_page_holds_eight_tables_streams_over_tls_with_http2(
        stack: Stack, tmp_path: Path) -> None:
    """Multi-tabling: over TLS the gateway speaks HTTP/2, and one page holds eight tables'
    WatchTable streams on one connection, each with its first event, all open at once (a
    page over plain HTTP/1.1 gets six connections to a host: the seventh would wait)."""
    import base64

    from playwright.async_api import async_playwright

    from studtest.gateway import frame

    chromium = shutil.which(os.environ.get("STUD_CHROMIUM", "") or "chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed (apt-get install chromium, or "
                    "STUD_CHROMIUM=/path): this test never skips", pytrace=False)
    tables = [f"gw-h2-{i}" for i in range(8)]
    for table in tables:
        stack.open_table(table)
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>tables</title>\n")
    bodies = [base64.b64encode(frame(table_pb2.WatchTableRequest(table_id=t))).decode()
              for t in tables]
    with running_gateway(stack.targets, tmp_path / "tls", web_root=web, tls=True) as gateway:
        assert gateway.url.startswith("https://")
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, headless=True,
                                               args=["--no-sandbox"])
            try:
                context = await browser.new_context(ignore_https_errors=True)
                page = await context.new_page()
                await page.goto(gateway.url)
                result = await page.evaluate(OPEN_STREAMS_JS, {
                    "bodies": bodies, "token": stack.token("multi-h2"), "waitMs": 20_000})
            finally:
                await browser.close()
    assert result["protocol"] == "h2", result
    assert result["got"] != "timeout", "not every stream started while the others were open"
    assert all(n >= 5 for n in result["got"]), result
