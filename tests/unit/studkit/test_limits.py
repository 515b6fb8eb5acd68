"""StreamLimiter: at most N open streams per principal and M per peer; a refused stream takes
no slot, a stream that ends (normally, by an error or cancelled) gives its slot back, and
idle principals and peers leave no entry behind."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from studkit.auth import Principal, Role
from studkit.errors import ResourceExhausted
from studkit.limits import StreamLimiter, TooManyStreams

ANN = Principal(Role.PLAYER, "ann")
BOB = Principal(Role.PLAYER, "bob")
TABLE = Principal(Role.SERVICE, "ann")  # same name, another role: another principal


class TestStreamLimiter:
    def test_limits_must_be_positive(self) -> None:
        """A limit below 1 is refused."""
        with pytest.raises(ValueError):
            StreamLimiter(per_principal=0, per_peer=5)
        with pytest.raises(ValueError):
            StreamLimiter(per_principal=5, per_peer=0)

    async def test_per_principal_limit(self) -> None:
        """The principal's limit holds across peers; other principals are not affected."""
        limiter = StreamLimiter(per_principal=2, per_peer=10)
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(limiter.hold(ANN, "p1"))
            await stack.enter_async_context(limiter.hold(ANN, "p2"))
            with pytest.raises(TooManyStreams) as info:
                await stack.enter_async_context(limiter.hold(ANN, "p3"))
            assert info.value.reason == "too_many_streams"
            assert isinstance(info.value, ResourceExhausted)
            await stack.enter_async_context(limiter.hold(BOB, "p3"))
            await stack.enter_async_context(limiter.hold(TABLE, "p3"))
            assert limiter.open_streams(ANN) == 2 and limiter.open_on_peer("p3") == 2
        assert limiter.tracked() == 0

    async def test_per_peer_limit(self) -> None:
        """The peer's limit holds across principals; a refusal takes no slot."""
        limiter = StreamLimiter(per_principal=10, per_peer=2)
        async with limiter.hold(ANN, "p1"), limiter.hold(BOB, "p1"):
            for who in (ANN, BOB, TABLE):
                with pytest.raises(TooManyStreams):
                    async with limiter.hold(who, "p1"):
                        pass
            assert limiter.open_streams(ANN) == 1 and limiter.open_on_peer("p1") == 2
            async with limiter.hold(ANN, "p2"):
                assert limiter.open_streams(ANN) == 2
        assert limiter.tracked() == 0

    async def test_a_failed_or_cancelled_stream_gives_its_slot_back(self) -> None:
        """Slots come back when the block raises or its task is cancelled."""
        limiter = StreamLimiter(per_principal=1, per_peer=1)
        with pytest.raises(RuntimeError):
            async with limiter.hold(ANN, "p1"):
                raise RuntimeError("handler failed")
        assert limiter.tracked() == 0
        held = asyncio.Event()

        async def stream() -> None:
            async with limiter.hold(ANN, "p1"):
                held.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(stream())
        await held.wait()
        assert limiter.open_streams(ANN) == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert limiter.tracked() == 0
        async with limiter.hold(ANN, "p1"):
            pass
