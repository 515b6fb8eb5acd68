"""A hand history for people to read: our event log, one line per event, with street and
showdown headings.

PHH, the hand history for programs, is the package :mod:`rules.phh`. Its public names can
still be imported from here, where they all were before.
"""

from __future__ import annotations

from collections.abc import Sequence

from rules.cards import format_cards
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
    Share,
    StakesChanged,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.phh import (
    END_OF_ACTIONS,
    VARIANT,
    PhhAction,
    PhhError,
    PhhHand,
    Rejection,
    ReplayResult,
    Verdict,
    export_phh,
    parse_action,
    parse_phh,
    parse_phh_cards,
    parse_phhs,
    replay_config,
    replay_phh,
)
from rules.streets import Street

__all__ = [
    "END_OF_ACTIONS",
    "VARIANT",
    "PhhAction",
    "PhhError",
    "PhhHand",
    "Rejection",
    "ReplayResult",
    "Verdict",
    "export_phh",
    "parse_action",
    "parse_phh",
    "parse_phh_cards",
    "parse_phhs",
    "render_history",
    "replay_config",
    "replay_phh",
]


def _chips(amount: int) -> str:
    return f"{amount:,}"


def _event_line(event: Event, pots: int) -> str | None:
    match event:
        case TableOpened(table_id=table_id, config=c):
            return (f"Table {table_id}: Seven Card Stud Hi/Lo, {_chips(c.small_bet)}/"
                    f"{_chips(c.big_bet)}, ante {_chips(c.ante)}, bring-in {_chips(c.bring_in)}")
        case PlayerSeated(seat=seat, player_id=player, stack=stack):
            return f"Seat {seat}: {player} sits down with {_chips(stack)}"
        case PlayerLeft(seat=seat, player_id=player, stack=stack):
            return f"Seat {seat}: {player} leaves with {_chips(stack)}"
        case PlayerSatOut(seat=seat):
            return f"Seat {seat} sits out"
        case PlayerSatIn(seat=seat):
            return f"Seat {seat} sits in"
        case ChipsAdded(seat=seat, amount=amount):
            return f"Seat {seat} adds {_chips(amount)}"
        case HandStarted(hand_number=n, seats=seats):
            return f"Hand #{n}: seats {', '.join(map(str, seats))} dealt in"
        case AntePosted(seat=seat, amount=amount):
            return f"Seat {seat} antes {_chips(amount)}"
        case CardBurned():
            return "A card is burned"
        case BurnsReshuffled(count=count):
            return f"The {count} burned cards are shuffled into the stub"
        case DownCardDealt(seat=seat, card=card):
            return f"Seat {seat} is dealt " + ("a down card" if card is None else f"[{card}]")
        case UpCardDealt(seat=seat, card=card):
            return f"Seat {seat} is dealt {card} up"
        case CommunityCardDealt(card=card):
            return f"The deck is short: community card {card}"
        case BringInPosted(seat=seat, amount=amount):
            return f"Seat {seat} brings in for {_chips(amount)}"
        case Completed(seat=seat, to=to):
            return f"Seat {seat} completes to {_chips(to)}"
        case BetMade(seat=seat, to=to):
            return f"Seat {seat} bets {_chips(to)}"
        case Raised(seat=seat, to=to):
            return f"Seat {seat} raises to {_chips(to)}"
        case Called(seat=seat, amount=amount):
            return f"Seat {seat} calls {_chips(amount)}"
        case Checked(seat=seat):
            return f"Seat {seat} checks"
        case Folded(seat=seat):
            return f"Seat {seat} folds"
        case ActionTimedOut(seat=seat):
            return f"Seat {seat} runs out of time"
        case UncalledBetReturned(seat=seat, amount=amount):
            return f"Uncalled {_chips(amount)} returned to seat {seat}"
        case HandExposed(seat=seat, down=down):
            return f"Seat {seat} turns up [{format_cards(down)}]"
        case HandShown(seat=seat, down=down):
            return f"Seat {seat} shows [{format_cards(down)}]"
        case HandMucked(seat=seat, down=down):
            return f"Seat {seat} mucks" + (f" [{format_cards(down)}]" if down else "")
        case PotAwarded(pot=pot, seat=seat, amount=amount, share=share, hand=hand):
            where = "" if pots <= 1 else (" from the main pot" if pot == 0
                                          else f" from side pot {pot}")
            part = "" if share == Share.WHOLE else f" ({share.value})"
            with_hand = f" with {hand}" if hand else ""
            return f"Seat {seat} wins {_chips(amount)}{where}{part}{with_hand}"
        case RakeTaken(amount=amount, pots=taken):
            parts = ", ".join(
                f"{_chips(t)} from " + ("the main pot" if i == 0 else f"side pot {i}")
                for i, t in enumerate(taken) if t)
            return f"Rake {_chips(amount)} taken ({parts})"
        case HandVoided(hand_number=n, reason=reason):
            return f"Hand #{n} is void: {reason}; every chip goes back"
        case HandEnded(hand_number=n):
            return f"*** Hand #{n} is over ***"
        case StakesChanged(small_bet=small, big_bet=big, ante=ante, bring_in=bring_in):
            return (f"Stakes from the next hand: {_chips(small)}/{_chips(big)}, "
                    f"ante {_chips(ante)}, bring-in {_chips(bring_in)}")
        case _:
            return None


def render_history(events: Sequence[Event]) -> str:
    """Our event log as a hand history to read, one line per event, with street and
    showdown headings.

    >>> from rules.config import TableConfig
    >>> from rules.testing import TableDriver
    >>> from rules.commands import PostBringIn, Fold
    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 3: 1000}); _ = t.start()
    >>> t.deal_from("Ah Kd 7c 7d 2c 9s", hide_down=True)
    >>> _ = t.apply(PostBringIn(seat=1)); _ = t.apply(Fold(seat=3))
    >>> print(render_history(t.events[3:]))
    Hand #1: seats 1, 3 dealt in
    Seat 1 antes 40
    Seat 3 antes 40
    *** 3rd street ***
    Seat 1 is dealt a down card
    Seat 3 is dealt a down card
    Seat 1 is dealt a down card
    Seat 3 is dealt a down card
    Seat 1 is dealt 2c up
    Seat 3 is dealt 9s up
    Seat 1 brings in for 50
    Seat 3 folds
    Uncalled 50 returned to seat 1
    Seat 1 wins 80
    *** Hand #1 is over ***
    """
    lines: list[str] = []
    street: Street | None = None
    in_showdown = False
    pots_by_hand: dict[int, int] = {}
    hand_index = -1
    for event in events:
        if isinstance(event, HandStarted):
            hand_index += 1
        elif isinstance(event, PotAwarded):
            pots_by_hand[hand_index] = max(pots_by_hand.get(hand_index, 0), event.pot + 1)
    hand_index = -1
    for event in events:
        if isinstance(event, HandStarted):
            hand_index += 1
            street, in_showdown = None, False
        dealt_on = (event.street if isinstance(event, DownCardDealt | UpCardDealt)
                    else Street.SEVENTH if isinstance(event, CommunityCardDealt) else None)
        if dealt_on is not None and dealt_on != street:
            street = dealt_on
            lines.append(f"*** {street.label} ***")
        elif isinstance(event, HandShown | HandMucked) and not in_showdown:
            in_showdown = True
            lines.append("*** Showdown ***")
        line = _event_line(event, pots_by_hand.get(hand_index, 0))
        if line is not None:
            lines.append(line)
    return "\n".join(lines)
