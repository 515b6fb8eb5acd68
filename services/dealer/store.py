"""The dealer's Redis store, the only module of the dealer that imports redis.

One hash per hand, ``stud:dealer:{<table>}:hand:<n>``, under the dealer ACL user's prefix
(the table's user gets NOPERM there): ``order``, ``reshuffle_key`` (52 bytes each: card
indexes, top first), ``salt`` (32 bytes), ``commitment``, ``created_ms``, ``deals`` (streets
recorded) and ``deal:<street>`` (JSON: what that street drew, for whom). Two Lua scripts make
"create the deck once" and "record a street once" atomic, so a retried or racing request never
draws a second deck or a second set of cards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from importlib import resources
from typing import Any, Final, cast

from rules import Street
from studkit.deckproof import Draw, HandDeck, StreetDeal
from studkit.keys import dealer_key
from studkit.redis_client import Client, connect

_CREATE: Final = resources.files("dealer").joinpath("create_hand.lua").read_text("utf-8")
_RECORD: Final = resources.files("dealer").joinpath("record_deal.lua").read_text("utf-8")
DEAL_PREFIX: Final = b"deal:"


def hand_key(table_id: str, hand_number: int) -> str:
    """The hash holding one hand's deck and draws."""
    return dealer_key(table_id, f"hand:{hand_number}")


class Recorded(Enum):
    """How :meth:`DealerStore.record_deal` ended."""

    RECORDED = "recorded"
    """This call recorded the street."""
    EXISTS = "exists"
    """The street was recorded before (returned as stored)."""
    CONFLICT = "conflict"
    """Another street was recorded since the draw was computed: recompute."""
    MISSING = "missing"
    """No deck for this hand."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredHand:
    """A hand as stored: the deck, its commitment and the streets dealt so far (in order)."""

    deck: HandDeck
    commitment: str
    deals: tuple[StreetDeal, ...]

    def deal_for(self, street: Street) -> StreetDeal | None:
        """The recorded deal of ``street``, if any."""
        return next((d for d in self.deals if d.street == street), None)


def encode_deal(deal: StreetDeal) -> str:
    """A street's record as stored (JSON)."""
    return json.dumps(
        {
            "street": int(deal.street),
            "reshuffled": deal.reshuffled,
            "burn": None if deal.burn is None else [deal.burn_index, deal.burn],
            "cards": [[d.index, d.card, d.seat, int(d.up)] for d in deal.cards],
        },
        separators=(",", ":"),
    )


def decode_deal(raw: bytes | str) -> StreetDeal:
    """The inverse of :func:`encode_deal`."""
    data: dict[str, Any] = json.loads(raw)
    burn = data["burn"]
    return StreetDeal(
        street=Street(int(data["street"])),
        reshuffled=bool(data["reshuffled"]),
        burn=None if burn is None else int(burn[1]),
        burn_index=None if burn is None else int(burn[0]),
        cards=tuple(
            Draw(index=int(i), card=int(c), seat=int(s), up=bool(u))
            for i, c, s, u in data["cards"]
        ),
    )


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


class DealerStore:
    """Decks and draws of hands in Redis (client with ``decode_responses=False``)."""

    def __init__(self, client: Client) -> None:
        self._redis = client
        self._create = client.register_script(_CREATE)
        self._record = client.register_script(_RECORD)

    @classmethod
    def from_url(cls, url: str, max_connections: int | None = None) -> DealerStore:
        """A store on a new connection pool for ``url`` (the dealer ACL user's) of at most
        ``max_connections`` (redis-py's default when None); a call that finds the pool empty
        fails (``MaxConnectionsError``, reported as ``UNAVAILABLE``)."""
        return cls(connect(url, decode_responses=False,
                           max_connections=max_connections))

    @property
    def client(self) -> Client:
        """The underlying client (shared with the event store's reads)."""
        return self._redis

    async def ping(self) -> None:
        """Fail fast when Redis is unreachable or the credentials are wrong."""
        await self._redis.ping()

    async def close(self) -> None:
        """Release the connections."""
        await self._redis.aclose()

    async def create_hand(self, deck: HandDeck, commitment: str, created_ms: int) -> str:
        """Store ``deck`` unless the hand already has one; returns the commitment of the deck
        that is stored (the existing one on a repeat)."""
        reply = await self._create(
            keys=[hand_key(deck.table_id, deck.hand_number)],
            args=[bytes(deck.order), bytes(deck.reshuffle_key), deck.salt, commitment,
                  created_ms],
        )
        return _text(reply[1])

    async def load_hand(self, table_id: str, hand_number: int) -> StoredHand | None:
        """The stored hand, or None when no deck was made for it."""
        raw = cast(dict[bytes, bytes],
                   await self._redis.hgetall(hand_key(table_id, hand_number)))
        if not raw or b"commitment" not in raw:
            return None
        deck = HandDeck(
            table_id=table_id,
            hand_number=hand_number,
            order=tuple(raw[b"order"]),
            reshuffle_key=tuple(raw[b"reshuffle_key"]),
            salt=raw[b"salt"],
        )
        deals = sorted(
            (decode_deal(value) for name, value in raw.items() if name.startswith(DEAL_PREFIX)),
            key=lambda d: int(d.street),
        )
        return StoredHand(deck=deck, commitment=_text(raw[b"commitment"]), deals=tuple(deals))

    async def record_deal(
        self, table_id: str, hand_number: int, deal: StreetDeal, expected_deals: int
    ) -> tuple[Recorded, StreetDeal | None]:
        """Record ``deal`` if its street is not recorded yet and exactly ``expected_deals``
        streets are; returns the outcome and, for ``EXISTS``, the stored deal."""
        reply = await self._record(
            keys=[hand_key(table_id, hand_number)],
            args=[f"deal:{int(deal.street)}", expected_deals, encode_deal(deal)],
        )
        outcome = Recorded(_text(reply[0]))
        stored = decode_deal(reply[1]) if outcome is Recorded.EXISTS else None
        return outcome, stored
