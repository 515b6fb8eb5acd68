"""What one viewer may see: hole-card secrecy as a pure projection of events and state.

A down card is visible only to the player who was dealt it until it is legitimately shown
(RULES 4.6, 11.7). Views are for a player in a hand, never for a seat number alone: whoever
sits in a seat after the hand is not the player who held its cards.

- An event of a hand is seen by a :data:`Viewer`, the seat its player held *in that hand*
  (None for anyone not dealt in), with ``dealt_in`` saying whether they were dealt in
  (the caller finds both in that hand's seating, as :func:`seat_in_hand` does for a state).
- A state is seen by a player id (None for an observer): :func:`table_for` and
  :func:`hand_for` look the player up in the hand's seating themselves."""

from __future__ import annotations

from dataclasses import replace

from rules.events import DownCardDealt, Event, HandMucked
from rules.state import HandState, Phase, TableState

Viewer = int | None
"""The seat a player held in the hand an event belongs to; None for anyone not dealt in."""

PlayerId = str | None
"""A player (their id), or None for an observer."""


def seat_in_hand(hand: HandState | None, player: PlayerId) -> int | None:
    """The seat ``player`` was dealt into in ``hand``; None if they were not dealt in (or
    for an observer, or when there is no hand).

    >>> from rules.state import Player
    >>> hand = HandState(hand_number=1, players=(Player(seat=2, stack=0, player_id="ann"),))
    >>> seat_in_hand(hand, "ann"), seat_in_hand(hand, "bob"), seat_in_hand(hand, None)
    (2, None, None)
    """
    if hand is None or not player:
        return None
    for p in hand.players:
        if p.player_id == player:
            return p.seat
    return None


def event_for(event: Event, viewer: Viewer, dealt_in: bool = False) -> Event:
    """The event as ``viewer`` may see it. ``dealt_in`` says whether the viewer was dealt
    into the event's hand (mucked hands go to the history of players dealt in only).

    >>> from rules.cards import parse_cards
    >>> from rules.streets import Street
    >>> e = DownCardDealt(seat=3, street=Street.THIRD, card=parse_cards("Ah")[0])
    >>> event_for(e, 3).card, event_for(e, 4).card, event_for(e, None).card
    (Card('Ah'), None, None)
    """
    if isinstance(event, DownCardDealt) and event.card is not None and event.seat != viewer:
        return replace(event, card=None)
    if isinstance(event, HandMucked) and event.down and event.seat != viewer and not dealt_in:
        return replace(event, down=())
    return event


def hand_for(hand: HandState, player: PlayerId) -> HandState:
    """The hand with every down card ``player`` may not see replaced by None: they see
    their own down cards only if they were dealt into this hand, and anyone's once shown or
    exposed.

    >>> from rules.cards import parse_cards
    >>> from rules.state import Player
    >>> hand = HandState(hand_number=1, phase=Phase.COMPLETE, players=(
    ...     Player(seat=2, stack=0, player_id="ann", mucked=True,
    ...            down=tuple(parse_cards("9s 2d 5c"))),))
    >>> hand_for(hand, "ann").players[0].down
    (Card('9s'), Card('2d'), Card('5c'))
    >>> hand_for(hand, "newcomer").players[0].down  # whoever sits in seat 2 now
    (None, None, None)
    """
    viewer = seat_in_hand(hand, player)
    players = []
    for p in hand.players:
        visible = p.seat == viewer or p.exposed or p.shown
        if not visible and any(c is not None for c in p.down):
            p = replace(p, down=tuple(None for _ in p.down))
        players.append(p)
    return replace(hand, players=tuple(players))


def table_for(state: TableState, player: PlayerId) -> TableState:
    """The table state as ``player`` (None: an observer) may see it. The current (or last)
    hand is shown to them as to a player dealt into it only if they were: the seat they sit
    in now does not matter."""
    if state.hand is None:
        return state
    return replace(state, hand=hand_for(state.hand, player))


def public_event(event: Event) -> Event:
    """The event as it may be written to the table's public stream."""
    return event_for(event, None, dealt_in=True)


def revealable_seats(hand: HandState) -> frozenset[int]:
    """Seats whose down cards may legitimately be turned face up now: every hand still in at
    the showdown or an all-in runout (RULES 9.7, 11), and hands already shown, exposed or
    mucked into the history. A folded hand never is.

    >>> from rules.state import Player
    >>> hand = HandState(hand_number=1, phase=Phase.SHOWDOWN, players=(
    ...     Player(seat=1, stack=0), Player(seat=2, stack=0, folded=True)))
    >>> sorted(revealable_seats(hand))
    [1]
    >>> sorted(revealable_seats(HandState(hand_number=1, players=(Player(seat=1, stack=0),))))
    []
    """
    at_showdown = hand.phase in (Phase.REVEAL, Phase.SHOWDOWN)
    return frozenset(
        p.seat for p in hand.players
        if not p.folded and (at_showdown or p.shown or p.exposed
                             or (p.mucked and all(c is not None for c in p.down)))
    )
