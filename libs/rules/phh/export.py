"""Writing one hand of our event log as PHH text that PokerKit can read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rules.cards import Card
from rules.config import TableConfig
from rules.events import (
    ActionTimedOut,
    AntePosted,
    BetMade,
    BringInPosted,
    Called,
    Checked,
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
    PotAwarded,
    Raised,
    TableOpened,
    UncalledBetReturned,
    UpCardDealt,
)
from rules.evolve import fold
from rules.phh.format import VARIANT, format_phh_cards, toml_value
from rules.streets import Street


def _one_hand(events: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """Split a log into what precedes the (first) hand and the hand's own events."""
    start = next((i for i, e in enumerate(events) if isinstance(e, HandStarted)), None)
    if start is None:
        raise ValueError("no HandStarted event: not a hand")
    end = next((i for i, e in enumerate(events) if i > start and isinstance(e, HandEnded)),
               len(events) - 1)
    return list(events[:start]), list(events[start:end + 1])


def export_phh(
    events: Sequence[Event],
    config: TableConfig,
    *,
    starting_stacks: Mapping[int, int] | None = None,
    players: Mapping[int, str] | None = None,
    fields: Mapping[str, object] | None = None,
) -> str:
    """Write one hand of our event log as PHH text that PokerKit can read.

    ``events`` holds the hand from ``HandStarted`` to ``HandEnded`` (a whole table log works
    too: its first hand is taken and the events before it give the starting stacks and player
    ids). Without that prefix, ``starting_stacks`` (by seat) is needed. A down card written
    ``None`` in the log (the public record) appears as ``??`` unless the log shows it later
    (exposed, shown, or mucked with ``history_reveals_mucked``). The dealt-in seats become
    ``p1..pN`` in seat order and are listed in ``seats``. PHH has no field for ``max_raises``,
    ``heads_up_raises`` or ``burn_cards``; a file is only faithful for the defaults (PokerKit
    caps at four wagers).
    ``fields`` adds optional PHH fields (``table``, ``event``, ...); names not in the PHH
    standard should start with ``_``.

    >>> from rules.testing import TableDriver
    >>> t = TableDriver(TableConfig(), stacks={2: 1000, 5: 1000}); _ = t.start()
    >>> t.deal_from("Ah Kd 7c 7d 2c 9s")
    >>> from rules.commands import PostBringIn, Fold
    >>> _ = t.apply(PostBringIn(seat=2)); _ = t.apply(Fold(seat=5))
    >>> print(export_phh(t.events, t.config))  # doctest: +NORMALIZE_WHITESPACE
    variant = "F7S/8"
    ante_trimming_status = true
    antes = [40, 40]
    bring_in = 50
    small_bet = 200
    big_bet = 400
    starting_stacks = [1000, 1000]
    actions = [
      "d dh p1 Ah7c2c",
      "d dh p2 Kd7d9s",
      "p1 pb",
      "p2 f",
    ]
    hand = 1
    seats = [2, 5]
    seat_count = 8
    players = ["p2", "p5"]
    finishing_stacks = [1040, 960]
    >>> export_phh(t.events[3:], t.config)
    Traceback (most recent call last):
    ...
    ValueError: give starting_stacks, or the table's events before the hand
    """
    before, hand_events = _one_hand(events)
    started = hand_events[0]
    assert isinstance(started, HandStarted)
    seats = started.seats
    if starting_stacks is None:
        if not before or not isinstance(before[0], TableOpened):
            raise ValueError("give starting_stacks, or the table's events before the hand")
        state = fold(before)
        starting_stacks = {s: state.stack(s) for s in seats}
        if players is None:
            players = {s: occupant.player_id for s in seats
                       if (occupant := state.seat(s)) is not None}
    number = {seat: i + 1 for i, seat in enumerate(seats)}
    stacks = {s: starting_stacks[s] for s in seats}
    revealed: dict[int, tuple[Card, ...]] = {}  # down cards the log shows later on
    for event in hand_events:
        if isinstance(event, HandExposed | HandShown | HandMucked) and event.down:
            revealed[event.seat] = event.down
    own: dict[int, list[Card | None]] = {s: [] for s in seats}
    down_at: dict[int, list[int]] = {s: [] for s in seats}
    actions: list[str] = []
    street_cards: dict[int, list[Card | None]] = {}
    in_hand = set(seats)
    exposed = False
    dealt_down_after_exposure = False
    shown_at_end = False
    comment = ""

    def flush() -> None:
        for seat in sorted(street_cards):
            actions.append(f"d dh p{number[seat]} {format_phh_cards(street_cards[seat])}")
        street_cards.clear()

    def acts(seat: int, verb: str) -> None:
        actions.append(f"p{number[seat]} {verb}{comment}")

    def shows(seat: int) -> None:
        actions.append(f"p{number[seat]} sm {format_phh_cards(own[seat])}")

    street: Street | None = None
    for event in hand_events[1:]:
        if not isinstance(event, DownCardDealt | UpCardDealt) or event.street != street:
            flush()
        match event:
            case DownCardDealt(seat=seat, card=card) | UpCardDealt(seat=seat, card=card):
                street = event.street
                if isinstance(event, DownCardDealt):
                    later = revealed.get(seat, ())
                    if card is None and len(down_at[seat]) < len(later):
                        card = later[len(down_at[seat])]
                    down_at[seat].append(len(own[seat]))
                elif exposed and event.street == Street.SEVENTH:
                    dealt_down_after_exposure = True  # PokerKit deals 7th down even here
                street_cards.setdefault(seat, []).append(card)
                own[seat].append(card)
            case CommunityCardDealt(card=card):
                actions.append(f"d db {card}")
            case AntePosted(seat=seat, amount=amount):
                stacks[seat] -= amount
            case BringInPosted(seat=seat, amount=amount):
                stacks[seat] -= amount
                acts(seat, "pb")
            case Completed(seat=seat, amount=amount, to=to) | BetMade(
                seat=seat, amount=amount, to=to
            ) | Raised(seat=seat, amount=amount, to=to):
                stacks[seat] -= amount
                acts(seat, f"cbr {to}")
            case Called(seat=seat, amount=amount):
                stacks[seat] -= amount
                acts(seat, "cc")
            case Checked(seat=seat):
                acts(seat, "cc")
            case Folded(seat=seat):
                in_hand.discard(seat)
                acts(seat, "f")
            case UncalledBetReturned(seat=seat, amount=amount):
                stacks[seat] += amount
            case HandExposed(seat=seat, down=down) | HandShown(seat=seat, down=down) | HandMucked(
                seat=seat, down=down
            ):
                for position, card in zip(down_at[seat], down, strict=False):
                    own[seat][position] = card
                if isinstance(event, HandExposed):
                    exposed = True
                else:
                    shown_at_end = True
                if isinstance(event, HandMucked):
                    actions.append(f"p{number[seat]} sm")
                else:
                    shows(seat)
            case PotAwarded(seat=seat, amount=amount):
                if exposed and dealt_down_after_exposure and not shown_at_end:
                    for still_in in seats:
                        if still_in in in_hand:
                            shows(still_in)
                    shown_at_end = True
                stacks[seat] += amount
            case _:
                pass
        comment = " # timed out" if isinstance(event, ActionTimedOut) else ""
    flush()
    lines = [
        f"variant = {toml_value(VARIANT)}",
        "ante_trimming_status = true",
        f"antes = {toml_value([config.ante] * len(seats))}",
        f"bring_in = {config.bring_in}",
        f"small_bet = {config.small_bet}",
        f"big_bet = {config.big_bet}",
        f"starting_stacks = {toml_value([starting_stacks[s] for s in seats])}",
        "actions = [",
        *(f"  {toml_value(a)}," for a in actions),
        "]",
        f"hand = {started.hand_number}",
        f"seats = {toml_value(list(seats))}",
        f"seat_count = {config.seats}",
    ]
    if players:
        lines.append(f"players = {toml_value([players.get(s, f'seat {s}') for s in seats])}")
    if isinstance(hand_events[-1], HandEnded):
        lines.append(f"finishing_stacks = {toml_value([stacks[s] for s in seats])}")
    for key, value in (fields or {}).items():
        lines.append(f"{key} = {toml_value(value)}")
    return "\n".join(lines) + "\n"
