"""Helpers for tests, bots, benchmarks and the PHH replay (never needed by a service): an
in-memory driver that applies commands with ``decide`` and ``evolve`` and keeps the log, a
stacked deck, the deal and reveal commands, and the command of each action kind. Services do
the same as the driver with a store."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from rules.betting import ActionKind, LegalActions, legal_actions_for
from rules.cards import DECK, Card, parse_cards
from rules.commands import (
    Bet,
    Call,
    Check,
    Command,
    Complete,
    DealStreet,
    DealtCard,
    Fold,
    OpenTable,
    PlayerCommand,
    PostBringIn,
    Raise,
    RevealedHand,
    RevealHands,
    Showdown,
    SitDown,
    StartHand,
)
from rules.config import TableConfig
from rules.dealing import DealPlan, deal_plan
from rules.decide import decide_and_fold
from rules.events import Event
from rules.state import HandState, Phase, TableState, initial_state

ACTION_COMMANDS: Final[Mapping[ActionKind, type[PlayerCommand]]] = {
    ActionKind.BRING_IN: PostBringIn,
    ActionKind.COMPLETE: Complete,
    ActionKind.BET: Bet,
    ActionKind.RAISE: Raise,
    ActionKind.CALL: Call,
    ActionKind.CHECK: Check,
    ActionKind.FOLD: Fold,
}
"""The command class of each action kind."""


def action_command(seat: int, kind: ActionKind, to: int | None = None) -> PlayerCommand:
    """The command of ``seat`` taking an action of ``kind`` (``to`` checks a wager's amount).

    >>> action_command(3, ActionKind.RAISE, to=800)
    Raise(seat=3, to=800)
    >>> action_command(3, ActionKind.CALL, to=800)
    Traceback (most recent call last):
    ...
    ValueError: only a wager has a 'to' amount
    """
    cls = ACTION_COMMANDS[kind]
    if cls in (Complete, Bet, Raise):
        return cls(seat=seat, to=to)
    if to is not None:
        raise ValueError("only a wager has a 'to' amount")
    return cls(seat=seat)


class TableDriver:
    """Holds a table's state and event log; every change goes through ``decide``.

    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000})
    >>> _ = t.start()
    >>> t.deal_from("2c 3c 4c 5c 6c 7c")
    >>> t.legal().seat
    1
    """

    def __init__(self, config: TableConfig, stacks: Mapping[int, int] | None = None,
                 table_id: str = "t1") -> None:
        self.state: TableState = initial_state()
        self.events: list[Event] = []
        self.reserved: set[Card] = set()
        self.apply(OpenTable(table_id=table_id, config=config))
        for seat, stack in sorted((stacks or {}).items()):
            self.apply(SitDown(seat=seat, player_id=f"p{seat}", stack=stack))

    @property
    def config(self) -> TableConfig:
        """The table's configuration."""
        assert self.state.config is not None
        return self.state.config

    @property
    def hand(self) -> HandState:
        """The current hand."""
        assert self.state.hand is not None
        return self.state.hand

    def apply(self, command: Command) -> tuple[Event, ...]:
        """Decide and apply one command; returns its events."""
        events, self.state = decide_and_fold(self.state, command)
        self.events.extend(events)
        return events

    def start(self, commitment: str = "") -> tuple[Event, ...]:
        """Start the next hand."""
        return self.apply(StartHand(hand_number=self.state.hands_started + 1,
                                    deck_commitment=commitment))

    def plan(self) -> DealPlan:
        """What must be dealt next."""
        plan = deal_plan(self.hand, self.config)
        if plan is None:
            raise ValueError(f"not dealing (phase {self.hand.phase.value})")
        return plan

    def deal(self, cards: Sequence[Card], hide_down: bool = False) -> tuple[Event, ...]:
        """Deal the next street from ``cards`` in dealing order (a stacked deck's next
        cards); with ``hide_down`` the down cards enter as unknown, as in the public record."""
        plan = self.plan()
        if len(cards) < len(plan.slots):
            raise ValueError(f"{plan.street.label} needs {len(plan.slots)} cards")
        return self.apply(deal_command(plan, cards[: len(plan.slots)], hide_down))

    def deal_from(self, text: str, hide_down: bool = False) -> None:
        """Deal the next street from cards written as text."""
        self.deal(parse_cards(text), hide_down=hide_down)

    def reserve(self, text: str) -> None:
        """Keep these cards out of automatic filling (they are meant for later streets)."""
        self.reserved.update(parse_cards(text))

    def deal_street(self, up: Mapping[int, str] | None = None,
                    down: Mapping[int, str] | None = None, community: str | None = None,
                    hide_down: bool = False) -> tuple[Event, ...]:
        """Deal the next street giving some cards by seat (``down`` may list two cards on
        3rd street); every card not given is filled from cards not yet seen or reserved."""
        plan = self.plan()
        wanted_up = {s: list(parse_cards(t)) for s, t in (up or {}).items()}
        wanted_down = {s: list(parse_cards(t)) for s, t in (down or {}).items()}
        wanted_community = list(parse_cards(community)) if community else []
        given = {c for cs in (*wanted_up.values(), *wanted_down.values()) for c in cs}
        given.update(wanted_community)
        seen = {c for p in self.hand.players for c in (*p.down, *p.up) if c is not None}
        if self.hand.community is not None:
            seen.add(self.hand.community)
        spare = [c for c in reversed(DECK) if c not in given | seen | self.reserved]
        cards: list[Card] = []
        for slot in plan.slots:
            source = (wanted_community if slot.seat == 0
                      else (wanted_up if slot.up else wanted_down).get(slot.seat, []))
            cards.append(source.pop(0) if source else spare.pop(0))
        return self.deal(cards, hide_down=hide_down)

    def legal(self) -> LegalActions:
        """What the player to act may do."""
        legal = legal_actions_for(self.hand, self.config)
        if legal is None:
            raise ValueError(f"nobody is to act (phase {self.hand.phase.value})")
        return legal

    def reveal(self) -> tuple[Event, ...]:
        """Turn the hands still in face up for an all-in runout, with the down cards this
        state knows."""
        return self.apply(RevealHands(hands=revealed_hands(self.state)))

    def showdown(self, mucks: Iterable[int] = ()) -> tuple[Event, ...]:
        """Settle the showdown with the down cards this state knows."""
        return self.apply(Showdown(hands=revealed_hands(self.state),
                                   muck_requests=frozenset(mucks)))

    def play_hand(
        self,
        deck: StackedDeck,
        act: Callable[[LegalActions], Command],
        mucks: Callable[[tuple[RevealedHand, ...]], Iterable[int]] = lambda hands: (),
        observe: Callable[[TableState, Command, tuple[Event, ...]], None] | None = None,
    ) -> None:
        """Start the next hand and play it to the end: cards from ``deck``, each player's
        command from ``act``, muck requests at the showdown from ``mucks``; ``observe`` sees
        every command with the state it met and the events it caused."""

        def apply(command: Command) -> None:
            before = self.state
            events = self.apply(command)
            if observe is not None:
                observe(before, command, events)

        apply(StartHand(hand_number=self.state.hands_started + 1))
        while not self.hand.is_over:
            phase = self.hand.phase
            if phase == Phase.DEALING:
                apply(deck.deal_command(self.plan()))
            elif phase == Phase.BETTING:
                apply(act(self.legal()))
            elif phase == Phase.REVEAL:
                apply(RevealHands(hands=revealed_hands(self.state)))  # as reveal(), observed
            else:
                hands = revealed_hands(self.state)
                apply(Showdown(hands=hands, muck_requests=frozenset(mucks(hands))))


class StackedDeck:
    """A deck in a known order (tests, benchmarks, replays): deals from the top as
    :func:`rules.pending_deal` asks, burning and, when RULES 10.4 says so, putting the burned
    cards back under the stub in the order burned (the dealer service shuffles them instead).
    """

    def __init__(self, cards: Iterable[Card]) -> None:
        self.stub: list[Card] = list(cards)
        self.burned: list[Card] = []
        self.dealt: list[Card] = []

    def copy(self) -> StackedDeck:
        """An independent deck in the same position."""
        twin = StackedDeck(self.stub)
        twin.burned, twin.dealt = list(self.burned), list(self.dealt)
        return twin

    def cards_for(self, plan: DealPlan) -> list[Card]:
        """Take the cards of ``plan`` off the deck, in dealing order."""
        if plan.reshuffle_burns:
            self.stub.extend(self.burned)
            self.burned.clear()
        if plan.burn:
            self.burned.append(self.stub.pop(0))
        cards = [self.stub.pop(0) for _ in plan.slots]
        self.dealt.extend(cards)
        return cards

    def deal_command(self, plan: DealPlan, hide_down: bool = False) -> DealStreet:
        """The DealStreet for ``plan`` from this deck; down cards as None when hidden."""
        return deal_command(plan, self.cards_for(plan), hide_down)


def deal_command(plan: DealPlan, cards: Sequence[Card], hide_down: bool = False) -> DealStreet:
    """The DealStreet for ``plan`` with ``cards`` in dealing order (down cards as None when
    hidden, as in the public record)."""
    return DealStreet(
        cards=tuple(DealtCard(seat=s.seat, up=s.up, card=None if hide_down and not s.up else c)
                    for s, c in zip(plan.slots, cards, strict=True)),
        burned=1 if plan.burn else 0,
        reshuffled_burns=plan.reshuffle_burns,
    )


def revealed_hands(state: TableState) -> tuple[RevealedHand, ...]:
    """The down cards of every hand still in, as this (full-information) state knows them."""
    assert state.hand is not None
    hands = []
    for p in state.hand.players:
        if not p.folded:
            known = tuple(c for c in p.down if c is not None)
            if len(known) != len(p.down):
                raise ValueError(f"seat {p.seat}'s down cards are not known to this state")
            hands.append(RevealedHand(seat=p.seat, down=known))
    return tuple(hands)
