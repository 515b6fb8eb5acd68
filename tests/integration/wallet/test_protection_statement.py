"""A player's statement shows their protection (issue 34): GetStatement's first page carries
every limit and exclusion event, oldest first, as GetProtection lists them; later pages and
other accounts carry none; another player may not read it. ``stud replay protection`` lists
the same events from the wallet's stream, in words, as the auditor Redis user."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studtest.redis import TestRedis
from studtest.wallet import OPERATOR, RunningWallet, player
from studtools.cli import main

pytestmark = pytest.mark.integration


async def statement(wallet: RunningWallet, account: pb.AccountRef, who: object,
                    page_size: int = 1, token: str = "") -> pb.GetStatementResponse:
    reply: pb.GetStatementResponse = await wallet.client.stub.GetStatement(
        pb.GetStatementRequest(account=account, page_size=page_size, page_token=token),
        metadata=wallet.client.metadata(who), timeout=10)  # type: ignore[arg-type]
    return reply


async def test_the_statement_lists_every_limit_and_exclusion_event(
        wallet: RunningWallet) -> None:
    client, me = wallet.client, player("alice")
    md = client.metadata(me)
    await client.create_account("alice")
    await client.create_account("bob")
    await client.deposit("alice", 300, "d1")
    await client.deposit("alice", 200, "d2")
    day = {"kind": pb.LIMIT_KIND_WAGER, "window": pb.LIMIT_WINDOW_DAY}
    await client.stub.SetLimit(pb.SetLimitRequest(player_id="alice", amount=400, **day),
                               metadata=md, timeout=10)
    await client.stub.SetLimit(pb.SetLimitRequest(player_id="alice", amount=900, **day),
                               metadata=md, timeout=10)
    await client.stub.CancelLimitIncrease(pb.CancelLimitIncreaseRequest(player_id="alice",
                                                                        **day),
                                          metadata=md, timeout=10)
    await client.stub.SelfExclude(pb.SelfExcludeRequest(
        player_id="alice", period=pb.EXCLUSION_PERIOD_DAY), metadata=md, timeout=10)
    protection: pb.ProtectionResponse = await client.stub.GetProtection(
        pb.GetProtectionRequest(player_id="alice"), metadata=md, timeout=10)

    alice = pb.AccountRef(player_id="alice")
    first = await statement(wallet, alice, me)
    assert len(first.lines) == 1 and first.next_page_token
    assert [e.type for e in first.protection] == [
        "LimitSet", "LimitIncreaseRequested", "LimitIncreaseCancelled", "SelfExcluded"]
    assert list(first.protection) == list(protection.events)
    assert json.loads(first.protection[0].json)["amount"] == 400
    assert [e.at_ms for e in first.protection] == sorted(e.at_ms for e in first.protection)
    later = await statement(wallet, alice, me, token=first.next_page_token)
    assert len(later.lines) == 1 and not later.protection
    assert list((await statement(wallet, alice, OPERATOR)).protection) == list(
        protection.events)
    house = await statement(wallet, pb.AccountRef(system=pb.SYSTEM_ACCOUNT_EXTERNAL),
                            OPERATOR, page_size=10)
    assert house.lines and not house.protection
    assert not (await statement(wallet, pb.AccountRef(player_id="bob"),
                                player("bob"))).protection
    with pytest.raises(grpc.aio.AioRpcError) as other:
        await statement(wallet, alice, player("bob"))
    assert other.value.code() is grpc.StatusCode.PERMISSION_DENIED


async def test_stud_replay_protection_lists_every_event_in_words(
        wallet: RunningWallet, redis_server: TestRedis, redis_url: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    client, md = wallet.client, wallet.client.metadata(player("cat"))
    await client.create_account("cat")
    loss = {"kind": pb.LIMIT_KIND_LOSS, "window": pb.LIMIT_WINDOW_WEEK}
    for amount in (500, 200, 0):  # set, lowered, a removal that waits 24 hours
        await client.stub.SetLimit(pb.SetLimitRequest(player_id="cat", amount=amount, **loss),
                                   metadata=md, timeout=10)
    await client.stub.SetRealityCheck(pb.SetRealityCheckRequest(
        player_id="cat", interval_minutes=30), metadata=md, timeout=10)
    await client.stub.ExcludePlayer(pb.ExcludePlayerRequest(
        player_id="cat", period=pb.EXCLUSION_PERIOD_INDEFINITE, reason="case 7"),
        metadata=client.metadata(OPERATOR), timeout=10)
    auditor = redis_server.server.url_for("auditor") if redis_server.server else redis_url
    monkeypatch.setenv("STUD_REPLAY_REDIS_URL", auditor)
    monkeypatch.setenv("STUD_RUN_DIR", str(tmp_path))

    async def cli(*argv: str) -> tuple[int, str]:
        out = io.StringIO()
        status = await asyncio.to_thread(main, ["replay", "protection", *argv], out)
        return status, out.getvalue()

    status, text = await cli("--player", "cat")
    assert status == 0, text
    lines = [line.split("UTC  ", 1)[1] for line in text.splitlines()[:-1]]
    assert lines[:2] == ["loss limit per week set to 500",
                         "loss limit per week lowered to 200, at once"]
    assert lines[2].startswith("loss limit per week: raise to no limit requested, from ")
    assert lines[3:] == ["a reality check every 30 minutes",
                         "excluded by operator:ops (indefinite) indefinitely: case 7"]
    assert text.splitlines()[-1] == "5 protection events of cat"
    status, out = await cli("--player", "cat", "--json")
    protection: pb.ProtectionResponse = await client.stub.GetProtection(
        pb.GetProtectionRequest(player_id="cat"), metadata=md, timeout=10)
    assert [(e["id"], e["type"], e["event"]) for e in json.loads(out)["events"]] == [
        (e.event_id, e.type, e.json) for e in protection.events]
    status, text = await cli("--player", "nobody")
    assert (status, text) == (0, "0 protection events of nobody\n")
