"""Through the real Envoy: gRPC-Web calls in plain HTTP reach the services with their auth,
status codes and ``stud-reason``; only the public methods are routed; the web app is served
on the same origin; CORS only for a configured origin."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import AsyncIterator

import pytest

from stud.v1 import dealer_pb2, table_pb2, wallet_pb2
from studkit.auth import Role
from studtest.gateway import Stack, WebReply, running_gateway, web_call

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def get(url: str, method: str = "GET", headers: dict[str, str] | None = None
        ) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, \
                answer.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


async def test_a_unary_call_through_the_gateway(stack: Stack) -> None:
    stack.open_table("gw-unary")
    reply = web_call(stack.gateway.url, "/stud.v1.TableService/GetTable",
                     table_pb2.GetTableRequest(table_id="gw-unary"), token=stack.token("ann"))
    view = reply.one(table_pb2.TableView)
    assert view.table_id == "gw-unary" and view.config.small_bet == 100
    assert reply.http_status == 200 and reply.headers["content-type"].startswith(
        "application/grpc-web")


async def test_a_refusal_keeps_its_status_and_reason(stack: Stack) -> None:
    bad = web_call(stack.gateway.url, "/stud.v1.TableService/GetTable",
                   table_pb2.GetTableRequest(table_id="gw-unary"), token="not-a-token",
                   source="127.0.0.31")
    assert bad.status == 16, (bad.status, bad.message)  # UNAUTHENTICATED
    assert bad.reason, bad.metadata
    missing = web_call(stack.gateway.url, "/stud.v1.TableService/GetTable",
                       table_pb2.GetTableRequest(table_id="no-such-table"),
                       token=stack.token("ann"))
    assert (missing.status, missing.reason) == (5, "unknown_table"), missing.metadata


@pytest.mark.parametrize("path", [
    "/stud.v1.DealerService/Deal", "/stud.v1.DealerService/StartHand",
    "/stud.v1.WalletService/SettleHand", "/stud.v1.WalletService/PayPrize",
    "/stud.v1.TableService/SeatEntrant", "/stud.v1.DealerTestingService/StackDeck",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"])
async def test_the_services_own_calls_are_not_routed(stack: Stack, path: str) -> None:
    reply = web_call(stack.gateway.url, path, dealer_pb2.DealRequest(table_id="gw-unary"),
                     token=stack.token("ops", Role.OPERATOR))
    assert (reply.http_status, reply.status) == (404, 12)  # UNIMPLEMENTED, never forwarded
    # never reached a service as the caller (the table's own SettleHand of another test's
    # hand in this module's stack is logged as service:table)
    logs = stack.room.dealer.logs() + stack.room.wallet.logs()
    assert [line for line in logs.splitlines()
            if path in line and '"principal": "service:table"' not in line] == []


async def test_the_web_app_is_served_on_the_same_origin(stack: Stack) -> None:
    status, headers, body = get(stack.gateway.url)
    assert (status, headers["content-type"]) == (200, "text/html; charset=utf-8")
    assert b"lobby" in body
    status, headers, body = get(stack.gateway.url + "app.js")
    assert (status, headers["content-type"], body) == (
        200, "text/javascript; charset=utf-8", b"console.log('stud');\n")
    assert get(stack.gateway.url + "nothing.js")[0] == 404
    assert get(stack.gateway.url + "healthz")[0] == 200
    # Outside the web root: refused, whatever the spelling.
    for path in ("../conftest.py", "%2e%2e/logs/table.log", "..%2Flogs%2Ftable.log"):
        assert get(stack.gateway.url + path)[0] in (400, 404), path


async def test_no_cors_unless_an_origin_is_configured(stack: Stack, tmp_path) -> None:  # type: ignore[no-untyped-def]
    preflight = {"Origin": "https://play.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type,x-grpc-web"}
    path = "stud.v1.TableService/GetTable"
    _, headers, _ = get(stack.gateway.url + path, "OPTIONS", preflight)
    assert "access-control-allow-origin" not in headers
    with running_gateway(stack.targets, tmp_path / "cors",
                         cors_origins=("https://play.example",)) as gateway:
        _, headers, _ = get(gateway.url + path, "OPTIONS", preflight)
        assert headers["access-control-allow-origin"] == "https://play.example"
        assert "authorization" in headers["access-control-allow-headers"]
        _, other, _ = get(gateway.url + path, "OPTIONS",
                          {**preflight, "Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other
        # The page on the configured origin reads the refusal's reason (a trailers-only
        # answer carries it in headers, which CORS must expose).
        reply = web_call(gateway.url, "/" + path, table_pb2.GetTableRequest(table_id="none"),
                         token=stack.token("ann"), headers={"origin": "https://play.example"})
        assert reply.reason == "unknown_table"
        assert "stud-reason" in reply.headers.get("access-control-expose-headers", "")


async def test_native_grpc_passes_through_the_gateway(stack: Stack) -> None:
    """A gRPC client (the SDK, stud play) reaches the same routes through the gateway."""
    import grpc

    from stud.v1 import table_pb2_grpc

    stack.open_table("gw-native")
    target = stack.gateway.url.removeprefix("http://").rstrip("/")
    async with grpc.aio.insecure_channel(target) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
        view = await stub.GetTable(table_pb2.GetTableRequest(table_id="gw-native"),
                                   metadata=(("authorization",
                                              f"Bearer {stack.token('nat')}"),), timeout=10)
        assert view.table_id == "gw-native"
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SeatEntrant(table_pb2.SeatEntrantRequest(table_id="gw-native"),
                                   metadata=(("authorization",
                                              f"Bearer {stack.token('nat')}"),), timeout=10)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED


async def test_play_passes_through_the_gateway_for_native_grpc_only(stack: Stack) -> None:
    """A Play stream (issue 35) through the gateway, as the SDK's play session opens it:
    records out and an action in, answered by its reply on the stream, both to the table
    Service and to the replica ``stud-owner`` names. gRPC-Web cannot carry a client stream:
    a gRPC-Web Play has no route (404, UNIMPLEMENTED), never forwarded."""
    import grpc

    from stud.v1 import table_pb2_grpc
    from studkit.commandwindow import new_id

    stack.open_table("gw-play")
    target = stack.gateway.url.removeprefix("http://").rstrip("/")
    auth = ("authorization", f"Bearer {stack.token('play-nat')}")
    async with grpc.aio.insecure_channel(target) as channel:
        stub = table_pb2_grpc.TableServiceStub(channel)  # type: ignore[no-untyped-call]
        for owner in ((), (("stud-owner", stack.room.table.target),)):
            sent: asyncio.Queue[table_pb2.PlayRequest | None] = asyncio.Queue()

            async def requests(queue: asyncio.Queue[table_pb2.PlayRequest | None] = sent
                               ) -> AsyncIterator[table_pb2.PlayRequest]:
                while (item := await queue.get()) is not None:
                    yield item

            call = stub.Play(requests(), metadata=(auth, *owner), timeout=30)
            await sent.put(table_pb2.PlayRequest(
                watch=table_pb2.WatchTableRequest(table_id="gw-play")))
            first = await call.read()
            assert first.WhichOneof("kind") == "record", (owner, first)
            assert first.record.event.WhichOneof("event") == "table_opened"
            fold = new_id("play-fold")
            await sent.put(table_pb2.PlayRequest(fold=table_pb2.FoldRequest(
                table_id="gw-play", command_id=fold, seat=1)))
            message = await call.read()
            while message.WhichOneof("kind") == "record":
                message = await call.read()
            # Not seated: the action's refusal, as a reply on the open stream.
            assert message.reply.command_id == fold and message.reply.code != 0, message
            assert message.reply.reason, message
            await sent.put(None)
            call.cancel()
    web = web_call(stack.gateway.url, "/stud.v1.TableService/Play",
                   table_pb2.PlayRequest(watch=table_pb2.WatchTableRequest(table_id="gw-play")),
                   token=stack.token("play-web"))
    assert (web.http_status, web.status) == (404, 12)


async def test_a_table_call_follows_the_owner_header(stack: Stack) -> None:
    """``stud-owner: ip:port`` (a not_owner refusal's owner) sends a table call to that
    replica instead of the table Service; only an address with the table's port is
    followed, so the header names no other service."""
    stack.open_table("gw-owner")
    request = table_pb2.GetTableRequest(table_id="gw-owner")
    token = stack.token("owner-follower")
    table_port = stack.room.table.target.rpartition(":")[2]

    def get(owner: str) -> WebReply:
        return web_call(stack.gateway.url, "/stud.v1.TableService/GetTable", request,
                        token=token, headers={"stud-owner": owner})

    assert get(stack.room.table.target).one(table_pb2.TableView).table_id == "gw-owner"
    nowhere = get(f"127.0.0.9:{table_port}")  # the table listens on 127.0.0.1 only
    assert nowhere.status == 14, nowhere.metadata  # UNAVAILABLE: followed, nobody there
    # Another port (the dealer's), a name, junk: not followed, the Service answers.
    for owner in (stack.room.dealer.target, f"localhost:{table_port}", "x" * 300):
        assert get(owner).one(table_pb2.TableView).table_id == "gw-owner", owner


async def test_the_operators_exclusion_calls_are_routed(stack: Stack) -> None:
    """ExcludePlayer and LiftExclusion (issue 34) reach the wallet: an operator excludes a
    player, and a lift of that fresh exclusion is the wallet's own refusal, not UNIMPLEMENTED."""
    stack.fund("gw-excluded")
    ops = stack.token("ops", Role.OPERATOR)
    excluded = web_call(stack.gateway.url, "/stud.v1.WalletService/ExcludePlayer",
                        wallet_pb2.ExcludePlayerRequest(
                            player_id="gw-excluded", reason="gateway test",
                            period=wallet_pb2.EXCLUSION_PERIOD_INDEFINITE), token=ops)
    assert excluded.status == 0, (excluded.http_status, excluded.message, excluded.reason)
    view = excluded.one(wallet_pb2.ProtectionResponse)
    assert view.excluded and view.excluded_by == "operator:ops"
    lift = web_call(stack.gateway.url, "/stud.v1.WalletService/LiftExclusion",
                    wallet_pb2.LiftExclusionRequest(player_id="gw-excluded", reason="test"),
                    token=ops)
    assert (lift.status, lift.reason) == (9, "exclusion_active"), lift.message
