"""``evolve(state, event) -> state``: apply one event. Total over every event type; the only
place state changes. ``fold`` replays a whole log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import assert_never

from rules.betting import (
    bring_in_duty,
    first_to_act,
    lifts_cap,
    next_to_act,
    round_over,
    street_bet,
)
from rules.config import TableConfig
from rules.events import (
    EVENT_TYPES,
    ActionTimedOut,
    AntePosted,
    BetMade,
    BringInPosted,
    BurnsReshuffled,
    Called,
    CardBurned,
    Checked,
    ChipsAdded,
    CommunityCardDealt,
    Completed,
    DownCardDealt,
    Event,
    Folded,
    HandEnded,
    HandExposed,
    HandMucked,
    HandShown,
    HandStarted,
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    PotAwarded,
    Raised,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.state import HandState, Phase, Player, Seat, TableState, initial_state
from rules.streets import Street


def _set_player(hand: HandState, player: Player) -> HandState:
    return replace(hand, players=tuple(player if p.seat == player.seat else p
                                       for p in hand.players))


def _set_seat(state: TableState, number: int, seat: Seat | None) -> TableState:
    seats = list(state.seats)
    seats[number - 1] = seat
    return replace(state, seats=tuple(seats))


def _street_dealt(hand: HandState) -> bool:
    """Whether every player still in has this street's cards."""
    assert hand.street is not None
    want = int(hand.street) - (1 if hand.community is not None else 0)
    return all(len(p.down) + len(p.up) == want for p in hand.players if not p.folded)


def _start_round(hand: HandState, config: TableConfig) -> HandState:
    """Reset the street's betting and find who acts first (or that nobody does)."""
    players = tuple(
        p if (p.street_total, p.acted, p.reference) == (0, False, 0)
        else replace(p, street_total=0, acted=False, reference=0)
        for p in hand.players
    )
    hand = replace(hand, players=players, target=0, level=0, full_wagers=0, to_act=None,
                   cap_lifted=False, bring_in_pending=False)
    street = hand.street
    assert street is not None
    if hand.exposed:
        return replace(hand, phase=Phase.SHOWDOWN if street == Street.SEVENTH else Phase.DEALING)
    if street == Street.THIRD:
        duty = bring_in_duty(hand)
        if duty is None:
            return replace(hand, phase=Phase.REVEAL)
        hand = replace(hand, phase=Phase.BETTING, to_act=duty, bring_in_seat=duty,
                       bring_in_pending=True)
    else:
        if sum(1 for p in hand.players if p.able) < 2:
            return replace(hand, phase=Phase.SHOWDOWN if street == Street.SEVENTH
                           else Phase.REVEAL)
        hand = replace(hand, phase=Phase.BETTING, to_act=first_to_act(hand))
    return replace(hand, cap_lifted=lifts_cap(hand, config, round_start=True))


def _end_round(hand: HandState) -> HandState:
    """Choose what follows a finished betting round."""
    hand = replace(hand, to_act=None)
    in_hand = [p for p in hand.players if not p.folded]
    if len(in_hand) <= 1:
        return replace(hand, phase=Phase.SETTLING)
    if hand.street == Street.SEVENTH:
        return replace(hand, phase=Phase.SHOWDOWN)
    if sum(1 for p in in_hand if p.able) <= 1:
        return replace(hand, phase=Phase.DEALING if hand.exposed else Phase.REVEAL)
    return replace(hand, phase=Phase.DEALING)


def _after_action(hand: HandState, config: TableConfig, seat: int) -> HandState:
    if not hand.cap_lifted and lifts_cap(hand, config, round_start=False):
        hand = replace(hand, cap_lifted=True)
    if round_over(hand):
        return _end_round(hand)
    return replace(hand, to_act=next_to_act(hand, seat))


def _reference(hand: HandState, config: TableConfig, target: int) -> int:
    if hand.street == Street.THIRD and target <= config.bring_in:
        return 0
    return target


def _put_in(hand: HandState, seat: int, amount: int) -> Player:
    p = hand.player(seat)
    return replace(p, stack=p.stack - amount, street_total=p.street_total + amount,
                   hand_total=p.hand_total + amount)


def _wager(hand: HandState, config: TableConfig, seat: int, amount: int, to: int) -> HandState:
    p = replace(_put_in(hand, seat, amount), acted=True)
    level, wagers = hand.level, hand.full_wagers
    if 2 * (to - level) >= street_bet(hand, config):
        level, wagers = to, wagers + 1
    hand = replace(hand, target=to, level=level, full_wagers=wagers,
                   last_wager=(hand.street, seat) if hand.street else None)
    hand = _set_player(hand, replace(p, reference=_reference(hand, config, to)))
    return _after_action(hand, config, seat)


def _card_dealt(hand: HandState, config: TableConfig) -> HandState:
    hand = replace(hand, dealt=hand.dealt + 1)
    if _street_dealt(hand):
        return _start_round(hand, config)
    return hand


def _hand_event(hand: HandState, config: TableConfig, event: Event) -> HandState:
    match event:
        case AntePosted(seat=seat, amount=amount):
            p = hand.player(seat)
            return _set_player(hand, replace(p, stack=p.stack - amount,
                                             hand_total=p.hand_total + amount))
        case CardBurned():
            return replace(hand, burned=hand.burned + 1)
        case BurnsReshuffled():
            return replace(hand, burned=0)
        case DownCardDealt(seat=seat, street=street, card=card):
            p = hand.player(seat)
            hand = _set_player(replace(hand, street=street), replace(p, down=(*p.down, card)))
            return _card_dealt(hand, config)
        case UpCardDealt(seat=seat, street=street, card=card):
            p = hand.player(seat)
            hand = _set_player(replace(hand, street=street), replace(p, up=(*p.up, card)))
            return _card_dealt(hand, config)
        case CommunityCardDealt(card=card):
            return _card_dealt(replace(hand, community=card, street=Street.SEVENTH), config)
        case BringInPosted(seat=seat, amount=amount):
            p = replace(_put_in(hand, seat, amount), acted=True, reference=0)
            hand = replace(_set_player(hand, p), target=config.bring_in, bring_in_pending=False)
            return _after_action(hand, config, seat)
        case Completed(seat=seat, amount=amount, to=to) | BetMade(
            seat=seat, amount=amount, to=to
        ) | Raised(seat=seat, amount=amount, to=to):
            return _wager(replace(hand, bring_in_pending=False), config, seat, amount, to)
        case Called(seat=seat, amount=amount):
            p = replace(_put_in(hand, seat, amount), acted=True,
                        reference=_reference(hand, config, hand.target))
            return _after_action(_set_player(hand, p), config, seat)
        case Checked(seat=seat):
            p = replace(hand.player(seat), acted=True,
                        reference=_reference(hand, config, hand.target))
            return _after_action(_set_player(hand, p), config, seat)
        case Folded(seat=seat):
            hand = _set_player(hand, replace(hand.player(seat), folded=True))
            return _after_action(hand, config, seat)
        case ActionTimedOut():
            return hand
        case UncalledBetReturned(seat=seat, amount=amount):
            return _set_player(hand, _put_in(hand, seat, -amount))
        case HandExposed(seat=seat, down=down):
            hand = _set_player(hand, replace(hand.player(seat), down=down, exposed=True))
            if all(p.exposed for p in hand.players if not p.folded):
                hand = replace(hand, exposed=True, phase=Phase.DEALING)
            return hand
        case HandShown(seat=seat, down=down):
            return _set_player(hand, replace(hand.player(seat), down=down, shown=True))
        case HandMucked(seat=seat, down=down):
            p = hand.player(seat)
            return _set_player(hand, replace(p, down=down or p.down, mucked=True))
        case PotAwarded(seat=seat, amount=amount):
            p = hand.player(seat)
            hand = _set_player(hand, replace(p, stack=p.stack + amount))
            return replace(hand, awards=(*hand.awards, event), phase=Phase.SETTLING)
        case _:
            raise TypeError(f"not a hand event: {type(event).__name__}")


_EVENT_TYPES = frozenset(EVENT_TYPES)


def evolve(state: TableState, event: Event) -> TableState:
    """Apply one event to a table's state.

    >>> from rules.config import TableConfig
    >>> s = evolve(initial_state(), TableOpened(table_id="t1", config=TableConfig()))
    >>> s = evolve(s, PlayerSeated(seat=3, player_id="ann", stack=1000))
    >>> s.seat(3)
    Seat(player_id='ann', stack=1000, sitting_out=False)
    >>> evolve(s, 42)  # type: ignore[arg-type]
    Traceback (most recent call last):
    ...
    TypeError: not an event: int
    """
    if type(event) not in _EVENT_TYPES:
        raise TypeError(f"not an event: {type(event).__name__}")
    match event:
        case TableOpened(table_id=table_id, config=config):
            return TableState(table_id=table_id, config=config, seats=(None,) * config.seats)
        case PlayerSeated(seat=seat, player_id=player_id, stack=stack):
            return _set_seat(state, seat, Seat(player_id=player_id, stack=stack))
        case PlayerLeft(seat=seat):
            return _set_seat(state, seat, None)
        case PlayerSatOut(seat=seat):
            current = state.seats[seat - 1]
            assert current is not None
            return _set_seat(state, seat, replace(current, sitting_out=True))
        case PlayerSatIn(seat=seat):
            current = state.seats[seat - 1]
            assert current is not None
            return _set_seat(state, seat, replace(current, sitting_out=False))
        case ChipsAdded(seat=seat, amount=amount):
            current = state.seats[seat - 1]
            assert current is not None
            return _set_seat(state, seat, replace(current, stack=current.stack + amount))
        case HandStarted(hand_number=number, seats=seats, deck_commitment=commitment):
            players = []
            for n in seats:
                seat_state = state.seats[n - 1]
                assert seat_state is not None
                players.append(Player(seat=n, stack=seat_state.stack))
            hand = HandState(hand_number=number, players=tuple(players),
                             deck_commitment=commitment)
            return replace(state, hand=hand, hands_started=state.hands_started + 1)
        case HandEnded():
            assert state.hand is not None
            table_seats = list(state.seats)
            for p in state.hand.players:
                current = table_seats[p.seat - 1]
                if current is not None:
                    table_seats[p.seat - 1] = replace(current, stack=p.stack)
            return replace(state, seats=tuple(table_seats),
                           hand=replace(state.hand, phase=Phase.COMPLETE, to_act=None))
        case (
            AntePosted() | CardBurned() | BurnsReshuffled() | DownCardDealt() | UpCardDealt()
            | CommunityCardDealt() | BringInPosted() | Completed() | BetMade() | Raised()
            | Called() | Checked() | Folded() | ActionTimedOut() | UncalledBetReturned()
            | HandExposed() | HandShown() | HandMucked() | PotAwarded()
        ):
            assert state.hand is not None and state.config is not None
            return replace(state, hand=_hand_event(state.hand, state.config, event))
        case _:
            assert_never(event)


def fold(events: Iterable[Event], state: TableState | None = None) -> TableState:
    """Replay events from ``state`` (default: the initial state)."""
    current = initial_state() if state is None else state
    for event in events:
        current = evolve(current, event)
    return current
