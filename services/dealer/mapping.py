"""Dealer protos <-> dealer values, pure. Requests are validated here (ids, hand numbers,
seats, streets) and refused with :class:`~studkit.errors.BadRequest` naming the field; cards
go through ``studkit.mapping`` so there is one card encoding on the wire. The auditor's side,
a HandAudit message back to values, is :func:`studkit.deckproof.audit_from_proto`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from dealer.players import OwnCards
from rules import DealPlan, DealSlot, card_from_index
from stud.v1 import commands_pb2 as cpb
from stud.v1 import common_pb2 as pb
from stud.v1 import dealer_pb2 as dpb
from studkit.cardcheck import HandProof
from studkit.cardproof import SCHEME as CARD_SCHEME
from studkit.cardproof import SEED_BYTES, CardOpening, DealHeader
from studkit.deckproof import Draw, HandAudit, StreetDeal
from studkit.errors import BadRequest
from studkit.keys import check_id
from studkit.mapping import card_to_proto, street_from_proto, street_to_proto

MAX_SEAT: Final = 8
SCHEME: Final = ("sha256(stud-hilo-deck-v1|table_id|hand_number|salt|deck|reshuffle_key), "
                 "cards as one byte each: (rank - 2) * 4 + suit (c=0, d=1, h=2, s=3)")


def table_id(value: str, field: str = "table_id") -> str:
    """A table id as keys accept it."""
    try:
        return check_id(value, field)
    except ValueError as exc:
        raise BadRequest(field, str(exc), reason="malformed_id") from None


def hand_number(value: int, field: str = "hand_number", *, latest_ok: bool = False) -> int:
    """A hand number, 1.. (0 too when it means "the latest hand")."""
    if value < (0 if latest_ok else 1):
        raise BadRequest(field, "hand numbers start at 1")
    return value


def commitment(value: str, field: str = "commitment") -> str:
    """A hex SHA-256 digest (64 lowercase hex digits)."""
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise BadRequest(field, "a commitment is 64 lowercase hex digits",
                         reason="malformed_commitment")
    return value


def seed(value: bytes, field: str = "seed") -> bytes:
    """A player's 32-byte seed."""
    if len(value) != SEED_BYTES:
        raise BadRequest(field, f"a seed is {SEED_BYTES} bytes", reason="malformed_seed")
    return bytes(value)


def seats(values: Iterable[int], field: str = "seats") -> tuple[int, ...]:
    """Seats 1..8."""
    out = tuple(values)
    for i, seat in enumerate(out):
        if not 1 <= seat <= MAX_SEAT:
            raise BadRequest(f"{field}[{i}]", f"seat must be 1..{MAX_SEAT}, got {seat}")
    return out


def plan_from_proto(msg: dpb.DealRequest) -> DealPlan:
    """The deal a request asks for, as a :class:`rules.DealPlan`."""
    if not msg.slots:
        raise BadRequest("slots", "at least one card to deal")
    slots = []
    for i, slot in enumerate(msg.slots):
        if not 0 <= slot.seat <= MAX_SEAT:
            raise BadRequest(f"slots[{i}].seat", f"seat must be 0..{MAX_SEAT}, got {slot.seat}")
        slots.append(DealSlot(seat=slot.seat, up=slot.up))
    return DealPlan(street=street_from_proto(msg.street), slots=tuple(slots), burn=msg.burn,
                    reshuffle_burns=msg.reshuffle_burns)


def card(index: int) -> pb.Card:
    """The wire form of a card index."""
    return card_to_proto(card_from_index(index))


def deal_to_proto(deal: StreetDeal) -> dpb.DealResponse:
    """The table's view of a street: up cards with values, down cards without."""
    cards = []
    for draw in deal.cards:
        dealt = cpb.DealtCard(seat=draw.seat, up=draw.up)
        if draw.up:
            dealt.card.CopyFrom(card(draw.card))
        cards.append(dealt)
    first = deal.burn_index if deal.burn_index is not None else deal.cards[0].index
    return dpb.DealResponse(cards=cards, burned=0 if deal.burn is None else 1,
                            reshuffled_burns=deal.reshuffled, card_index_start=first)


def opening_to_proto(opening: CardOpening, draw: int = 0) -> dpb.CardOpening:
    """One card's opening."""
    return dpb.CardOpening(position=opening.position, card=card(opening.card),
                           salt=opening.salt, path=list(opening.path), draw=draw)


def header_to_proto(header: DealHeader) -> dpb.DealHeader:
    """What a card commitment binds."""
    return dpb.DealHeader(root=header.root, dealer_seed_commitment=header.dealer_seed,
                          seeds=[dpb.SeedCommitment(player_id=p, commitment=c)
                                 for p, c in header.seeds], scheme=CARD_SCHEME)


def own_cards_to_proto(cards: OwnCards) -> dpb.MyCards:
    """A player's own cards, with their openings (an empty opening where the corrupted test
    dealer withholds one)."""
    msg = dpb.MyCards(table_id=cards.table_id, hand_number=cards.hand_number, seat=cards.seat,
                      down=[card(c) for c in cards.down], up=[card(c) for c in cards.up],
                      down_openings=[dpb.CardOpening() if o is None else opening_to_proto(o)
                                     for o in cards.openings])
    if cards.header is not None:
        msg.header.CopyFrom(header_to_proto(cards.header))
    return msg


def hand_proof_to_proto(table: str, number: int, proof: HandProof) -> dpb.HandProof:
    """The public proof of a hand."""
    commitments = dict(proof.header.seeds)
    return dpb.HandProof(
        table_id=table, hand_number=number, card_commitment=proof.header.commitment,
        header=header_to_proto(proof.header),
        openings=[opening_to_proto(o.opening, o.draw) for o in proof.openings],
        complete=proof.complete, dealer_seed=proof.dealer_seed or b"",
        seeds=[dpb.SeedOpening(player_id=p, commitment=commitments.get(p, ""),
                               seed=s or b"", withheld=s is None) for p, s in proof.seeds])


def reveal_to_proto(hands: dict[int, tuple[int, ...]]) -> dpb.RevealResponse:
    """Revealed hands, in the order given."""
    return dpb.RevealResponse(hands=[
        cpb.RevealedHand(seat=seat, down=[card(c) for c in down]) for seat, down in hands.items()
    ])


def _draw(draw: Draw) -> dpb.AuditDraw:
    return dpb.AuditDraw(index=draw.index, card=card(draw.card), seat=draw.seat, up=draw.up)


def audit_to_proto(audit: HandAudit) -> dpb.HandAudit:
    """Everything an auditor needs to check a hand."""
    streets = []
    used = 0
    for deal in audit.deals:
        street = dpb.AuditStreet(street=street_to_proto(deal.street), reshuffled=deal.reshuffled,
                                 cards=[_draw(d) for d in deal.cards])
        if deal.burn is not None and deal.burn_index is not None:
            street.burn.CopyFrom(dpb.AuditDraw(index=deal.burn_index, card=card(deal.burn)))
            used += 1
        used += len(deal.cards)
        streets.append(street)
    deck = audit.deck
    msg = dpb.HandAudit(
        table_id=deck.table_id, hand_number=deck.hand_number, commitment=audit.commitment,
        deck=[card(c) for c in deck.order], salt=deck.salt, scheme=SCHEME, cards_used=used,
        reshuffle_key=[card(c) for c in deck.reshuffle_key], streets=streets,
    )
    if audit.fair is not None:
        commitments = dict(audit.fair.seeds)
        msg.card_commitment = audit.fair.commitment
        msg.card_salts.extend(audit.fair.deck.salts)
        msg.dealer_seed = audit.fair.deck.dealer_seed
        msg.seeds.extend(dpb.SeedOpening(player_id=p, commitment=commitments.get(p, ""),
                                         seed=s or b"", withheld=s is None)
                         for p, s in audit.fair.opened)
    return msg
