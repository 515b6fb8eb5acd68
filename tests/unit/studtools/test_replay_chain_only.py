"""``stud replay verify`` on a table whose chain is broken and that has no hand: the break is
named (a verdict of hand 0), and the card check, which pairs hands with verdicts, does not
crash on that lone verdict (the review's finding: ``zip(strict=True)`` raised)."""

from __future__ import annotations

from typing import Any

from studkit.chain import ChainBreak
from studtools import replay_cli
from studtools.replay_hands import HandVerdict


class NoDealer:
    """A dealer source that must not be asked: there is no hand to check."""

    async def audits(self, *args: Any) -> Any:
        raise AssertionError("no hand: the dealer is not asked")


async def test_a_broken_chain_without_hands_is_named_and_the_checks_go_on() -> None:
    verdicts: list[HandVerdict] = []
    broken = ChainBreak("t1", 3, b"\x01" * 32, b"\x02" * 32, "digest")
    replay_cli._chain_problem("t1", broken, [], verdicts, None)
    assert [(v.hand, [p.what[:12] for p in v.problems]) for v in verdicts] == [
        (0, ["chain broken"])]
    await replay_cli._check_cards(NoDealer(), "token", "t1", [], verdicts)  # type: ignore[arg-type]
    await replay_cli._recheck_last_settlement(None, "t1", [], verdicts)  # type: ignore[arg-type]
    assert len(verdicts) == 1 and len(verdicts[0].problems) == 1
