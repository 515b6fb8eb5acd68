"""``decide(state, command) -> events``: judge one command against the state. Returns every
event the command causes (including what follows automatically: a round closing, uncalled
wagers, a hand settling) or raises :class:`RuleViolation` and changes nothing."""

from __future__ import annotations

from typing import Any, assert_never

from rules._mutable import MutableHand, maker
from rules.betting import ActionKind, LegalAction, judge_action, legal_actions_for
from rules.cards import Card
from rules.commands import (
    AddChips,
    Bet,
    Call,
    ChangeStakes,
    Check,
    Command,
    Complete,
    DealStreet,
    Fold,
    LeaveSeat,
    OpenTable,
    PostBringIn,
    Raise,
    RevealHands,
    Showdown,
    SitDown,
    SitIn,
    SitOut,
    StartHand,
    TimeOut,
    VoidHand,
)
from rules.config import TableConfig
from rules.dealing import deal_plan
from rules.errors import Reason, RuleViolation
from rules.events import (
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
    HandStarted,
    HandVoided,
    PlayerLeft,
    PlayerSatIn,
    PlayerSatOut,
    PlayerSeated,
    PotAwarded,
    Raised,
    Share,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.evolve import HAND_EVENTS, evolve, fold, with_hand
from rules.queries import seats_to_deal, sit_refusal, start_refusal
from rules.rounds import Hand
from rules.showdown import award_events, evaluate, raked_pots, showdown_events
from rules.stakes import change_stakes
from rules.state import HandState, Phase, TableState
from rules.streets import Street

_KIND = {
    PostBringIn: ActionKind.BRING_IN,
    Complete: ActionKind.COMPLETE,
    Bet: ActionKind.BET,
    Raise: ActionKind.RAISE,
    Call: ActionKind.CALL,
    Check: ActionKind.CHECK,
    Fold: ActionKind.FOLD,
}

# Enum members as module constants for the hot paths: ``Phase.BETTING`` is looked up through
# the enum's metaclass, about ten times the cost of a global.
_DEALING, _BETTING, _REVEAL = Phase.DEALING, Phase.BETTING, Phase.REVEAL
_SHOWDOWN, _SETTLING, _COMPLETE_PHASE = Phase.SHOWDOWN, Phase.SETTLING, Phase.COMPLETE
_BRING_IN, _CHECK, _FOLD, _CALL = (ActionKind.BRING_IN, ActionKind.CHECK, ActionKind.FOLD,
                                   ActionKind.CALL)
_COMPLETE_KIND, _BET, _RAISE = ActionKind.COMPLETE, ActionKind.BET, ActionKind.RAISE

# The events decide makes most (a betting action's, a dealt card's, an ante), built by
# positional makers (rules._mutable.maker: plain stores, then the frozen class), about half
# the cost of the frozen dataclass's keyword __init__ (interpreted in both builds).
_ANTE, _DOWN, _UP = maker(AntePosted), maker(DownCardDealt), maker(UpCardDealt)
_CALLED, _CHECKED, _FOLDED = maker(Called), maker(Checked), maker(Folded)
_BROUGHT_IN, _COMPLETED = maker(BringInPosted), maker(Completed)
_BET_MADE, _RAISED = maker(BetMade), maker(Raised)
_SEATED, _STARTED, _ENDED = maker(PlayerSeated), maker(HandStarted), maker(HandEnded)

# Those events kept by their fields for the next command that causes the same one (issue 35):
# an event is a frozen value, so one made is as good as another of the same fields, and a
# look-up costs about half a maker's call. Keys hold only values the rules computed (a seat,
# a street and the amounts of the plan or the action judged legal) and the dealt card when it
# is exactly a :class:`Card` (a value: equal cards make equal events; any other object is
# made anew, as before), so equal keys always mean equal events
# (tests/unit/rules/test_event_cache.py checks each against a fresh build).
_DEALT: dict[tuple[int, bool, Street, Card | None], Event] = {}
"""The dealt cards' events by seat, face, street and card."""
_ACTED: dict[tuple[ActionKind, int, int, int], Event] = {}
"""The betting actions' events by kind, seat, amount and total (``to``)."""
_ANTES: dict[tuple[int, int], Event] = {}
"""The antes posted by seat and amount."""
_EVENTS_KEPT = 4096
"""At most this many events are kept in each (then forgotten all at once)."""


def _dealt_event(seat: int, up: bool, street: Street, card: Any) -> Event:
    """``UpCardDealt`` or ``DownCardDealt`` of that seat, street and card, kept."""
    if card is not None and card.__class__ is not Card:
        return _UP(seat, street, card) if up else _DOWN(seat, street, card)  # type: ignore[no-any-return]
    key = (seat, up, street, card)
    event = _DEALT.get(key)
    if event is None:
        event = _UP(seat, street, card) if up else _DOWN(seat, street, card)
        if len(_DEALT) >= _EVENTS_KEPT:
            _DEALT.clear()
        _DEALT[key] = event
    return event


def _ante_event(seat: int, amount: int) -> Event:
    """``AntePosted`` of that seat and amount, kept."""
    key = (seat, amount)
    event = _ANTES.get(key)
    if event is None:
        event = _ANTE(seat, amount)
        if len(_ANTES) >= _EVENTS_KEPT:
            _ANTES.clear()
        _ANTES[key] = event
    return event


def _fail(reason: Reason, detail: str) -> RuleViolation:
    return RuleViolation(reason, detail)


def _config(state: TableState) -> TableConfig:
    if state.config is None:
        raise _fail(Reason.INVALID_COMMAND, "the table is not open")
    return state.config


def _hand(state: TableState, phase: Phase) -> HandState:
    hand = state.hand
    # ``hand.is_over`` read as the phase it is (an interpreted property call, each command).
    if hand is None or hand.phase == _COMPLETE_PHASE:
        raise _fail(Reason.NO_HAND_IN_PROGRESS, "no hand is in progress")
    if hand.phase != phase:
        reason = Reason.NOT_BETTING if phase == _BETTING else Reason.INVALID_COMMAND
        raise _fail(reason, f"the hand is in phase {hand.phase.value}, not {phase.value}")
    return hand


# A command's fields are read untyped (``c: Any = command``) wherever they are checked here:
# compiled (tools/compile_core.py), a read typed as the field's declared type checks it (a
# TypeError, or a bool taken as an int) before the check below can refuse it; read untyped,
# both builds give the same refusal (tests/unit/rules/test_compiled_build.py).

def _seat_number(state: TableState, seat: object) -> int:
    config = _config(state)
    if (not isinstance(seat, int) or isinstance(seat, bool)
            or not 1 <= seat <= config.seats):
        raise _fail(Reason.SEAT_OUT_OF_RANGE, f"seat must be 1..{config.seats}, got {seat!r}")
    return seat


def _occupied(state: TableState, seat: object) -> None:
    if state.seat(_seat_number(state, seat)) is None:
        raise _fail(Reason.SEAT_EMPTY, f"seat {seat} is empty")


def _in_current_hand(state: TableState, seat: Any) -> bool:
    return state.hand_in_progress and state.hand is not None and state.hand.has_player(seat)


def _positive(amount: object, what: str) -> int:
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise _fail(Reason.INVALID_COMMAND, f"{what} must be a positive integer, got {amount!r}")
    return amount


# --- table commands ---------------------------------------------------------------------

def _open(state: TableState, command: OpenTable) -> list[Event]:
    if state.opened:
        raise _fail(Reason.INVALID_COMMAND, "the table is already open")
    c: Any = command
    if not c.table_id:
        raise _fail(Reason.INVALID_COMMAND, "table id must not be empty")
    return [TableOpened(table_id=c.table_id, config=c.config)]


def _sit_down(state: TableState, command: SitDown) -> list[Event]:
    c: Any = command
    refusal = sit_refusal(state, c.seat, c.player_id, c.stack)
    if refusal is not None:
        raise refusal
    return [_SEATED(c.seat, c.player_id, c.stack)]


def _leave(state: TableState, command: LeaveSeat) -> list[Event]:
    c: Any = command
    _occupied(state, c.seat)
    if _in_current_hand(state, c.seat):
        raise _fail(Reason.HAND_IN_PROGRESS, f"seat {c.seat} is in the current hand")
    seat = state.seat(c.seat)
    assert seat is not None
    return [PlayerLeft(seat=c.seat, player_id=seat.player_id, stack=seat.stack)]


def _sit_out(state: TableState, command: SitOut | SitIn) -> list[Event]:
    c: Any = command
    _occupied(state, c.seat)
    seat = state.seat(c.seat)
    assert seat is not None
    wants_out = isinstance(command, SitOut)
    if seat.sitting_out == wants_out:
        raise _fail(Reason.INVALID_COMMAND,
                    f"seat {c.seat} is already sitting {'out' if wants_out else 'in'}")
    return [PlayerSatOut(seat=c.seat) if wants_out else PlayerSatIn(seat=c.seat)]


def _add_chips(state: TableState, command: AddChips) -> list[Event]:
    c: Any = command
    _occupied(state, c.seat)
    if _in_current_hand(state, c.seat):
        raise _fail(Reason.HAND_IN_PROGRESS, "chips cannot be added during a hand (table stakes)")
    return [ChipsAdded(seat=c.seat, amount=_positive(c.amount, "amount"))]


def _start(state: TableState, command: StartHand) -> list[Event]:
    refusal = start_refusal(state)
    if refusal is not None:
        raise refusal
    config = _config(state)
    c: Any = command
    if (not isinstance(c.hand_number, int) or isinstance(c.hand_number, bool)
            or c.hand_number != state.hands_started + 1):
        raise _fail(Reason.INVALID_COMMAND,
                    f"the next hand number is {state.hands_started + 1}")
    seats = seats_to_deal(state)
    events: list[Event] = [_STARTED(c.hand_number, seats, c.deck_commitment,
                                    c.card_commitment)]
    if config.ante > 0:
        for n in seats:
            stack = state.seats[n - 1].stack  # type: ignore[union-attr]
            events.append(_ante_event(n, min(config.ante, stack)))
    return events


# --- dealing --------------------------------------------------------------------------

def _known_cards(hand: HandState) -> list[Card]:
    cards: list[Card] = []
    for p in hand.players:
        cards.extend(c for c in p.down if c is not None)
        cards.extend(p.up)
    if hand.community is not None:
        cards.append(hand.community)
    return cards


def _check_unique(cards: list[Card]) -> None:
    # The message counts repeats and never names them: a repeated card may be a down card.
    repeats = len(cards) - len(set(cards))
    if repeats:
        raise _fail(Reason.DUPLICATE_CARD, f"{repeats} card(s) would be dealt twice")


def _deal(state: TableState, command: DealStreet) -> list[Event]:
    config = _config(state)
    hand = _hand(state, _DEALING)
    plan = deal_plan(hand, config)
    assert plan is not None
    c: Any = command
    if len(c.cards) != len(plan.slots):
        raise _fail(Reason.WRONG_DEAL,
                    f"{plan.street.label} needs {len(plan.slots)} cards, got {len(c.cards)}")
    burned = 1 if plan.burn else 0
    if c.burned != burned or c.reshuffled_burns != plan.reshuffle_burns:
        raise _fail(Reason.WRONG_DEAL, f"{plan.street.label}: burn={plan.burn}, "
                    f"reshuffle={plan.reshuffle_burns} expected")
    events: list[Event] = []
    if plan.reshuffle_burns:
        events.append(BurnsReshuffled(count=hand.burned))
    if plan.burn:
        events.append(CardBurned())
    new_cards: list[Card] = []
    dealt: Any
    for slot, dealt in zip(plan.slots, c.cards, strict=True):
        if dealt.seat != slot.seat or dealt.up != slot.up:
            raise _fail(Reason.WRONG_DEAL, f"expected a {'up' if slot.up else 'down'} card for "
                        f"{'the community' if slot.seat == 0 else f'seat {slot.seat}'}")
        if slot.up and dealt.card is None:
            raise _fail(Reason.WRONG_DEAL, "a face-up card needs its value")
        if dealt.card is not None:
            new_cards.append(dealt.card)
        if slot.seat == 0:
            assert dealt.card is not None
            events.append(CommunityCardDealt(card=dealt.card))
        else:
            assert not slot.up or dealt.card is not None
            events.append(_dealt_event(slot.seat, slot.up, plan.street, dealt.card))
    _check_unique(_known_cards(hand) + new_cards)
    return events


def _reveal_map(hand: HandState, hands: Any) -> dict[int, tuple[Card, ...]]:
    """Check revealed down cards: exactly the seats still in, the right count, consistent
    with anything already known, no card twice."""
    in_hand = [p for p in hand.players if not p.folded]
    given = {h.seat: h.down for h in hands}
    if len(given) != len(hands) or set(given) != {p.seat for p in in_hand}:
        raise _fail(Reason.WRONG_SHOWDOWN, "reveal exactly the hands still in: seats "
                    + ", ".join(str(p.seat) for p in in_hand))
    cards: list[Card] = []
    for p in in_hand:
        down = given[p.seat]
        if len(down) != len(p.down):
            raise _fail(Reason.WRONG_SHOWDOWN, f"seat {p.seat} has {len(p.down)} down cards")
        for known, revealed in zip(p.down, down, strict=True):
            if known is not None and known != revealed:
                raise _fail(Reason.WRONG_SHOWDOWN, f"seat {p.seat}: revealed cards differ")
        cards.extend(down)
        cards.extend(p.up)
    if hand.community is not None:
        cards.append(hand.community)
    _check_unique(cards)
    return given


def _reveal(state: TableState, command: RevealHands) -> list[Event]:
    hand = _hand(state, _REVEAL)
    c: Any = command
    given = _reveal_map(hand, c.hands)
    return [HandExposed(seat=seat, down=given[seat]) for seat in sorted(given)]


def _showdown(state: TableState, command: Showdown) -> list[Event]:
    config = _config(state)
    hand = _hand(state, _SHOWDOWN)
    c: Any = command
    given = _reveal_map(hand, c.hands)
    return showdown_events(hand, config, given, c.muck_requests,
                           all_show=_all_show(hand))


def _all_show(hand: HandState) -> bool:
    """Every hand is shown: an all-in runout, or at most one player could still act on 7th
    street (RULES 9.7, 11.6)."""
    return hand.exposed or sum(1 for p in hand.players if p.able) <= 1


# --- betting ----------------------------------------------------------------------------

def _action_event(hand: HandState, action: LegalAction) -> Event:
    """The event of the legal ``action`` of the player to act, kept."""
    seat = hand.to_act
    assert seat is not None
    key = (action.kind, seat, action.amount, action.to)
    event = _ACTED.get(key)
    if event is None:
        event = _new_action_event(seat, action)
        if len(_ACTED) >= _EVENTS_KEPT:
            _ACTED.clear()
        _ACTED[key] = event
    return event


def _new_action_event(seat: int, action: LegalAction) -> Event:
    kind = action.kind
    if kind == _CALL:
        return _CALLED(seat, action.amount)  # type: ignore[no-any-return]
    if kind == _CHECK:
        return _CHECKED(seat)  # type: ignore[no-any-return]
    if kind == _FOLD:
        return _FOLDED(seat)  # type: ignore[no-any-return]
    if kind == _BRING_IN:
        return _BROUGHT_IN(seat, action.amount)  # type: ignore[no-any-return]
    if kind == _COMPLETE_KIND:
        return _COMPLETED(seat, action.amount, action.to)  # type: ignore[no-any-return]
    if kind == _BET:
        return _BET_MADE(seat, action.amount, action.to)  # type: ignore[no-any-return]
    if kind == _RAISE:
        return _RAISED(seat, action.amount, action.to)  # type: ignore[no-any-return]
    assert_never(kind)  # type: ignore[arg-type]


def _act(state: TableState, seat: object, kind: ActionKind, to: object) -> list[Event]:
    config = _config(state)
    hand = _hand(state, _BETTING)
    if seat != hand.to_act:
        raise _fail(Reason.NOT_YOUR_TURN, f"seat {hand.to_act} is to act, not seat {seat}")
    action = judge_action(hand, config, kind)
    if isinstance(action, RuleViolation):
        legal = legal_actions_for(hand, config)
        assert legal is not None
        listed = ", ".join(sorted(a.kind.value for a in legal.actions))
        raise _fail(action.reason, f"{action.detail} (legal: {listed})")
    if to is not None and to != action.to:
        raise _fail(Reason.WRONG_AMOUNT, f"a {kind.value} now goes to exactly {action.to}")
    return [_action_event(hand, action)]


def _time_out(state: TableState, command: TimeOut) -> list[Event]:
    config = _config(state)
    hand = _hand(state, _BETTING)
    c: Any = command
    if c.seat != hand.to_act:
        raise _fail(Reason.NOT_YOUR_TURN, f"seat {hand.to_act} is to act, not {c.seat}")
    for kind in (_BRING_IN, _CHECK, _FOLD):
        action = judge_action(hand, config, kind)
        if isinstance(action, LegalAction):
            return [ActionTimedOut(seat=c.seat), _action_event(hand, action)]
    raise AssertionError("a player to act can always post, check or fold")


def _void(state: TableState, command: VoidHand) -> list[Event]:
    hand = state.hand
    if hand is None or hand.is_over:
        raise _fail(Reason.NO_HAND_IN_PROGRESS, "no hand is in progress")
    c: Any = command
    if not isinstance(c.reason, str) or not c.reason.strip():
        raise _fail(Reason.INVALID_COMMAND, "a void needs a reason")
    return [HandVoided(hand_number=hand.hand_number, reason=c.reason)]


# --- what follows automatically -----------------------------------------------------------

def _uncalled(hand: Hand) -> list[Event]:
    """The bet nobody called, returned (frozen hand or the fold's twin: compiled, a twin
    typed as the frozen hand would be refused, its players a list)."""
    totals = sorted(((p.street_total, p.seat) for p in hand.players), reverse=True)
    if len(totals) >= 2 and totals[0][0] > totals[1][0]:
        return [UncalledBetReturned(seat=totals[0][1], amount=totals[0][0] - totals[1][0])]
    return []


def _uncontested(hand: HandState, config: TableConfig) -> list[Event]:
    winner = next(p.seat for p in hand.players if not p.folded)
    rake, paid = raked_pots(hand, config)
    return [*rake, *(PotAwarded(pot=i, seat=winner, amount=pot.amount, share=Share.WHOLE)
                     for i, pot in enumerate(paid) if winner in pot.eligible and pot.amount)]


def _exposed_showdown(hand: HandState, config: TableConfig) -> list[Event]:
    values = {}
    for p in hand.players:
        if not p.folded:
            own = tuple(c for c in p.own_cards() if c is not None)
            values[p.seat] = evaluate(p.seat, own, hand.community)
    rake, paid = raked_pots(hand, config)
    return [*rake, *award_events(paid, values, values)]


def _follow(state: TableState, events: list[Event]) -> tuple[tuple[Event, ...], TableState]:
    """Append what the command's events set off, evolving as we go; returns the events and
    the state after them.

    The same as ``state = evolve(state, event)`` for each event in turn (as :func:`fold`
    does, a run of hand events is applied in place to one mutable twin of the hand, frozen
    once at the end of the run or before anything reads the frozen state)."""
    out: list[Event] = []
    twin: MutableHand | None = None
    config = state.config
    for event in events:
        handler = HAND_EVENTS.get(type(event))
        if handler is not None:
            if twin is None:
                assert state.hand is not None and state.config is not None
                twin, config = MutableHand.thaw(state.hand), state.config
            assert config is not None
            before: Phase | None = twin.phase
            handler(twin, config, event)
            out.append(event)
            if before != _BETTING or twin.phase == _BETTING or twin.voided:
                continue
            for returned in _uncalled(twin):
                HAND_EVENTS[UncalledBetReturned](twin, config, returned)
                out.append(returned)
            continue
        if twin is not None:
            state, twin = with_hand(state, twin.freeze()), None
        before = state.hand.phase if state.hand is not None else None
        state = evolve(state, event)
        out.append(event)
        hand = state.hand
        if (hand is None or before != _BETTING or hand.phase == _BETTING
                or hand.voided):
            continue
        for returned in _uncalled(hand):
            state = evolve(state, returned)
            out.append(returned)
    if twin is not None:
        state = with_hand(state, twin.freeze())
    hand = state.hand
    if hand is None:
        return tuple(out), state
    phase = hand.phase
    # A hand in SETTLING ends now, even when no pot holds a chip (ante 0, everyone folds to
    # the bring-in: RULES 7.6, 9.6); so does an exposed one at the showdown. (Neither phase
    # is that of a hand over: nothing to do for one, nor for any other phase.)
    if phase == _SETTLING:
        config = _config(state)
        settle: list[Event] = []
        if not (hand.awards or hand.rake_pots or hand.voided):
            settle = _uncontested(hand, config)
    elif phase == _SHOWDOWN and hand.exposed:
        settle = _exposed_showdown(hand, _config(state))
    else:
        return tuple(out), state
    settle.append(_ENDED(hand.hand_number))
    state = fold(settle, state)
    out.extend(settle)
    return tuple(out), state


def decide(state: TableState, command: Command) -> tuple[Event, ...]:
    """The events a command causes, or :class:`RuleViolation` (nothing changes).

    >>> from rules.config import TableConfig
    >>> from rules.state import initial_state
    >>> decide(initial_state(), OpenTable(table_id="t1", config=TableConfig()))
    (TableOpened(table_id='t1', config=TableConfig(...)),)
    >>> decide(initial_state(), SitDown(seat=1, player_id="ann", stack=100))
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: invalid_command: the table is not open
    """
    return decide_and_fold(state, command)[0]


def decide_and_fold(state: TableState, command: Command) -> tuple[tuple[Event, ...], TableState]:
    """:func:`decide` and the state after its events (``fold(events, state)``), which
    deciding computes anyway: a replay that checks each command saves the second fold.
    """
    kind = _KIND.get(type(command))
    if kind is not None:  # a betting action, the commonest command: the match's case below
        action: Any = command
        return _follow(state, _act(state, action.seat, kind, getattr(action, "to", None)))
    match command:
        case OpenTable():
            events = _open(state, command)
        case SitDown():
            events = _sit_down(state, command)
        case LeaveSeat():
            events = _leave(state, command)
        case SitOut() | SitIn():
            events = _sit_out(state, command)
        case AddChips():
            events = _add_chips(state, command)
        case StartHand():
            events = _start(state, command)
        case DealStreet():
            events = _deal(state, command)
        case PostBringIn() | Complete() | Bet() | Raise() | Call() | Check() | Fold():
            c: Any = command
            events = _act(state, c.seat, _KIND[type(command)], getattr(c, "to", None))
        case TimeOut():
            events = _time_out(state, command)
        case RevealHands():
            events = _reveal(state, command)
        case Showdown():
            events = _showdown(state, command)
        case VoidHand():
            events = _void(state, command)
        case ChangeStakes():
            events = change_stakes(state, command)
        case _:
            assert_never(command)
    return _follow(state, events)
