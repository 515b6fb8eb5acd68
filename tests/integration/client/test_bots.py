"""``stud bots`` end to end against the in-process room: the command line opens tables, funds
and seats bots that use only the SDK, plays the hands, and proves no chip was created or
lost."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from stud.v1 import wallet_pb2
from studclient import Client
from studtest.table import OPERATOR, Room, player
from studtools import cli
from studtools.devkeys import DevKeys

pytestmark = pytest.mark.integration


def env_for(room: Room, keys: DevKeys) -> dict[str, str]:
    return {"STUD_TABLE_TARGET": f"127.0.0.1:{room.table_port}",
            "STUD_DEALER_TARGET": f"127.0.0.1:{room.dealer.port}",
            "STUD_WALLET_TARGET": f"127.0.0.1:{room.wallet.port}",
            "STUD_ISSUER_KEY": keys.issuer_key.pem()}


async def test_stud_bots_plays_and_conserves_chips(
        room: Room, dev_keys: DevKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env_for(room, dev_keys).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("STUD_OPERATOR_TOKEN", raising=False)
    out = io.StringIO()
    # The command runs its own event loop: in a thread, while the room serves on this one.
    status = await asyncio.to_thread(cli.main, [
        "bots", "--tables", "2", "--hands", "3", "--seed", "7", "--strategy", "mixed",
        "--players", "3", "--rake-bps", "500", "--timeout", "120"], out)
    print(out.getvalue())
    lines = out.getvalue().strip().splitlines()
    assert status == 0, out.getvalue()
    last = lines[-1]
    fields = dict(part.split("=") for part in last.split())
    assert list(fields) == ["hands", "actions", "errors", "chips_conserved"]
    assert int(fields["hands"]) >= 6
    assert int(fields["actions"]) > 0
    assert fields["errors"] == "0"
    assert fields["chips_conserved"] == "yes"


async def test_stud_bots_with_given_tokens(
        room: Room, dev_keys: DevKeys, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """Without the issuer key: an operator token and one player token per bot; short
    stacks (six big bets) that top up when under five."""
    issuer = dev_keys.issuer()
    for name, value in env_for(room, dev_keys).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("STUD_ISSUER_KEY")
    monkeypatch.chdir(tmp_path)  # no .run/keys here
    monkeypatch.setenv("STUD_OPERATOR_TOKEN", issuer.issue(OPERATOR))
    monkeypatch.setenv("STUD_PLAYER_TOKENS", ",".join(
        issuer.issue(player(n)) for n in ("tok-ann", "tok-bob")))
    out = io.StringIO()
    status = await asyncio.to_thread(cli.main, [
        "bots", "--hands", "6", "--players", "2", "--strategy", "random", "--seed", "1",
        "--buy-in", "2400", "--timeout", "90"], out)
    assert status == 0, out.getvalue()
    assert out.getvalue().strip().splitlines()[-1].endswith("errors=0 chips_conserved=yes")
    async with Client.connect(f"127.0.0.1:{room.table_port}",
                              wallet_addr=f"127.0.0.1:{room.wallet.port}",
                              token=issuer.issue(OPERATOR)) as ops:
        buy_ins = [line for name in ("tok-ann", "tok-bob") for line in
                   await ops.statement(name) if line.kind == wallet_pb2.TRANSACTION_KIND_BUY_IN]
        print(f"{len(buy_ins)} buy-ins and top-ups")
        assert len(buy_ins) >= 2


def test_stud_bots_without_credentials_exits_2(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    for name in ("STUD_ISSUER_KEY", "STUD_OPERATOR_TOKEN", "STUD_PLAYER_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["bots", "--hands", "1"], io.StringIO()) == 2


async def test_a_bot_that_spends_its_deposit_buys_in_again_and_the_run_ends(
        room: Room, dev_keys: DevKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacks of one big bet, heads-up, random play: a bot busts once its three buy-ins are
    spent. It is funded again (an operator deposit, in the ledger check) and buys in again,
    so its table keeps dealing and the run plays the hands asked for and ends, where the
    table waited for a second stack until the timeout."""
    for name, value in env_for(room, dev_keys).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("STUD_OPERATOR_TOKEN", raising=False)
    # Which bot loses its three stacks, and when, follows the dealer's shuffle, which is not
    # seeded: a run of 40 hands mostly busts one, not always. Up to three runs (each
    # must end cleanly), until one has a bot funded again.
    funded: list[str] = []
    for _ in range(3):
        out = io.StringIO()
        status = await asyncio.to_thread(cli.main, [
            "bots", "--hands", "40", "--players", "2", "--strategy", "random", "--seed", "3",
            "--buy-in", "400", "--timeout", "120"], out)
        print(out.getvalue())
        lines = out.getvalue().strip().splitlines()
        assert status == 0, out.getvalue()
        fields = dict(part.split("=") for part in lines[-1].split())
        assert list(fields) == ["hands", "actions", "errors", "chips_conserved"]
        assert int(fields["hands"]) >= 40
        assert fields["errors"] == "0" and fields["chips_conserved"] == "yes"
        funded = [line for line in lines if "funded again" in line]
        if funded:
            break
    assert funded, "no bot spent its deposit in three runs"
