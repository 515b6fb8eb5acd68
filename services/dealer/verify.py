"""``python -m dealer.verify``: an auditor checks finished hands of a table. It fetches each
hand's audit record from the dealer (``GetAudit``, with an auditor token), reads the table's
public stream from Redis (any user that may read ``stud:table:*``, e.g. the auditor's), and
runs :func:`studkit.deckproof.verify_hand`. Prints one line per hand, no card values; exits 1 if any
hand fails.

    STUD_TOKEN=<auditor jwt> python -m dealer.verify --dealer 127.0.0.1:50052 \\
        --redis redis://auditor:...@127.0.0.1:6379/0 --table t1 --hands 1-20
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from rules import Event
from stud.v1 import dealer_pb2 as pb
from stud.v1 import dealer_pb2_grpc as pb_grpc
from studkit.auth import bearer_metadata
from studkit.deckproof import Verification, audit_from_proto, verify_hand
from studkit.mapping import event_from_envelope, is_room_event
from studkit.redis_client import connect
from studkit.store import EventStore

TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class HandReport:
    """The verification of one hand, or why it could not be fetched."""

    hand_number: int
    verification: Verification | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.verification is not None and self.verification.ok

    def line(self) -> str:
        if self.verification is None:
            return f"hand {self.hand_number}: not verified ({self.error})"
        v = self.verification
        if v.ok:
            return (f"hand {self.hand_number}: OK ({v.draws} draws, "
                    f"{v.cards_checked} public cards checked)")
        return f"hand {self.hand_number}: FAILED: " + "; ".join(v.problems)


async def verify_hands(stub: pb_grpc.DealerServiceStub, token: str, events: Sequence[Event],
                       table_id: str, hands: Sequence[int]) -> list[HandReport]:
    """Fetch and verify each hand of ``hands``."""
    reports = []
    for number in hands:
        try:
            reply = await stub.GetAudit(
                pb.GetAuditRequest(table_id=table_id, hand_number=number),
                metadata=bearer_metadata(token), timeout=TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            reports.append(HandReport(number, None, f"{exc.code().name}: {exc.details()}"))
            continue
        reports.append(HandReport(number, verify_hand(audit_from_proto(reply), events)))
    return reports


def _hands(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


async def _run(args: argparse.Namespace, token: str) -> int:
    client = connect(args.redis)
    try:
        stored = await EventStore(client).read(args.table)
    finally:
        await client.aclose()
    events = [event_from_envelope(s.envelope) for s in stored
              if not is_room_event(s.envelope)]
    async with grpc.aio.insecure_channel(args.dealer) as channel:
        stub = pb_grpc.DealerServiceStub(channel)  # type: ignore[no-untyped-call]
        reports = await verify_hands(stub, token, events, args.table, _hands(args.hands))
    for report in reports:
        print(report.line())
    return 0 if reports and all(r.ok for r in reports) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, verify, print; the token comes from ``STUD_TOKEN``."""
    parser = argparse.ArgumentParser(prog="python -m dealer.verify", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dealer", required=True, help="dealer address, host:port")
    parser.add_argument("--redis", required=True, help="Redis URL able to read the stream")
    parser.add_argument("--table", required=True)
    parser.add_argument("--hands", required=True, help="a hand number or a range, e.g. 1-20")
    args = parser.parse_args(argv)
    token = os.environ.get("STUD_TOKEN", "")
    if not token:
        print("error: set STUD_TOKEN to an auditor token", file=sys.stderr)
        return 2
    return asyncio.run(_run(args, token))


if __name__ == "__main__":
    raise SystemExit(main())
