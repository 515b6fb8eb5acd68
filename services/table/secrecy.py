"""``make audit``: the secrecy campaign. Redis, the dealer, the wallet and the table as separate
processes; bots play many hands at several tables while every player and an observer watch
each table (``WatchTable``), and the views of random players are sampled during play. Then,
hand by hand, the dealer's record (``GetAudit``, as an auditor) says which cards were dealt
face down to whom, and everything captured is searched:

- the table's stream (read as an auditor would) and every watch stream: no down card's value,
  no mucked hand for a viewer not dealt in, no folded hand ever;
- every sampled view: no other seat's down card before it was shown;
- hand histories fetched as an observer: no down card but those shown;
- every service's log output and ``/metrics``: no card at all (services never log a card).

Last line: ``hands=… leaks=0``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import re
import sys
import tempfile
import urllib.request
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import grpc
import redis.asyncio as aredis

from rules import TableConfig
from rules.events import DownCardDealt, HandExposed, HandMucked, HandShown
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import dealer_pb2_grpc as dpb_grpc
from stud.v1 import table_pb2 as pb
from stud.v1 import wallet_pb2 as wpb
from studkit.auth import DevKeys, Principal, Role, TokenBook
from studkit.mapping import card_from_proto, config_to_proto, event_from_envelope
from studkit.redis_server import RedisServer, free_port
from studkit.store import EventStore
from table.processes import CHANNEL_OPTIONS, RoomProcesses
from table.testing import _RPC, fast_settings

OPERATOR = Principal(Role.OPERATOR, "ops")
AUDITOR = Principal(Role.AUDITOR, "audit")
CARD = re.compile(r"(?<![A-Za-z0-9])[2-9TJQKA][cdhs](?![A-Za-z0-9])")
"""A card as the rules write it ("Ah", "Td"): never in a log line or a metric."""


class Capture:
    """Everything the campaign saw, and the leaks found in it."""

    def __init__(self) -> None:
        self.watch: dict[tuple[str, str], list[pb.TableEventRecord]] = defaultdict(list)
        self.views: list[tuple[str, str, pb.TableView]] = []
        self.leaks: list[str] = []
        self.secret_cards = 0
        """Down cards never shown, each searched for everywhere."""

    def leak(self, what: str) -> None:
        self.leaks.append(what)
        if len(self.leaks) <= 20:
            print("LEAK", what, flush=True)


async def watch(stub: Any, table_id: str, who: Principal, tokens: TokenBook,
                capture: Capture, stop: asyncio.Event) -> None:
    """Keep a watch on ``table_id`` as ``who``, resuming after any cut."""
    after = 0
    while not stop.is_set():
        call = stub.WatchTable(
            pb.WatchTableRequest(table_id=table_id, after_sequence=after),
            metadata=tokens.metadata(who))
        try:
            async for record in call:
                capture.watch[(table_id, who.subject)].append(record)
                after = record.sequence
                if stop.is_set():
                    break
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.1)
        finally:
            call.cancel()


async def bot(stub: Any, table_id: str, tokens: TokenBook, capture: Capture,
              stop: asyncio.Event, rng: random.Random) -> None:
    while not stop.is_set():
        view = await stub.GetTable(pb.GetTableRequest(table_id=table_id),
                                   metadata=tokens.metadata(OPERATOR), timeout=10)
        if view.seats and rng.random() < 0.2:  # a player's own view, kept for the search
            seat = rng.choice(list(view.seats))
            mine = await stub.GetTable(pb.GetTableRequest(table_id=table_id),
                                       metadata=tokens.metadata(
                                           Principal(Role.PLAYER, seat.player_id)), timeout=10)
            capture.views.append((table_id, seat.player_id, mine))
        hand = view.hand
        if hand.phase != pb.HAND_PHASE_BETTING or not hand.to_act \
                or not hand.legal_actions.actions:
            await asyncio.sleep(0.01)
            continue
        holder = next(s.player_id for s in view.seats if s.seat == hand.to_act)
        action = rng.choice(list(hand.legal_actions.actions))
        method, request_type = _RPC[action.kind]
        request = request_type(table_id=table_id, seat=hand.to_act,
                               command_id=uuid.uuid4().hex, expected_sequence=view.version)
        if method in ("Complete", "Bet", "Raise"):
            request.to = action.to
        with contextlib.suppress(grpc.aio.AioRpcError):
            await getattr(stub, method)(request, metadata=tokens.metadata(
                Principal(Role.PLAYER, holder)), timeout=10)


async def campaign(hands: int, n_tables: int, seed: int, work: Path) -> tuple[int, Capture]:
    rng = random.Random(seed)
    capture = Capture()
    keys = DevKeys.generate()
    tokens = TokenBook(keys)
    passwords = {n: uuid.uuid4().hex for n in ("table", "dealer", "wallet", "auditor")}
    redis = RedisServer(data_dir=work / "redis", passwords=passwords)
    redis.start()
    procs = RoomProcesses(redis.url_for, keys, work / "logs")
    metrics = {}
    for proc in procs.all:
        metrics[proc.name] = free_port()
        proc.env["METRICS_PORT"] = str(metrics[proc.name])
        proc.env["METRICS_ADDR"] = "127.0.0.1"
    played = 0
    try:
        await procs.start()
        async with grpc.aio.insecure_channel(procs.table.target, options=CHANNEL_OPTIONS) as tc, \
                grpc.aio.insecure_channel(procs.wallet.target) as wc, \
                grpc.aio.insecure_channel(procs.dealer.target) as dc:
            from stud.v1 import table_pb2_grpc, wallet_pb2_grpc
            table = table_pb2_grpc.TableServiceStub(tc)  # type: ignore[no-untyped-call]
            wallet = wallet_pb2_grpc.WalletServiceStub(wc)  # type: ignore[no-untyped-call]
            dealer = dpb_grpc.DealerServiceStub(dc)  # type: ignore[no-untyped-call]
            table_ids = [f"sec-{i}" for i in range(n_tables)]
            seats: dict[str, list[str]] = {}
            for i, table_id in enumerate(table_ids):
                config = TableConfig(history_reveals_mucked=bool(i % 2))
                await table.OpenTable(pb.OpenTableRequest(
                    table_id=table_id, command_id=f"open-{table_id}",
                    config=config_to_proto(config), settings=fast_settings()),
                    metadata=tokens.metadata(OPERATOR), timeout=10)
                seats[table_id] = []
                for seat in range(1, 2 + rng.randint(2, 4)):
                    name = f"{table_id}-p{seat}"
                    seats[table_id].append(name)
                    md = tokens.metadata(OPERATOR)
                    await wallet.CreateAccount(wpb.CreateAccountRequest(player_id=name),
                                               metadata=md, timeout=10)
                    await wallet.Deposit(wpb.DepositRequest(
                        player_id=name, amount=10**9, command_id=f"d-{name}"), metadata=md,
                        timeout=10)
                    await table.SitDown(pb.SitDownRequest(
                        table_id=table_id, seat=seat, buy_in=1_000_000,
                        command_id=f"s-{name}"),
                        metadata=tokens.metadata(Principal(Role.PLAYER, name)), timeout=10)
            stop = asyncio.Event()
            tasks = []
            for table_id in table_ids:
                for who in [Principal(Role.PLAYER, "observer"),
                            *(Principal(Role.PLAYER, n) for n in seats[table_id])]:
                    tasks.append(asyncio.create_task(
                        watch(table, table_id, who, tokens, capture, stop)))
                tasks.append(asyncio.create_task(
                    bot(table, table_id, tokens, capture, stop, random.Random(rng.random()))))
            per_table = -(-hands // n_tables)
            while True:
                views = [await table.GetTable(pb.GetTableRequest(table_id=t),
                                              metadata=tokens.metadata(OPERATOR), timeout=10)
                         for t in table_ids]
                if all(v.hands_started > per_table for v in views):
                    break
                await asyncio.sleep(0.2)
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

            admin = aredis.Redis.from_url(redis.url)
            store = EventStore(admin)
            for table_id in table_ids:
                played += await check_table(table_id, store, table, dealer, tokens, capture,
                                            per_table)
            await admin.aclose()
        for proc in procs.all:
            for line in proc.logs().splitlines():
                if CARD.search(line):
                    capture.leak(f"{proc.name} log: {line[:200]}")
        for name, port in metrics.items():
            with contextlib.suppress(OSError):
                text = urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                for line in text.splitlines():
                    if not line.startswith("#") and CARD.search(line.split(" ")[0]):
                        capture.leak(f"{name} metric: {line[:200]}")
    finally:
        procs.stop()
        redis.stop()
    return played, capture


async def check_table(table_id: str, store: EventStore, table: Any, dealer: Any,
                      tokens: TokenBook, capture: Capture, hands: int) -> int:
    """Search everything captured at ``table_id`` against the dealer's record; the number of
    complete hands checked."""
    stored = await store.read(table_id)
    events = [(s.envelope.hand_number, event_from_envelope(s.envelope)) for s in stored]
    checked = 0
    for number in range(1, hands + 1):
        hand_events = [e for n, e in events if n == number]
        if not any(type(e).__name__ == "HandEnded" for e in hand_events):
            continue
        audit = await dealer.GetAudit(
            dpb.GetAuditRequest(table_id=table_id, hand_number=number),
            metadata=tokens.metadata(AUDITOR), timeout=10)
        down: dict[int, set[str]] = defaultdict(set)
        for street in audit.streets:
            for draw in street.cards:
                if not draw.up and draw.seat:
                    down[draw.seat].add(str(card_from_proto(draw.card)))
        shown = {e.seat for e in hand_events if isinstance(e, HandShown | HandExposed)}
        mucked = {e.seat for e in hand_events if isinstance(e, HandMucked)}
        secret = {card for seat, cards in down.items() if seat not in shown for card in cards}
        folded_secret = {card for seat, cards in down.items()
                         if seat not in shown and seat not in mucked for card in cards}
        checked += 1
        capture.secret_cards += len(secret)
        # The public stream: no down card's value, no folded hand.
        for event in hand_events:
            text = repr(event)
            if isinstance(event, DownCardDealt) and event.card is not None:
                capture.leak(f"{table_id} #{number} stream: {text}")
            kind = type(event).__name__
            if kind not in ("HandMucked", "HandShown", "HandExposed") and any(
                    f"Card('{c}')" in text for c in folded_secret):
                capture.leak(f"{table_id} #{number} stream: folded card in {text}")
        # Every watch stream: as its viewer may see it.
        for (t, viewer), records in capture.watch.items():
            if t != table_id:
                continue
            for record in records:
                if record.hand_number != number:
                    continue
                kind = record.event.WhichOneof("event")
                body = getattr(record.event, kind)
                cards = [str(card_from_proto(c)) for c in _cards_of(body)]
                if kind == "down_card_dealt" and body.HasField("card"):
                    capture.leak(f"{table_id} #{number} {viewer} watch: a down card's value")
                if kind not in ("hand_shown", "hand_exposed") and secret & set(cards):
                    mucked_seen = kind == "hand_mucked" and viewer.endswith(
                        tuple(f"-p{s}" for s in down))
                    if not mucked_seen:
                        capture.leak(f"{table_id} #{number} {viewer} watch: {kind} {cards}")
        # Hand history as an observer.
        history = await table.GetHandHistory(
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=number),
            metadata=tokens.metadata(Principal(Role.PLAYER, "observer")), timeout=10)
        for record in history.events:
            kind = record.event.WhichOneof("event")
            seen = {str(card_from_proto(c)) for c in _cards_of(getattr(record.event, kind))}
            if kind not in ("hand_shown", "hand_exposed") and seen & secret:
                capture.leak(f"{table_id} #{number} observer history: {kind}")
    # Sampled views: another seat's down card is never visible before it is shown.
    for t, viewer, view in capture.views:
        if t != table_id:
            continue
        for player in view.hand.players:
            seat_holder = next((s.player_id for s in view.seats if s.seat == player.seat), "")
            if seat_holder == viewer or player.shown or player.exposed:
                continue
            if any(d.HasField("card") for d in player.down):
                capture.leak(f"{table_id} #{view.hand.hand_number} view of {viewer}: "
                             f"seat {player.seat}'s down card")
    return checked


def _cards_of(message: Any) -> list[Any]:
    out = []
    for name in ("card", "down", "cards"):
        value = getattr(message, name, None)
        if value is None:
            continue
        if hasattr(value, "rank"):
            if message.HasField(name):
                out.append(value)
        else:
            out.extend(value)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make audit", description=__doc__)
    parser.add_argument("--hands", type=int, default=1000)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stud-audit-") as work:
        played, capture = asyncio.run(campaign(args.hands, args.tables, args.seed, Path(work)))
    print(f"watched_events={sum(len(r) for r in capture.watch.values())} "
          f"views={len(capture.views)} secret_cards={capture.secret_cards}")
    print(f"hands={played} leaks={len(capture.leaks)}")
    return 0 if not capture.leaks else 1


if __name__ == "__main__":
    sys.exit(main())
