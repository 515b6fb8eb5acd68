"""Table integration fixtures: the whole room in process (real dealer, wallet and table
gRPC servers over the session's real Redis, each through its own ACL user)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from studtest.redis import TestRedis
from studtest.table import Room, running_room
from studtools.devkeys import DevKeys


@pytest.fixture
async def room(redis_server: TestRedis, redis_url: str, dev_keys: DevKeys
               ) -> AsyncIterator[Room]:
    """A fresh room on a flushed Redis."""
    async with running_room(redis_server, redis_url, dev_keys) as running:
        yield running
