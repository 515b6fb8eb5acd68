"""``evolve(state, event) -> state``: apply one event. Total over every event type; the only
place state changes. ``fold`` replays a whole log."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any, TypeVar, assert_never

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

_T = TypeVar("_T", HandState, Player, TableState)
_FIELDS = {cls: (tuple(f.name for f in fields(cls)), attrgetter(*(f.name for f in fields(cls))))
           for cls in (HandState, Player, TableState)}
_new = object.__new__
_set = object.__setattr__


def _derive(obj: _T, **changes: Any) -> _T:
    """``dataclasses.replace`` for the hot path of ``fold``, about twice as fast: copies the
    fields into a new frozen value without going through ``__init__`` (these classes
    compute and check nothing there)."""
    cls = type(obj)
    names, values = _FIELDS[cls]
    new = _new(cls)
    for name, value in zip(names, values(obj), strict=True):
        _set(new, name, value)
    for name, value in changes.items():
        _set(new, name, value)
    return new


def _with_player(players: tuple[Player, ...], player: Player) -> tuple[Player, ...]:
    seat = player.seat
    return tuple(player if p.seat == seat else p for p in players)


def _set_player(hand: HandState, player: Player, **changes: Any) -> HandState:
    """The hand with ``player`` in place of the one at its seat (and other ``changes``)."""
    return _derive(hand, players=_with_player(hand.players, player), **changes)


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
        else _derive(p, street_total=0, acted=False, reference=0)
        for p in hand.players
    )
    hand = _derive(hand, players=players, target=0, level=0, full_wagers=0, to_act=None,
                   cap_lifted=False, bring_in_pending=False)
    street = hand.street
    assert street is not None
    if hand.exposed:
        return _derive(hand, phase=Phase.SHOWDOWN if street == Street.SEVENTH else Phase.DEALING)
    if street == Street.THIRD:
        duty = bring_in_duty(hand)
        if duty is None:
            return _derive(hand, phase=Phase.REVEAL)
        return _derive(hand, phase=Phase.BETTING, to_act=duty, bring_in_seat=duty,
                       bring_in_pending=True,
                       cap_lifted=lifts_cap(hand, config, round_start=True))
    if sum(1 for p in hand.players if p.able) < 2:
        return _derive(hand, phase=Phase.SHOWDOWN if street == Street.SEVENTH else Phase.REVEAL)
    return _derive(hand, phase=Phase.BETTING, to_act=first_to_act(hand),
                   cap_lifted=lifts_cap(hand, config, round_start=True))


def _end_round(hand: HandState, cap_lifted: bool) -> HandState:
    """Choose what follows a finished betting round."""
    in_hand = [p for p in hand.players if not p.folded]
    if len(in_hand) <= 1:
        phase = Phase.SETTLING
    elif hand.street == Street.SEVENTH:
        phase = Phase.SHOWDOWN
    elif sum(1 for p in in_hand if p.able) <= 1:
        phase = Phase.DEALING if hand.exposed else Phase.REVEAL
    else:
        phase = Phase.DEALING
    return _derive(hand, to_act=None, phase=phase, cap_lifted=cap_lifted)


def _after_action(hand: HandState, config: TableConfig, seat: int) -> HandState:
    lifted = hand.cap_lifted or lifts_cap(hand, config, round_start=False)
    if round_over(hand):
        return _end_round(hand, lifted)
    return _derive(hand, to_act=next_to_act(hand, seat), cap_lifted=lifted)


def _reference(hand: HandState, config: TableConfig, target: int) -> int:
    if hand.street == Street.THIRD and target <= config.bring_in:
        return 0
    return target


def _put_in(hand: HandState, seat: int, amount: int, **changes: Any) -> Player:
    """The player at ``seat`` after putting ``amount`` in (and other ``changes``)."""
    p = hand.player(seat)
    return _derive(p, stack=p.stack - amount, street_total=p.street_total + amount,
                   hand_total=p.hand_total + amount, **changes)


def _wager(hand: HandState, config: TableConfig, seat: int, amount: int, to: int) -> HandState:
    level, wagers = hand.level, hand.full_wagers
    if 2 * (to - level) >= street_bet(hand, config):
        level, wagers = to, wagers + 1
    p = _put_in(hand, seat, amount, acted=True, reference=_reference(hand, config, to))
    hand = _set_player(hand, p, target=to, level=level, full_wagers=wagers,
                       last_wager=(hand.street, seat) if hand.street else None,
                       bring_in_pending=False)
    return _after_action(hand, config, seat)


def _card_dealt(hand: HandState, config: TableConfig) -> HandState:
    """``hand`` has just received a card: start the round once the street is dealt."""
    if _street_dealt(hand):
        return _start_round(hand, config)
    return hand


def _hand_event(hand: HandState, config: TableConfig, event: Event) -> HandState:
    # Cases run from the most frequent events down (``fold`` spends its time here).
    match event:
        case UpCardDealt(seat=seat, street=street, card=card):
            p = hand.player(seat)
            return _card_dealt(_set_player(hand, _derive(p, up=(*p.up, card)), street=street,
                                           dealt=hand.dealt + 1), config)
        case DownCardDealt(seat=seat, street=street, card=card):
            p = hand.player(seat)
            return _card_dealt(_set_player(hand, _derive(p, down=(*p.down, card)),
                                           street=street, dealt=hand.dealt + 1), config)
        case Called(seat=seat, amount=amount):
            p = _put_in(hand, seat, amount, acted=True,
                        reference=_reference(hand, config, hand.target))
            return _after_action(_set_player(hand, p), config, seat)
        case Checked(seat=seat):
            p = _derive(hand.player(seat), acted=True,
                        reference=_reference(hand, config, hand.target))
            return _after_action(_set_player(hand, p), config, seat)
        case AntePosted(seat=seat, amount=amount):
            p = hand.player(seat)
            return _set_player(hand, _derive(p, stack=p.stack - amount,
                                             hand_total=p.hand_total + amount))
        case Completed(seat=seat, amount=amount, to=to) | BetMade(
            seat=seat, amount=amount, to=to
        ) | Raised(seat=seat, amount=amount, to=to):
            return _wager(hand, config, seat, amount, to)
        case Folded(seat=seat):
            hand = _set_player(hand, _derive(hand.player(seat), folded=True))
            return _after_action(hand, config, seat)
        case BringInPosted(seat=seat, amount=amount):
            p = _put_in(hand, seat, amount, acted=True, reference=0)
            hand = _set_player(hand, p, target=config.bring_in, bring_in_pending=False)
            return _after_action(hand, config, seat)
        case CardBurned():
            return _derive(hand, burned=hand.burned + 1)
        case BurnsReshuffled():
            return _derive(hand, burned=0)
        case CommunityCardDealt(card=card):
            return _card_dealt(_derive(hand, community=card, street=Street.SEVENTH,
                                       dealt=hand.dealt + 1), config)
        case ActionTimedOut():
            return hand
        case UncalledBetReturned(seat=seat, amount=amount):
            return _set_player(hand, _put_in(hand, seat, -amount))
        case HandExposed(seat=seat, down=down):
            hand = _set_player(hand, _derive(hand.player(seat), down=down, exposed=True))
            if all(p.exposed for p in hand.players if not p.folded):
                hand = _derive(hand, exposed=True, phase=Phase.DEALING)
            return hand
        case HandShown(seat=seat, down=down):
            return _set_player(hand, _derive(hand.player(seat), down=down, shown=True))
        case HandMucked(seat=seat, down=down):
            p = hand.player(seat)
            return _set_player(hand, _derive(p, down=down or p.down, mucked=True))
        case PotAwarded(seat=seat, amount=amount):
            p = hand.player(seat)
            return _set_player(hand, _derive(p, stack=p.stack + amount),
                               awards=(*hand.awards, event), phase=Phase.SETTLING)
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
            return _derive(state, hand=_hand_event(state.hand, state.config, event))
        case _:
            assert_never(event)


_HAND_EVENT_TYPES = frozenset({
    AntePosted, CardBurned, BurnsReshuffled, DownCardDealt, UpCardDealt, CommunityCardDealt,
    BringInPosted, Completed, BetMade, Raised, Called, Checked, Folded, ActionTimedOut,
    UncalledBetReturned, HandExposed, HandShown, HandMucked, PotAwarded,
})


def fold(events: Iterable[Event], state: TableState | None = None) -> TableState:
    """Replay events from ``state`` (default: the initial state).

    The same as applying :func:`evolve` to each event in turn; a run of hand events is
    applied to the hand alone, and the table takes the hand back once at the end of it.
    """
    current = initial_state() if state is None else state
    hand: HandState | None = None
    """The hand while a run of hand events lasts (``current.hand`` is stale meanwhile)."""
    config = current.config
    for event in events:
        if type(event) in _HAND_EVENT_TYPES:
            if hand is None:
                hand, config = current.hand, current.config
            assert hand is not None and config is not None
            hand = _hand_event(hand, config, event)
            continue
        if hand is not None:
            current, hand = _derive(current, hand=hand), None
        current = evolve(current, event)
    if hand is not None:
        current = _derive(current, hand=hand)
    return current
