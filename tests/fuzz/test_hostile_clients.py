"""Hostile clients (``make fuzz``; a short run in ``make test``): hypothesis-driven requests to
every RPC of every service — the table, the dealer, the wallet — built from the protobuf
descriptors with odd values (empty, huge, negative, newline and unicode ids, unknown enum
numbers, repeated fields, undecodable bodies), sent with no token, a forged or expired one,
another player's, another service's, an operator's or an auditor's, against a room with
tables and funded players. Every answer must be a deliberate status: never INTERNAL or
UNKNOWN, never a crash; and a refused request changes nothing (a digest of every key the
services own, the ownership heartbeat and lobby summaries aside, is the same after it).

``FUZZ_CASES`` (default 300) sets the number of requests; the last line printed is
``cases=… crashes=0 internal=0 changed=0``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor as gdesc
from google.protobuf.message import Message

from stud.v1 import dealer_pb2, table_pb2, wallet_pb2
from studkit.auth import DevKeys, Principal, Role, TokenBook
from studkit.redis_client import Client, connect
from studkit.testing import TestRedis
from table.testing import Room, fast_settings, player, running_room

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]
CASES = int(os.environ.get("FUZZ_CASES", "300"))
SEED = int(os.environ.get("FUZZ_SEED", "0"))
IGNORED_KEYS = (b":summary", b"stud:table:replicas", b":owner")
"""Keys that change by themselves (lobby summaries, heartbeats, lease renewals)."""

STRINGS = ["", "t-open", "t-empty", "ann", "bob", "ops", "a", "a\n", "a b", "é", "../x",
           "x" * 64, "x" * 65, "x" * 5000, "0-1", "h1", "*", "{t-open}", "\x00", "ann\r\n"]
INTS = [0, 1, 2, 3, 7, 8, 9, -1, 40, 50, 200, 400, 10_000, 2**31 - 1, 2**31, 2**53,
        2**63 - 1, -(2**63)]


@dataclass
class Target:
    service: str
    method: str
    request: type[Message]
    response: type[Message]
    streaming: bool


def targets() -> list[Target]:
    out = []
    for module, service in ((table_pb2, "TableService"), (dealer_pb2, "DealerService"),
                            (dealer_pb2, "DealerTestingService"),
                            (wallet_pb2, "WalletService")):
        desc = module.DESCRIPTOR.services_by_name[service]
        for m in desc.methods:
            from google.protobuf import message_factory
            req = message_factory.GetMessageClass(m.input_type)
            resp = message_factory.GetMessageClass(m.output_type)
            out.append(Target(desc.full_name, m.name, req, resp, m.server_streaming))
    return out


def fill(message: Message, rng: random.Random, depth: int = 0) -> None:
    """Random but typed field values, biased to the interesting ones."""
    for field in message.DESCRIPTOR.fields:
        if rng.random() < 0.3:
            continue
        repeated = field.is_repeated
        count = rng.choice((0, 1, 2, 5)) if repeated else 1
        for _ in range(count):
            if field.type == gdesc.FieldDescriptor.TYPE_MESSAGE:
                if depth > 2:
                    continue
                sub = getattr(message, field.name).add() if repeated else getattr(
                    message, field.name)
                if not repeated:
                    sub.SetInParent()
                fill(sub, rng, depth + 1)
                continue
            value = scalar(field, rng)
            if value is None:
                continue
            if repeated:
                getattr(message, field.name).append(value)
            else:
                with contextlib.suppress(ValueError, TypeError):
                    setattr(message, field.name, value)


def scalar(field: gdesc.FieldDescriptor, rng: random.Random) -> Any:
    t = field.type
    if t == gdesc.FieldDescriptor.TYPE_STRING:
        return rng.choice(STRINGS)
    if t == gdesc.FieldDescriptor.TYPE_BYTES:
        return rng.randbytes(rng.choice((0, 1, 16, 32, 100)))
    if t == gdesc.FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t == gdesc.FieldDescriptor.TYPE_ENUM:
        known = [v.number for v in field.enum_type.values]
        return rng.choice([*known, 99, -1])
    if t in (gdesc.FieldDescriptor.TYPE_UINT32, gdesc.FieldDescriptor.TYPE_FIXED32):
        return rng.choice([i for i in INTS if 0 <= i < 2**32])
    if t in (gdesc.FieldDescriptor.TYPE_UINT64, gdesc.FieldDescriptor.TYPE_FIXED64):
        return rng.choice([i for i in INTS if 0 <= i < 2**64])
    if t in (gdesc.FieldDescriptor.TYPE_INT32, gdesc.FieldDescriptor.TYPE_SINT32):
        return rng.choice([i for i in INTS if -(2**31) <= i < 2**31])
    if t in (gdesc.FieldDescriptor.TYPE_INT64, gdesc.FieldDescriptor.TYPE_SINT64):
        return rng.choice(INTS)
    return None


async def digest(admin: Client) -> str:
    """A hash of every key's content, the self-changing keys aside."""
    keys = sorted([k async for k in admin.scan_iter(count=1000)
                   if not any(part in k for part in IGNORED_KEYS)])
    pipe = admin.pipeline(transaction=False)
    for k in keys:
        pipe.dump(k)
    dumps = await pipe.execute()
    h = hashlib.sha256()
    for k, d in zip(keys, dumps, strict=True):
        h.update(k)
        h.update(d or b"")
    return h.hexdigest()


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
               ) -> AsyncIterator[Room]:
    async with running_room(redis_server, redis_url, dev_keys,
                            dealer_overrides={"stacked_decks": True}) as running:
        yield running


async def test_hostile_requests(room: Room, redis_url: str, dev_keys: DevKeys) -> None:
    rng = random.Random(SEED)
    # A quiet room: one table with one seated player (no hand can start), one empty table.
    settings = fast_settings(next_hand_delay_ms=600_000)
    await room.client.open_table("t-open", settings=settings)
    await room.client.open_table("t-empty", settings=settings)
    await room.fund("ann")
    await room.client.call("SitDown", table_pb2.SitDownRequest(
        table_id="t-open", seat=1, buy_in=10_000), player("ann"))
    await room.fund("bob")
    other_keys = DevKeys.generate()  # a stranger's keys: forged tokens
    principals: list[Principal | None] = [
        None, player("ann"), player("bob"), player("zed"), Principal(Role.OPERATOR, "ops"),
        Principal(Role.AUDITOR, "audit"), Principal(Role.SERVICE, "table"),
        Principal(Role.SERVICE, "dealer"), Principal(Role.SERVICE, "wallet")]
    books = {"ours": TokenBook(dev_keys), "forged": TokenBook(other_keys),
             "expired": TokenBook(dev_keys, ttl_seconds=1)}
    ports = {"stud.v1.TableService": room.table_port,
             "stud.v1.DealerService": room.dealer.port,
             "stud.v1.DealerTestingService": room.dealer.port,
             "stud.v1.WalletService": room.wallet.port}
    channels = {p: grpc.aio.insecure_channel(f"127.0.0.1:{p}") for p in set(ports.values())}
    admin = connect(redis_url)
    expired_tokens = {}
    for who in principals:
        if who is not None:
            expired_tokens[who] = books["expired"].token(who)
    time.sleep(7)  # past the expiry leeway
    all_targets = targets()
    codes: Counter[str] = Counter()
    internal = crashes = changed = 0
    before = await digest(admin)
    for case in range(CASES):
        target = rng.choice(all_targets)
        who = rng.choice(principals)
        how = rng.choice(("ours", "ours", "ours", "forged", "expired", "garbage"))
        metadata: tuple[tuple[str, str], ...] = ()
        if who is not None:
            if how == "expired":
                metadata = (("authorization", f"Bearer {expired_tokens[who]}"),)
            elif how == "garbage":
                metadata = (("authorization", rng.choice(
                    ("Bearer", "Bearer x.y.z", "Basic abc", "Bearer " + "a" * 5000))),)
            else:
                metadata = tuple(books[how].metadata(who))
        if rng.random() < 0.1:
            body = rng.randbytes(rng.choice((1, 7, 64)))
        else:
            request = target.request()
            fill(request, rng)
            body = request.SerializeToString()
        channel = channels[ports[target.service]]
        path = f"/{target.service}/{target.method}"
        try:
            if target.streaming:
                call = channel.unary_stream(path, request_serializer=lambda b: b,
                                            response_deserializer=lambda b: b)(
                    body, metadata=metadata, timeout=2)
                async for _ in call:
                    break
                call.cancel()
                code = grpc.StatusCode.OK
            else:
                await channel.unary_unary(path, request_serializer=lambda b: b,
                                          response_deserializer=lambda b: b)(
                    body, metadata=metadata, timeout=5)
                code = grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
        codes[code.name] += 1
        if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
            internal += 1
            print("INTERNAL", path, who, how, case)
        after = await digest(admin)
        refused = code not in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED,
                               grpc.StatusCode.DEADLINE_EXCEEDED)
        if refused and after != before:
            changed += 1
            print("CHANGED", path, who, how, code.name, case)
        before = after
    for p in (room.table_port, room.dealer.port, room.wallet.port):
        # Every service still answers (no crash).
        from grpc_health.v1 import health_pb2, health_pb2_grpc
        stub = health_pb2_grpc.HealthStub(channels[p])
        try:
            await stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.aio.AioRpcError:
            crashes += 1
    for channel in channels.values():
        await channel.close()
    await admin.aclose()
    print(dict(codes))
    print(f"cases={CASES} crashes={crashes} internal={internal} changed={changed}")
    assert (crashes, internal, changed) == (0, 0, 0)
