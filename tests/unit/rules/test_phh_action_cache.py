"""The PHH actions kept by :func:`rules.phh.format.parse_action` are the actions
:func:`rules.phh.format.read_action` parses from the same text for as many players, whatever
was parsed before; a text that is not an action is refused every time."""

from __future__ import annotations

import pytest

from rules.phh import format as phh_format
from rules.phh.format import PhhError, parse_action, read_action

TEXTS = ("p1 cc", "p3 cc", "p2 f", "p8 pb", "p3 cbr 200", "p2 cbr 2.5", "d dh p3 ????Kd",
         "d dh p1 AhKd7c", "d db 9s", "p3 sm", "p3 sm -", "p2 sm AcKd", "# a comment",
         "p1 cc # calls", "p9 cc", "p1 xx", "d dh p2 Zz", "p1 cbr lots")


def _outcome(parse: object, text: str, players: int) -> object:
    try:
        return parse(text, players)  # type: ignore[operator]
    except PhhError as error:
        return ("refused", str(error))


@pytest.mark.parametrize("order", [1, -1])
def test_kept_actions_are_the_actions_read(order: int) -> None:
    phh_format._ACTIONS.clear()
    for _ in range(2):  # first read, then found
        for players in range(2, 9)[::order]:
            for text in TEXTS:
                assert (_outcome(parse_action, text, players)
                        == _outcome(read_action, text, players)), (text, players)


def test_the_actions_kept_are_bounded() -> None:
    phh_format._ACTIONS.clear()
    for amount in range(1, phh_format._ACTIONS_KEPT + 10):
        assert parse_action(f"p1 cbr {amount}", 2).amount == amount
        assert len(phh_format._ACTIONS) <= phh_format._ACTIONS_KEPT
