"""Player protection from the SDK and ``stud play`` (issue 34) against a real wallet: a
player sets and raises limits, reads what is left, is refused past a limit in words, and
self-excludes (only with --yes)."""

from __future__ import annotations

import argparse
import io
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from stud.v1 import wallet_pb2 as pb
from studclient.client import Client
from studclient.errors import FailedPrecondition
from studclient.protection import (
    parse_limit,
    protection_lines,
    reality_check_text,
    refusal_text,
)
from studclient.tui.command import protect
from studtest.wallet import OPERATOR, RunningWallet, player

pytestmark = pytest.mark.integration


def connect(wallet: RunningWallet, name: str) -> Client:
    who = OPERATOR if name == "ops" else player(name)
    return Client.connect("127.0.0.1:9", wallet_addr=f"127.0.0.1:{wallet.port}",
                          token=wallet.client.tokens.token(who))


def args(**given: Any) -> argparse.Namespace:
    base = {"limits": False, "set_limit": None, "cancel_raise": None, "self_exclude": None,
            "yes": False, "reality_check": None, "session_limit": None}
    return argparse.Namespace(**{**base, **given})


async def test_the_sdk_sets_limits_and_reads_a_refusal_in_words(wallet: RunningWallet) -> None:
    carol, ops = connect(wallet, "carol"), connect(wallet, "ops")
    try:
        await carol.create_account()
        await carol.set_limit(pb.LIMIT_KIND_DEPOSIT, pb.LIMIT_WINDOW_DAY, 100)
        reply = await carol.set_limit(pb.LIMIT_KIND_DEPOSIT, pb.LIMIT_WINDOW_DAY, 1_000)
        (row,) = reply.limits
        assert (row.amount, row.increase_pending, row.pending_amount) == (100, True, 1_000)
        await ops.deposit("carol", 60)
        with pytest.raises(FailedPrecondition) as refused:
            await ops.deposit("carol", 60)
        assert refused.value.reason == "deposit_limit"
        text = refusal_text(refused.value)
        assert text is not None and "day deposit limit of 100 has 40 left" in text
        lines = protection_lines(await carol.protection())
        assert "used" in lines[0] and "left" in lines[0] and "raise to 1,000" in lines[0]
    finally:
        await carol.close()
        await ops.close()


async def test_stud_play_sets_a_limit_and_self_excludes_only_with_yes(
        wallet: RunningWallet, capsys: pytest.CaptureFixture[str]) -> None:
    setup: Any = SimpleNamespace(connect=lambda: connect(wallet, "dave"))
    out = io.StringIO()
    assert await protect(setup, args(set_limit="loss:week:500"), out) == 0
    assert "loss    per week" in out.getvalue() and "500" in out.getvalue()
    assert await protect(setup, args(set_limit="loss:fortnight:5"), io.StringIO()) == 2
    assert await protect(setup, args(self_exclude="week"), io.StringIO()) == 2
    assert "--yes" in capsys.readouterr().err
    out = io.StringIO()
    assert await protect(setup, args(self_exclude="week", yes=True), out) == 0
    assert "excluded from play until" in out.getvalue()
    assert "(self-excluded)" in out.getvalue()
    assert await protect(setup, args(cancel_raise="loss:week"), io.StringIO()) == 1
    assert "no_pending_increase" in capsys.readouterr().err


def test_a_limit_is_kind_window_amount() -> None:
    assert parse_limit("wager:month:0") == (pb.LIMIT_KIND_WAGER, pb.LIMIT_WINDOW_MONTH, 0)
    for bad in ("wager:month", "bet:day:5", "deposit:day:-1"):
        with pytest.raises(ValueError):
            parse_limit(bad)


async def test_the_first_deposit_prompts_for_limits_until_one_is_set(
        wallet: RunningWallet) -> None:
    """RTS 12: stud play's first (dev) deposit says the player has no limits and how to set
    them; with a limit set it says nothing of it."""
    from studclient.tui.command import Setup

    for name, expect in (("erin", True), ("finn", False)):
        client = connect(wallet, name)
        fake: Any = SimpleNamespace(operator=wallet.client.tokens.token(OPERATOR),
                                    player=name,
                                    connect=lambda token=None: connect(wallet, "ops"))
        try:
            await client.create_account()
            if not expect:
                await client.set_limit(pb.LIMIT_KIND_LOSS, pb.LIMIT_WINDOW_WEEK, 5_000)
            note = await Setup.fund(fake, client, 1_000)
            assert note is not None and note.startswith("Dev deposit: 5,000")
            assert ("--set-limit" in note) is expect
        finally:
            await client.close()


async def test_a_reality_check_is_set_from_stud_play_and_refused_off(
        wallet: RunningWallet) -> None:
    setup: Any = SimpleNamespace(connect=lambda: connect(wallet, "gail"))
    gail = connect(wallet, "gail")
    try:
        await gail.create_account()
        with pytest.raises(FailedPrecondition) as refused:
            async for _check in gail.reality_checks():
                pass
        assert refused.value.reason == "reality_check_off"
        out = io.StringIO()
        assert await protect(setup, args(reality_check=45), out) == 0
        assert "a reality check every 45 minutes of play" in out.getvalue()
    finally:
        await gail.close()
    text = reality_check_text(pb.RealityCheck(session_ms=95 * 60_000, net_result=-300))
    assert text == ("Reality check: you have played 1 h 35 min this session; "
                    "net result -300.")


async def test_stud_play_sets_a_session_limit_and_a_buy_in_past_it_is_refused_in_words(
        wallet: RunningWallet) -> None:
    """``stud play --session-limit 60``: the limit in the protection lines; a longer one
    waits (shown with its time); out of range is refused; a session_limit refusal in
    words."""
    setup: Any = SimpleNamespace(connect=lambda: connect(wallet, "hal"))
    out = io.StringIO()
    assert await protect(setup, args(session_limit=60), out) == 0
    assert "hal: sessions end after 60 minutes" in out.getvalue()
    out = io.StringIO()
    assert await protect(setup, args(session_limit=90), out) == 0
    assert "hal: sessions end after 60 minutes" in out.getvalue()
    assert "session limit raise to 90 minutes from " in out.getvalue()
    assert await protect(setup, args(session_limit=-5), io.StringIO()) == 1
    text = refusal_text(FailedPrecondition(
        grpc.StatusCode.FAILED_PRECONDITION, "session_limit", "x",
        {"session_started_ms": "1800000000000", "ended_ms": "1800003600000"}))
    assert text == ("Your session reached its time limit at 2027-01-15 09:00 UTC; a new one "
                    "may start after 30 minutes away from every table.")
