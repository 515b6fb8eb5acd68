"""``studclient.protection.event_line``: every protection event the wallet records has words
(``stud replay protection``, docs/player-protection.md), from its stored JSON."""

from __future__ import annotations

from studclient.protection import event_line
from wallet.protection import (
    EVENT_TYPES,
    ExclusionLiftRequested,
    LimitDecreased,
    LimitIncreaseCancelled,
    LimitIncreaseRequested,
    LimitKind,
    LimitSet,
    Period,
    PlayerExcluded,
    RealityCheckSet,
    SelfExcluded,
    SessionLimitSet,
    Window,
    event_to_json,
)

T = 1_800_000_000_000  # 2027-01-15 08:00 UTC
DAY = 86_400_000

L = {"at_ms": T, "kind": LimitKind.WAGER, "window": Window.DAY}
SAMPLES = [
    (LimitSet(**L, amount=1_500), "wager limit per day set to 1,500"),
    (LimitDecreased(**L, amount=700), "wager limit per day lowered to 700, at once"),
    (LimitIncreaseRequested(**L, amount=0, effective_ms=T + DAY),
     "wager limit per day: raise to no limit requested, from 2027-01-16 08:00 UTC"),
    (LimitIncreaseRequested(**L, amount=9_000, effective_ms=T + DAY),
     "wager limit per day: raise to 9,000 requested, from 2027-01-16 08:00 UTC"),
    (LimitIncreaseCancelled(**L), "wager limit per day: the waiting raise cancelled"),
    (SelfExcluded(at_ms=T, period=Period.WEEK, until_ms=T + 7 * DAY),
     "self-excluded (week) until 2027-01-22 08:00 UTC"),
    (PlayerExcluded(at_ms=T, period=Period.INDEFINITE, until_ms=0, operator="operator:ops",
                    reason="case 7"),
     "excluded by operator:ops (indefinite) indefinitely: case 7"),
    (ExclusionLiftRequested(at_ms=T, operator="operator:ops", reason="reviewed",
                            effective_ms=T + DAY),
     "exclusion lift by operator:ops, from 2027-01-16 08:00 UTC: reviewed"),
    (RealityCheckSet(at_ms=T, minutes=45), "a reality check every 45 minutes"),
    (RealityCheckSet(at_ms=T, minutes=0), "reality checks off"),
    (SessionLimitSet(at_ms=T, minutes=60, effective_ms=T), "session limit set to 60 minutes, "
     "at once"),
    (SessionLimitSet(at_ms=T, minutes=0, effective_ms=T + DAY),
     "session limit: raise to no session limit requested, from 2027-01-16 08:00 UTC"),
]


def test_every_event_type_in_words() -> None:
    assert {type(e).__name__ for e, _ in SAMPLES} == set(EVENT_TYPES)
    for event, words in SAMPLES:
        assert event_line(type(event).__name__, event_to_json(event)) == words


def test_an_unknown_event_is_shown_as_stored() -> None:
    assert event_line("Novel", '{"at_ms":1}') == 'Novel {"at_ms":1}'
