"""Showdown: who shows first, automatic show or muck, and settling every pot (RULES §11, §14)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from rules.cards import Card
from rules.config import ShowdownOpener, TableConfig
from rules.events import Event, HandMucked, HandShown, PotAwarded, RakeTaken, Share
from rules.hands import best_high, best_low
from rules.rake import rake_due, take_rake
from rules.rounds import clockwise_after, highest_board_seat
from rules.side_pots import Contribution, Pot, ShowdownHand, build_pots, split_pot
from rules.state import HandState
from rules.streets import Street


def hand_pots(hand: HandState) -> tuple[Pot, ...]:
    """The pots of a hand from its contributions so far (after uncalled wagers return)."""
    return build_pots([
        Contribution(seat=p.seat, total=p.hand_total, in_hand=not p.folded, all_in=p.all_in)
        for p in hand.players
    ])


def raked_pots(hand: HandState, config: TableConfig
               ) -> tuple[list[RakeTaken], tuple[Pot, ...]]:
    """The rake event due when the hand's pots are settled now (none when nothing is due)
    and the pots as they are then awarded, each reduced by its part of the rake (RULES 2.4).

    The street the hand ends on is the latest dealt: a hand that never saw a 4th-street
    card pays nothing."""
    pots = hand_pots(hand)
    amount = rake_due(sum(p.amount for p in pots), config.rake, hand.street)
    if amount == 0:
        return [], pots
    taken = take_rake([p.amount for p in pots], amount)
    reduced = tuple(replace(p, amount=p.amount - t) for p, t in zip(pots, taken, strict=True))
    return [RakeTaken(amount=amount, pots=taken)], reduced


def showdown_opener(hand: HandState, config: TableConfig) -> int:
    """Who shows first (RULES 11.2)."""
    in_hand = {p.seat for p in hand.players if not p.folded}
    last = hand.last_wager
    if last is not None and last[0] == Street.SEVENTH and last[1] in in_hand:
        return last[1]
    if config.showdown_opener == ShowdownOpener.LAST_AGGRESSOR:
        if last is not None and last[1] in in_hand:
            return last[1]
        if last is None and hand.bring_in_seat is not None and hand.bring_in_seat in in_hand:
            return hand.bring_in_seat
    return highest_board_seat(hand)


def showing_order(hand: HandState, config: TableConfig) -> tuple[int, ...]:
    """Every seat still in, in showing order: the opener, then clockwise (RULES 11.3)."""
    first = showdown_opener(hand, config)
    order = [first]
    seat = first
    while True:
        nxt = clockwise_after(hand, seat, lambda p: not p.folded)
        if nxt is None or nxt == first:
            break
        order.append(nxt)
        seat = nxt
    return tuple(order)


def evaluate(seat: int, own: tuple[Card, ...], community: Card | None) -> ShowdownHand:
    """Best high and low of a player's cards (plus the community card, if any)."""
    cards = own + ((community,) if community is not None else ())
    return ShowdownHand(seat=seat, high=best_high(cards), low=best_low(cards), own_cards=own)


def must_show(hand_value: ShowdownHand, pots: tuple[Pot, ...],
              shown: Mapping[int, ShowdownHand]) -> bool:
    """Whether a later player's hand is shown automatically (RULES 11.4)."""
    for pot in pots:
        if len(pot.eligible) < 2 or hand_value.seat not in pot.eligible:
            continue
        rivals = [shown[s] for s in pot.eligible if s in shown]
        if not rivals or hand_value.high >= max(r.high for r in rivals):
            return True
        if hand_value.low is not None:
            lows = [r.low for r in rivals if r.low is not None]
            if not lows or hand_value.low >= max(lows):
                return True
    return False


def showdown_events(
    hand: HandState,
    config: TableConfig,
    down: Mapping[int, tuple[Card, ...]],
    muck_requests: Collection[int],
    all_show: bool,
) -> list[Event]:
    """Shows and mucks in order, then the rake (if any) and the awards of every pot."""
    rake, paid = raked_pots(hand, config)
    pots = hand_pots(hand)
    values = {
        seat: evaluate(seat, cards + hand.player(seat).up, hand.community)
        for seat, cards in down.items()
    }
    events: list[Event] = []
    shown: dict[int, ShowdownHand] = {}
    for index, seat in enumerate(showing_order(hand, config)):
        value = values[seat]
        if (all_show or index == 0 or seat not in muck_requests
                or must_show(value, pots, shown)):
            shown[seat] = value
            if not hand.player(seat).exposed:
                events.append(HandShown(seat=seat, down=down[seat]))
        else:
            kept = down[seat] if config.history_reveals_mucked else ()
            events.append(HandMucked(seat=seat, down=kept))
    events.extend(rake)
    events.extend(award_events(paid, values, shown))
    return events


def award_events(pots: tuple[Pot, ...], values: Mapping[int, ShowdownHand],
                 shown: Mapping[int, ShowdownHand]) -> list[PotAwarded]:
    """Settle each pot: a single eligible player takes it; otherwise the shown hands split.
    A pot the rake emptied awards nothing."""
    events: list[PotAwarded] = []
    for index, pot in enumerate(pots):
        if pot.amount == 0:
            continue
        if len(pot.eligible) == 1:
            seat = pot.eligible[0]
            events.append(PotAwarded(pot=index, seat=seat, amount=pot.amount, share=Share.WHOLE))
            continue
        for award in split_pot(pot, {s: shown[s] for s in pot.eligible if s in shown}):
            events.append(PotAwarded(pot=index, seat=award.seat, amount=award.amount,
                                     share=award.share, hand=award.hand))
    return events
