"""Checking a hand against the deck its dealer committed to, pure and free of I/O: the values an
auditor obtains after a hand (the deck, its salt and reshuffle key, the commitment and the
dealer's log of draws), the commitment scheme, the replay of the deck, :func:`verify_hand` and
:func:`audit_from_proto`. The dealer builds on the same values to deal and commit; ``stud replay
verify`` and ``python -m dealer.verify`` check with them.

The deck
--------

Cards are ``rules.Card.index`` values (0 = ``2c`` .. 51 = ``As``). ``order`` is the shuffled
deck, top card first. Every card taken from the deck (dealt or burned) gets the next *draw
number*, 0, 1, 2, ... for the whole hand. With burns on, the burned cards may be shuffled
back into the stub before 7th street (RULES 10.4); the new order of those cards is their order
in ``reshuffle_key``, a second random permutation fixed and committed at hand start, so the
whole hand is decided by committed data and can be replayed by an auditor.

The commitment
--------------

SHA-256 over a canonical encoding, published in the table's stream
(``HandStarted.deck_commitment``) before any card is dealt. Encoding, version 1 (all fields
fixed-length or free of ``|``, so it is unambiguous)::

    b"stud-hilo-deck-v1|" + table_id (ASCII) + b"|" + hand_number (decimal ASCII) + b"|"
      + salt (32 bytes) + b"|" + order (52 bytes) + b"|" + reshuffle_key (52 bytes)

where ``order`` and ``reshuffle_key`` are one byte per card, the card's index (``2c`` = 0 ..
``As`` = 51), top card first. The commitment is the lowercase hex SHA-256 of that. Binding
the table and hand number means a deck committed for one hand cannot be passed off for another;
the secret random salt means the commitment reveals nothing about the order.

The verification
----------------

The revealed deck matches the commitment published at hand start, the dealer's log follows
from that deck, and every card of the table's public record (up cards, the community card,
shown, exposed and mucked hands) came from that deck in dealing order, with burns and the
reshuffle of burns (RULES 10.4) replayed as well. Problems are described by draw number, seat
and street only, never by card value, so a report may be logged.

Dealing a street and shuffling are the dealer's business (``dealer.deck``, ``dealer.shuffle``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from rules import Card, DealPlan, Event, Street
from rules.cards import DECK_SIZE
from rules.draws import DeckExhausted, Stub
from rules.events import (
    BurnsReshuffled,
    CardBurned,
    CommunityCardDealt,
    DownCardDealt,
    HandEnded,
    HandExposed,
    HandMucked,
    HandShown,
    HandStarted,
    TableOpened,
    UpCardDealt,
)
from stud.v1 import common_pb2 as pb
from stud.v1 import dealer_pb2 as dpb
from studkit.cardproof import FairDeck, deal_order, same, seed_commitment
from studkit.errors import BadRequest
from studkit.mapping.common import (
    card_from_proto,
    check_hand_number,
    check_ident,
    street_from_proto,
)

SALT_BYTES: Final = 32
"""The length of a commitment's salt."""
COMMUNITY_SEAT = 0
"""The seat number of the community card (as in :class:`rules.DealSlot`)."""


class DeckInconsistent(RuntimeError):
    """Raised when stored draws do not follow from the stored deck (tampering or a bug); the
    dealer refuses to deal from such a hand."""


def is_permutation(cards: Sequence[int]) -> bool:
    """Whether ``cards`` holds each of the 52 card indexes exactly once."""
    return len(cards) == DECK_SIZE and set(cards) == set(range(DECK_SIZE))


@dataclass(frozen=True, slots=True, kw_only=True)
class HandDeck:
    """The secret of one hand, fixed at hand start."""

    table_id: str
    hand_number: int
    order: tuple[int, ...]
    """The shuffled deck, top card first."""
    reshuffle_key: tuple[int, ...]
    """Second permutation: the order of cards reshuffled into the stub (RULES 10.4)."""
    salt: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not is_permutation(self.order) or not is_permutation(self.reshuffle_key):
            raise ValueError("order and reshuffle_key must be permutations of the 52 cards")

    def __repr__(self) -> str:  # never print a deck by accident
        return f"HandDeck(table_id={self.table_id!r}, hand_number={self.hand_number})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Draw:
    """One card taken from the deck: its draw number, the card, and where it went (seat 0 =
    the community card)."""

    index: int
    card: int
    seat: int
    up: bool

    def __repr__(self) -> str:  # no card value in a repr
        return f"Draw(index={self.index}, seat={self.seat}, up={self.up})"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreetDeal:
    """The cards drawn for one street, as the dealer recorded them."""

    street: Street
    cards: tuple[Draw, ...]
    burn: int | None = None
    """The burned card (by index), if one was burned before the street."""
    burn_index: int | None = None
    reshuffled: bool = False

    def matches(self, plan: DealPlan) -> bool:
        """Whether this deal delivers exactly ``plan``."""
        return (
            self.street == plan.street
            and tuple((d.seat, d.up) for d in self.cards)
            == tuple((s.seat, s.up) for s in plan.slots)
            and (self.burn is not None) == plan.burn
            and self.reshuffled == plan.reshuffle_burns
        )

    def __repr__(self) -> str:
        return f"StreetDeal(street={int(self.street)}, cards={len(self.cards)})"


Pile = Stub
"""Where the deck stands: the stub of card indexes (top first), the burned cards and the
draws so far (the rules' :class:`rules.draws.Stub`, over card values)."""


def fresh_pile(deck: HandDeck) -> Pile:
    """The pile before any card is drawn."""
    return Stub(deck.order)


def replay(deck: HandDeck, deals: Iterable[StreetDeal]) -> Pile:
    """The pile after ``deals``, checking that each recorded card is the card the deck gives
    at that point; raises :class:`DeckInconsistent` otherwise."""
    try:
        return _replay(deck, deals)
    except DeckExhausted:
        raise DeckInconsistent("the stub is empty") from None


def _replay(deck: HandDeck, deals: Iterable[StreetDeal]) -> Pile:
    pile = fresh_pile(deck)
    for deal in deals:
        if deal.reshuffled:
            pile = pile.reshuffle(deck.reshuffle_key)
        if deal.burn is not None:
            if deal.burn_index != pile.drawn:
                raise DeckInconsistent(f"{deal.street.label}: burn at the wrong draw")
            card, pile = pile.burn()
            if card != deal.burn:
                raise DeckInconsistent(f"{deal.street.label}: burned card differs from the deck")
        for draw in deal.cards:
            if draw.index != pile.drawn:
                raise DeckInconsistent(f"{deal.street.label}: draw {draw.index} out of order")
            card, pile = pile.take()
            if card != draw.card:
                raise DeckInconsistent(f"{deal.street.label}: draw {draw.index} differs "
                                       "from the deck")
    return pile


# --- the commitment -------------------------------------------------------------------------


DOMAIN: Final = b"stud-hilo-deck-v1"


def encode(deck: HandDeck) -> bytes:
    """The canonical bytes the commitment hashes."""
    if len(deck.salt) != SALT_BYTES:
        raise ValueError(f"the salt must be {SALT_BYTES} bytes")
    return b"|".join((
        DOMAIN,
        deck.table_id.encode("ascii"),
        str(deck.hand_number).encode("ascii"),
        deck.salt,
        bytes(deck.order),
        bytes(deck.reshuffle_key),
    ))


def commit(deck: HandDeck) -> str:
    """The commitment: hex SHA-256 of :func:`encode`."""
    return hashlib.sha256(encode(deck)).hexdigest()


def verify_commitment(deck: HandDeck, commitment: str) -> bool:
    """Whether ``commitment`` is the commitment of ``deck`` (constant-time compare)."""
    try:
        expected = commit(deck)
    except ValueError:
        return False
    return hmac.compare_digest(expected, commitment.strip().lower())


# --- the verification -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FairAudit:
    """The per-card commitment's secret, for an auditor (:mod:`studkit.cardproof`): the base
    deck with its salts and the dealer's seed, the players' seed commitments and their seeds
    (None: committed but not opened in time), and the card commitment."""

    deck: FairDeck
    seeds: tuple[tuple[str, str], ...]
    opened: tuple[tuple[str, bytes | None], ...] = field(repr=False)
    commitment: str

    def dealing_deck(self, salt: bytes) -> HandDeck:
        """The deck in the order it was dealt (the base deck permuted by the seeds)."""
        order, key = self.deck.dealing(deal_order(self.deck.table_id, self.deck.hand_number,
                                                  self.deck.dealer_seed, self.opened))
        return HandDeck(table_id=self.deck.table_id, hand_number=self.deck.hand_number,
                        order=order, reshuffle_key=key, salt=salt)

    def problems(self, base: HandDeck, published: str) -> list[str]:
        """What is wrong with this secret against the v1 deck ``base`` and the card
        commitment ``published`` in the hand's ``HandStarted``."""
        out = []
        if self.deck.base != base.order:
            out.append("the per-card base deck is not the committed deck")
        if not same(self.deck.header(self.seeds).commitment, published):
            out.append("the salted cards and seeds do not match the card commitment")
        if sorted(p for p, _s in self.opened) != [p for p, _c in self.seeds]:
            out.append("the opened seeds are not the committed ones")
        commitments = dict(self.seeds)
        for player, seed in self.opened:
            if seed is not None and not same(seed_commitment(
                    self.deck.table_id, self.deck.hand_number, player, seed),
                    commitments.get(player, "")):
                out.append(f"{player}'s seed does not open its commitment")
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class HandAudit:
    """What an auditor obtains from the dealer after a hand: the deck with its salt and
    reshuffle key, the published commitment and the dealer's log of draws; for a hand with a
    per-card commitment, its secret as well (``fair``: the deck is then the base deck)."""

    deck: HandDeck
    commitment: str
    deals: tuple[StreetDeal, ...] = ()
    fair: FairAudit | None = None


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of :func:`verify_hand`."""

    problems: tuple[str, ...]
    cards_checked: int
    """Public cards compared with the deck (up, community, shown, exposed, mucked)."""
    draws: int
    """Cards taken from the deck according to the public record (burns included)."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def hand_events(events: Iterable[Event], hand_number: int) -> list[Event]:
    """The events of hand ``hand_number`` (from its ``HandStarted`` to its ``HandEnded``) out
    of a table's whole stream."""
    out: list[Event] = []
    inside = False
    for event in events:
        if isinstance(event, HandStarted):
            inside = event.hand_number == hand_number
        if inside:
            out.append(event)
            if isinstance(event, HandEnded):
                inside = False
    return out


@dataclass
class _Replay:
    pile: Pile
    problems: list[str]
    down: dict[int, list[int]]
    draws: list[tuple[int, int, bool]]
    """(draw number, seat, up) of each public draw."""
    checked: int = 0

    def take(self, seat: int, up: bool, card: Card | None, where: str) -> None:
        index = self.pile.drawn
        try:
            drawn, self.pile = self.pile.take()
        except DeckExhausted:
            self.problems.append(f"{where}: the deck is exhausted at draw {index}")
            return
        self.draws.append((index, seat, up))
        if not up and seat != 0:
            self.down.setdefault(seat, []).append(drawn)
        if card is not None:
            self.checked += 1
            if card.index != drawn:
                self.problems.append(f"{where}: draw {index} is not the deck's card")

    def burn(self) -> None:
        index = self.pile.drawn
        try:
            _card, self.pile = self.pile.burn()
        except DeckExhausted:
            self.problems.append(f"burn: the deck is exhausted at draw {index}")
            return
        self.draws.append((index, -1, False))

    def shown(self, seat: int, down: Sequence[Card], what: str) -> None:
        if not down:
            return
        self.checked += len(down)
        if tuple(c.index for c in down) != tuple(self.down.get(seat, ())):
            self.problems.append(f"seat {seat}: {what} down cards are not the cards dealt")


def _log_draws(deals: Sequence[StreetDeal]) -> list[tuple[int, int, bool]]:
    out: list[tuple[int, int, bool]] = []
    for deal in deals:
        if deal.burn_index is not None:
            out.append((deal.burn_index, -1, False))
        out.extend((d.index, d.seat, d.up) for d in deal.cards)
    return out


def verify_hand(audit: HandAudit, events: Iterable[Event]) -> Verification:
    """Check a hand against its commitment and its public record. ``events`` is the table's
    public stream (whole, or only the hand's events)."""
    deck = audit.deck
    problems: list[str] = []
    if not verify_commitment(deck, audit.commitment):
        problems.append("the deck, salt and reshuffle key do not match the commitment")
    all_events = list(events)
    opened = [e for e in all_events if isinstance(e, TableOpened)]
    if opened and opened[0].table_id != deck.table_id:
        problems.append("the deck belongs to another table")
    hand = hand_events(all_events, deck.hand_number)
    if not hand:
        problems.append(f"hand {deck.hand_number} is not in the public record")
        return Verification(tuple(problems), 0, 0)
    started = hand[0]
    assert isinstance(started, HandStarted)
    if started.deck_commitment != audit.commitment:
        problems.append("the commitment published at hand start differs")
    if audit.fair is not None:
        problems.extend(audit.fair.problems(deck, started.card_commitment))
        deck = audit.fair.dealing_deck(deck.salt)
    elif started.card_commitment:
        problems.append("the dealer gave no per-card secret for a hand with a card commitment")
    try:
        replay(deck, audit.deals)
    except DeckInconsistent as exc:
        problems.append(f"the dealer's log does not follow from the deck ({exc})")
    run = _Replay(pile=fresh_pile(deck), problems=problems, down={}, draws=[])
    for event in hand:
        match event:
            case BurnsReshuffled():
                run.pile = run.pile.reshuffle(deck.reshuffle_key)
            case CardBurned():
                run.burn()
            case DownCardDealt(seat=seat, street=street, card=card):
                run.take(seat, False, card, f"{street.label}, seat {seat}")
            case UpCardDealt(seat=seat, street=street, card=card):
                run.take(seat, True, card, f"{street.label}, seat {seat}")
            case CommunityCardDealt(card=card):
                run.take(0, True, card, "community card")
            case HandExposed(seat=seat, down=down):
                run.shown(seat, down, "exposed")
            case HandShown(seat=seat, down=down):
                run.shown(seat, down, "shown")
            case HandMucked(seat=seat, down=down):
                run.shown(seat, down, "mucked")
            case _:
                pass
    logged = _log_draws(audit.deals)
    if run.draws != logged[: len(run.draws)]:
        problems.append("the dealer's log and the public record disagree on who got which draw")
    return Verification(tuple(problems), run.checked, len(run.draws))


# --- from the wire --------------------------------------------------------------------------


def _index(msg: pb.Card, field: str) -> int:
    return card_from_proto(msg, field).index


def audit_from_proto(msg: dpb.HandAudit) -> HandAudit:
    """The auditor's side: a HandAudit message (the dealer's ``GetAudit``) as values
    :func:`verify_hand` checks; a malformed one is refused with
    :class:`~studkit.errors.BadRequest` naming the field."""
    try:
        deck = HandDeck(
            table_id=check_ident(msg.table_id, "table_id"),
            hand_number=check_hand_number(msg.hand_number, "hand_number"),
            order=tuple(_index(c, f"deck[{i}]") for i, c in enumerate(msg.deck)),
            reshuffle_key=tuple(_index(c, f"reshuffle_key[{i}]")
                                for i, c in enumerate(msg.reshuffle_key)),
            salt=bytes(msg.salt),
        )
    except ValueError as exc:
        raise BadRequest("deck", str(exc)) from None
    deals = []
    for i, street in enumerate(msg.streets):
        field = f"streets[{i}]"
        burn = street.burn if street.HasField("burn") else None
        deals.append(StreetDeal(
            street=street_from_proto(street.street, f"{field}.street"),
            reshuffled=street.reshuffled,
            burn=None if burn is None else _index(burn.card, f"{field}.burn.card"),
            burn_index=None if burn is None else burn.index,
            cards=tuple(Draw(index=d.index, card=_index(d.card, f"{field}.cards[{j}].card"),
                             seat=d.seat, up=d.up) for j, d in enumerate(street.cards)),
        ))
    return HandAudit(deck=deck, commitment=msg.commitment, deals=tuple(deals),
                     fair=_fair_from_proto(msg, deck))


def _fair_from_proto(msg: dpb.HandAudit, deck: HandDeck) -> FairAudit | None:
    if not msg.card_commitment:
        return None
    try:
        secret = FairDeck(table_id=deck.table_id, hand_number=deck.hand_number,
                          base=deck.order, salts=tuple(bytes(s) for s in msg.card_salts),
                          dealer_seed=bytes(msg.dealer_seed))
    except ValueError as exc:
        raise BadRequest("card_salts", str(exc)) from None
    seeds = tuple(sorted((s.player_id, s.commitment) for s in msg.seeds))
    opened = tuple((s.player_id, None if s.withheld else bytes(s.seed)) for s in msg.seeds)
    return FairAudit(deck=secret, seeds=seeds, opened=opened, commitment=msg.card_commitment)
