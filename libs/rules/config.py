"""Table configuration: stakes with derived defaults, options, and validation (RULES §2)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, unique

from rules.errors import Reason, RuleViolation


@unique
class HeadsUpRaises(StrEnum):
    """Whether the raise cap lifts heads-up (RULES 6.8)."""

    CAPPED = "capped"
    ROUND_STARTS_HEADS_UP = "round_starts_heads_up"
    HEADS_UP_BEFORE_CAP = "heads_up_before_cap"


@unique
class ShowdownOpener(StrEnum):
    """Who shows first when 7th street had no wager (RULES 11.2)."""

    LAST_AGGRESSOR = "last_aggressor"
    FIRST_TO_ACT = "first_to_act"


BASIS_POINTS = 10_000
"""Basis points in a whole: ``percent_bps = 10000`` is 100 %."""


@dataclass(frozen=True, slots=True)
class Rake:
    """The house's share of each pot (RULES 2.4): ``percent_bps`` basis points (0..10000) of
    the pots, at most ``cap`` (> 0 when ``percent_bps > 0``).

    >>> Rake(500, 30).amount(1150)
    30
    >>> Rake(500, 0)
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: invalid_config: rake: need cap > 0 when percent_bps > 0
    """

    percent_bps: int
    cap: int

    def __post_init__(self) -> None:
        checks = (
            (all(isinstance(v, int) and not isinstance(v, bool)
                 for v in (self.percent_bps, self.cap)), "amounts must be integers"),
            (0 <= self.percent_bps <= BASIS_POINTS, "need 0 <= percent_bps <= 10000"),
            (self.cap >= 0, "need cap >= 0"),
            (self.percent_bps == 0 or self.cap > 0, "need cap > 0 when percent_bps > 0"),
        )
        for ok, message in checks:
            if not ok:
                raise RuleViolation(Reason.INVALID_CONFIG, f"rake: {message}")

    def amount(self, pots: int) -> int:
        """The rake of a hand whose pots hold ``pots`` in all, when the hand is raked:
        ``min(cap, floor(pots * percent_bps / 10000))``."""
        return min(self.cap, pots * self.percent_bps // BASIS_POINTS)


def _round_half_up_div(numerator: int, denominator: int) -> int:
    return (2 * numerator + denominator) // (2 * denominator)


@dataclass(frozen=True, slots=True, kw_only=True)
class TableConfig:
    """Stakes and options of one table. Amounts are integer cents.

    >>> TableConfig.for_stakes(200)
    TableConfig(seats=8, min_players=2, small_bet=200, big_bet=400, ante=40, bring_in=50, \
max_raises=3, heads_up_raises=<HeadsUpRaises.CAPPED: 'capped'>, burn_cards=False, \
showdown_opener=<ShowdownOpener.LAST_AGGRESSOR: 'last_aggressor'>, history_reveals_mucked=True, \
rake=None)
    >>> TableConfig(small_bet=200, big_bet=400, ante=40, bring_in=200)
    Traceback (most recent call last):
    ...
    rules.errors.RuleViolation: invalid_config: need 0 < bring_in < small_bet
    """

    seats: int = 8
    min_players: int = 2
    small_bet: int = 200
    big_bet: int = 400
    ante: int = 40
    bring_in: int = 50
    max_raises: int = 3
    heads_up_raises: HeadsUpRaises = HeadsUpRaises.CAPPED
    burn_cards: bool = False
    showdown_opener: ShowdownOpener = ShowdownOpener.LAST_AGGRESSOR
    history_reveals_mucked: bool = True
    rake: Rake | None = None
    """The house's share of each pot (RULES 2.4); None: no rake."""

    def __post_init__(self) -> None:
        checks = (
            (all(isinstance(v, int) and not isinstance(v, bool) for v in (
                self.seats, self.min_players, self.small_bet, self.big_bet, self.ante,
                self.bring_in, self.max_raises)), "amounts and counts must be integers"),
            (0 < self.small_bet < self.big_bet, "need 0 < small_bet < big_bet"),
            (self.ante >= 0, "need 0 <= ante"),
            (0 < self.bring_in < self.small_bet, "need 0 < bring_in < small_bet"),
            (self.max_raises >= 0, "need max_raises >= 0"),
            (2 <= self.min_players <= self.seats <= 8, "need 2 <= min_players <= seats <= 8"),
        )
        for ok, message in checks:
            if not ok:
                raise RuleViolation(Reason.INVALID_CONFIG, message)
        if self.rake is not None and not isinstance(self.rake, Rake):
            raise RuleViolation(Reason.INVALID_CONFIG, f"bad rake: {self.rake!r}")
        for name, enum in (("heads_up_raises", HeadsUpRaises),
                           ("showdown_opener", ShowdownOpener)):
            value = getattr(self, name)
            if not isinstance(value, enum):
                try:
                    object.__setattr__(self, name, enum(value))
                except ValueError:
                    raise RuleViolation(Reason.INVALID_CONFIG, f"bad {name}: {value!r}") from None

    @classmethod
    def for_stakes(
        cls,
        small_bet: int,
        *,
        big_bet: int | None = None,
        ante: int | None = None,
        bring_in: int | None = None,
        **options: object,
    ) -> TableConfig:
        """A config from the small bet, deriving what is not given (RULES 2.2).

        >>> c = TableConfig.for_stakes(10); (c.big_bet, c.ante, c.bring_in)
        (20, 2, 3)
        >>> TableConfig.for_stakes(1)
        Traceback (most recent call last):
        ...
        rules.errors.RuleViolation: invalid_config: deriving amounts needs small_bet >= 2
        """
        derives = big_bet is None or ante is None or bring_in is None
        if derives and (not isinstance(small_bet, int) or small_bet < 2):
            raise RuleViolation(Reason.INVALID_CONFIG, "deriving amounts needs small_bet >= 2")
        return cls(
            small_bet=small_bet,
            big_bet=2 * small_bet if big_bet is None else big_bet,
            ante=max(1, _round_half_up_div(small_bet, 5)) if ante is None else ante,
            bring_in=max(1, _round_half_up_div(small_bet, 4)) if bring_in is None else bring_in,
            **options,  # type: ignore[arg-type]
        )

    @property
    def cap(self) -> int:
        """Full wagers allowed in a capped round: one bet plus ``max_raises`` raises."""
        return 1 + self.max_raises
