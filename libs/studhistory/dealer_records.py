"""The dealer's record of a hand (``GetAudit``), as the archiver copies it next to the hand:
the bytes of the ``HandAudit`` reply, for the auditor schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import grpc

from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from studhistory.archiver import RecordUnavailable
from studkit.auth import bearer_metadata

AUDIT_TIMEOUT_S: Final = 10.0


class DealerAudits:
    """``GetAudit`` over ``channel`` with the token ``token()`` gives (an auditor's, or the
    archiver service's own)."""

    def __init__(self, channel: grpc.aio.Channel, token: Callable[[], str]) -> None:
        self._stub = dpb_grpc.DealerServiceStub(channel)  # type: ignore[no-untyped-call]
        self._token = token

    async def record(self, table_id: str, hand: int) -> bytes | None:
        """The record's bytes; None when the dealer has none (no deck was drawn for the
        hand); :class:`RecordUnavailable` when it cannot answer now."""
        try:
            reply: dpb.HandAudit = await self._stub.GetAudit(
                dpb.GetAuditRequest(table_id=table_id, hand_number=hand),
                metadata=bearer_metadata(self._token()), timeout=AUDIT_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() is grpc.StatusCode.NOT_FOUND:
                return None
            raise RecordUnavailable(f"{table_id}: the dealer's record of hand {hand}: "
                                    f"{exc.code().name} {exc.details()}") from exc
        return bytes(reply.SerializeToString(deterministic=True))

    async def release(self, table_id: str, through_hand: int) -> int:
        """``ReleaseHands``: the dealer forgets its keys of hands up to ``through_hand``."""
        try:
            reply: dpb.ReleaseHandsResponse = await self._stub.ReleaseHands(
                dpb.ReleaseHandsRequest(table_id=table_id, through_hand=through_hand),
                metadata=bearer_metadata(self._token()), timeout=AUDIT_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            raise RecordUnavailable(f"{table_id}: ReleaseHands through {through_hand}: "
                                    f"{exc.code().name} {exc.details()}") from exc
        return int(reply.released_through)
