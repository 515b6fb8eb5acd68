"""The dealer's Redis store, the only module of the dealer that imports redis.

One hash per hand, ``stud:dealer:{<table>}:hand:<n>``, under the dealer ACL user's prefix
(the table's user gets NOPERM there): ``order``, ``reshuffle_key`` (52 bytes each: card
indexes, top first), ``salt`` (32 bytes), ``commitment``, ``created_ms``, ``deals`` (streets
recorded) and ``deal:<street>`` (JSON: what that street drew, for whom). Two Lua scripts make
"create the deck once" and "record a street once" atomic, so a retried or racing request never
draws a second deck or a second set of cards.

A hand with a per-card commitment (docs/fairness.md) also holds ``card_commitment``,
``card_salts`` (52 x 32 bytes, by base position), ``dealer_seed`` (32 bytes),
``seed_commitments`` (JSON ``[[player, commitment], ...]``), ``seed:<player>`` (each opened
seed) and ``seeds_frozen`` (set by the first deal: no seed is taken after it). Before the hand
starts, players' commitments wait in ``stud:dealer:{<table>}:seeds:<n>``; ``seeds.lua`` takes,
closes, opens and freezes them atomically with the hand's record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from importlib import resources
from typing import Any, Final, cast

from redis.exceptions import NoScriptError, ResponseError

from rules import Street
from stud.v1.envelope_pb2 import EventEnvelope
from studkit.cardproof import SALT_BYTES as CARD_SALT_BYTES
from studkit.cardproof import DealOrder, FairDeck, deal_order
from studkit.deckproof import Draw, HandDeck, StreetDeal
from studkit.keys import dealer_key, table_key
from studkit.redis_client import Client, connect, is_cluster
from studkit.store import ENVELOPE_FIELD, EventStore, StoredEvent, Tail, format_stream_id

_CREATE: Final = resources.files("dealer").joinpath("create_hand.lua").read_text("utf-8")
_RECORD: Final = resources.files("dealer").joinpath("record_deal.lua").read_text("utf-8")
_SEEDS: Final = resources.files("dealer").joinpath("seeds.lua").read_text("utf-8")
_READ_TABLE: Final = resources.files("dealer").joinpath("read_table.lua").read_text("utf-8")
DEAL_PREFIX: Final = b"deal:"
SEED_PREFIX: Final = b"seed:"
SEEDS_TTL_S: Final = 86_400
"""How long commitments for a hand that never starts are kept."""
IDENTITY: Final = tuple(range(52))
"""The v1 reshuffle key of a hand dealt under the per-card scheme, whose reshuffle order
follows from the seeds instead (docs/fairness.md)."""


def hand_key(table_id: str, hand_number: int) -> str:
    """The hash holding one hand's deck and draws."""
    return dealer_key(table_id, f"hand:{hand_number}")


def released_key(table_id: str) -> str:
    """The greatest hand whose keys the dealer forgot once the archive held its record
    (``ReleaseHands``); absent: none."""
    return dealer_key(table_id, "released")


def seeds_key(table_id: str, hand_number: int) -> str:
    """The players' seed commitments for a hand that has not started yet."""
    return dealer_key(table_id, f"seeds:{hand_number}")


class SeedTaken(Enum):
    """How a seed commitment or opening ended (``seeds.lua``)."""

    OK = "ok"
    TOO_LATE = "too_late"
    TOO_MANY = "too_many"
    MISSING = "missing"


@dataclass(frozen=True, slots=True, kw_only=True)
class FairHand:
    """A hand's per-card commitment as stored: the secret deck, the commitment, the players'
    seed commitments, the seeds opened so far and whether the first deal froze them."""

    deck: FairDeck
    commitment: str
    seeds: tuple[tuple[str, str], ...]
    opened: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    frozen: bool = False

    def order(self) -> DealOrder:
        """The deal order from the seeds opened so far (the final one once frozen)."""
        return deal_order(self.deck.table_id, self.deck.hand_number, self.deck.dealer_seed,
                          [(p, self.opened.get(p)) for p, _c in self.seeds])

    def seed_openings(self) -> tuple[tuple[str, bytes | None], ...]:
        """Each committed player's seed, None when not opened."""
        return tuple((p, self.opened.get(p)) for p, _c in self.seeds)


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
    fair: FairHand | None = None
    created_ms: int = 0

    def dealing_deck(self) -> HandDeck:
        """The deck in dealing order: the deck itself, or for a per-card commitment the base
        deck in the order that follows from the seeds (only final once they are frozen)."""
        if self.fair is None:
            return self.deck
        secret = self.fair.deck
        return _dealing_deck(self.deck.table_id, self.deck.hand_number, secret.base,
                             secret.dealer_seed, self.deck.salt, self.fair.seed_openings())

    def deal_for(self, street: Street) -> StreetDeal | None:
        """The recorded deal of ``street``, if any."""
        return next((d for d in self.deals if d.street == street), None)


CACHED_HANDS: Final = 512
"""Hands whose derived values (the dealing deck, the decoded secret deck and streets) are
kept in memory: a few kilobytes each, pure functions of the stored record, so one not kept
is derived again on its next call."""


@lru_cache(maxsize=CACHED_HANDS)
def _dealing_deck(table_id: str, hand_number: int, base: tuple[int, ...], dealer_seed: bytes,
                  salt: bytes, openings: tuple[tuple[str, bytes | None], ...]) -> HandDeck:
    """The dealing deck of a per-card hand for the seeds opened so far (memoised: the deal
    order is two SHA-256-driven shuffles, the same for every street of a hand)."""
    order = deal_order(table_id, hand_number, dealer_seed, openings)
    return HandDeck(table_id=table_id, hand_number=hand_number,
                    order=tuple(base[p] for p in order.deal),
                    reshuffle_key=tuple(base[p] for p in order.reshuffle), salt=salt)


@lru_cache(maxsize=CACHED_HANDS)
def _decks(table_id: str, hand_number: int, order: bytes, reshuffle_key: bytes, salt: bytes,
           card_salts: bytes | None, dealer_seed: bytes | None
           ) -> tuple[HandDeck, FairDeck | None]:
    """The decks of a hand's record, from the fields written once when it was made
    (memoised: every call on a hand decodes and checks the same 52 cards and salts)."""
    deck = HandDeck(table_id=table_id, hand_number=hand_number, order=tuple(order),
                    reshuffle_key=tuple(reshuffle_key), salt=salt)
    if card_salts is None or dealer_seed is None:
        return deck, None
    salts = tuple(card_salts[i:i + CARD_SALT_BYTES]
                  for i in range(0, len(card_salts), CARD_SALT_BYTES))
    return deck, FairDeck(table_id=table_id, hand_number=hand_number, base=deck.order,
                          salts=salts, dealer_seed=dealer_seed)


@lru_cache(maxsize=CACHED_HANDS)
def _seed_commitments(raw: bytes) -> tuple[tuple[str, str], ...]:
    return tuple((str(p), str(c)) for p, c in json.loads(raw))


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


_decoded_deal: Final = lru_cache(maxsize=8 * CACHED_HANDS)(decode_deal)
""":func:`decode_deal`, memoised: a street's record never changes once written."""


def _fair(secret: FairDeck | None, raw: Mapping[bytes, bytes]) -> FairHand | None:
    if b"card_commitment" not in raw:
        return None
    assert secret is not None
    opened = {name[len(SEED_PREFIX):].decode(): value for name, value in raw.items()
              if name.startswith(SEED_PREFIX)}
    return FairHand(deck=secret, commitment=_text(raw[b"card_commitment"]),
                    seeds=_seed_commitments(raw[b"seed_commitments"]), opened=opened,
                    frozen=b"seeds_frozen" in raw)


class DealerStore:
    """Decks and draws of hands in Redis (client with ``decode_responses=False``)."""

    def __init__(self, client: Client) -> None:
        self._redis = client
        self._create = client.register_script(_CREATE)
        self._record = client.register_script(_RECORD)
        self._seeds = client.register_script(_SEEDS)

    @classmethod
    def from_url(cls, url: str, max_connections: int | None = None) -> DealerStore:
        """A store on a new connection pool for ``url`` (the dealer ACL user's) of at most
        ``max_connections`` (``studkit.redis_client.POOL_SIZE`` when None); a call that finds
        the pool empty waits for a connection, up to ``studkit.redis_client.POOL_WAIT_S``,
        then fails (``redis.ConnectionError``, reported as ``UNAVAILABLE``)."""
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

    async def create_hand(self, deck: HandDeck, commitment: str, created_ms: int,
                          fair: FairHand | None = None) -> tuple[str, str] | None:
        """Store ``deck`` (and its per-card commitment) unless the hand already has one;
        returns the commitments of the deck that is stored (the existing one on a repeat):
        the deck's and the card commitment ('' without one). A per-card hand is stored only
        if the seed commitments taken for it are exactly ``fair.seeds``, and closes them (no
        seed is committed for it after its cards are); None when they are not (a seed was
        committed since they were read: :meth:`close_seeds`, then commit to those)."""
        keys = [hand_key(deck.table_id, deck.hand_number)]
        args: list[bytes | str | int] = [bytes(deck.order), bytes(deck.reshuffle_key),
                                         deck.salt, commitment, created_ms]
        if fair is not None:
            keys.append(seeds_key(deck.table_id, deck.hand_number))
            args += [fair.commitment, b"".join(fair.deck.salts), fair.deck.dealer_seed,
                     json.dumps([list(s) for s in fair.seeds], separators=(",", ":")),
                     SEEDS_TTL_S]
        reply = await self._create(keys=keys, args=args)
        if int(reply[0]) < 0:
            return None
        return _text(reply[1]), _text(reply[2])

    async def commit_seed(self, table_id: str, hand_number: int, player_id: str,
                          commitment: str, max_seeds: int) -> SeedTaken:
        """Take a player's seed commitment for a hand that has not started."""
        reply = await self._seeds(
            keys=[seeds_key(table_id, hand_number), hand_key(table_id, hand_number)],
            args=["commit", player_id, commitment, max_seeds, SEEDS_TTL_S])
        return SeedTaken(_text(reply))

    async def close_seeds(self, table_id: str, hand_number: int) -> tuple[tuple[str, str], ...]:
        """Close a hand's seed commitments (StartHand, when a seed came between its read of
        them and its deck) and return them, in player order."""
        reply = await self._seeds(
            keys=[seeds_key(table_id, hand_number), hand_key(table_id, hand_number)],
            args=["close", SEEDS_TTL_S])
        return seed_commitments(dict(zip(reply[::2], reply[1::2], strict=True)))

    async def open_seed(self, table_id: str, hand_number: int, player_id: str,
                        seed: bytes) -> SeedTaken:
        """Keep a player's opened seed unless the first deal froze the seeds."""
        reply = await self._seeds(
            keys=[seeds_key(table_id, hand_number), hand_key(table_id, hand_number)],
            args=["open", player_id, seed])
        return SeedTaken(_text(reply))

    async def freeze_seeds(self, table_id: str, hand_number: int) -> StoredHand | None:
        """No seed is taken for the hand from now on (its first deal); returns the hand as
        frozen, read by the same script (the seeds opened before the freeze, and no other),
        None when no deck was made for it."""
        flat = await self._seeds(
            keys=[seeds_key(table_id, hand_number), hand_key(table_id, hand_number)],
            args=["freeze"])
        return hand_from_hash(table_id, hand_number, dict(zip(flat[::2], flat[1::2],
                                                              strict=True)))

    async def released(self, table_id: str) -> int:
        """The greatest hand forgotten so far (0: none)."""
        raw = await self._redis.get(released_key(table_id))
        return int(raw) if raw is not None else 0

    async def release(self, table_id: str, through_hand: int) -> tuple[int, int]:
        """Forget the keys of hands up to ``through_hand`` (their records are archived):
        deleted a batch at a time, then the mark moves; a repeat deletes nothing more.
        Returns (released through, hands whose keys were deleted)."""
        done = await self.released(table_id)
        deleted = 0
        for first in range(done + 1, through_hand + 1, 256):
            last = min(through_hand, first + 255)
            names = [name for hand in range(first, last + 1)
                     for name in (hand_key(table_id, hand), seeds_key(table_id, hand))]
            deleted += int(await self._redis.delete(*names))
            await self._redis.set(released_key(table_id), str(last))
        return max(done, through_hand), deleted

    async def load_hand(self, table_id: str, hand_number: int) -> StoredHand | None:
        """The stored hand, or None when no deck was made for it."""
        return hand_from_hash(table_id, hand_number, cast(
            dict[bytes, bytes], await self._redis.hgetall(hand_key(table_id, hand_number))))

    async def record_deal(
        self, table_id: str, hand_number: int, deal: StreetDeal, expected_deals: int,
        freeze: Collection[str] | None = None,
    ) -> tuple[Recorded, StreetDeal | None]:
        """Record ``deal`` if its street is not recorded yet and exactly ``expected_deals``
        streets are; returns the outcome and, for ``EXISTS``, the stored deal. ``freeze``:
        the players whose opened seeds the deal was drawn from, for a per-card hand whose
        seeds no deal froze yet: the seeds are frozen with the street, only if exactly those
        are opened (else ``CONFLICT``: draw again)."""
        args: list[str | int] = [f"deal:{int(deal.street)}", expected_deals, encode_deal(deal)]
        if freeze is not None:
            args += ["freeze", *sorted(freeze)]
        reply = await self._record(keys=[hand_key(table_id, hand_number)], args=args)
        outcome = Recorded(_text(reply[0]))
        stored = decode_deal(reply[1]) if outcome is Recorded.EXISTS else None
        return outcome, stored


def seed_commitments(raw: Mapping[bytes, bytes] | None) -> tuple[tuple[str, str], ...]:
    """The players' seed commitments for a hand, in player order, from their hash as read
    (``HGETALL``; closed or not)."""
    return tuple(sorted((_text(p), _text(c)) for p, c in (raw or {}).items()
                        if p != b"~closed"))


def hand_from_hash(table_id: str, hand_number: int, raw: dict[bytes, bytes] | None
                   ) -> StoredHand | None:
    """One hand's record from its hash as read (``HGETALL``), None when no deck was made."""
    if not raw or b"commitment" not in raw:
        return None
    fair = b"card_commitment" in raw
    deck, secret = _decks(table_id, hand_number, raw[b"order"], raw[b"reshuffle_key"],
                          raw[b"salt"], raw[b"card_salts"] if fair else None,
                          raw[b"dealer_seed"] if fair else None)
    deals = sorted(
        (_decoded_deal(value) for name, value in raw.items()
         if name.startswith(DEAL_PREFIX)),
        key=lambda d: int(d.street),
    )
    return StoredHand(deck=deck, commitment=_text(raw[b"commitment"]), deals=tuple(deals),
                      fair=_fair(secret, raw), created_ms=int(raw.get(b"created_ms", 0)))


class TableReader:
    """A table's stream read from a version on, with one of the dealer's hashes of the same
    table, as :meth:`studkit.store.EventStore.tail` reads them (the same :class:`Tail`), in
    one read-only script call (``read_table.lua``, ``EVALSHA_RO``: the dealer's ACL user only
    reads the tables' keys) instead of a ``MULTI`` of four commands: one reply for the client
    to parse, not seven (issue 35). On a Redis Cluster, whose client finds a script's keys
    only for ``EVALSHA`` (``EVALSHA_RO``'s would cost it a ``COMMAND GETKEYS`` each time), and
    for a tail longer than a page, the event store reads as it always does."""

    def __init__(self, events: EventStore) -> None:
        self._events = events
        self._client = events.client
        self._sha = hashlib.sha1(_READ_TABLE.encode()).hexdigest()
        self._script = not is_cluster(self._client)
        self._read_only = True
        """``EVALSHA_RO`` until a server says it has no such command (Redis 6.2, which the
        README's fallback server is: then ``EVALSHA``, which the dealer's grant there allows)."""

    async def _run(self, keys: int, args: list[str | int]) -> Any:
        if self._read_only:
            try:
                return await self._client.evalsha_ro(self._sha, keys, *args)
            except ResponseError as exc:
                if "unknown command" not in str(exc).lower():
                    raise
                self._read_only = False
        return await self._client.evalsha(self._sha, keys, *args)

    async def tail(self, table_id: str, from_version: int, hash_key: str | None) -> Tail:
        """The table's version, trimmed count and events after ``from_version``, and the
        hash ``hash_key`` (a key of the table's own hash tag), read together."""
        if not self._script:
            return await self._events.tail(table_id, from_version, hash_key=hash_key)
        if from_version < 0:
            raise ValueError("from_version must be >= 0")
        page = self._events.page_size
        names = [table_key(table_id, "version"), table_key(table_id, "trimmed"),
                 table_key(table_id, "events")]
        if hash_key is not None:
            names.append(hash_key)
        args: list[str | int] = [*names, "(" + format_stream_id((0, from_version)), page]
        try:
            reply = await self._run(len(names), args)
        except NoScriptError:  # a restarted (or flushed) Redis: load it, once
            await self._client.script_load(_READ_TABLE)
            reply = await self._run(len(names), args)
        version, trimmed, entries, flat = reply
        events = [_stored_event(entry) for entry in entries]
        if len(events) == page:  # the rest as the event store reads it
            last = int(events[-1].stream_id.partition("-")[2])
            events += await self._events.read(table_id, from_version=last)
        return Tail(version=int(version) if version is not None else 0,
                    trimmed=int(trimmed) if trimmed is not None else 0, events=events,
                    hash=None if flat is None else dict(zip(flat[::2], flat[1::2],
                                                            strict=True)))


def _stored_event(entry: list[Any]) -> StoredEvent:
    """A stream entry as a script returns it, ``[id, [field, value, ...]]``."""
    entry_id, fields = entry
    if len(fields) == 2 and fields[0] == ENVELOPE_FIELD:  # the table writes this one field
        payload = fields[1]
    else:
        payload = next((fields[i + 1] for i in range(0, len(fields) - 1, 2)
                        if fields[i] == ENVELOPE_FIELD), None)
    if not isinstance(payload, bytes):
        raise TypeError(f"stream entry {entry_id!r} has no bytes field 'envelope'")
    return StoredEvent(_text(entry_id), EventEnvelope.FromString(payload))
