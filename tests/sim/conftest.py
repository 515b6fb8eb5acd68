"""Fixtures of the simulator's tests: a client that records what each Lua script answered, for
the contract tests (the stores read only part of a script's reply, and a port must agree on
all of it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


class Recording:
    """Wraps a redis-py client or a :class:`sim.redis.SimRedis`; ``replies`` holds every
    script's raw reply, in order."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.replies: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def register_script(self, source: str) -> Callable[..., Any]:
        script = self.client.register_script(source)

        async def run(keys: list[Any], args: list[Any]) -> Any:
            reply = await script(keys=keys, args=args)
            self.replies.append(reply)
            return reply
        return run


@pytest.fixture
def recording() -> type[Recording]:
    """The recording client's class (the contract tests wrap both clients in it)."""
    return Recording
