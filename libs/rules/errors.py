"""Rule violations: the one exception the rules library raises, with a machine-readable reason."""

from __future__ import annotations

from enum import StrEnum, unique


@unique
class Reason(StrEnum):
    """Why a command (or input) was refused. Values are stable wire strings."""

    MALFORMED_CARD = "malformed_card"
    INVALID_CONFIG = "invalid_config"
    INVALID_COMMAND = "invalid_command"
    SEAT_OUT_OF_RANGE = "seat_out_of_range"
    SEAT_TAKEN = "seat_taken"
    SEAT_EMPTY = "seat_empty"
    PLAYER_ALREADY_SEATED = "player_already_seated"
    HAND_IN_PROGRESS = "hand_in_progress"
    NO_HAND_IN_PROGRESS = "no_hand_in_progress"
    NOT_ENOUGH_PLAYERS = "not_enough_players"
    NOT_YOUR_TURN = "not_your_turn"
    NOT_BETTING = "not_betting"
    ILLEGAL_ACTION = "illegal_action"
    WRONG_AMOUNT = "wrong_amount"
    CAP_REACHED = "cap_reached"
    RAISE_NOT_REOPENED = "raise_not_reopened"
    CHECK_NOT_ALLOWED = "check_not_allowed"
    FOLD_NOT_ALLOWED = "fold_not_allowed"
    INSUFFICIENT_CHIPS = "insufficient_chips"
    WRONG_DEAL = "wrong_deal"
    DUPLICATE_CARD = "duplicate_card"
    NOT_AT_SHOWDOWN = "not_at_showdown"
    WRONG_SHOWDOWN = "wrong_showdown"
    MUCK_NOT_ALLOWED = "muck_not_allowed"


class RuleViolation(Exception):
    """Raised when a command is illegal now or an input is malformed; nothing changes.

    >>> str(RuleViolation(Reason.NOT_YOUR_TURN, "seat 3 is to act"))
    'not_your_turn: seat 3 is to act'
    """

    def __init__(self, reason: Reason, detail: str) -> None:
        # ``_value_`` is ``.value`` without the enum property's cost (refusals are built
        # on hot paths: every kind ``legal_actions_for`` rules out is one).
        super().__init__(f"{reason._value_}: {detail}")
        self.reason = reason
        self.detail = detail
