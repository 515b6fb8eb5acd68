r"""What the terminal client says, as plain text (no textual here): cards, seats, pots, the
legal actions as keys, and the dealer log.

The dealer log reads like the hand history because it *is* the hand history's text:
:func:`rules.history.render_history` renders the events of the hand so far and the log takes
the lines it has not shown yet. Two kinds of line are the client's own: the value of a hand
shown at the showdown, and one sentence per pot saying who won which half
(:func:`award_summary`), e.g.

>>> from rules.events import PotAwarded, Share
>>> line = award_summary([
...     PotAwarded(pot=0, seat=3, amount=4210, share=Share.HIGH, hand="Flush, ace high"),
...     PotAwarded(pot=0, seat=5, amount=4210, share=Share.LOW, hand="8-6-4-2-A")])
>>> print(line.replace("; ", ";\n"))
Seat 3 wins the high half (4,210) with a flush, ace high;
seat 5 wins the low half (4,210) with 8-6-4-2-A
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from rules.cards import Card, format_cards
from rules.events import (
    CommunityCardDealt,
    Event,
    HandEnded,
    HandShown,
    HandStarted,
    PotAwarded,
    Share,
    UpCardDealt,
)
from rules.hands import best_high, best_low
from rules.history import render_history
from stud.v1 import common_pb2, events_pb2, table_pb2
from studkit.errors import BadRequest
from studkit.mapping import card_from_proto, event_from_proto

A = common_pb2

RANKS: Final = {2: "2", 3: "3", 4: "4", 5: "5", 6: "6", 7: "7", 8: "8", 9: "9", 10: "T",
                11: "J", 12: "Q", 13: "K", 14: "A"}
SUITS: Final = {A.SUIT_CLUBS: "c", A.SUIT_DIAMONDS: "d", A.SUIT_HEARTS: "h",
                A.SUIT_SPADES: "s"}
HIDDEN: Final = "##"
"""A down card the viewer may not see."""
STREETS: Final = {A.STREET_THIRD: "3rd street", A.STREET_FOURTH: "4th street",
                  A.STREET_FIFTH: "5th street", A.STREET_SIXTH: "6th street",
                  A.STREET_SEVENTH: "7th street"}
PHASES: Final = {table_pb2.HAND_PHASE_DEALING: "dealing", table_pb2.HAND_PHASE_BETTING: "betting",
                 table_pb2.HAND_PHASE_REVEAL: "all-in runout",
                 table_pb2.HAND_PHASE_SHOWDOWN: "showdown",
                 table_pb2.HAND_PHASE_SETTLING: "settling",
                 table_pb2.HAND_PHASE_COMPLETE: "hand over"}

PASSIVE: Final = (A.ACTION_KIND_CHECK, A.ACTION_KIND_CALL, A.ACTION_KIND_BRING_IN)
"""The ``c`` key: check, call or post the bring-in."""
AGGRESSIVE: Final = (A.ACTION_KIND_COMPLETE, A.ACTION_KIND_BET, A.ACTION_KIND_RAISE)
"""The ``b`` key: complete, bet or raise."""
FOLD: Final = (A.ACTION_KIND_FOLD,)
"""The ``f`` key."""
KEYS: Final = {"f": FOLD, "c": PASSIVE, "b": AGGRESSIVE}


def chips(amount: int) -> str:
    """``1,234``."""
    return f"{amount:,}"


def card_text(card: common_pb2.Card) -> str:
    """A wire card as the rules write it, e.g. ``Ah``.

    >>> card_text(common_pb2.Card(rank=A.RANK_ACE, suit=A.SUIT_HEARTS))
    'Ah'
    """
    return RANKS.get(card.rank, "?") + SUITS.get(card.suit, "?")


def down_text(down: Iterable[table_pb2.DownCard]) -> list[str]:
    """Each down card's text, :data:`HIDDEN` where the viewer may not see it."""
    return [card_text(d.card) if d.HasField("card") else HIDDEN for d in down]


def action_label(action: common_pb2.LegalAction) -> str:
    """Words for one legal action with its amount, e.g. ``Raise to 400``.

    >>> action_label(common_pb2.LegalAction(kind=A.ACTION_KIND_CALL, amount=200, to=200))
    'Call 200'
    >>> action_label(common_pb2.LegalAction(kind=A.ACTION_KIND_COMPLETE, amount=150, to=200))
    'Complete to 200'
    """
    suffix = " (all-in)" if action.all_in else ""
    match action.kind:
        case A.ACTION_KIND_BRING_IN:
            return f"Bring in {chips(action.amount)}{suffix}"
        case A.ACTION_KIND_COMPLETE:
            return f"Complete to {chips(action.to)}{suffix}"
        case A.ACTION_KIND_BET:
            return f"Bet {chips(action.to)}{suffix}"
        case A.ACTION_KIND_RAISE:
            return f"Raise to {chips(action.to)}{suffix}"
        case A.ACTION_KIND_CALL:
            return f"Call {chips(action.amount)}{suffix}"
        case A.ACTION_KIND_CHECK:
            return "Check"
        case A.ACTION_KIND_FOLD:
            return "Fold"
    return "?"


def action_for(key: str, view: table_pb2.TableView | None) -> common_pb2.LegalAction | None:
    """The legal action key ``key`` (``f``, ``c`` or ``b``) stands for now, if any: only when
    the viewer is the seat to act."""
    if view is None or not view.HasField("hand") or not view.viewer_seat:
        return None
    hand = view.hand
    if hand.to_act != view.viewer_seat or hand.legal_actions.seat != view.viewer_seat:
        return None
    for kind in KEYS[key]:
        for action in hand.legal_actions.actions:
            if action.kind == kind:
                found: common_pb2.LegalAction = action
                return found
    return None


def seat_status(view: table_pb2.TableView, seat: table_pb2.SeatView,
                player: table_pb2.PlayerView | None) -> str:
    """A seat's status: to act, folded, all-in, shown, mucked, sitting out, leaving."""
    words: list[str] = []
    hand = view.hand if view.HasField("hand") else None
    live = hand is not None and hand.phase != table_pb2.HAND_PHASE_COMPLETE
    if hand is not None and live and hand.to_act == seat.seat:
        words.append("TO ACT")
    if player is not None:
        if player.folded:
            words.append("folded")
        if player.all_in:
            words.append("all-in")
        if player.shown:
            words.append("shown")
        if player.mucked:
            words.append("mucked")
    elif live:
        words.append("not dealt in")
    if seat.sitting_out:
        words.append("sitting out")
    if seat.leaving:
        words.append("leaving")
    return ", ".join(words)


def awards_of(view: table_pb2.TableView) -> list[PotAwarded]:
    """The view's awards so far, as rules events."""
    out: list[PotAwarded] = []
    for award in view.hand.awards:
        try:
            event = event_from_proto(events_pb2.TableEvent(pot_awarded=award))
        except BadRequest:
            continue
        if isinstance(event, PotAwarded):
            out.append(event)
    return out


def pots_text(view: table_pb2.TableView) -> str:
    """The pots, main first: ``Pot 1,200`` or ``Main pot 800 · Side pot 1: 400 (seats 2,
    5)``; once the hand is over, who won them."""
    if view.HasField("hand") and view.hand.phase == table_pb2.HAND_PHASE_COMPLETE \
            and view.hand.awards:
        return award_summary(awards_of(view))
    if not view.HasField("hand") or not view.hand.pots:
        return "Pot 0"
    pots = list(view.hand.pots)
    if len(pots) == 1:
        return f"Pot {chips(pots[0].amount)}"
    parts = [f"Main pot {chips(pots[0].amount)}"]
    for i, pot in enumerate(pots[1:], start=1):
        seats = ", ".join(map(str, pot.eligible))
        parts.append(f"Side pot {i}: {chips(pot.amount)} (seats {seats})")
    return " · ".join(parts)


def countdown(seconds_left: float) -> str:
    """``0:17``; never negative.

    >>> countdown(17.2), countdown(75), countdown(-3)
    ('0:18', '1:15', '0:00')
    """
    whole = max(0, int(-(-seconds_left // 1)))
    return f"{whole // 60}:{whole % 60:02d}"


# --- the dealer log --------------------------------------------------------------------------

def _with(description: str) -> str:
    """``Flush, ace high`` -> ``a flush, ace high``; a low ``8-6-4-2-A`` stays."""
    if not description or description[0].isdigit():
        return description
    text = description[0].lower() + description[1:]
    if re.match(r"(flush|straight|full house)", text):
        return "a " + text
    return text


def _pot_name(pot: int, pots: int) -> str:
    if pots <= 1:
        return "the pot"
    return "the main pot" if pot == 0 else f"side pot {pot}"


def award_summary(awards: Sequence[PotAwarded]) -> str:
    """One line per pot: who won it, or which half, with which hand."""
    pots = max((a.pot for a in awards), default=-1) + 1
    lines: list[str] = []
    for pot in range(pots):
        these = [a for a in awards if a.pot == pot]
        parts: list[str] = []
        for award in these:
            same = sum(1 for a in these if a.share == award.share)
            where = _pot_name(pot, pots)
            if award.share == Share.WHOLE:
                what = where if same == 1 else f"{chips(award.amount)} of {where}"
                amount = f" ({chips(award.amount)})" if same == 1 else ""
            else:
                half = f"the {award.share.value} half" + ("" if pots <= 1 else f" of {where}")
                what = half if same == 1 else f"{chips(award.amount)} of {half}"
                amount = f" ({chips(award.amount)})" if same == 1 else ""
            hand = f" with {_with(award.hand)}" if award.hand else ""
            parts.append(f"seat {award.seat} wins {what}{amount}{hand}")
        if parts:
            line = "; ".join(parts)
            lines.append(line[0].upper() + line[1:])
    return "\n".join(lines)


def shown_value(down: Sequence[Card], up: Sequence[Card]) -> str:
    """The value of a hand shown: ``flush, ace high; low 8-6-4-2-A`` (or ``no low``).

    >>> from rules.cards import parse_cards
    >>> shown_value(parse_cards("Ah 2h 7h"), parse_cards("Kh 4h 3c 9s"))
    'a flush, ace high; low 7-4-3-2-A'
    """
    cards = [*down, *up]
    if not 5 <= len(cards) <= 7:
        return ""
    try:
        high = best_high(cards)
        low = best_low(cards)
    except Exception:  # a malformed or partial hand: say nothing rather than fail
        return ""
    return f"{_with(high.description)}; " + (f"low {low.description}" if low else "no low")


@dataclass
class DealerLog:
    """Turns the table's event records, in order, into the dealer log's lines.

    Each hand's events so far are rendered by :func:`rules.history.render_history`; the
    lines not yet shown are returned. The pot awards are said once per pot when the awards
    are over (:func:`award_summary`), and a hand shown gets its value.
    """

    hide_down_deals: bool = True
    """Leave out the 'is dealt a down card' lines (they tell nothing)."""
    events: list[Event] = field(default_factory=list)
    """The current hand's events (or the table's, between hands)."""
    shown: int = 0
    awards: list[PotAwarded] = field(default_factory=list)
    up: dict[int, list[Card]] = field(default_factory=dict)
    community: Card | None = None

    def seed_up_cards(self, view: table_pb2.TableView) -> None:
        """The up cards so far of a hand already under way when the log starts."""
        if not view.HasField("hand"):
            return
        for player in view.hand.players:
            self.up[player.seat] = [card_from_proto(c) for c in player.up]

    def feed(self, record: table_pb2.TableEventRecord) -> list[str]:
        """The new lines for one event record."""
        try:
            event = event_from_proto(record.event)
        except BadRequest:
            return []
        lines: list[str] = []
        if isinstance(event, HandStarted):
            lines += self._flush_awards()
            self.events, self.shown = [], 0
            self.up, self.community = {}, None
        if isinstance(event, PotAwarded):
            self.awards.append(event)
            return []
        lines += self._flush_awards()
        if isinstance(event, UpCardDealt):
            self.up.setdefault(event.seat, []).append(event.card)
        elif isinstance(event, CommunityCardDealt):
            self.community = event.card
        self.events.append(event)
        rendered = render_history(self.events).split("\n")
        new, self.shown = rendered[self.shown:], len(rendered)
        for line in new:
            if self.hide_down_deals and line.endswith("is dealt a down card"):
                continue
            if isinstance(event, HandShown) and line == rendered[-1]:
                up = list(self.up.get(event.seat, []))
                if self.community is not None:
                    up.append(self.community)
                value = shown_value(event.down, up)
                line = f"{line}: {value}" if value else line
            lines.append(line)
        if isinstance(event, HandEnded):
            self.events, self.shown = [], 0
        return lines

    def _flush_awards(self) -> list[str]:
        if not self.awards:
            return []
        summary = award_summary(self.awards)
        self.awards = []
        return summary.split("\n")


def history_text(history: table_pb2.HandHistory) -> str:
    """A hand's history as the room's hand history reads, plus who won what."""
    events: list[Event] = []
    for record in history.events:
        try:
            events.append(event_from_proto(record.event))
        except BadRequest:
            continue
    text = render_history(events)
    awards = [e for e in events if isinstance(e, PotAwarded)]
    if awards:
        text += "\n" + award_summary(awards)
    return text


def cards_text(cards: Iterable[Card]) -> str:
    """``Ah Kd``."""
    return format_cards(cards)
