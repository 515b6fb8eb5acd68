"""``make audit``: the secrecy campaign. Redis, the dealer, the wallet and the table as separate
processes; the bots play many hands at several tables while every player and an observer
watch each table (``WatchTable``), and the views of random players are sampled during play.
Then, hand by hand, the dealer's record (``GetAudit``, as an auditor) says which cards were
dealt face down to whom, and everything captured is searched:

- the table's stream (read as an auditor would) and every watch stream: no down card's value,
  no mucked hand for a viewer not dealt in, no folded hand ever;
- every sampled view: no other seat's down card before it was shown;
- hand histories fetched as an observer: no down card but those shown;
- every service's log output and ``/metrics``: no card at all (services never log a card).

Beside the cash tables, a sit & go of bots (``stud bots --tournament``, a tournament service
process) is railed by a player who holds no entry, through ``stud play --tournament``'s
rail (:mod:`studclient.tui.tourney`: the chip leader's table, a ``TableWatch`` without the
card stream: ``WatchTable`` and ``GetTable`` as the public sees them), and watched and viewed
as an observer too; every hand its table finished is searched as a cash table's: the rail's
events and views, the observer's watch and views, the hand histories, the openings.

A capture that fails is a failure, never a pass: a ``/metrics`` that does not answer (or
answers nothing), a service log that is missing or empty, a watch that captured nothing or
skipped a sequence, a sampled view refused, a hand that did not end, no down card left
secret to search for, no action, no hand.

A rail that captured nothing, or no tournament hand finished while railed, fails the run.
Last line: ``hands=… leaks=0`` (the cash tables' hands and the sit & go's); the exit status is
1 on a leak or a failed capture.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import redis.asyncio as aredis

import rules
from campaigns.bot import OPERATOR, Tally
from campaigns.checks import enough_play
from campaigns.room import CampaignRoom, campaign_room, retry_unavailable, wait_until
from campaigns.router import Router
from campaigns.tournament import tournament_process
from rules import TableConfig
from rules.events import DownCardDealt, HandExposed, HandMucked, HandShown, HandStarted
from stud.v1 import dealer_pb2 as dpb
from stud.v1 import table_pb2 as pb
from stud.v1 import tournament_pb2 as tpb
from stud.v1 import tournament_pb2_grpc as tpb_grpc
from stud.v1 import wallet_pb2 as wpb
from studclient.client import Client
from studclient.errors import StudError
from studclient.tui.tourney import entered, rail_table
from studclient.watch import TableWatch
from studkit.auth import Principal, Role
from studkit.commandwindow import new_id
from studkit.mapping import card_from_proto, event_from_envelope, game_envelopes
from studkit.store import EventStore
from studtest.processes import ServiceProcess, restartable_port
from studtest.table import fast_settings
from studtest.tournament_service import TournamentClient

AUDITOR = Principal(Role.AUDITOR, "audit")
OBSERVER = Principal(Role.PLAYER, "observer")
RAILER = Principal(Role.PLAYER, "railer")
"""A player with no entry who rails the sit & go (``stud play --tournament``'s rail)."""
SNG = "rail-sng"
SNG_PLAYERS = 4
SNG_LEVELS = tpb.TournamentStructure(starting_stack=2_000, levels=[
    tpb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=20),
    tpb.TournamentLevel(ante=25, bring_in=50, small_bet=100, big_bet=200, seconds=20),
    tpb.TournamentLevel(ante=50, bring_in=100, small_bet=200, big_bet=400, seconds=20),
    tpb.TournamentLevel(ante=100, bring_in=200, small_bet=500, big_bet=1000, seconds=600)])
"""A sit & go of a few minutes: enough hands at one table to rail."""
SNG_WAIT_S = 300.0
"""After the cash tables' hands, how long the sit & go may take to finish."""
CARD = re.compile(r"(?<![A-Za-z0-9])[2-9TJQKA][cdhs](?![A-Za-z0-9])")
"""A card as the rules write it ("Ah", "Td"): never in a log line or a metric."""
HANDS_S_EACH = 2.0
"""Longest wait per hand asked for (the play's deadline)."""


@dataclass(frozen=True)
class Scrape:
    """One ``/metrics`` scrape: its text, or why there is none."""

    name: str
    text: str | None
    error: str | None = None


def scrape_metrics(name: str, port: int, timeout: float = 5.0) -> Scrape:
    """``GET http://127.0.0.1:<port>/metrics``; never raises (a failure is in the result)."""
    if not port:
        return Scrape(name, None, "no metrics port")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                    timeout=timeout) as reply:
            return Scrape(name, reply.read().decode())
    except (OSError, ValueError) as exc:
        return Scrape(name, None, f"{type(exc).__name__}: {exc}")


@dataclass
class Capture:
    """Everything the campaign saw, the leaks found in it, and what could not be captured."""

    watch: dict[tuple[str, str], list[pb.TableEventRecord]] = field(
        default_factory=lambda: defaultdict(list))
    views: list[tuple[str, str, pb.TableView]] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Captures that failed: each fails the run."""
    secret_cards: int = 0
    """Down cards never shown, each searched for everywhere."""
    newcomers: int = 0
    """Players who sat in a seat just left, their views searched (issue 17 F4)."""
    cards: dict[tuple[str, str], list[dpb.MyCards]] = field(
        default_factory=lambda: defaultdict(list))
    """Every MyCards (with its openings) each player received, by (table, player)."""
    openings: int = 0
    """Openings searched (own and public; docs/fairness.md)."""
    own_openings: int = 0
    """Of which openings players received with their own down cards."""
    rail_events: int = 0
    rail_views: int = 0
    """What the rail (``stud play --tournament``'s, a non-entrant's) received."""
    railed: set[str] = field(default_factory=set)
    """The tournament tables the rail watched."""

    def leak(self, what: str) -> None:
        self.leaks.append(what)
        if len(self.leaks) <= 20:
            print("LEAK", what, flush=True)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        if len(self.failures) <= 20:
            print("CAPTURE FAILED", what, flush=True)

    def search_log(self, name: str, text: str) -> None:
        """A service's log: it must exist, and hold no card."""
        if not text.strip():
            self.fail(f"{name}: no log to search")
        for line in text.splitlines():
            if CARD.search(line):
                self.leak(f"{name} log: {line[:200]}")

    def search_metrics(self, scrape: Scrape) -> None:
        """A ``/metrics`` scrape: it must have answered with metrics, none naming a card."""
        if scrape.text is None:
            self.fail(f"{scrape.name} /metrics: {scrape.error}")
            return
        samples = [line for line in scrape.text.splitlines()
                   if line and not line.startswith("#")]
        if not samples:
            self.fail(f"{scrape.name} /metrics: answered with no metric")
        for line in samples:
            if CARD.search(line.split(" ")[0]):
                self.leak(f"{scrape.name} metric: {line[:200]}")

    def check_watches(self, expected: list[tuple[str, str]],
                      game: dict[str, list[int]]) -> None:
        """Every watch captured something, with no game event skipped or repeated:
        ``game`` is each table's sequences of the rules' events in its stream (the room's
        own events are never sent to watchers)."""
        for key in expected:
            records = self.watch.get(key, [])
            if not records:
                self.fail(f"watch of {key[1]} at {key[0]}: nothing captured")
                continue
            sequences = [r.sequence for r in records]
            due = [n for n in game.get(key[0], []) if sequences[0] <= n <= sequences[-1]]
            if sequences != due:
                missing = sorted(set(due) - set(sequences))[:5]
                self.fail(f"watch of {key[1]} at {key[0]}: {len(sequences)} events where "
                          f"{len(due)} were due (missing {missing})")

    @property
    def ok(self) -> bool:
        return not self.leaks and not self.failures


async def watch_cards(room: CampaignRoom, table_id: str, who: Principal, capture: Capture,
                      stop: asyncio.Event) -> None:
    """Keep ``who``'s WatchMyCards open on ``table_id``, capturing every message."""
    while not stop.is_set():
        call = room.dealer.WatchMyCards(dpb.WatchMyCardsRequest(table_id=table_id),
                                        metadata=room.md(who))
        try:
            async for cards in call:
                capture.cards[(table_id, who.subject)].append(cards)
                if stop.is_set():
                    break
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.1)
        finally:
            call.cancel()


@dataclass(frozen=True, slots=True)
class HandSecrets:
    """What of a per-card hand nobody but its holder (or nobody at all) may learn, from the
    auditor's ``GetAudit``: each seat's hidden down cards (seats not shown), the burned
    cards, and every card's salt."""

    hidden: dict[int, set[int]]
    burned: set[int]
    salt_of: dict[int, bytes]

    @classmethod
    def of(cls, audit: Any, shown: set[int]) -> HandSecrets:
        base = [card_from_proto(c).index for c in audit.deck]
        down: dict[int, set[int]] = defaultdict(set)
        for street in audit.streets:
            for draw in street.cards:
                if not draw.up and draw.seat:
                    down[draw.seat].add(card_from_proto(draw.card).index)
        return cls(hidden={seat: cards for seat, cards in down.items() if seat not in shown},
                   burned={card_from_proto(s.burn.card).index for s in audit.streets
                           if s.HasField("burn")},
                   salt_of={base[i]: bytes(s) for i, s in enumerate(audit.card_salts)})

    def leaks_in(self, blob: bytes, cards: set[int], others: set[int]) -> bool:
        """Whether a message (``blob``, opening ``cards``) carries one of ``others`` or its
        salt."""
        return bool(cards & others) or any(self.salt_of[c] in blob for c in others)


def search_own_openings(table_id: str, number: int, secrets: HandSecrets,
                        capture: Capture) -> None:
    """Every opening a player received for hand ``number`` (``capture.cards``): none may
    carry another seat's hidden down card, a burned card, or the salt of either."""
    for (t, name), messages in capture.cards.items():
        if t != table_id:
            continue
        for cards in messages:
            if cards.hand_number != number:
                continue
            others = {c for seat, cs in secrets.hidden.items() if seat != cards.seat
                      for c in cs} | secrets.burned
            for opening in cards.down_openings:
                capture.openings += 1
                capture.own_openings += 1
                if secrets.leaks_in(opening.SerializeToString(),
                                    {card_from_proto(opening.card).index}, others):
                    capture.leak(f"{table_id} #{number} {name}'s opening: another card")


def search_public_proof(table_id: str, number: int, secrets: HandSecrets, proof: Any,
                        capture: Capture) -> None:
    """The dealer's public proof of hand ``number``: no hidden or burned card's opening, no
    such card's salt."""
    secret = {c for cs in secrets.hidden.values() for c in cs} | secrets.burned
    capture.openings += len(proof.openings)
    if secrets.leaks_in(proof.SerializeToString(),
                        {card_from_proto(o.card).index for o in proof.openings}, secret):
        capture.leak(f"{table_id} #{number} public proof: a hidden card's opening")


async def check_openings(table_id: str, number: int, audit: Any, shown: set[int],
                         room: CampaignRoom, capture: Capture) -> None:
    """Search every opening of hand ``number`` for cards and salts their holder may not
    have: another seat's hidden down card (folded, mucked or never shown) or a burned card."""
    if not audit.card_commitment:
        return
    secrets = HandSecrets.of(audit, shown)
    search_own_openings(table_id, number, secrets, capture)
    proof = await room.dealer.GetHandProof(
        dpb.GetHandProofRequest(table_id=table_id, hand_number=number),
        metadata=room.md(OBSERVER), timeout=10)
    search_public_proof(table_id, number, secrets, proof, capture)


async def capture_watch(router: Router, table_id: str, who: Principal, capture: Capture,
                        stop: asyncio.Event) -> None:
    """Keep a watch on ``table_id`` as ``who`` (the router resumes it after any cut)."""
    watch = router.watch(table_id, who, idle_s=1.0)
    try:
        async for record in watch:
            if stop.is_set():
                return
            if record is not None:
                capture.watch[(table_id, who.subject)].append(record)
    except grpc.aio.AioRpcError as exc:
        capture.fail(f"watch of {who.subject} at {table_id}: {exc.code().name} "
                     f"{exc.details()}")
    finally:
        await watch.aclose()


async def sample_views(room: CampaignRoom, table_id: str, capture: Capture,
                       stop: asyncio.Event, rng: random.Random) -> None:
    """Now and then, a random seated player's own view, kept for the search."""
    while not stop.is_set():
        try:
            view = await room.router.view(table_id, OPERATOR)
            if view.seats:
                seat = rng.choice(list(view.seats))
                mine = await room.router.view(table_id, Principal(Role.PLAYER, seat.player_id))
                capture.views.append((table_id, seat.player_id, mine))
        except grpc.aio.AioRpcError as exc:
            capture.fail(f"a view of {table_id}: {exc.code().name} {exc.details()}")
        await asyncio.sleep(0.05)


async def newcomer_views(room: CampaignRoom, table_id: str, capture: Capture,
                         stop: asyncio.Event, rng: random.Random) -> None:
    """Issue 17 F4: a seat's player leaves and a newcomer, not dealt into the hand that seat
    played, sits there; the newcomer's views are kept for the search (the hand's down cards
    of that seat are not theirs to see)."""
    await asyncio.sleep(rng.uniform(0.5, 2.0))
    view = await room.router.view(table_id, OPERATOR)
    if len(view.seats) < 3 or stop.is_set():
        return
    gone = rng.choice(list(view.seats))
    newcomer = f"{table_id}-new"
    await retry_unavailable(functools.partial(
        room.wallet.CreateAccount, wpb.CreateAccountRequest(player_id=newcomer),
        metadata=room.md(), timeout=10))
    await retry_unavailable(functools.partial(
        room.wallet.Deposit, wpb.DepositRequest(player_id=newcomer, amount=10**9,
                                                command_id=f"dep-{newcomer}"),
        metadata=room.md(), timeout=10))
    room.players.append(newcomer)
    room.deposits += 10**9
    await room.router.call(table_id, "LeaveSeat", pb.LeaveSeatRequest(
        table_id=table_id, seat=gone.seat, command_id=new_id(f"leave-{newcomer}")),
        Principal(Role.PLAYER, gone.player_id))
    deadline = time.monotonic() + 30
    while True:
        if stop.is_set():
            return  # the run is over (its hands played): not a seat that stayed
        view = await room.router.view(table_id, OPERATOR)
        if all(s.seat != gone.seat for s in view.seats):
            break
        if time.monotonic() >= deadline:
            capture.fail(f"{table_id}: seat {gone.seat} was not left within 30 s")
            return
        await asyncio.sleep(0.02)
    sit = pb.SitDownRequest(table_id=table_id, seat=gone.seat, buy_in=1_000_000)
    for attempt in range(200):  # the seat is free once its cash-out is paid
        sit.command_id = new_id(f"sit-{newcomer}-{attempt}")
        try:
            await room.router.call(table_id, "SitDown", sit, Principal(Role.PLAYER, newcomer),
                                   limit_s=5)
            break
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.FAILED_PRECONDITION or attempt == 199:
                capture.fail(f"{table_id}: the newcomer could not sit in seat {gone.seat}: "
                             f"{exc.code().name} {exc.details()}")
                return
            await asyncio.sleep(0.05)
    capture.newcomers += 1
    while not stop.is_set():
        capture.views.append((table_id, newcomer, await room.router.view(
            table_id, Principal(Role.PLAYER, newcomer))))
        await asyncio.sleep(0.05)


async def rail(client: Client, tournament_id: str, capture: Capture,
               stop: asyncio.Event) -> None:
    """``stud play --tournament``'s rail, as :class:`studclient.tui.tourney.TournamentPlayApp`
    runs it for a player with no entry: the table :func:`rail_table` picks (the chip
    leader's), followed by a :class:`TableWatch` without the card stream, switched when the
    lead moves; every event record and every view it gets kept for the search."""
    view = await client.tournaments.get(tournament_id)
    if entered(view, RAILER.subject):
        capture.fail(f"{RAILER.subject} is entered in {tournament_id}: not a rail")
        return
    watch: TableWatch | None = None
    current = ""

    def record(table_id: str) -> Any:
        def on_event(event: pb.TableEventRecord) -> None:
            capture.rail_events += 1
            capture.watch[(table_id, RAILER.subject)].append(event)
        return on_event

    async def keep_views(w: TableWatch, table_id: str) -> None:
        async for seen in w.views():
            capture.rail_views += 1
            capture.views.append((table_id, RAILER.subject, seen))
    viewing: asyncio.Task[None] | None = None
    try:
        while not stop.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError, Exception):
                view = await client.tournaments.get(tournament_id)
            table_id = rail_table(view)
            if table_id and table_id != current:
                if watch is not None:
                    await watch.close()
                if viewing is not None:
                    viewing.cancel()
                current = table_id
                capture.railed.add(table_id)
                watch = TableWatch(client, table_id, cards=False, on_event=record(table_id))
                try:
                    await watch.start()
                except (grpc.aio.AioRpcError, StudError):  # not open yet: the next round
                    await watch.close()
                    current, watch = "", None
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 0.2)
                    continue
                viewing = asyncio.create_task(keep_views(watch, table_id))
            if view.phase in (tpb.TOURNAMENT_PHASE_FINISHED, tpb.TOURNAMENT_PHASE_CANCELLED):
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    finally:
        if viewing is not None:
            viewing.cancel()
            await asyncio.gather(viewing, return_exceptions=True)
        if watch is not None:
            await watch.close()


def tournament_bots(room: CampaignRoom, service: ServiceProcess, work: Path,
                    seed: int) -> subprocess.Popen[str]:
    """``stud bots --tournament`` fielding the sit & go's players."""
    room.keys.write(work / "keys")
    env = {**os.environ, "STUD_TABLE_TARGET": room.tables[0].target,
           "STUD_DEALER_TARGET": room.procs.dealer.target,
           "STUD_WALLET_TARGET": room.procs.wallet.target,
           "STUD_TOURNAMENT_TARGET": service.target,
           "STUD_ISSUER_KEY": str(work / "keys" / "issuer.pem")}
    with (work / "logs" / "tournament-bots.log").open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "studtools.cli", "bots", "--tournament", SNG,
             "--players", str(SNG_PLAYERS), "--prefix", "tb", "--strategy", "random",
             "--seed", str(seed), "--timeout", "3600"],
            env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


async def observe_tournament_tables(room: CampaignRoom, client: Client, capture: Capture,
                                    stop: asyncio.Event) -> None:
    """A plain observer (no entry) on every table the sit & go opens: its watch (the
    router's) and its views (``GetTable``), kept for the search beside the rail's."""
    tasks: dict[str, asyncio.Task[None]] = {}
    try:
        while not stop.is_set():
            with contextlib.suppress(grpc.aio.AioRpcError, Exception):
                view = await client.tournaments.get(SNG)
                for table_id in {*tasks, *(table.table_id for table in view.tables)}:
                    with contextlib.suppress(grpc.aio.AioRpcError):  # not open yet
                        capture.views.append((table_id, OBSERVER.subject,
                                              await room.router.view(table_id, OBSERVER)))
                        if table_id not in tasks:  # the table is there: watched from now
                            tasks[table_id] = asyncio.create_task(capture_watch(
                                room.router, table_id, OBSERVER, capture, stop))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)
    finally:
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


async def finished_hands(store: EventStore, table_id: str) -> int:
    """How many hands ``table_id``'s stream has ended (hands 1..n, in order)."""
    return sum(1 for s in game_envelopes(e.envelope for e in await store.read(table_id))
               if type(event_from_envelope(s)).__name__ == "HandEnded")


async def campaign(hands: int, n_tables: int, seed: int, work: Path,
                   sng_wait_s: float = 0.0) -> tuple[int, int, Capture, Tally]:
    """The cash tables' hands checked, the sit & go's, what was captured, the bots' tally.
    ``sng_wait_s``: how long the sit & go may take to finish after the cash tables' hands
    (0: :data:`SNG_WAIT_S`)."""
    rng = random.Random(seed)
    capture = Capture()
    tally = Tally()
    played = railed_hands = 0
    # every viewer's watch goes over the router's one connection (up to 6 a table): more
    # than the table's default 16 a connection, which refused the rest, retried for ever,
    # and their capture stayed empty ("nothing captured")
    async with campaign_room(work, replicas=1, lease_ms=None, metrics=True,
                             watches_per_connection=64) as room:
        table_ids = [f"sec-{i}" for i in range(n_tables)]
        seats: dict[str, int] = {t: 1 + rng.randint(2, 4) for t in table_ids}
        for i, table_id in enumerate(table_ids):
            await room.open_tables(
                [table_id], players=seats[table_id], buy_in=1_000_000, deposit=10**9,
                config=functools.partial(_config, reveals=bool(i % 2)),
                settings=fast_settings())
        viewers = {t: [OBSERVER, *(Principal(Role.PLAYER, f"{t}-p{s}")
                                   for s in range(1, seats[t] + 1))] for t in table_ids}
        # the sit & go to rail: its service, its bots, the rail's client
        service = tournament_process(room, work, tick_s=0.2)
        service.env["METRICS_PORT"] = str(restartable_port())
        service.start()
        bots: subprocess.Popen[str] | None = None
        railer = Client.connect(room.tables[0].target, room.procs.dealer.target,
                                room.procs.wallet.target, room.tokens.token(RAILER),
                                tournament_addr=service.target)
        try:
            await service.wait_serving()
            async with grpc.aio.insecure_channel(service.target) as channel:
                await TournamentClient(tpb_grpc.TournamentServiceStub(  # type: ignore[no-untyped-call]
                    channel), room.keys).create(SNG, tpb.TournamentConfig(
                        name="Rail", format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100,
                        fee=10, seats=SNG_PLAYERS, structure=SNG_LEVELS))
            bots = tournament_bots(room, service, work, seed)
            stop = asyncio.Event()
            tasks = [asyncio.create_task(capture_watch(room.router, t, who, capture, stop))
                     for t in table_ids for who in viewers[t]]
            tasks += [asyncio.create_task(watch_cards(room, t, who, capture, stop))
                      for t in table_ids for who in viewers[t] if who.role is Role.PLAYER]
            tasks += [asyncio.create_task(sample_views(room, t, capture, stop,
                                                       random.Random(rng.random())))
                      for t in table_ids]
            tasks += [asyncio.create_task(b.run(stop))
                      for b in room.bots(table_ids, tally, rng)]
            tasks += [asyncio.create_task(newcomer_views(room, t, capture, stop,
                                                         random.Random(rng.random())))
                      for t in table_ids]
            railing = asyncio.create_task(rail(railer, SNG, capture, stop))
            tasks += [railing, asyncio.create_task(
                observe_tournament_tables(room, railer, capture, stop))]
            per_table = -(-hands // n_tables)
            try:
                async def hands_now() -> dict[str, tuple[int, list[str]]]:
                    """Each table's hands started and who sits there (what a wait
                    reports)."""
                    return {t: (v.hands_started, [s.player_id for s in v.seats])
                            for t, v in (await room.views(table_ids)).items()}

                await wait_until(hands_now,
                                 lambda hs: all(n > per_table for n, _ in hs.values()),
                                 max(60.0, hands * HANDS_S_EACH), f"fewer than {per_table} "
                                 "hands at a table")
                # the sit & go's end (the rail stops there), or as far as it got
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(railing),
                                           sng_wait_s or SNG_WAIT_S)
            finally:
                stop.set()
                await asyncio.sleep(0.5)  # the watches take in what is on its way
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            store = EventStore(aredis.Redis.from_url(room.redis.url))
            try:
                railed = sorted(({t for t, _ in capture.watch} | capture.railed)
                                - set(table_ids))
                game = {t: [e.sequence for e in game_envelopes(s.envelope
                                                               for s in await store.read(t))]
                        for t in [*table_ids, *railed]}
                capture.check_watches(
                    [(t, who.subject) for t in table_ids for who in viewers[t]]
                    + [(t, OBSERVER.subject) for t in railed]
                    + [(t, RAILER.subject) for t in sorted(capture.railed)], game)
                for table_id in table_ids:
                    played += await check_table(table_id, store, room, capture, per_table)
                for table_id in railed:
                    railed_hands += await check_table(table_id, store, room, capture,
                                                      await finished_hands(store, table_id))
            finally:
                await store.client.aclose()
            for proc in [*room.procs.all, service]:
                capture.search_log(proc.name, proc.logs())
                capture.search_metrics(await asyncio.to_thread(scrape_metrics, _label(proc),
                                                               proc.metrics_port))
        finally:
            await railer.close()
            if bots is not None and bots.poll() is None:
                bots.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    bots.wait(10)
            service.terminate()
    if not capture.railed or capture.rail_events < 1 or capture.rail_views < 1:
        capture.fail(f"the rail captured nothing (tables {sorted(capture.railed)}, "
                     f"{capture.rail_events} events, {capture.rail_views} views)")
    if railed_hands < 1:
        capture.fail("no hand of the sit & go finished while it was railed")
    if played < hands:
        capture.fail(f"{played} hands checked of the {hands} asked for")
    if capture.secret_cards < 1:
        capture.fail("no down card stayed secret: nothing was searched for")
    if capture.own_openings < 1:
        capture.fail("no player's card opening was captured: nothing was searched for")
    if capture.newcomers < 1:
        capture.fail("no newcomer sat in a seat just left: the F4 case did not happen")
    for problem in enough_play(tally.actions, played):
        capture.fail(problem)
    for error in tally.errors:
        capture.fail(f"bot: {error}")
    return played, railed_hands, capture, tally


def _config(_index: int, reveals: bool) -> TableConfig:
    return TableConfig(history_reveals_mucked=reveals)


def _label(proc: ServiceProcess) -> str:
    return proc.env.get("TABLE_REPLICA_ID") or proc.name


async def check_table(table_id: str, store: EventStore, room: CampaignRoom, capture: Capture,
                      hands: int) -> int:
    """Search everything captured at ``table_id`` against the dealer's record; the number of
    complete hands checked (each of hands 1..``hands`` must be complete)."""
    stored = await store.read(table_id)
    events = [(e.hand_number, event_from_envelope(e))
              for e in game_envelopes(s.envelope for s in stored)]
    checked = 0
    for number in range(1, hands + 1):
        hand_events = [e for n, e in events if n == number]
        if not any(type(e).__name__ == "HandEnded" for e in hand_events):
            capture.fail(f"{table_id} #{number}: the hand did not end")
            continue
        audit = await room.dealer.GetAudit(
            dpb.GetAuditRequest(table_id=table_id, hand_number=number),
            metadata=room.md(AUDITOR), timeout=10)
        down: dict[int, set[str]] = defaultdict(set)
        for street in audit.streets:
            for draw in street.cards:
                if not draw.up and draw.seat:
                    down[draw.seat].add(str(card_from_proto(draw.card)))
        shown = {e.seat for e in hand_events if isinstance(e, HandShown | HandExposed)}
        # Openings (docs/fairness.md): a player's own carry only their own cards; the public
        # proof only the cards the record shows; no hidden card's salt reaches anyone else.
        await check_openings(table_id, number, audit, shown, room, capture)
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
        history = await room.router.call(
            table_id, "GetHandHistory",
            pb.GetHandHistoryRequest(table_id=table_id, hand_number=number), OBSERVER)
        for record in history.events:
            kind = record.event.WhichOneof("event")
            seen = {str(card_from_proto(c)) for c in _cards_of(getattr(record.event, kind))}
            if kind not in ("hand_shown", "hand_exposed") and seen & secret:
                capture.leak(f"{table_id} #{number} observer history: {kind}")
    # Sampled views: a down card is visible only to the player dealt in at that seat in
    # that hand (never to whoever holds the seat now: F4), or once it is shown.
    dealt = _dealt_in([e for _n, e in events])
    for t, viewer, view in capture.views:
        if t != table_id:
            continue
        for player in view.hand.players:
            holder = dealt.get(view.hand.hand_number, {}).get(player.seat, "")
            if holder == viewer or player.shown or player.exposed:
                continue
            if any(d.HasField("card") for d in player.down):
                capture.leak(f"{table_id} #{view.hand.hand_number} view of {viewer}: "
                             f"seat {player.seat}'s down card")
    return checked


def _dealt_in(events: list[Any]) -> dict[int, dict[int, str]]:
    """Hand number -> {seat: player} of the players dealt into it, from the game's events."""
    state = rules.initial_state()
    out: dict[int, dict[int, str]] = {}
    for event in events:
        if isinstance(event, HandStarted):
            out[event.hand_number] = {n: seat.player_id for n in event.seats
                                      if (seat := state.seat(n)) is not None}
        state = rules.evolve(state, event)
    return out


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
    parser = argparse.ArgumentParser(prog="make audit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hands", type=int, default=1000)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stud-audit-") as work:
        played, railed, capture, tally = asyncio.run(campaign(args.hands, args.tables,
                                                              args.seed, Path(work)))
    print(f"watched_events={sum(len(r) for r in capture.watch.values())} "
          f"views={len(capture.views)} secret_cards={capture.secret_cards} "
          f"openings={capture.openings} own_openings={capture.own_openings} "
          f"actions={tally.actions} rail_hands={railed} rail_events={capture.rail_events} "
          f"rail_views={capture.rail_views} "
          f"capture_failures={len(capture.failures)} "
          f"seconds={time.monotonic() - started:.0f}")
    print(f"hands={played + railed} leaks={len(capture.leaks)}")
    return 0 if capture.ok else 1


if __name__ == "__main__":
    sys.exit(main())
