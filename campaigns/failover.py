"""``make failover``: three table-service replicas (separate processes) over one Redis, with
the dealer and the wallet, while the bots play through any replica (the router follows
``not_owner`` redirects):

1. the replica that owns the most tables is killed with SIGKILL mid-hand, its tables are
   taken over, and it is started again;
2. the fence: the replica that owns the most tables now is frozen (SIGSTOP); a command is
   sent to it for each of its tables (a seat sitting out or in: legal in any phase), and
   stays in flight while its tables are taken over; then it goes on (SIGCONT) and handles
   them with the epoch it had. Whether it reaches a command before its own ownership round
   finds the leases lost is a race: the freeze is repeated (``--fence-attempts``, 5) until
   one of its appends was refused;
3. all three are restarted one at a time (a rolling restart: leases handed back).

Afterwards, each a comparison that can come out false:

- each command id's events are counted anywhere in its table's stream and compared with its
  outcome in the commands hash: none lost, none written twice; every command a bot got an
  answer for is in the stream;
- each stream is gapless and its events fold to the stacks the table shows;
- chips: deposits == player balances + escrows + house;
- at least one action and one hand, and no bot error;
- the fence was exercised: the frozen replica's appends after it went on were refused
  (``stale_appends_refused`` >= 1, from its log's ``stale_append_refused`` lines), and its
  in-flight commands changed nothing (no events, or exactly those recorded).

Last line: ``tables=… takeovers=… max_takeover_s=… lost_events=0 duplicate_events=0
chips_lost=0 stale_appends_refused=…``; the exit status is 1 if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from campaigns.bot import Tally
from campaigns.checks import count_commands, enough_play, gapless, untouched
from campaigns.room import CampaignRoom, campaign_room
from rules import fold
from stud.v1 import table_pb2 as pb
from studkit import keys as studkeys
from studkit.auth import Principal, Role
from studkit.commandwindow import new_id
from studkit.grpc_errors import rpc_error_reason
from studkit.mapping import event_from_envelope, game_envelopes
from studkit.store import EventStore
from studtest.processes import ServiceProcess

STALE_APPEND_LOG = '"stale_append_refused"'
"""What the table service logs when the fence refuses one of its appends."""


@dataclass
class Report:
    tables: int = 0
    takeovers: int = 0
    max_takeover_s: float = 0.0
    lost_events: int = 0
    duplicate_events: int = 0
    chips_lost: int = 0
    stale_appends_refused: int = 0
    hands: int = 0
    tally: Tally = field(default_factory=Tally)
    in_flight: dict[str, str] = field(default_factory=dict)
    """Command id -> table, of the commands sent to the frozen replica."""
    in_flight_replies: list[str] = field(default_factory=list)
    frozen_refused: int = 0
    """``stale_append_refused`` lines the frozen replica logged after it went on."""
    fence_attempts: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def actions(self) -> int:
        return self.tally.actions

    def line(self) -> str:
        return (f"tables={self.tables} takeovers={self.takeovers} "
                f"max_takeover_s={self.max_takeover_s:.2f} lost_events={self.lost_events} "
                f"duplicate_events={self.duplicate_events} chips_lost={self.chips_lost} "
                f"stale_appends_refused={self.stale_appends_refused}")

    def judge(self) -> None:
        """Add a problem for every check that came out false."""
        if self.lost_events:
            self.problems.append(f"{self.lost_events} events lost")
        if self.duplicate_events:
            self.problems.append(f"{self.duplicate_events} events written twice")
        if self.chips_lost:
            self.problems.append(f"{self.chips_lost} chips lost")
        self.problems.extend(enough_play(self.actions, self.hands))
        if self.tally.errors:
            self.problems.append(f"{len(self.tally.errors)} bot errors, first: "
                                 f"{self.tally.errors[0]}")
        if not self.in_flight:
            self.problems.append("no command was in flight to the frozen replica")
        if self.frozen_refused < 1 or self.stale_appends_refused < 1:
            self.problems.append("the fence was not exercised: the frozen replica logged "
                                 f"{self.frozen_refused} refused appends after it went on "
                                 f"(replies to its in-flight commands: "
                                 f"{self.in_flight_replies})")


def most_tables(owners: dict[str, tuple[str, int]], replicas: list[ServiceProcess]
                ) -> ServiceProcess:
    """The replica that owns the most tables."""
    held = {p.env["TABLE_REPLICA_ID"]: 0 for p in replicas}
    for owner, _epoch in owners.values():
        if owner in held:
            held[owner] += 1
    best = max(held, key=lambda r: held[r])
    return next(p for p in replicas if p.env["TABLE_REPLICA_ID"] == best)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def kill_one(room: CampaignRoom, table_ids: list[str], report: Report) -> None:
    """SIGKILL the replica owning the most tables; wait for the takeover; start it again."""
    before = await room.owners(table_ids)
    victim = most_tables(before, room.tables)
    await asyncio.to_thread(victim.kill)
    took = await room.wait_taken_over(before, victim.env["TABLE_REPLICA_ID"])
    report.max_takeover_s = max(report.max_takeover_s, took)
    victim.start()
    await victim.wait_serving()


async def freeze_with_commands_in_flight(room: CampaignRoom, table_ids: list[str],
                                         report: Report) -> int:
    """The fence: freeze the replica owning the most tables, send it a command for each of
    them (seat 1 sits out, or in, as the stream says it is now: legal in any phase), let
    the tables be taken over, let it go on, and collect its replies; the appends it logged
    as refused after it went on."""
    before = await room.owners(table_ids)
    frozen = most_tables(before, room.tables)
    replica = frozen.env["TABLE_REPLICA_ID"]
    mine = [t for t, (owner, _epoch) in before.items() if owner == replica]
    calls: list[asyncio.Future[Any]] = []
    frozen.freeze()
    try:
        await asyncio.sleep(0.3)  # its last appends, if any, land (or never do)
        store = EventStore(room.admin)
        stub = room.router.stubs[frozen.target]
        for table_id in mine:
            state = fold([event_from_envelope(e) for e in game_envelopes(
                s.envelope for s in await store.read(table_id))])
            seat = state.seat(1)
            if seat is None:
                continue
            command_id = new_id()
            method, request_type = ("SitIn", pb.SitInRequest) if seat.sitting_out else (
                "SitOut", pb.SitOutRequest)
            request = request_type(table_id=table_id, seat=1, command_id=command_id)
            report.in_flight[command_id] = table_id
            calls.append(asyncio.ensure_future(getattr(stub, method)(
                request, metadata=room.md(Principal(Role.PLAYER, seat.player_id)),
                timeout=60)))
        took = await room.wait_taken_over(before, replica)
        report.max_takeover_s = max(report.max_takeover_s, took)
        mark = frozen.log_size()
    finally:
        frozen.thaw()
    for call in calls:
        try:
            await asyncio.wait_for(call, 30)
            report.in_flight_replies.append("OK")
        except grpc.aio.AioRpcError as exc:
            report.in_flight_replies.append(f"{exc.code().name} {rpc_error_reason(exc)}")
        except TimeoutError:
            report.in_flight_replies.append("no reply within 30s")
    await asyncio.sleep(1.0)  # what it does next (its rounds find the leases lost) is logged
    return frozen.logs(mark).count(STALE_APPEND_LOG)


async def exercise_the_fence(room: CampaignRoom, table_ids: list[str], report: Report,
                             attempts: int, seconds_between: float) -> None:
    """Freeze an owner with commands in flight until its appends were refused at least once
    (whether a resumed replica handles an in-flight command before its own ownership round
    drops the table is a race), at most ``attempts`` times; the run fails if none was."""
    for attempt in range(1, attempts + 1):
        report.fence_attempts = attempt
        report.frozen_refused += await freeze_with_commands_in_flight(room, table_ids, report)
        if report.frozen_refused:
            return
        await asyncio.sleep(seconds_between)


async def check_tables(room: CampaignRoom, table_ids: list[str],
                       views: dict[str, pb.TableView], report: Report) -> None:
    """Count every command's events against its recorded outcome, and fold every stream."""
    store = EventStore(room.admin)
    for table_id in table_ids:
        stored = await store.read(table_id)
        stream = [(s.stream_id, s.envelope.command_id) for s in stored]
        recorded = await room.admin.hgetall(studkeys.table_commands(table_id))
        acked = report.tally.acknowledged.get(table_id, [])
        # A reply with no event shown (a room event only, e.g. a top-up queued mid-hand)
        # must still have its recorded outcome.
        keys_ = [_text(k) for k in recorded]
        for a in acked:
            if not a.sequences and not any(k.endswith(f":{a.command_id}") for k in keys_):
                report.lost_events += 1
                report.problems.append(f"{table_id}: acknowledged {a.command_id} has no "
                                       "recorded outcome")
        acknowledged = [a.sequences for a in acked if a.sequences]
        counted = count_commands(stream, recorded, acknowledged)
        report.lost_events += counted.lost
        report.duplicate_events += counted.duplicate
        report.problems.extend(f"{table_id}: {p}" for p in counted.problems[:10])
        gap = gapless([s.envelope.sequence for s in stored])
        if gap is not None:
            report.problems.append(f"{table_id}: {gap}")
        state = fold([event_from_envelope(e)
                      for e in game_envelopes(s.envelope for s in stored)])
        folded = {n: state.stack(n) for n in range(1, 9) if state.seat(n)}
        shown = {s.seat: s.stack for s in views[table_id].seats}
        if folded != shown:
            report.problems.append(f"{table_id}: the stream folds to stacks {folded}, the "
                                   f"table shows {shown}")
        for command_id, where in report.in_flight.items():
            if where == table_id and (changed := untouched(command_id, stream, recorded)):
                report.problems.append(f"{table_id}: the frozen replica changed something "
                                       f"after it went on: {changed}")


async def campaign(n_tables: int, seconds_between: float, seed: int, work: Path,
                   fence_attempts: int = 5) -> Report:
    report = Report(tables=n_tables)
    rng = random.Random(seed)
    async with campaign_room(work, replicas=3) as room:
        table_ids = [f"fo-{i}" for i in range(n_tables)]
        await room.open_tables(table_ids)
        stop = asyncio.Event()
        bots = [asyncio.create_task(b.run(stop))
                for b in room.bots(table_ids, report.tally, rng)]
        try:
            await asyncio.sleep(seconds_between)
            await kill_one(room, table_ids, report)
            await asyncio.sleep(seconds_between)
            await exercise_the_fence(room, table_ids, report, fence_attempts, seconds_between)
            for proc in room.tables:  # the rolling restart
                await asyncio.sleep(seconds_between)
                proc.terminate(timeout=15)
                proc.start()
                await proc.wait_serving()
            await asyncio.sleep(seconds_between)
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*bots), 60)
        views = await room.finish(table_ids, report.tally)
        await room.settled(table_ids)
        await check_tables(room, table_ids, views, report)
        report.hands = sum(v.hands_started for v in views.values())
        end = await room.owners(table_ids)
        report.takeovers = sum(epoch - 1 for _owner, epoch in end.values())
        report.chips_lost = await room.chips_lost(table_ids)
        report.stale_appends_refused = sum(p.logs().count(STALE_APPEND_LOG)
                                           for p in room.tables)
    report.judge()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make failover", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=6)
    parser.add_argument("--seconds-between", type=float, default=3.0,
                        help="play between the faults")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fence-attempts", type=int, default=5,
                        help="freezes with commands in flight, at most, until one is refused")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stud-failover-") as work:
        report = asyncio.run(campaign(args.tables, args.seconds_between, args.seed,
                                      Path(work), args.fence_attempts))
    for problem in report.problems:
        print(f"FAILED {problem}")
    print(f"actions={report.actions} hands={report.hands} moved_on={report.tally.moved_on} "
          f"bot_errors={len(report.tally.errors)} in_flight={len(report.in_flight)} "
          f"frozen_refused={report.frozen_refused} fence_attempts={report.fence_attempts} "
          f"seconds={time.monotonic() - started:.0f} "
          f"in_flight_replies={sorted(set(report.in_flight_replies))}")
    print(report.line())
    return 0 if not report.problems else 1


if __name__ == "__main__":
    sys.exit(main())
