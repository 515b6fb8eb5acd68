"""Regressions found by the property tests (tests/property/test_rules_properties.py)."""

from __future__ import annotations

from rules.commands import Fold, PostBringIn
from rules.config import TableConfig
from rules.events import HandEnded, PotAwarded, UncalledBetReturned
from rules.state import Phase
from rules.testing import TableDriver


class TestHandWithEmptyPotEnds:
    def test_everyone_folds_to_the_bring_in_without_antes(self) -> None:
        """RULES 7.6, 9.6: with ante 0 the bring-in comes back uncalled and the hand ends,
        although no pot holds a chip."""
        t = TableDriver(TableConfig(ante=0), stacks={1: 1000, 2: 1000})
        t.start()
        t.deal_from("Kc Kd 2c Ks Kh Ac")
        t.apply(PostBringIn(seat=1))
        events = t.apply(Fold(seat=2))
        assert UncalledBetReturned(seat=1, amount=50) in events
        assert not any(isinstance(e, PotAwarded) for e in events)
        assert events[-1] == HandEnded(hand_number=1)
        assert t.hand.phase == Phase.COMPLETE
        assert (t.state.stack(1), t.state.stack(2)) == (1000, 1000)
