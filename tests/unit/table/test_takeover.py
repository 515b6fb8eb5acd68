"""A call for a table this replica is taking over waits for its load, then is served or told
to ask again (``table.takeover``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from studkit.errors import Unavailable
from table import takeover
from table.takeover import Takeovers


class TestTakeovers:
    async def test_a_call_waiting_for_a_load_gets_the_table_once_it_ends(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The wait ends when the load ends (not at its limit), with the driver the load
        made."""
        monkeypatch.setattr(takeover, "TAKING_WAIT_S", 600.0)
        takeovers, driver = Takeovers(), object()
        drivers: dict[str, Any] = {}
        takeovers.mark("t1")
        assert "t1" in takeovers
        waiting = asyncio.ensure_future(takeovers.driver_once_taken("t1", drivers))
        await asyncio.sleep(0)
        assert not waiting.done()
        drivers["t1"] = driver
        takeovers.ended("t1")
        async with asyncio.timeout(10):
            assert await waiting is driver
        assert "t1" not in takeovers

    async def test_a_load_that_ends_without_the_table_is_taking_over(self) -> None:
        """A load that failed leaves no driver: UNAVAILABLE ``taking_over`` (ask again)."""
        takeovers = Takeovers()
        takeovers.mark("t1")
        takeovers.ended("t1")
        with pytest.raises(Unavailable) as refused:
            await takeovers.driver_once_taken("t1", {})
        assert refused.value.reason == "taking_over"

    async def test_a_load_longer_than_the_wait_is_taking_over(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The call waits at most ``TAKING_WAIT_S``, then is told to ask again."""
        monkeypatch.setattr(takeover, "TAKING_WAIT_S", 0.01)
        takeovers = Takeovers()
        takeovers.mark("t1")
        drivers: dict[str, Any] = {}
        with pytest.raises(Unavailable) as refused:
            await takeovers.driver_once_taken("t1", drivers)
        assert refused.value.reason == "taking_over"
        assert "t1" in takeovers
