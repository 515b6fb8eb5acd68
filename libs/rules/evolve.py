"""``evolve(state, event) -> state``: apply one event. Total over every event type; the only
place state changes. ``fold`` replays a whole log."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, TypeVar, assert_never, cast

from rules._mutable import MutableHand, MutablePlayer, become, copier, twin_class
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
    HandVoided,
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    PotAwarded,
    Raised,
    RakeTaken,
    StakesChanged,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.rounds import (
    bring_in_duty,
    first_to_act,
    lifts_cap,
    next_to_act,
    round_over,
    street_bet,
)
from rules.state import HandState, Phase, Player, Seat, TableState, initial_state
from rules.streets import Street

_new = object.__new__
_set = object.__setattr__

# Enum members as module constants for the hot paths: ``Phase.BETTING`` is looked up through
# the enum's metaclass, about ten times the cost of a global.
_DEALING, _BETTING, _REVEAL = Phase.DEALING, Phase.BETTING, Phase.REVEAL
_SHOWDOWN, _SETTLING, _COMPLETE = Phase.SHOWDOWN, Phase.SETTLING, Phase.COMPLETE
_THIRD, _SEVENTH = Street.THIRD, Street.SEVENTH
_D = TypeVar("_D", HandState, TableState, Seat, Player)
_TWINS: dict[type, tuple[type, Callable[[object], Any]]] = {}
for _cls in (HandState, TableState, Seat, Player):
    _twin = twin_class(_cls)
    _TWINS[_cls] = (_twin, copier(_cls, _twin))


def _derive(obj: _D, **changes: Any) -> _D:
    """``dataclasses.replace`` without going through ``__init__`` (these classes compute and
    check nothing there): a copy into a mutable twin of the same layout, changed, then turned
    into the frozen class (:func:`rules._mutable.become`); several times as fast."""
    cls = type(obj)
    new = _TWINS[cls][1](obj)
    for name, value in changes.items():
        setattr(new, name, value)
    result: _D = become(new, cls)
    return result


def _with_hand_copier() -> Callable[[TableState, HandState], TableState]:
    """``_derive(state, hand=hand)`` as straight-line code, generated once (as
    :func:`rules._mutable._copier` does): it runs once per command and per run of events."""
    lines = [f"    new.{name} = {'hand' if name == 'hand' else 'state.' + name}"
             for name in TableState.__slots__]
    source = ("def with_hand(state, hand):\n    new = _new(Twin)\n" + "\n".join(lines)
              + "\n    _set(new, '__class__', TableState)\n    return new\n")
    namespace: dict[str, Any] = {"_new": _new, "_set": _set, "TableState": TableState,
                                 "Twin": _TWINS[TableState][0]}
    exec(source, namespace)  # the source holds only dataclass field names
    return cast(Callable[[TableState, HandState], TableState], namespace["with_hand"])


with_hand: Callable[[TableState, HandState], TableState] = _with_hand_copier()
"""``with_hand(state, hand)``: ``state`` with ``hand`` (private to the rules package)."""
_with_hand = with_hand

_copy_player, _copy_seat = _TWINS[Player][1], _TWINS[Seat][1]
_BLANK_PLAYER = Player(seat=0, stack=0)
_BLANK_HAND = HandState(hand_number=0, players=())
"""A player and a hand with every default, to derive the ones a hand starts with from (the
same values as their ``__init__`` makes, which computes nothing)."""


def _set_seat(state: TableState, number: int, seat: Seat | None) -> TableState:
    seats = list(state.seats)
    seats[number - 1] = seat
    return _derive(state, seats=tuple(seats))


def _street_dealt(hand: MutableHand, q: MutablePlayer | None = None) -> bool:
    """Whether every player still in has this street's cards (``q``, if given, is the player
    who just got a card: checked first, then the players after it in seat order, as the ones
    most likely still short when the cards go round in seat order, then those before it)."""
    street = hand.street
    assert street is not None
    want = street - 1 if hand.community is not None else street + 0  # plain ints
    players = hand.players
    if q is None:
        for p in players:  # noqa: SIM110 (a loop: no generator on the hot path)
            if not p.folded and len(p.down) + len(p.up) != want:
                return False
        return True
    if not q.folded and len(q.down) + len(q.up) != want:
        return False
    seat = q.seat
    for p in players:
        if p.seat > seat and not p.folded and len(p.down) + len(p.up) != want:
            return False
    for p in players:
        if p.seat < seat and not p.folded and len(p.down) + len(p.up) != want:
            return False
    return True


def _start_round(hand: MutableHand, config: TableConfig) -> None:
    """Reset the street's betting and find who acts first (or that nobody does)."""
    players = hand.players
    able = 0
    for i in range(len(players)):
        p = players[i]
        if p.street_total != 0 or p.acted or p.reference != 0:
            twin = hand.mutable_at(i)
            twin.street_total, twin.acted, twin.reference = 0, False, 0
        if not p.folded and p.stack > 0:  # p.able, inlined
            able += 1
    hand.target = hand.level = hand.full_wagers = 0
    hand.to_act = None
    hand.cap_lifted = hand.bring_in_pending = False
    street = hand.street
    assert street is not None
    if hand.exposed:
        hand.phase = _SHOWDOWN if street == _SEVENTH else _DEALING
    elif street == _THIRD:
        duty = bring_in_duty(hand)
        if duty is None:
            hand.phase = _REVEAL
        else:
            hand.cap_lifted = lifts_cap(hand, config, round_start=True)
            hand.phase, hand.to_act, hand.bring_in_seat = _BETTING, duty, duty
            hand.bring_in_pending = True
    elif able < 2:
        hand.phase = _SHOWDOWN if street == _SEVENTH else _REVEAL
    else:
        hand.cap_lifted = lifts_cap(hand, config, round_start=True)
        hand.phase, hand.to_act = _BETTING, first_to_act(hand)


def _end_round(hand: MutableHand, cap_lifted: bool) -> None:
    """Choose what follows a finished betting round."""
    in_hand = able = 0
    for p in hand.players:
        if not p.folded:
            in_hand += 1
            if p.stack > 0:  # p.able, inlined
                able += 1
    if in_hand <= 1:
        phase = _SETTLING
    elif hand.street == _SEVENTH:
        phase = _SHOWDOWN
    elif able <= 1:
        phase = _DEALING if hand.exposed else _REVEAL
    else:
        phase = _DEALING
    hand.to_act, hand.phase, hand.cap_lifted = None, phase, cap_lifted


def _after_action(hand: MutableHand, config: TableConfig, seat: int) -> None:
    lifted = hand.cap_lifted or lifts_cap(hand, config, round_start=False)
    if round_over(hand):
        _end_round(hand, lifted)
    else:
        hand.to_act, hand.cap_lifted = next_to_act(hand, seat), lifted


def _reference(hand: MutableHand, config: TableConfig, target: int) -> int:
    if hand.street == _THIRD and target <= config.bring_in:
        return 0
    return target


def _put_in(hand: MutableHand, seat: int, amount: int) -> MutablePlayer:
    """The player at ``seat``, after putting ``amount`` in."""
    p = hand.mutable(seat)
    p.stack -= amount
    p.street_total += amount
    p.hand_total += amount
    return p


def _act(hand: MutableHand, seat: int, amount: int, reference: int) -> None:
    """The player at ``seat`` acts, putting ``amount`` in (``_put_in``, inlined)."""
    p = hand.mutable(seat)
    p.stack -= amount
    p.street_total += amount
    p.hand_total += amount
    p.acted, p.reference = True, reference


def _wager(hand: MutableHand, config: TableConfig, seat: int, amount: int, to: int) -> None:
    if 2 * (to - hand.level) >= street_bet(hand, config):
        hand.level = to
        hand.full_wagers += 1
    _act(hand, seat, amount, _reference(hand, config, to))
    hand.target = to
    hand.last_wager = (hand.street, seat) if hand.street else None
    hand.bring_in_pending = False
    _after_action(hand, config, seat)


# One function per hand event, changing the hand in place.

def _up_card(hand: MutableHand, config: TableConfig, event: UpCardDealt) -> None:
    p = hand.mutable(event.seat)
    p.up = (*p.up, event.card)
    hand.street = event.street
    hand.dealt += 1
    if _street_dealt(hand, p):  # the street is dealt: its round starts
        _start_round(hand, config)


def _down_card(hand: MutableHand, config: TableConfig, event: DownCardDealt) -> None:
    p = hand.mutable(event.seat)
    p.down = (*p.down, event.card)
    hand.street = event.street
    hand.dealt += 1
    if _street_dealt(hand, p):
        _start_round(hand, config)


def _called(hand: MutableHand, config: TableConfig, event: Called) -> None:
    _act(hand, event.seat, event.amount, _reference(hand, config, hand.target))
    _after_action(hand, config, event.seat)


def _checked(hand: MutableHand, config: TableConfig, event: Checked) -> None:
    _act(hand, event.seat, 0, _reference(hand, config, hand.target))
    _after_action(hand, config, event.seat)


def _ante(hand: MutableHand, config: TableConfig, event: AntePosted) -> None:
    p = hand.mutable(event.seat)
    p.stack -= event.amount
    p.hand_total += event.amount


def _wagered(hand: MutableHand, config: TableConfig, event: Completed | BetMade | Raised) -> None:
    _wager(hand, config, event.seat, event.amount, event.to)


def _folded(hand: MutableHand, config: TableConfig, event: Folded) -> None:
    hand.mutable(event.seat).folded = True
    _after_action(hand, config, event.seat)


def _bring_in(hand: MutableHand, config: TableConfig, event: BringInPosted) -> None:
    _act(hand, event.seat, event.amount, 0)
    hand.target, hand.bring_in_pending = config.bring_in, False
    _after_action(hand, config, event.seat)


def _burned(hand: MutableHand, config: TableConfig, event: CardBurned) -> None:
    hand.burned += 1


def _reshuffled(hand: MutableHand, config: TableConfig, event: BurnsReshuffled) -> None:
    hand.burned = 0


def _community(hand: MutableHand, config: TableConfig, event: CommunityCardDealt) -> None:
    hand.community, hand.street = event.card, _SEVENTH
    hand.dealt += 1
    if _street_dealt(hand):
        _start_round(hand, config)


def _timed_out(hand: MutableHand, config: TableConfig, event: ActionTimedOut) -> None:
    pass


def _returned(hand: MutableHand, config: TableConfig, event: UncalledBetReturned) -> None:
    _put_in(hand, event.seat, -event.amount)


def _exposed(hand: MutableHand, config: TableConfig, event: HandExposed) -> None:
    p = hand.mutable(event.seat)
    p.down, p.exposed = event.down, True
    if all(p.exposed for p in hand.players if not p.folded):
        hand.exposed, hand.phase = True, _DEALING


def _shown(hand: MutableHand, config: TableConfig, event: HandShown) -> None:
    p = hand.mutable(event.seat)
    p.down, p.shown = event.down, True


def _mucked(hand: MutableHand, config: TableConfig, event: HandMucked) -> None:
    p = hand.mutable(event.seat)
    p.down, p.mucked = event.down or p.down, True


def _awarded(hand: MutableHand, config: TableConfig, event: PotAwarded) -> None:
    hand.mutable(event.seat).stack += event.amount
    hand.awards = (*hand.awards, event)
    hand.phase = _SETTLING


def _raked(hand: MutableHand, config: TableConfig, event: RakeTaken) -> None:
    # The chips leave the table: no stack gets them, so every stack folds to the money the
    # wallet holds for its seat (RULES 2.4).
    hand.rake, hand.rake_pots = event.amount, event.pots
    hand.phase = _SETTLING


def _voided(hand: MutableHand, config: TableConfig, event: HandVoided) -> None:
    # Every ante and wager goes back; hand_total stays as the record of what was put in.
    for p in hand.players:
        if p.hand_total:
            twin = hand.mutable(p.seat)
            twin.stack += twin.hand_total
    hand.voided, hand.to_act, hand.phase = True, None, _SETTLING


HAND_EVENTS: dict[type[Event], Callable[[MutableHand, TableConfig, Any], None]] = {
    AntePosted: _ante, CardBurned: _burned, BurnsReshuffled: _reshuffled,
    DownCardDealt: _down_card, UpCardDealt: _up_card, CommunityCardDealt: _community,
    BringInPosted: _bring_in, Completed: _wagered, BetMade: _wagered, Raised: _wagered,
    Called: _called, Checked: _checked, Folded: _folded, ActionTimedOut: _timed_out,
    UncalledBetReturned: _returned, HandExposed: _exposed, HandShown: _shown,
    HandMucked: _mucked, PotAwarded: _awarded, RakeTaken: _raked, HandVoided: _voided,
}
"""What each hand event does to the hand (the only place a hand changes). Private to the
rules package (``decide`` applies its own events through it too)."""
_HAND_EVENTS = HAND_EVENTS


_EVENT_TYPES = frozenset(EVENT_TYPES)
_copy_hand, _copy_table = _TWINS[HandState][1], _TWINS[TableState][1]


def _hand_started(state: TableState, event: HandStarted) -> TableState:
    """The hand dealt in at ``event``'s seats (once a hand: plain stores into twins, where
    ``_derive`` took keyword arguments)."""
    seats = state.seats
    players = []
    for n in event.seats:
        seat_state = seats[n - 1]
        assert seat_state is not None
        player = _copy_player(_BLANK_PLAYER)
        player.seat, player.stack, player.player_id = n, seat_state.stack, seat_state.player_id
        players.append(become(player, Player))
    hand = _copy_hand(_BLANK_HAND)
    hand.hand_number, hand.players = event.hand_number, tuple(players)
    hand.deck_commitment, hand.card_commitment = event.deck_commitment, event.card_commitment
    table = _copy_table(state)
    table.hand, table.hands_started = become(hand, HandState), state.hands_started + 1
    result: TableState = become(table, TableState)
    return result


def _hand_ended(state: TableState) -> TableState:
    """Each seat keeps its player's stack at the hand's end; the hand is complete."""
    ended = state.hand
    assert ended is not None
    table_seats = list(state.seats)
    for p in ended.players:
        current = table_seats[p.seat - 1]
        if current is not None:
            seat_twin = _copy_seat(current)
            seat_twin.stack = p.stack
            table_seats[p.seat - 1] = become(seat_twin, Seat)
    hand = _copy_hand(ended)
    hand.phase, hand.to_act = _COMPLETE, None
    table = _copy_table(state)
    table.seats, table.hand = tuple(table_seats), become(hand, HandState)
    result: TableState = become(table, TableState)
    return result


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
    handler = _HAND_EVENTS.get(type(event))
    if handler is not None:
        assert state.hand is not None and state.config is not None
        twin = MutableHand.thaw(state.hand)
        handler(twin, state.config, event)
        return _with_hand(state, twin.freeze())
    kind = type(event)
    if kind is HandStarted:  # once a hand each: before the match's chain of cases
        return _hand_started(state, event)  # type: ignore[arg-type]
    if kind is HandEnded:
        return _hand_ended(state)
    if kind not in _EVENT_TYPES:
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
            return _set_seat(state, seat, _derive(current, sitting_out=True))
        case PlayerSatIn(seat=seat):
            current = state.seats[seat - 1]
            assert current is not None
            return _set_seat(state, seat, _derive(current, sitting_out=False))
        case ChipsAdded(seat=seat, amount=amount):
            current = state.seats[seat - 1]
            assert current is not None
            return _set_seat(state, seat, _derive(current, stack=current.stack + amount))
        case HandStarted():
            return _hand_started(state, event)
        case StakesChanged(small_bet=small, big_bet=big, ante=ante, bring_in=bring_in):
            assert state.config is not None
            return _derive(state, config=replace(state.config, small_bet=small, big_bet=big,
                                                 ante=ante, bring_in=bring_in))
        case HandEnded():
            return _hand_ended(state)
        case (
            AntePosted() | CardBurned() | BurnsReshuffled() | DownCardDealt() | UpCardDealt()
            | CommunityCardDealt() | BringInPosted() | Completed() | BetMade() | Raised()
            | Called() | Checked() | Folded() | ActionTimedOut() | UncalledBetReturned()
            | HandExposed() | HandShown() | HandMucked() | PotAwarded() | RakeTaken()
            | HandVoided()
        ):
            raise AssertionError("hand events are applied above")
        case _:
            assert_never(event)


def fold(events: Iterable[Event], state: TableState | None = None) -> TableState:
    """Replay events from ``state`` (default: the initial state).

    The same as applying :func:`evolve` to each event in turn; a run of hand events is
    applied in place to one mutable twin of the hand, and the table takes the hand back, as
    a frozen value, once at the end of it.
    """
    current = initial_state() if state is None else state
    hand: MutableHand | None = None
    """The hand while a run of hand events lasts (``current.hand`` is stale meanwhile)."""
    config = current.config
    handlers = _HAND_EVENTS
    for event in events:
        handler = handlers.get(type(event))
        if handler is not None:
            if hand is None:
                assert current.hand is not None
                hand, config = MutableHand.thaw(current.hand), current.config
            assert config is not None
            handler(hand, config, event)
            continue
        if hand is not None:
            current, hand = _with_hand(current, hand.freeze()), None
        current = evolve(current, event)
    if hand is not None:
        current = _with_hand(current, hand.freeze())
    return current
