"""A street's successor and label (looked up in tables built from the enum, not computed)."""

from __future__ import annotations

from rules.streets import Street, card_is_up


def test_next_street_and_labels() -> None:
    assert [s.next() for s in Street] == [Street.FOURTH, Street.FIFTH, Street.SIXTH,
                                         Street.SEVENTH, None]
    assert [s.label for s in Street] == ["3rd street", "4th street", "5th street",
                                         "6th street", "7th street"]
    assert all(type(s.next()) is Street for s in list(Street)[:-1])


def test_which_cards_are_up() -> None:
    assert [card_is_up(Street.THIRD, n) for n in range(3)] == [False, False, True]
    assert [card_is_up(s) for s in list(Street)[1:]] == [True, True, True, False]
