"""Test support for the per-card commitment: a whole hand dealt in memory as an honest dealer
deals it (a random base deck, salts and seeds; the deal order from the seeds; the rules'
public deal rule), and what each party then holds: the public record, a player's own cards
with their openings, and the dealer's public proof. Pure: no Redis, no gRPC."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rules import Phase, TableConfig, card_from_index
from rules.commands import (
    Bet,
    Call,
    Check,
    DealStreet,
    DealtCard,
    Fold,
    PostBringIn,
    RevealedHand,
    RevealHands,
    Showdown,
)
from rules.draws import BURN_SEAT, Drawn, Stub, deal_street
from rules.events import Event, HandStarted
from rules.testing import TableDriver
from studkit.cardcheck import HandProof, OwnCards, OwnSeed, PublicOpening, public_cards
from studkit.cardproof import FairDeck, deal_order, seed_commitment

TABLE = "t1"


@dataclass
class DealtHand:
    """One hand as the honest in-memory dealer dealt it."""

    deck: FairDeck
    events: list[Event]
    """The public record of the hand (down cards unknown), from HandStarted on."""
    draws: tuple[Drawn, ...]
    """The draws by base position (as a player computes them)."""
    cards: tuple[Drawn, ...]
    """The same draws by card."""
    seeds: dict[str, bytes]
    opened: tuple[tuple[str, bytes | None], ...]
    config: TableConfig

    def proof(self) -> HandProof:
        header = self.deck.header([(p, seed_commitment(TABLE, 1, p, s))
                                   for p, s in self.seeds.items()])
        shown = public_cards(self.events, self.draws)
        leaves = self.deck.leaves()
        openings = tuple(PublicOpening(draw=d, opening=self.deck.opening(
            self.deck.position_of(card), leaves)) for d, card in sorted(shown.items()))
        return HandProof(header=header, openings=openings, complete=True,
                         dealer_seed=self.deck.dealer_seed, seeds=self.opened)

    def own(self, seat: int) -> OwnCards:
        downs = [d for d in self.cards if d.seat == seat and not d.up]
        leaves = self.deck.leaves()
        return OwnCards(seat=seat, down=tuple(d.item for d in downs),
                        openings=tuple(self.deck.opening(self.deck.position_of(d.item), leaves)
                                       for d in downs))

    def seed(self, player: str) -> OwnSeed:
        return OwnSeed(seed=self.seeds[player], committed=True,
                       opened=dict(self.opened).get(player) is not None)


def deal_hand(rng: random.Random, players: int = 3, *, burn_cards: bool = False,
              folds: Mapping[int, int] | None = None, seeded: Sequence[int] = (1, 2),
              withheld: Sequence[int] = ()) -> DealtHand:
    """Play one hand at ``players`` seats (player ``p<seat>``), everyone calling or checking
    to the end but the seats in ``folds`` (seat -> street they fold on); the players of
    ``seeded`` seats give seeds, those of ``withheld`` commit one but never open it."""
    config = TableConfig(burn_cards=burn_cards)
    base = list(range(52))
    rng.shuffle(base)
    deck = FairDeck(table_id=TABLE, hand_number=1, base=tuple(base),
                    salts=tuple(rng.randbytes(32) for _ in range(52)),
                    dealer_seed=rng.randbytes(32))
    seeds = {f"p{s}": rng.randbytes(32) for s in seeded}
    opened = tuple(sorted((p, None if int(p[1:]) in withheld else s) for p, s in seeds.items()))
    order = deal_order(TABLE, 1, deck.dealer_seed, opened)
    dealing, key = deck.dealing(order)
    t = TableDriver(config, {s: 100_000 for s in range(1, players + 1)}, table_id=TABLE)
    t.start()
    start = len(t.events) - (1 + players * (config.ante > 0))
    stub_cards, stub_positions = Stub(dealing), Stub(order.deal)
    by_card: list[Drawn] = []
    by_position: list[Drawn] = []
    folds = dict(folds or {})
    while not t.hand.is_over:
        phase = t.hand.phase
        if phase == Phase.DEALING:
            plan = t.plan()
            got, stub_cards = deal_street(stub_cards, plan, key)
            at, stub_positions = deal_street(stub_positions, plan, order.reshuffle)
            by_card.extend(got)
            by_position.extend(at)
            t.apply(DealStreet(
                cards=tuple(DealtCard(seat=d.seat, up=d.up,
                                      card=card_from_index(d.item) if d.up else None)
                            for d in got if d.seat != BURN_SEAT),
                burned=int(plan.burn), reshuffled_burns=plan.reshuffle_burns))
        elif phase == Phase.BETTING:
            legal = t.legal()
            kinds = {a.kind.value for a in legal.actions}
            street = int(t.hand.street or 3)
            folding = {s for s, st in folds.items() if st == street
                       and not t.hand.player(s).folded}
            if "bring_in" in kinds:
                t.apply(PostBringIn(seat=legal.seat))
            elif legal.seat in folding and "fold" in kinds:
                t.apply(Fold(seat=legal.seat))
            elif folding and legal.seat not in folding and "bet" in kinds:
                t.apply(Bet(seat=legal.seat))  # a wager for the folding seats to face
            elif "call" in kinds:
                t.apply(Call(seat=legal.seat))
            else:
                t.apply(Check(seat=legal.seat))
        else:
            hands = tuple(
                RevealedHand(seat=p.seat, down=tuple(
                    card_from_index(d.item) for d in by_card if d.seat == p.seat and not d.up))
                for p in t.hand.players if not p.folded)
            t.apply(RevealHands(hands=hands) if phase == Phase.REVEAL
                    else Showdown(hands=hands))
    events = t.events[start:]
    assert isinstance(events[0], HandStarted)
    return DealtHand(deck=deck, events=list(events), draws=tuple(by_position),
                     cards=tuple(by_card), seeds=seeds, opened=opened, config=config)


def with_card_commitment(hand: DealtHand) -> DealtHand:
    """The hand with the card commitment in its HandStarted, as the table records it."""
    started = hand.events[0]
    assert isinstance(started, HandStarted)
    header = hand.proof().header
    return replace(hand, events=[replace(started, card_commitment=header.commitment),
                                 *hand.events[1:]])
