"""How a PHH hand maps onto our table: the configuration it is replayed with and the command
each of its betting actions stands for."""

from __future__ import annotations

from rules.betting import ActionKind, wager_kind
from rules.commands import Bet, Call, Check, Command, Complete, Fold, PostBringIn, Raise
from rules.config import TableConfig
from rules.errors import RuleViolation
from rules.phh.format import PhhAction, PhhError, PhhHand
from rules.state import HandState, Phase

_BETTING = Phase.BETTING
_COMPLETE, _BET = ActionKind.COMPLETE, ActionKind.BET


def replay_config(hand: PhhHand) -> TableConfig:
    """The table configuration a PHH hand is replayed with: its stakes, the uniform ante,
    no burns (see :mod:`rules.phh.replay`), every other option at its default. Raises
    :class:`PhhError` when our rules cannot express the file's stakes.

    >>> from rules.phh import VARIANT
    >>> h = PhhHand(variant=VARIANT, antes=(40, 40), bring_in=50, small_bet=200, big_bet=400,
    ...             starting_stacks=(1000, 1000), actions=())
    >>> c = replay_config(h); c.seats, c.ante, c.burn_cards
    (8, 40, False)
    >>> from dataclasses import replace
    >>> try:
    ...     replay_config(replace(h, antes=(40, 30)))
    ... except PhhError as error:
    ...     print(error)
    antes differ between players ([40, 30]); our ante is one amount for everyone
    """
    if len(set(hand.antes)) > 1:
        raise PhhError(f"antes differ between players ({list(hand.antes)}); our ante is one "
                       "amount for everyone")
    seats = len(hand.starting_stacks)
    highest = max(hand.seats) if hand.seats else seats
    seat_count = hand.seat_count if hand.seat_count and highest <= hand.seat_count <= 8 else 8
    ante = hand.antes[0] if hand.antes else 0
    # Each value with its type: 200 and 200.0 or True are one key otherwise, and TableConfig
    # refuses what is not an int.
    key = tuple((type(v), v) for v in (seat_count, hand.small_bet, hand.big_bet, ante,
                                        hand.bring_in))
    config = _CONFIGS.get(key)
    if config is None:
        try:
            config = TableConfig(seats=seat_count, small_bet=hand.small_bet,
                                 big_bet=hand.big_bet, ante=ante, bring_in=hand.bring_in)
        except RuleViolation as error:
            raise PhhError(str(error)) from None
        if len(_CONFIGS) >= _CONFIGS_KEPT:
            _CONFIGS.clear()
        _CONFIGS[key] = config
    return config


_CONFIGS: dict[tuple[tuple[type, object], ...], TableConfig] = {}
"""The configurations made, by their stakes and seats (a TableConfig is a frozen value, and
making one, pure with its checks, was a few per cent of a replay; files repeat their stakes).
A refusal is not kept: it is raised each time."""

_CONFIGS_KEPT = 1024
"""At most this many configurations are kept (then forgotten all at once)."""


_BY_SEAT: dict[tuple[type, int], Command] = {}
"""The seat-only commands made (``PostBringIn``, ``Fold``, ``Call``, ``Check``), by type and
seat; a command is a frozen value: made once, shared (making one, a frozen dataclass of the
pure commands, cost several times the look-up)."""

_TO: dict[tuple[type, int, int | None], Command] = {}
"""The wagers made (``Complete``, ``Bet``, ``Raise``), by type, seat and amount."""

_KEPT = 4096
"""At most this many wagers are kept (then forgotten all at once)."""


def _seat_command(kind: type[PostBringIn | Fold | Call | Check], seat: int) -> Command:
    key = (kind, seat)
    command = _BY_SEAT.get(key)
    if command is None:
        command = _BY_SEAT[key] = kind(seat=seat)  # seats 1..8: at most 32 entries
    return command


def _wager(kind: type[Complete | Bet | Raise], seat: int, to: int | None) -> Command:
    key = (kind, seat, to)
    command = _TO.get(key)
    if command is None:
        command = kind(seat=seat, to=to)
        if len(_TO) >= _KEPT:
            _TO.clear()
        _TO[key] = command
    return command


def command_for(action: PhhAction, seat: int, hand: HandState, config: TableConfig) -> Command:
    """The command a betting action (``pb``, ``cbr``, ``cc``, ``f``) of ``seat`` stands for
    now: ``cbr`` the completion, bet or raise that fits, ``cc`` a check or a call. Whether
    the command is legal is for ``decide`` to say.

    >>> from rules.testing import TableDriver
    >>> from rules.phh import parse_action
    >>> t = TableDriver(TableConfig(), stacks={1: 1000, 2: 1000}); _ = t.start()
    >>> t.deal_from("Ah Kd 7c 7d 2c 9s")
    >>> command_for(parse_action("p1 cbr 200", 2), 1, t.hand, t.config)
    Complete(seat=1, to=200)
    >>> command_for(parse_action("p2 cc", 2), 2, t.hand, t.config)  # not p2's turn: no check
    Call(seat=2)
    """
    verb = action.verb
    if verb == "pb":
        return _seat_command(PostBringIn, seat)
    if verb == "f":
        return _seat_command(Fold, seat)
    # What judge_action(hand, config, kind) would say, read straight from the hand (it was
    # judged kind by kind here, then again by decide; tests/property/test_one_legality.py
    # checks these against judge_action over random play): a check is legal for the player
    # to act with nothing to call and no bring-in due; a wager is the completion while the
    # bring-in is due, else the one wager kind that fits (wager_kind), whether or not it is
    # legal (decide refuses it if not).
    to_act = hand.to_act
    if hand.phase is not _BETTING or to_act is None:
        return _seat_command(Call, seat) if verb == "cc" else _wager(Bet, seat, action.amount)
    if verb == "cc":
        if to_act != seat or hand.bring_in_pending:
            return _seat_command(Call, seat)
        for p in hand.players:  # hand.player(seat), an interpreted call: the seat to act is in
            if p.seat == seat:
                return (_seat_command(Check, seat) if hand.target - p.street_total <= 0
                        else _seat_command(Call, seat))
        raise KeyError(seat)
    kind = _COMPLETE if hand.bring_in_pending else wager_kind(hand)
    if kind is _COMPLETE:
        return _wager(Complete, seat, action.amount)
    if kind is _BET:
        return _wager(Bet, seat, action.amount)
    return _wager(Raise, seat, action.amount)
