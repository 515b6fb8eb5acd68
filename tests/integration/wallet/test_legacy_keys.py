"""The wallet's keys before the ``{wallet}`` hash tag (``stud:wallet:<name>``, one Redis) are
adopted at start: renamed to their tagged names in one script, so an upgraded wallet finds
every balance, statement, seat, idempotency record and the ledger where it left them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from studkit import keys
from studkit.redis_client import Client, connect
from studtest.redis import TestRedis
from studtest.wallet import RunningWallet
from wallet.model import player_account

pytestmark = pytest.mark.integration

TAGGED = f"{keys.WALLET_PREFIX}{keys.WALLET_TAG}:"


@pytest.fixture
async def admin(redis_server: TestRedis, redis_url: str) -> AsyncIterator[Client]:
    if redis_server.cluster:
        pytest.skip("the untagged layout never ran on a cluster (its script spans slots)")
    client = connect(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def to_legacy_layout(admin: Client) -> set[str]:
    """Rename every tagged wallet key to its old name, as an older wallet wrote them (the
    player protection's keys, ``usage:*``, ``protection*`` and ``sessions``, came after the
    tag: an older wallet never wrote them)."""
    names = [k async for k in admin.scan_iter(match=f"{TAGGED}*")
             if not k.removeprefix(TAGGED).startswith(("usage:", "protection", "sessions"))]
    for name in names:
        await admin.rename(name, keys.legacy_wallet_key(name.removeprefix(TAGGED)))
    return {keys.legacy_wallet_key(n.removeprefix(TAGGED)) for n in names}


async def play_a_little(wallet: RunningWallet) -> None:
    for name in ("ann", "bob"):
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, 5_000, f"dep-{name}")
    await wallet.client.buy_in("ann", "t1", 2, 1_000, "buy-ann")
    await wallet.client.buy_in("bob", "t9", 4, 700, "buy-bob")


async def test_an_upgraded_wallet_finds_everything(wallet: RunningWallet,
                                                   admin: Client) -> None:
    await play_a_little(wallet)
    before = ([await wallet.client.player_balance(n) for n in ("ann", "bob")],
              await wallet.client.escrows("t1"), await wallet.client.escrows("t9"),
              await wallet.deps.store.ledger())
    legacy = await to_legacy_layout(admin)
    assert keys.legacy_wallet_key("ledger") in legacy
    assert keys.legacy_wallet_key("seats:t9") in legacy
    assert keys.legacy_wallet_key("postings:player:ann") in legacy

    assert await wallet.deps.store.adopt_legacy_keys() == len(legacy)
    assert [await admin.exists(name) for name in sorted(legacy)] == [0] * len(legacy)
    after = ([await wallet.client.player_balance(n) for n in ("ann", "bob")],
             await wallet.client.escrows("t1"), await wallet.client.escrows("t9"),
             await wallet.deps.store.ledger())
    assert after == before
    # The idempotency records and the statements came along: a retry replays.
    again = await wallet.client.buy_in("ann", "t1", 2, 1_000, "buy-ann")
    assert (again.replayed, again.player_balance, again.seat_balance) == (True, 4_000, 1_000)
    statement = await wallet.deps.store.statement(player_account("ann"), 10)
    assert [line.amount for line in statement.lines] == [5_000, -1_000]
    assert await wallet.deps.store.adopt_legacy_keys() == 0  # nothing left: a no-op


async def test_both_layouts_at_once_are_refused(wallet: RunningWallet, admin: Client) -> None:
    await play_a_little(wallet)
    await to_legacy_layout(admin)
    await wallet.client.create_account("cat")  # the tagged layout gets data too
    with pytest.raises(RuntimeError, match="both"):
        await wallet.deps.store.adopt_legacy_keys()
