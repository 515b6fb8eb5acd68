"""What a finished hand did to each seat's money: the wallet's settlement, derived from the
events alone (DESIGN §5, §5a)."""

from __future__ import annotations

from dataclasses import dataclass

from rules.state import TableState
from rules.streets import Street


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class SettlementSeat:
    """One seat dealt into the hand: what it put in (antes and wagers, net of uncalled
    wagers returned) and what it won (its awards; for a voided hand, everything it put in)."""

    seat: int
    player_id: str
    amount_in: int
    amount_won: int

    def __init__(self, *, seat: int, player_id: str, amount_in: int, amount_won: int) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "seat", seat)
        object.__setattr__(self, "player_id", player_id)
        object.__setattr__(self, "amount_in", amount_in)
        object.__setattr__(self, "amount_won", amount_won)

    @property
    def net(self) -> int:
        """The change of the seat's stack over the hand."""
        return self.amount_won - self.amount_in


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Settlement:
    """A complete hand's money: balanced, ``sum(amount_won) + rake == sum(amount_in)``.

    ``ended_on`` is the latest street dealt (None when no card was dealt or the hand was
    voided, which pays no rake); ``rake`` follows RULES 2.4 from it and the pots."""

    hand_number: int
    seats: tuple[SettlementSeat, ...]
    rake: int
    ended_on: Street | None
    voided: bool

    def __init__(self, *, hand_number: int, seats: tuple[SettlementSeat, ...], rake: int,
                 ended_on: Street | None, voided: bool) -> None:
        # Written out (init=False): compiled, the dataclass's own runs interpreted, five
        # times the cost (tests/unit/rules/test_value_inits.py: the same signature).
        object.__setattr__(self, "hand_number", hand_number)
        object.__setattr__(self, "seats", seats)
        object.__setattr__(self, "rake", rake)
        object.__setattr__(self, "ended_on", ended_on)
        object.__setattr__(self, "voided", voided)

    @property
    def amount_in(self) -> int:
        """Chips put into the hand by every seat (the sum of its pots)."""
        return sum(s.amount_in for s in self.seats)


def settlement(state: TableState) -> Settlement | None:
    """The settlement of the latest hand once it is complete, else None.

    Every seat dealt in is listed in seat order (a seat that put nothing in and won nothing
    with zeros).

    >>> from rules.testing import TableDriver
    >>> from rules.config import TableConfig
    >>> from rules.commands import PostBringIn, Fold
    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 3: 1000}); _ = t.start()
    >>> settlement(t.state) is None
    True
    >>> t.deal_from("Ah Kd 7c 7d 2c 9s")
    >>> _ = t.apply(PostBringIn(seat=1)); _ = t.apply(Fold(seat=3))
    >>> s = settlement(t.state)
    >>> [(x.seat, x.player_id, x.amount_in, x.amount_won) for x in s.seats], s.rake, s.ended_on
    ([(1, 'p1', 40, 80), (3, 'p3', 40, 0)], 0, <Street.THIRD: 3>)
    """
    hand = state.hand
    if hand is None or not hand.is_over:
        return None
    won: dict[int, int] = {}
    for award in hand.awards:
        won[award.seat] = won.get(award.seat, 0) + award.amount
    seats = tuple(
        SettlementSeat(seat=p.seat, player_id=p.player_id, amount_in=p.hand_total,
                       amount_won=p.hand_total if hand.voided else won.get(p.seat, 0))
        for p in hand.players
    )
    return Settlement(hand_number=hand.hand_number, seats=seats,
                      rake=0 if hand.voided else hand.rake,
                      ended_on=None if hand.voided else hand.street, voided=hand.voided)
