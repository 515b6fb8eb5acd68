"""The campaigns' one router: calls for a table go to the replica that owns it. Any replica
can be asked first; a ``not_owner`` refusal names the owner (ErrorInfo metadata ``owner``) and
the call goes there. While tables change hands (a replica killed, frozen or restarting) a
call is retried elsewhere, with the same request (the same command id: the table answers a
retry of an applied command with its recorded outcome), until its deadline.

:meth:`Router.watch` follows a table's events the same way, resuming after the last sequence
it saw whenever the stream is cut, and going elsewhere when nothing arrives for a while (a
frozen owner keeps its streams open and silent).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncGenerator
from typing import Any, Final

import grpc

from stud.v1 import table_pb2 as pb
from stud.v1 import table_pb2_grpc as pb_grpc
from studkit.auth import Principal, TokenBook
from studkit.grpc_errors import rpc_error_info, rpc_error_reason
from studtest.processes import CHANNEL_OPTIONS

CALL_TIMEOUT_S: Final = 5.0
"""One attempt's deadline (a frozen replica never answers)."""
RETRIED: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                            grpc.StatusCode.CANCELLED})
"""Codes that mean "not now, maybe elsewhere": the call is tried again."""
WATCH_CUTS: Final = frozenset({*RETRIED, grpc.StatusCode.RESOURCE_EXHAUSTED,
                               grpc.StatusCode.UNAUTHENTICATED})
"""Codes that end a watch a viewer resumes (a replica gone, a watcher too slow, an expired
token: a fresh one is minted on resuming)."""


class Router:
    """Calls any of ``addresses`` for a table and follows ``not_owner`` redirects."""

    def __init__(self, addresses: list[str], tokens: TokenBook) -> None:
        self.tokens = tokens
        self.channels = {a: grpc.aio.insecure_channel(a, options=CHANNEL_OPTIONS)
                         for a in addresses}
        self.stubs = {a: pb_grpc.TableServiceStub(c)  # type: ignore[no-untyped-call]
                      for a, c in self.channels.items()}
        self.home: dict[str, str] = {}
        """Where each table last answered."""

    def _redirect(self, exc: grpc.aio.AioRpcError, address: str) -> str | None:
        """The owner a ``not_owner`` refusal names, if it is another known replica."""
        if rpc_error_reason(exc) != "not_owner":
            return None
        info = rpc_error_info(exc)
        owner = info.metadata.get("owner", "") if info is not None else ""
        return owner if owner in self.stubs and owner != address else None

    def _elsewhere(self, address: str) -> str:
        others = [a for a in self.stubs if a != address]
        return random.choice(others or [address])

    async def call(self, table_id: str, method: str, request: Any, who: Principal,
                   limit_s: float = 60.0) -> Any:
        """``method(request)`` as ``who`` at the owner of ``table_id``; the last refusal is
        raised once ``limit_s`` has passed (or at once when it is not one to retry)."""
        deadline = time.monotonic() + limit_s
        address = self.home.get(table_id, next(iter(self.stubs)))
        while True:
            try:
                reply = await getattr(self.stubs[address], method)(
                    request, metadata=self.tokens.metadata(who), timeout=CALL_TIMEOUT_S)
                self.home[table_id] = address
                return reply
            except grpc.aio.AioRpcError as exc:
                owner = self._redirect(exc, address)
                if owner is not None:
                    address = owner
                    continue
                retry = exc.code() in RETRIED or rpc_error_reason(exc) == "not_owner"
                if not retry or time.monotonic() > deadline:
                    raise
                address = self._elsewhere(address)
                await asyncio.sleep(0.1)

    async def view(self, table_id: str, who: Principal) -> pb.TableView:
        view: pb.TableView = await self.call(table_id, "GetTable",
                                             pb.GetTableRequest(table_id=table_id), who)
        return view

    async def watch(self, table_id: str, who: Principal, after: int = 0,
                    idle_s: float = 3.0) -> AsyncGenerator[pb.TableEventRecord | None, None]:
        """The table's events after sequence ``after`` as ``who`` sees them, for as long as
        the caller iterates: resumed after the last one seen when the stream is cut, and
        opened elsewhere when nothing arrives for ``idle_s`` (then ``None`` is yielded, so
        that the caller may look again at what it has). Refusals other than a cut or a
        redirect are raised."""
        address = self.home.get(table_id, next(iter(self.stubs)))
        while True:
            call = self.stubs[address].WatchTable(
                pb.WatchTableRequest(table_id=table_id, after_sequence=after),
                metadata=self.tokens.metadata(who))
            try:
                while True:
                    try:
                        record = await asyncio.wait_for(call.read(), idle_s)
                    except TimeoutError:
                        yield None
                        address = self._elsewhere(address)
                        break
                    if record is grpc.aio.EOF:  # ended by the replica (shutting down)
                        await asyncio.sleep(0.1)
                        break
                    self.home[table_id] = address
                    after = record.sequence
                    yield record
            except grpc.aio.AioRpcError as exc:
                owner = self._redirect(exc, address)
                if owner is not None:
                    address = owner
                    continue
                if exc.code() not in WATCH_CUTS and rpc_error_reason(exc) != "not_owner":
                    raise
                address = self._elsewhere(address)
                await asyncio.sleep(0.1)
            finally:
                call.cancel()

    async def close(self) -> None:
        for channel in self.channels.values():
            await channel.close()
