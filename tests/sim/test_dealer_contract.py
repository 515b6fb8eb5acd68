"""The simulated dealer store against the real one: the dealer's ``create_hand.lua``,
``record_deal.lua`` and ``seeds.lua`` on a real Redis and their Python ports in
:mod:`sim.scripts` answer the same calls alike. Each case runs ``DealerStore`` on both; the
store's answers, every script's whole reply and the stored hand (and seed commitments)
afterwards must agree. ``seeds.lua``'s
``commit`` and ``open`` are not ported (no player commits a seed in the simulation), so only
``close`` and ``freeze`` are compared."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dealer.store import DealerStore, FairHand, seeds_key
from rules import DECK_SIZE, Street
from sim.redis import Data, SimRedis
from studkit.cardproof import SALT_BYTES, SEED_BYTES, FairDeck
from studkit.deckproof import Draw, HandDeck, StreetDeal
from studkit.redis_client import connect
from tests.sim.conftest import Recording

Case = Callable[[DealerStore], Awaitable[list[object]]]


def deck(hand: int, shift: int = 0) -> HandDeck:
    order = tuple((i + shift) % DECK_SIZE for i in range(DECK_SIZE))
    return HandDeck(table_id="t1", hand_number=hand, order=order,
                    reshuffle_key=tuple(reversed(range(DECK_SIZE))), salt=b"s" * 16)


def deal(street: Street, first: int, burn: int | None = None) -> StreetDeal:
    return StreetDeal(street=street, cards=(Draw(index=first, card=first + 3, seat=1, up=False),
                                            Draw(index=first + 1, card=first + 7, seat=2, up=True)),
                      burn=burn, burn_index=None if burn is None else first - 1)


async def outcome(call: Awaitable[Any]) -> object:
    try:
        return ("ok", await call)
    except Exception as exc:
        return ("refused", type(exc).__name__, str(exc))


async def hands(store: DealerStore) -> list[object]:
    return [await outcome(store.create_hand(deck(1), "c1", 1_000)),
            await outcome(store.create_hand(deck(1, 5), "c2", 2_000)),  # a repeat: the first
            await outcome(store.load_hand("t1", 1)),
            await outcome(store.load_hand("t1", 2)),
            await outcome(store.record_deal("t1", 2, deal(Street.THIRD, 0), 0)),  # missing
            await outcome(store.record_deal("t1", 1, deal(Street.FOURTH, 0), 1)),  # conflict
            await outcome(store.record_deal("t1", 1, deal(Street.THIRD, 0), 0)),
            await outcome(store.record_deal("t1", 1, deal(Street.THIRD, 9), 0)),  # exists
            await outcome(store.record_deal("t1", 1, deal(Street.FOURTH, 3, burn=2), 0)),
            await outcome(store.record_deal("t1", 1, deal(Street.FOURTH, 3, burn=2), 1)),
            await outcome(store.load_hand("t1", 1))]


async def fair_hands(store: DealerStore) -> list[object]:
    secret = FairDeck(table_id="t1", hand_number=3, base=tuple(range(DECK_SIZE)),
                      salts=tuple(bytes([i]) * SALT_BYTES for i in range(DECK_SIZE)),
                      dealer_seed=b"d" * SEED_BYTES)
    fair = FairHand(deck=secret, commitment="cc", seeds=())
    # Seeds that were never committed (the simulation commits none): not created.
    seeded = FairHand(deck=secret, commitment="cs", seeds=(("p1", "a" * 64), ("p2", "b" * 64)))
    return [await outcome(store.create_hand(deck(5), "c6", 6_000, seeded)),
            await outcome(store.load_hand("t1", 5)),
            await outcome(store.client.hgetall(seeds_key("t1", 5))),
            await outcome(store.close_seeds("t1", 3)),
            await outcome(store.close_seeds("t1", 3)),  # a repeat: the same
            await outcome(store.create_hand(deck(3), "c3", 3_000, fair)),
            await outcome(store.create_hand(deck(3, 1), "c4", 4_000)),  # a repeat
            await outcome(store.load_hand("t1", 3)),
            await outcome(store.freeze_seeds("t1", 3)),
            await outcome(store.freeze_seeds("t1", 3)),
            await outcome(store.record_deal("t1", 3, deal(Street.THIRD, 0), 0)),
            await outcome(store.load_hand("t1", 3)),
            await outcome(store.client.hgetall(seeds_key("t1", 3))),
            # A first street that freezes the seeds with its record: only with exactly the
            # seeds it was drawn from opened (none here: p1's expected, a conflict).
            await outcome(store.create_hand(deck(4), "c5", 5_000, fair)),
            await outcome(store.record_deal("t1", 4, deal(Street.THIRD, 0), 0, ("p1",))),
            await outcome(store.load_hand("t1", 4)),
            await outcome(store.record_deal("t1", 4, deal(Street.THIRD, 0), 0, ())),
            await outcome(store.record_deal("t1", 4, deal(Street.FOURTH, 2), 1, ())),
            await outcome(store.load_hand("t1", 4)),
            await outcome(store.client.hgetall(seeds_key("t1", 4)))]  # closed by the create


CASES: dict[str, Case] = {"hands": hands, "fair_hands": fair_hands}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_simulated_dealer_scripts_answer_as_the_real_ones(
        redis_url: str, name: str, recording: type[Recording]) -> None:
    case = CASES[name]

    async def run(client: Recording) -> list[object]:
        return [*await case(DealerStore(client)), client.replies]  # type: ignore[arg-type]

    async def real() -> list[object]:
        client = connect(redis_url, decode_responses=False)
        try:
            return await run(recording(client))
        finally:
            await client.aclose()

    on_redis = asyncio.run(real())
    assert {o[0] for o in on_redis[:-1] if isinstance(o, tuple)} == {"ok"}
    assert len({repr(o) for o in on_redis}) > 3 and len(on_redis[-1]) > 3  # type: ignore[arg-type]
    assert asyncio.run(run(recording(SimRedis(Data())))) == on_redis
