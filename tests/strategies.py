"""Hypothesis strategies and command builders for the rules library: table configs, short
and deep stacks, decks, a stacked-deck dealer, legal and illegal commands."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from rules import DECK, Card, Reason, format_cards
from rules.betting import WAGERS, ActionKind, LegalActions, legal_actions_for
from rules.commands import (
    AddChips,
    Bet,
    Call,
    Check,
    Command,
    Complete,
    DealStreet,
    DealtCard,
    Fold,
    LeaveSeat,
    OpenTable,
    PostBringIn,
    Raise,
    RevealedHand,
    RevealHands,
    Showdown,
    SitDown,
    SitIn,
    SitOut,
    StartHand,
    TimeOut,
)
from rules.config import HeadsUpRaises, ShowdownOpener, TableConfig
from rules.dealing import deal_plan
from rules.queries import seats_to_deal
from rules.state import Phase, TableState
from rules.testing import ACTION_COMMANDS, StackedDeck, deal_command, revealed_hands


class Deck(tuple[Card, ...]):
    """A deck order that hypothesis prints as card text."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"Deck({format_cards(self)!r})")


decks = st.permutations(DECK).map(Deck)
"""A shuffled deck: the dealer's order for one hand."""


# --- tables -----------------------------------------------------------------------------

@st.composite
def configs(draw: st.DrawFn, seats: int | None = None) -> TableConfig:
    """Any valid table: stakes derived from the small bet (RULES 2.2) or given one by one,
    every option, 0-4 raises."""
    if seats is None:
        seats = draw(st.sampled_from((8, 8, 8, 7, 6, 5, 4, 3, 2)))
    options = {
        "seats": seats,
        "max_raises": draw(st.integers(0, 4)),
        "heads_up_raises": draw(st.sampled_from(HeadsUpRaises)),
        "burn_cards": draw(st.booleans()),
        "showdown_opener": draw(st.sampled_from(ShowdownOpener)),
        "history_reveals_mucked": draw(st.booleans()),
    }
    small_bet = draw(st.one_of(st.sampled_from((200, 2, 3, 5, 10, 100, 1000)),
                               st.integers(2, 5000)))
    big_bet = draw(st.none() | st.integers(small_bet + 1, 3 * small_bet))
    ante = draw(st.none() | st.integers(0, small_bet))
    bring_in = draw(st.none() | st.integers(1, small_bet - 1))
    return TableConfig.for_stakes(small_bet, big_bet=big_bet, ante=ante, bring_in=bring_in,
                                  **options)


def stacks(config: TableConfig, short: bool = True) -> st.SearchStrategy[int]:
    """A buy-in: with ``short``, often below the ante, exactly the ante, or less than the
    bring-in or the small bet behind after the ante; else (and otherwise) a few bets or
    deep."""
    ante, bring_in, small, big = config.ante, config.bring_in, config.small_bet, config.big_bet
    choices: list[st.SearchStrategy[int]] = []
    if short:
        if ante > 1:
            choices.append(st.integers(1, ante - 1))
        if ante > 0:
            choices.append(st.just(ante))
        choices.append(st.integers(ante + 1, ante + bring_in))
        if bring_in + 1 < small:
            choices.append(st.integers(ante + bring_in + 1, ante + small - 1))
    choices.append(st.integers(ante + small, ante + 2 * small + 6 * big))
    choices.append(st.integers(ante + 12 * big, ante + 40 * big))
    return st.one_of(choices)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableSetup:
    """A table to open: its config and the stack bought in at each occupied seat."""

    config: TableConfig
    stacks: dict[int, int]

    def commands(self, table_id: str = "t1") -> Iterator[Command]:
        """OpenTable, then a SitDown per seat."""
        yield OpenTable(table_id=table_id, config=self.config)
        for seat, stack in sorted(self.stacks.items()):
            yield SitDown(seat=seat, player_id=f"p{seat}", stack=stack)


@st.composite
def tables(draw: st.DrawFn, min_players: int = 2) -> TableSetup:
    """A config and 2 to ``seats`` players at random seats with random stacks;
    ``min_players`` of the config is at most the number seated."""
    config = draw(configs())
    count = draw(st.just(config.seats) | st.integers(min_players, config.seats))
    seats = draw(st.lists(st.integers(1, config.seats), min_size=count, max_size=count,
                          unique=True))
    wanted = draw(st.integers(2, count))
    config = replace(config, min_players=wanted)
    short = draw(st.booleans())
    return TableSetup(config=config,
                      stacks={s: draw(stacks(config, short)) for s in sorted(seats)})


# --- the dealer --------------------------------------------------------------------------

# The stacked deck, the deal command and the reveal are the rules driver's own.
Dealer = StackedDeck


# --- legal commands ----------------------------------------------------------------------

def legal_of(state: TableState) -> LegalActions | None:
    """What the player to act may do, if anyone is to act."""
    if state.hand is None or state.config is None:
        return None
    return legal_actions_for(state.hand, state.config)


def action_command(legal: LegalActions, choice: int, calm: bool = False) -> Command:
    """A legal player command from a number 0-99 (0 shrinks to the passive action):
    0-44 check, call or post; 45-59 fold; 60-94 bet, complete or raise (odd numbers state
    the amount); 95-99 a time-out. A kind that is not legal falls back to the passive one.
    A ``calm`` player never folds and wagers only on 85-94 (hands that go the distance)."""
    seat = legal.seat
    passive = next(a for a in legal.actions if a.kind in (
        ActionKind.CHECK, ActionKind.CALL, ActionKind.BRING_IN))
    wager = next((a for a in legal.actions if a.kind in WAGERS), None)
    fold = legal.get(ActionKind.FOLD)
    if choice >= 95:
        return TimeOut(seat=seat)
    if choice >= (85 if calm else 60) and wager is not None:
        cls = ACTION_COMMANDS[wager.kind]
        return cls(seat=seat, to=wager.to if choice % 2 else None)  # type: ignore[call-arg]
    if 45 <= choice < 60 and fold is not None and not calm:
        return Fold(seat=seat)
    return ACTION_COMMANDS[passive.kind](seat=seat)


@st.composite
def between_hands(draw: st.DrawFn, state: TableState) -> list[Command]:
    """Table commands between hands: sit outs and ins, leaves, new players, added chips."""
    assert state.config is not None
    commands: list[Command] = []
    for number, seat in enumerate(state.seats, start=1):
        move = draw(st.integers(0, 9))
        if seat is None:
            if move >= 8:
                player = f"h{state.hands_started}s{number}"
                commands.append(SitDown(seat=number, player_id=player,
                                        stack=draw(stacks(state.config))))
            continue
        if move == 9:
            commands.append(LeaveSeat(seat=number))
        elif move == 8:
            commands.append(SitIn(seat=number) if seat.sitting_out else SitOut(seat=number))
        elif move == 7 or (seat.stack == 0 and move >= 4):
            commands.append(AddChips(seat=number, amount=draw(stacks(state.config))))
    return commands


# --- illegal commands --------------------------------------------------------------------

def _player_commands(seat: int) -> list[Command]:
    return [PostBringIn(seat=seat), Complete(seat=seat), Bet(seat=seat), Raise(seat=seat),
            Call(seat=seat), Check(seat=seat), Fold(seat=seat), TimeOut(seat=seat)]


def illegal_commands(state: TableState, dealer: Dealer | None
                     ) -> list[tuple[Command, Reason | None]]:
    """Commands that must be refused now, each with the reason expected (None: any reason).
    ``state`` must know the down cards (full information); ``dealer`` holds the next cards."""
    config = state.config
    assert config is not None
    hand = state.hand
    out: list[tuple[Command, Reason | None]] = []
    occupied = [n for n, s in enumerate(state.seats, start=1) if s is not None]
    empty = [n for n, s in enumerate(state.seats, start=1) if s is None]
    for n in occupied:
        out.append((SitDown(seat=n, player_id="newcomer", stack=100), Reason.SEAT_TAKEN))
    for n in (0, -1, config.seats + 1):
        out.append((SitDown(seat=n, player_id="newcomer", stack=100), Reason.SEAT_OUT_OF_RANGE))
    for n in empty:
        out.append((LeaveSeat(seat=n), Reason.SEAT_EMPTY))
        out.append((AddChips(seat=n, amount=100), Reason.SEAT_EMPTY))
        out.append((SitDown(seat=n, player_id="newcomer", stack=0), Reason.INVALID_COMMAND))
        if occupied:
            taken = state.seats[occupied[0] - 1]
            assert taken is not None
            out.append((SitDown(seat=n, player_id=taken.player_id, stack=100),
                        Reason.PLAYER_ALREADY_SEATED))
    out.append((StartHand(hand_number=state.hands_started + 2), None))
    out.append((StartHand(hand_number=state.hands_started), None))
    for n in occupied:
        out.append((AddChips(seat=n, amount=0), None))
    if hand is None or hand.is_over:
        for n in occupied:
            out.extend((c, Reason.NO_HAND_IN_PROGRESS) for c in _player_commands(n))
        out.append((DealStreet(cards=()), Reason.NO_HAND_IN_PROGRESS))
        out.append((Showdown(hands=()), Reason.NO_HAND_IN_PROGRESS))
        out.append((RevealHands(hands=()), Reason.NO_HAND_IN_PROGRESS))
        if len(seats_to_deal(state)) < config.min_players:
            out.append((StartHand(hand_number=state.hands_started + 1),
                        Reason.NOT_ENOUGH_PLAYERS))
        return out
    out.append((StartHand(hand_number=state.hands_started + 1), Reason.HAND_IN_PROGRESS))
    for p in hand.players:
        out.append((LeaveSeat(seat=p.seat), Reason.HAND_IN_PROGRESS))
        out.append((AddChips(seat=p.seat, amount=100), Reason.HAND_IN_PROGRESS))
    if hand.phase != Phase.BETTING:
        for n in occupied:
            out.extend((c, Reason.NOT_BETTING) for c in _player_commands(n))
    if hand.phase != Phase.DEALING:
        out.append((DealStreet(cards=()), Reason.INVALID_COMMAND))
    if hand.phase != Phase.SHOWDOWN:
        out.append((Showdown(hands=revealed_or_empty(state)), Reason.INVALID_COMMAND))
    if hand.phase != Phase.REVEAL:
        out.append((RevealHands(hands=revealed_or_empty(state)), Reason.INVALID_COMMAND))
    match hand.phase:
        case Phase.BETTING:
            out.extend(_illegal_actions(state))
        case Phase.DEALING:
            assert dealer is not None
            out.extend(_bad_deals(state, dealer))
        case Phase.REVEAL:
            out.extend((RevealHands(hands=h), Reason.WRONG_SHOWDOWN)
                       for h in _bad_reveals(state))
        case Phase.SHOWDOWN:
            out.extend((Showdown(hands=h), Reason.WRONG_SHOWDOWN) for h in _bad_reveals(state))
        case _:
            raise AssertionError(f"a hand waits in phase {hand.phase}")
    return out


def revealed_or_empty(state: TableState) -> tuple[RevealedHand, ...]:
    """The hands still in with their down cards, or () when a hand has no cards yet."""
    assert state.hand is not None
    if any(None in p.down for p in state.hand.players):
        return ()
    return tuple(RevealedHand(seat=p.seat, down=tuple(c for c in p.down if c))
                 for p in state.hand.players if not p.folded)


def _illegal_actions(state: TableState) -> Iterator[tuple[Command, Reason | None]]:
    hand, config = state.hand, state.config
    assert hand is not None and config is not None
    legal = legal_actions_for(hand, config)
    assert legal is not None
    seat = legal.seat
    for other in range(-1, config.seats + 2):
        if other != seat:
            yield from ((c, Reason.NOT_YOUR_TURN) for c in _player_commands(other))
    kinds = legal.kinds
    capped = hand.full_wagers >= config.cap and not hand.cap_lifted
    for kind, cls in ACTION_COMMANDS.items():
        action = legal.get(kind)
        if action is None:
            reason: Reason | None = None
            if kind == ActionKind.FOLD and ActionKind.CHECK in kinds:
                reason = Reason.FOLD_NOT_ALLOWED
            elif kind == ActionKind.CHECK and not hand.bring_in_pending:
                reason = Reason.CHECK_NOT_ALLOWED
            elif (kind in WAGERS and capped and not hand.bring_in_pending
                  and not kinds & WAGERS):
                reason = Reason.CAP_REACHED
            yield cls(seat=seat), reason
        elif kind in WAGERS:
            for delta in (-1, 1, -config.small_bet, config.big_bet, -action.to):
                yield cls(seat=seat, to=action.to + delta), Reason.WRONG_AMOUNT  # type: ignore[call-arg]


def _bad_deals(state: TableState, dealer: Dealer) -> Iterator[tuple[Command, Reason | None]]:
    hand, config = state.hand, state.config
    assert hand is not None and config is not None
    plan = deal_plan(hand, config)
    assert plan is not None
    peek = dealer.copy()
    cards = peek.cards_for(plan)
    good = deal_command(plan, cards)
    slots = list(good.cards)
    yield DealStreet(cards=tuple(slots[:-1]), burned=good.burned,
                     reshuffled_burns=good.reshuffled_burns), Reason.WRONG_DEAL
    yield DealStreet(cards=(*slots, slots[-1]), burned=good.burned,
                     reshuffled_burns=good.reshuffled_burns), Reason.WRONG_DEAL
    yield DealStreet(cards=good.cards, burned=1 - good.burned,
                     reshuffled_burns=good.reshuffled_burns), Reason.WRONG_DEAL
    yield DealStreet(cards=good.cards, burned=good.burned,
                     reshuffled_burns=not good.reshuffled_burns), Reason.WRONG_DEAL
    first = slots[0]
    flipped = DealtCard(seat=first.seat, up=not first.up, card=first.card)
    yield DealStreet(cards=(flipped, *slots[1:]), burned=good.burned,
                     reshuffled_burns=good.reshuffled_burns), Reason.WRONG_DEAL
    moved = DealtCard(seat=(first.seat % config.seats) + 1 if first.seat else 1, up=first.up,
                      card=first.card)
    yield DealStreet(cards=(moved, *slots[1:]), burned=good.burned,
                     reshuffled_burns=good.reshuffled_burns), Reason.WRONG_DEAL
    up_index = next((i for i, s in enumerate(slots) if s.up), None)
    if up_index is not None:
        blank = DealtCard(seat=slots[up_index].seat, up=True, card=None)
        yield DealStreet(cards=(*slots[:up_index], blank, *slots[up_index + 1:]),
                         burned=good.burned, reshuffled_burns=good.reshuffled_burns), \
            Reason.WRONG_DEAL
        seen = list(dealer.dealt) or [c for c in cards if c != slots[up_index].card][:1]
        for repeated in seen[:2]:
            dup = DealtCard(seat=slots[up_index].seat, up=True, card=repeated)
            yield DealStreet(cards=(*slots[:up_index], dup, *slots[up_index + 1:]),
                             burned=good.burned, reshuffled_burns=good.reshuffled_burns), \
                Reason.DUPLICATE_CARD


def _bad_reveals(state: TableState) -> Iterator[tuple[RevealedHand, ...]]:
    hands = list(revealed_hands(state))
    assert state.hand is not None
    yield tuple(hands[1:])
    yield (*hands, hands[0])
    folded = [p.seat for p in state.hand.players if p.folded]
    if folded:
        yield (*hands, RevealedHand(seat=folded[0], down=hands[0].down))
    first = hands[0]
    yield (RevealedHand(seat=first.seat, down=first.down[:-1]), *hands[1:])
    yield (RevealedHand(seat=first.seat, down=(*first.down, first.down[0])), *hands[1:])
    # a card of another hand, or a card nobody has, in place of a known down card
    other = hands[1].down[0]
    yield (RevealedHand(seat=first.seat, down=(other, *first.down[1:])), *hands[1:])
    used = {c for p in state.hand.players for c in (*p.down, *p.up)}
    unseen = [c for c in DECK if c not in used]
    if unseen:
        yield (RevealedHand(seat=first.seat, down=(unseen[0], *first.down[1:])), *hands[1:])


# --- anything at all ---------------------------------------------------------------------

_seats = st.integers(-1, 9)
_amounts = st.integers(-5, 10**6)
_maybe_to = st.none() | st.integers(-5, 5000)
_cards = st.sampled_from(DECK)


def _reveals() -> st.SearchStrategy[tuple[RevealedHand, ...]]:
    hand = st.builds(RevealedHand, seat=_seats,
                     down=st.lists(_cards, max_size=4).map(tuple))
    return st.lists(hand, max_size=4).map(tuple)


any_commands: st.SearchStrategy[Command] = st.one_of(
    st.builds(SitDown, seat=_seats, player_id=st.sampled_from(("", "p1", "x")), stack=_amounts),
    st.builds(LeaveSeat, seat=_seats),
    st.builds(SitOut, seat=_seats),
    st.builds(SitIn, seat=_seats),
    st.builds(AddChips, seat=_seats, amount=_amounts),
    st.builds(StartHand, hand_number=st.integers(-1, 20)),
    st.builds(DealStreet,
              cards=st.lists(st.builds(DealtCard, seat=_seats, up=st.booleans(),
                                       card=st.none() | _cards), max_size=10).map(tuple),
              burned=st.integers(-1, 2), reshuffled_burns=st.booleans()),
    *(st.builds(cls, seat=_seats) for cls in (PostBringIn, Call, Check, Fold, TimeOut)),
    *(st.builds(cls, seat=_seats, to=_maybe_to) for cls in (Complete, Bet, Raise)),
    st.builds(RevealHands, hands=_reveals()),
    st.builds(Showdown, hands=_reveals(),
              muck_requests=st.frozensets(_seats, max_size=4)),
)
"""Any command with values of the right types, legal or not."""
