"""Protobuf <-> rules values shared by every contract (``common.proto``): cards, streets,
table configs and legal actions, plus the field checks the other mapping modules use.

Each check raises :class:`~studkit.errors.BadRequest` naming the field by its path."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, TypeVar

from rules.betting import ActionKind, LegalAction, LegalActions
from rules.cards import DECK, Card, Suit
from rules.config import HeadsUpRaises, Rake, ShowdownOpener, TableConfig
from rules.errors import RuleViolation
from rules.streets import Street
from stud.v1 import common_pb2 as pb
from studkit.errors import BadRequest
from studkit.keys import check_id

MAX_SEAT: Final = 8

_K = TypeVar("_K")
_V = TypeVar("_V")
_E = TypeVar("_E", bound=int)


def inverse(table: Mapping[_K, _V]) -> dict[_V, _K]:
    """The table read backwards (rules value -> wire value becomes wire -> rules)."""
    return {v: k for k, v in table.items()}


_RANKS: Final[dict[int, pb.Rank]] = dict(zip(range(2, 15), (
    pb.RANK_TWO, pb.RANK_THREE, pb.RANK_FOUR, pb.RANK_FIVE, pb.RANK_SIX, pb.RANK_SEVEN,
    pb.RANK_EIGHT, pb.RANK_NINE, pb.RANK_TEN, pb.RANK_JACK, pb.RANK_QUEEN, pb.RANK_KING,
    pb.RANK_ACE), strict=True))
_SUITS: Final[dict[Suit, pb.Suit]] = {
    Suit.CLUBS: pb.SUIT_CLUBS, Suit.DIAMONDS: pb.SUIT_DIAMONDS,
    Suit.HEARTS: pb.SUIT_HEARTS, Suit.SPADES: pb.SUIT_SPADES,
}
_CARDS: Final[dict[tuple[int, int], Card]] = {
    (_RANKS[c.rank], _SUITS[c.suit]): c for c in DECK
}
_STREETS: Final[dict[Street, pb.Street]] = {
    Street.THIRD: pb.STREET_THIRD, Street.FOURTH: pb.STREET_FOURTH,
    Street.FIFTH: pb.STREET_FIFTH, Street.SIXTH: pb.STREET_SIXTH,
    Street.SEVENTH: pb.STREET_SEVENTH,
}
_HEADS_UP: Final[dict[HeadsUpRaises, pb.HeadsUpRaises]] = {
    HeadsUpRaises.CAPPED: pb.HEADS_UP_RAISES_CAPPED,
    HeadsUpRaises.ROUND_STARTS_HEADS_UP: pb.HEADS_UP_RAISES_ROUND_STARTS_HEADS_UP,
    HeadsUpRaises.HEADS_UP_BEFORE_CAP: pb.HEADS_UP_RAISES_HEADS_UP_BEFORE_CAP,
}
_OPENERS: Final[dict[ShowdownOpener, pb.ShowdownOpener]] = {
    ShowdownOpener.LAST_AGGRESSOR: pb.SHOWDOWN_OPENER_LAST_AGGRESSOR,
    ShowdownOpener.FIRST_TO_ACT: pb.SHOWDOWN_OPENER_FIRST_TO_ACT,
}
_ACTIONS: Final[dict[ActionKind, pb.ActionKind]] = {
    ActionKind.BRING_IN: pb.ACTION_KIND_BRING_IN, ActionKind.COMPLETE: pb.ACTION_KIND_COMPLETE,
    ActionKind.BET: pb.ACTION_KIND_BET, ActionKind.RAISE: pb.ACTION_KIND_RAISE,
    ActionKind.CALL: pb.ACTION_KIND_CALL, ActionKind.CHECK: pb.ACTION_KIND_CHECK,
    ActionKind.FOLD: pb.ACTION_KIND_FOLD,
}
_RANKS_KNOWN: Final = frozenset(_RANKS.values())
_SUITS_KNOWN: Final = frozenset(_SUITS.values())
_STREETS_IN: Final = inverse(_STREETS)
_HEADS_UP_IN: Final = inverse(_HEADS_UP)
_OPENERS_IN: Final = inverse(_OPENERS)
_ACTIONS_IN: Final = inverse(_ACTIONS)


# --- field checks ---------------------------------------------------------------------------


def enum_value(value: _E, table: Mapping[_E, _V], field: str) -> _V:
    """The rules value of a wire enum value; unspecified and unknown values are refused."""
    if value not in table:
        what = "unspecified" if value == 0 else f"unknown value {value}"
        raise BadRequest(field, f"{what}; expected one of {sorted(table)}")
    return table[value]


def check_seat(value: int, field: str, *, community: bool = False) -> int:
    """``value`` if it is a seat 1..8 (0..8 for a ``community`` card slot)."""
    low = 0 if community else 1
    if not low <= value <= MAX_SEAT:
        raise BadRequest(field, f"seat must be {low}..{MAX_SEAT}, got {value}")
    return value


def check_seats(values: Iterable[int], field: str) -> tuple[int, ...]:
    """Every value a seat 1..8."""
    return tuple(check_seat(v, f"{field}[{i}]") for i, v in enumerate(values))


def check_amount(value: int, field: str) -> int:
    """``value`` if it is a non-negative amount."""
    if value < 0:
        raise BadRequest(field, f"must be >= 0, got {value}")
    return value


def check_hand_number(value: int, field: str) -> int:
    """``value`` if it is a hand number (1, 2, ...)."""
    if value < 1:
        raise BadRequest(field, "hand numbers start at 1")
    return value


def check_ident(value: str, field: str) -> str:
    """``value`` if it is a safe id (1-64 of letters, digits, '_', '.', '-')."""
    try:
        return check_id(value, field)
    except ValueError as exc:
        raise BadRequest(field, str(exc), reason="malformed_id") from None


def missing(field: str) -> BadRequest:
    """The error for a required message field that is absent."""
    return BadRequest(field, "required")


# --- values ---------------------------------------------------------------------------------


def card_to_proto(card: Card) -> pb.Card:
    """The wire form of a card."""
    return pb.Card(rank=_RANKS[card.rank], suit=_SUITS[card.suit])


def card_from_proto(msg: pb.Card, field: str = "card") -> Card:
    """The card a message names; both rank and suit must be known values."""
    if msg.rank not in _RANKS_KNOWN:
        raise BadRequest(f"{field}.rank", f"not a rank: {msg.rank}", reason="malformed_card")
    if msg.suit not in _SUITS_KNOWN:
        raise BadRequest(f"{field}.suit", f"not a suit: {msg.suit}", reason="malformed_card")
    return _CARDS[(msg.rank, msg.suit)]


def cards_from_proto(msgs: Iterable[pb.Card], field: str) -> tuple[Card, ...]:
    """The cards of a repeated Card field."""
    return tuple(card_from_proto(m, f"{field}[{i}]") for i, m in enumerate(msgs))


def cards_to_proto(cards: Iterable[Card]) -> list[pb.Card]:
    """The wire form of a sequence of cards."""
    return [card_to_proto(c) for c in cards]


def street_to_proto(street: Street) -> pb.Street:
    """The wire form of a street."""
    return _STREETS[street]


def street_from_proto(value: pb.Street, field: str = "street") -> Street:
    """The street a wire value names (unspecified is refused)."""
    return enum_value(value, _STREETS_IN, field)


def rake_to_proto(rake: Rake) -> pb.Rake:
    """The wire form of a rake."""
    return pb.Rake(percent_bps=rake.percent_bps, cap=rake.cap)


def rake_from_proto(msg: pb.Rake, field: str = "rake") -> Rake:
    """The rake a message describes (RULES 2.4); an invalid one is refused naming ``field``."""
    try:
        return Rake(msg.percent_bps, check_amount(msg.cap, f"{field}.cap"))
    except RuleViolation as exc:
        raise BadRequest(field, exc.detail, reason=exc.reason.value) from None


def config_to_proto(config: TableConfig) -> pb.TableConfig:
    """The wire form of a table configuration (``rake`` absent when there is none)."""
    msg = pb.TableConfig(
        seats=config.seats, min_players=config.min_players, small_bet=config.small_bet,
        big_bet=config.big_bet, ante=config.ante, bring_in=config.bring_in,
        max_raises=config.max_raises, heads_up_raises=_HEADS_UP[config.heads_up_raises],
        burn_cards=config.burn_cards, showdown_opener=_OPENERS[config.showdown_opener],
        history_reveals_mucked=config.history_reveals_mucked,
    )
    if config.rake is not None:
        msg.rake.CopyFrom(rake_to_proto(config.rake))
    return msg


def config_from_proto(msg: pb.TableConfig, field: str = "config", *,
                      defaults: bool = False) -> TableConfig:
    """The table configuration a message describes; an invalid combination (rules 2.x) is
    refused naming ``field`` with the rules' explanation. An absent ``rake`` is no rake.

    As a stored record (an event, a command) every field is taken as written: a zero is a
    zero, so a record reads as it was written. With ``defaults`` (a client's request,
    OpenTable) a field left unset takes its RULES 2.1 default and the big bet, ante and
    bring-in left unset derive from ``small_bet`` (2.2). Unset is zero for the fields that
    may never be zero, and absence for ``ante``, ``max_raises`` and
    ``history_reveals_mucked``, which may be given as zero (common.proto).

    >>> c = config_from_proto(pb.TableConfig(small_bet=100), defaults=True)
    >>> (c.seats, c.small_bet, c.big_bet, c.ante, c.bring_in, c.max_raises)
    (8, 100, 200, 20, 25, 3)
    >>> config_from_proto(pb.TableConfig(small_bet=100, ante=0), defaults=True).ante
    0
    """
    rake = rake_from_proto(msg.rake, f"{field}.rake") if msg.HasField("rake") else None
    try:
        if defaults:
            return _config_with_defaults(msg, field, rake)
        return TableConfig(
            seats=msg.seats, min_players=msg.min_players,
            small_bet=check_amount(msg.small_bet, f"{field}.small_bet"),
            big_bet=check_amount(msg.big_bet, f"{field}.big_bet"),
            ante=check_amount(msg.ante, f"{field}.ante"),
            bring_in=check_amount(msg.bring_in, f"{field}.bring_in"),
            max_raises=msg.max_raises,
            heads_up_raises=enum_value(
                msg.heads_up_raises, _HEADS_UP_IN, f"{field}.heads_up_raises"),
            burn_cards=msg.burn_cards,
            showdown_opener=enum_value(
                msg.showdown_opener, _OPENERS_IN, f"{field}.showdown_opener"),
            history_reveals_mucked=msg.history_reveals_mucked,
            rake=rake,
        )
    except RuleViolation as exc:
        raise BadRequest(field, exc.detail, reason=exc.reason.value) from None


_DEFAULT_CONFIG: Final = TableConfig()
"""RULES 2.1's defaults (a $2/$4 table)."""


def _config_with_defaults(msg: pb.TableConfig, field: str, rake: Rake | None) -> TableConfig:
    """A request's config: RULES 2.1 defaults for what is unset, 2.2's derived amounts."""
    d = _DEFAULT_CONFIG

    def amount(name: str) -> int | None:
        value = check_amount(getattr(msg, name), f"{field}.{name}")
        return value or None

    small_bet = amount("small_bet") or d.small_bet
    return TableConfig.for_stakes(
        small_bet,
        big_bet=amount("big_bet"),
        ante=check_amount(msg.ante, f"{field}.ante") if msg.HasField("ante") else None,
        bring_in=amount("bring_in"),
        seats=msg.seats or d.seats,
        min_players=msg.min_players or d.min_players,
        max_raises=msg.max_raises if msg.HasField("max_raises") else d.max_raises,
        heads_up_raises=(enum_value(msg.heads_up_raises, _HEADS_UP_IN,
                                    f"{field}.heads_up_raises")
                         if msg.heads_up_raises else d.heads_up_raises),
        burn_cards=msg.burn_cards,
        showdown_opener=(enum_value(msg.showdown_opener, _OPENERS_IN,
                                    f"{field}.showdown_opener")
                         if msg.showdown_opener else d.showdown_opener),
        history_reveals_mucked=(msg.history_reveals_mucked
                                if msg.HasField("history_reveals_mucked")
                                else d.history_reveals_mucked),
        rake=rake,
    )


def legal_actions_to_proto(legal: LegalActions) -> pb.LegalActions:
    """The wire form of what the player to act may do."""
    return pb.LegalActions(seat=legal.seat, actions=[
        pb.LegalAction(kind=_ACTIONS[a.kind], amount=a.amount, to=a.to, all_in=a.all_in)
        for a in legal.actions
    ])


def legal_actions_from_proto(msg: pb.LegalActions, field: str = "legal_actions") -> LegalActions:
    """What the player to act may do, as a client reads it."""
    actions = []
    for i, a in enumerate(msg.actions):
        f = f"{field}.actions[{i}]"
        actions.append(LegalAction(
            kind=enum_value(a.kind, _ACTIONS_IN, f"{f}.kind"),
            amount=check_amount(a.amount, f"{f}.amount"), to=check_amount(a.to, f"{f}.to"),
            all_in=a.all_in,
        ))
    return LegalActions(seat=check_seat(msg.seat, f"{field}.seat"), actions=tuple(actions))
