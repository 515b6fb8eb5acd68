"""What one viewer may see: hole-card secrecy as a pure projection of events and state.

A viewer is a seat number (a player at the table) or None (an observer). A down card is
visible only to its owner until it is legitimately shown (RULES 4.6, 11.7)."""

from __future__ import annotations

from dataclasses import replace

from rules.events import DownCardDealt, Event, HandMucked
from rules.state import HandState, Phase, TableState

Viewer = int | None


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


def hand_for(hand: HandState, viewer: Viewer) -> HandState:
    """The hand with every down card the viewer may not see replaced by None."""
    players = []
    for p in hand.players:
        visible = p.seat == viewer or p.exposed or p.shown
        if not visible and any(c is not None for c in p.down):
            p = replace(p, down=tuple(None for _ in p.down))
        players.append(p)
    return replace(hand, players=tuple(players))


def table_for(state: TableState, viewer: Viewer) -> TableState:
    """The table state as ``viewer`` may see it."""
    if state.hand is None:
        return state
    return replace(state, hand=hand_for(state.hand, viewer))


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
