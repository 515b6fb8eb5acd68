"""The deal plans kept by :func:`rules.dealing.street_plan` are the plans
:func:`rules.dealing.plan_street` makes for the same arguments, whatever was asked before
(the 7th street's stub and burned cards are part of what a kept plan is found by)."""

from __future__ import annotations

import itertools

from rules import dealing
from rules.dealing import plan_street, street_plan
from rules.streets import Street

SEATS = ((1, 2), (1, 3, 8), (2, 4, 5, 6, 7), tuple(range(1, 9)))


def _cases() -> list[tuple[Street, tuple[int, ...], tuple[int, ...], bool, int, int, bool]]:
    cases = []
    for street, dealt_in, exposed, burn in itertools.product(
            Street, SEATS, (False, True), (False, True)):
        for still_in in {dealt_in, dealt_in[:2], dealt_in[1:]}:
            for stub, burned in ((43, 0), (30, 3), (len(still_in), 0), (1, 0), (0, 4),
                                 (len(still_in) - 1, 2), (0, 0)):
                cases.append((street, dealt_in, still_in, exposed, stub, burned, burn))
    return cases


def test_kept_plans_are_the_plans_made() -> None:
    dealing._PLANS.clear()
    cases = _cases()
    for _ in range(2):  # first made, then found
        for street, dealt_in, still_in, exposed, stub, burned, burn in cases:
            kept = street_plan(street, dealt_in, still_in, exposed=exposed, stub=stub,
                               burned=burned, burn_cards=burn)
            made = plan_street(street, dealt_in, still_in, exposed=exposed, stub=stub,
                               burned=burned, burn_cards=burn)
            assert kept == made, (street, dealt_in, still_in, exposed, stub, burned, burn)


def test_seventh_street_plans_depend_on_the_stub() -> None:
    dealing._PLANS.clear()
    full = street_plan(Street.SEVENTH, (1, 2), (1, 2), exposed=False, stub=30, burned=0,
                       burn_cards=False)
    short = street_plan(Street.SEVENTH, (1, 2), (1, 2), exposed=False, stub=1, burned=0,
                        burn_cards=False)
    reshuffled = street_plan(Street.SEVENTH, (1, 2), (1, 2), exposed=False, stub=1, burned=4,
                             burn_cards=True)
    assert not full.community and short.community
    assert reshuffled.reshuffle_burns and not reshuffled.community


def test_the_plans_kept_are_bounded() -> None:
    dealing._PLANS.clear()
    for stub in range(dealing._PLANS_KEPT + 10):
        street_plan(Street.SEVENTH, (1, 2), (1, 2), exposed=False, stub=stub, burned=0,
                    burn_cards=False)
        assert len(dealing._PLANS) <= dealing._PLANS_KEPT
