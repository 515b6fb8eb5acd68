"""``make protection``'s short run (issue 34): a few players racing their moves against their
limits and exclusions at a real wallet; the audit finds no violation, and it finds them when
the script stops refusing (the audit is not blind)."""

from __future__ import annotations

import pytest

from campaigns.protection import campaign

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def test_a_short_run_has_no_violation(capsys: pytest.CaptureFixture[str]) -> None:
    assert await campaign(players=10, rounds=3, moves=12, seed=34) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("players=10 limits_hit=") and last.endswith(" violations=0")
    fields = dict(part.split("=") for part in last.split())
    assert int(fields["limits_hit"]) > 0 and int(fields["exclusions"]) > 0


async def test_the_audit_finds_moves_past_a_limit(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The same run with apply.lua's limit refusal switched off: violations found."""
    import wallet.store
    broken = wallet.store._SCRIPT.replace("\n    if worst then\n", "\n    if false then\n")
    assert broken != wallet.store._SCRIPT
    monkeypatch.setattr(wallet.store, "_SCRIPT", broken)
    assert await campaign(players=10, rounds=3, moves=12, seed=34) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert not last.endswith(" violations=0")
