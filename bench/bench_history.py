"""``make bench-history``: what the archive does to Redis, and what PostgreSQL gives back.
Prints figures; asserts nothing (docs/history.md, docs/scaling.md). Everything is real: a
local redis-server, a local PostgreSQL (``studtools.pg_server``), the in-process room
(``studtest.table.running_room``) and the archiver's own step.

1. **Redis bytes per table against hands dealt**: one table, ``--players`` random-legal bots,
   ``--hands`` hands, the archiver's step after every hand with ``STUD_HOT_HANDS`` =
   ``--hot-hands`` (its dealer's records copied and released, as the service does) and its
   step for the wallet's ledger with ``WALLET_HOT_TRANSACTIONS`` = ``--wallet-hot``; every
   ``--every`` hands, ``MEMORY USAGE`` of the table's keys, the
   dealer's keys of the table, and the wallet's keys. ``redis_flat=yes`` when the second half
   of the run grew the total by under 5%.
2. **Tables per Redis master**, as docs/scaling.md derives them (8 GiB, 1 core, 50%, 0.5
   actions a second per table): memory-bound from the bytes a table keeps (the flat part,
   plus 7 days of what still grows per hand), CPU-bound from Redis's CPU per action measured
   in phase 1 and the idle cost of an open table (``--idle-tables`` tables open and waiting).
3. **Archive throughput and lag**: a backlog of ``--backlog`` settled hands copied in one step
   (hands a second); then ``--pace-tables`` tables of bots at about 0.5 actions a second for
   ``--pace-seconds`` with the archiver's loop running, each copied hand's lag from its end to
   its copy being durable (p50, p99).
4. **Look-ups over ``--rows`` archived hands**: hand rows made from hands played by the real
   rules (``bench_rules.record_hand``: each row's players, pot, rake and nets are a real
   hand's, its table, time and player names drawn), COPY'd into ``history.hands`` and
   ``history.hand_players``, beside phase 1's archived table; then ``stud replay list
   --player``'s query and ``show`` of an archived hand (its segment read and folded), p50/p99.

Last line: ``redis_flat=... mem_tables=... cpu_tables=... mem_cpu_ratio=... archive_hands_s=...
lag_p99_ms=... query_p99_ms=...`` (query: the worse of the two look-ups).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import psycopg
import structlog
from psycopg.types.json import Jsonb

from bench.bench_rules import record_hand
from bench.bench_scaling import play, prefix_bytes, redis_counters, seat_players
from rules import settlement
from studhistory.archiver import archive_table
from studhistory.dealer_records import DealerAudits
from studhistory.ledger_archive import archive_ledger
from studhistory.pgarchive import PgHistory
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest.redis import RedisSource, TestRedis
from studtest.table import Room, act_once, running_room
from studtools.devkeys import DevKeys
from studtools.pg_server import ADMIN_USER, PostgresServer
from studtools.redis_server import RedisServer
from studtools.replay_find import archived_hands
from studtools.replay_source import RedisSource as ReplaySource

GIB = 2**30


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def table_bytes(admin: Any, table_id: str) -> tuple[int, int, int]:
    """(the table's keys, the dealer's keys of the table, the wallet's keys), in bytes."""
    _, table = await prefix_bytes(admin, f"stud:table:{{{table_id}}}*")
    _, dealer = await prefix_bytes(admin, f"stud:dealer:{{{table_id}}}*")
    _, wallet = await prefix_bytes(admin, "stud:wallet:*")
    return table, dealer, wallet


async def play_hand(room: Room, table_id: str, rng: random.Random) -> int:
    """Act until the next hand has started (bench_scaling's player); actions taken."""
    return await play(room, table_id, (await room.client.view(table_id)).hands_started, rng)


async def phase_redis(redis: TestRedis, dev: DevKeys, pg: PostgresServer,
                      args: argparse.Namespace) -> dict[str, Any]:
    admin = connect(redis.url)
    await admin.flushall()
    history = await PgHistory.connect(pg.dsn("archiver"))
    samples: list[tuple[int, int, int, int]] = []
    actions = 0
    async with running_room(redis, redis.url, dev, snapshot_every=args.snapshot_every) as room:
        table_id = await room.client.open_table("history")
        await seat_players(room, table_id, args.players)
        rng = random.Random(1)
        store = EventStore(admin)
        tokens = dev.service_source("archiver")
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{room.dealer.port}")
        dealer = DealerAudits(channel, lambda: tokens.token("dealer"))
        cpu0, _ = await redis_counters(admin)
        for hand in range(1, args.hands + 1):
            actions += await play_hand(room, table_id, rng)
            # Hands at bench speed: the step runs the idempotency window later, so a command
            # record leaves with its events as at human pace, where the hot window (20
            # hands) outlasts the window's 10 minutes (docs/history.md, "Expired commands").
            await archive_table(store, history, table_id, keep_hands=args.hot_hands,
                                dealer=dealer,
                                clock=lambda: time.time() + COMMAND_WINDOW_S)
            await archive_ledger(admin, history.conn, keep=args.wallet_hot)
            if hand % args.every == 0 or hand == args.hands:
                samples.append((hand, *await table_bytes(admin, table_id)))
        cpu1, _ = await redis_counters(admin)
        await channel.close()
        # The idle cost of an open table (as docs/scaling.md measures it): --idle-tables
        # tables seated and dealt, each waiting for an action, nobody acting.
        for i in range(args.idle_tables):
            await seat_players(room, await room.client.open_table(f"idle-{i}"), 2)
        await asyncio.sleep(2.0)
        idle0, _ = await redis_counters(admin)
        await asyncio.sleep(args.idle_seconds)
        idle1, _ = await redis_counters(admin)
        await room.table_deps.app.stop()
    await history.aclose()
    await admin.aclose()
    print(f"== 1. Redis bytes per table: 1 table, {args.players} bots, {args.hands} hands, "
          f"STUD_HOT_HANDS={args.hot_hands}, snapshot every {args.snapshot_every} hands, the "
          "archiver's step after each hand")
    print(f"  {'hands':>7} {'table B':>10} {'dealer B':>10} {'wallet B':>10} {'total B':>10}")
    for hand, t, d, w in samples:
        print(f"  {hand:>7} {t:>10,} {d:>10,} {w:>10,} {t + d + w:>10,}")
    half = samples[len(samples) // 2:]

    def slope(i: int) -> float:
        """Bytes per hand over the second half (least squares; snapshots make it saw)."""
        xs, ys = [h[0] for h in half], [h[i] for h in half]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        den = sum((x - mx) ** 2 for x in xs) or 1.0
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den
    growth = {name: slope(i) for i, name in ((1, "table"), (2, "dealer"), (3, "wallet"))}
    span = max(1, half[-1][0] - half[0][0])
    mean = sum(sum(h[1:]) for h in half) / len(half)
    families = {name: g * span < 0.05 * mean for name, g in growth.items()}
    flat = all(families.values())
    last = samples[-1]
    total_last = sum(last[1:])
    print("  growth per hand over the second half (least squares): " + ", ".join(
        f"{k} {v:,.0f} B" for k, v in growth.items()) + f"; flat (under 5% of the mean "
        f"{mean:,.0f} B over {span} hands): " + ", ".join(
            f"{name} {'yes' if ok else 'no'}" for name, ok in families.items()))
    return {"flat": flat, "bytes_now": total_last, "table_id": table_id,
            "growth": {k: v for k, v in growth.items() if not families[k]},
            "actions": actions, "hands": args.hands,
            "redis_cpu_per_action": (cpu1 - cpu0) / max(1, actions),
            "idle_cpu": (idle1 - idle0) / args.idle_seconds / (args.idle_tables + 1)}


def phase_capacity(first: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    pace, days, utilisation = 0.5, 7.0, 0.5
    actions_per_hand = first["actions"] / first["hands"]
    hands_per_day = pace * 86_400 / actions_per_hand
    still_growing = max(0.0, sum(first["growth"].values()))
    kept = first["bytes_now"] + still_growing * hands_per_day * days
    mem_tables = utilisation * args.redis_memory_gib * GIB / kept
    cpu_tables = utilisation / (first["redis_cpu_per_action"] * pace + first["idle_cpu"])
    print(f"== 2. Tables per Redis master (1 core, {args.redis_memory_gib} GiB, 50%) at "
          f"{pace} actions/s per table ({actions_per_hand:.1f} actions a hand, "
          f"{hands_per_day:,.0f} hands a day)")
    print(f"  memory: {mem_tables:,.0f} tables (= 0.5 x {args.redis_memory_gib} GiB / "
          f"({first['bytes_now']:,} B kept + {still_growing:,.0f} B still growing a hand x "
          f"{hands_per_day:,.0f} hands/day x {days:.0f} days))")
    print(f"  CPU: {cpu_tables:,.0f} tables (= 0.5 / ({first['redis_cpu_per_action'] * 1e6:.0f}"
          f" us x {pace} + {first['idle_cpu'] * 1e6:.1f} us idle))")
    return {"mem_tables": mem_tables, "cpu_tables": cpu_tables}


async def phase_archive(redis: TestRedis, dev: DevKeys, pg: PostgresServer,
                        args: argparse.Namespace) -> dict[str, float]:
    admin = connect(redis.url)
    history = await PgHistory.connect(pg.dsn("archiver"))
    lags: list[float] = []
    async with running_room(redis, redis.url, dev, snapshot_every=args.snapshot_every) as room:
        # A backlog copied in one step.
        table_id = await room.client.open_table("backlog")
        await seat_players(room, table_id, args.players)
        rng = random.Random(2)
        for _ in range(args.backlog):
            await play_hand(room, table_id, rng)
        started = time.perf_counter()
        outcome = await archive_table(EventStore(admin), history, table_id,
                                      keep_hands=args.hot_hands)
        took = time.perf_counter() - started
        rate = len(outcome.plan.hands) / took
        print(f"== 3. Archive: a backlog of {len(outcome.plan.hands)} settled hands "
              f"({outcome.plan.copy_to - outcome.plan.archived} events) copied, verified and "
              f"trimmed in one step: {took:.2f} s = {rate:,.0f} hands/s")

        # Human pace: bots think about 2 s an action; the archiver's loop every second.
        ids = [await room.client.open_table(f"pace-{i}") for i in range(args.pace_tables)]
        for table in ids:
            await seat_players(room, table, args.players)
        stop = asyncio.Event()

        async def bot(table: str, r: random.Random) -> None:
            while not stop.is_set():
                view = await room.client.view(table)
                if await act_once(room.client, table, view, r.choice):
                    await asyncio.sleep(r.uniform(1.0, 3.0))
                else:
                    await asyncio.sleep(0.2)

        async def archiver() -> None:
            store = EventStore(admin)
            while not stop.is_set():
                for table in ids:
                    done = await archive_table(store, history, table,
                                               keep_hands=args.hot_hands)
                    now = datetime.now(UTC)
                    lags.extend((now - ended).total_seconds() for ended in done.ended)
                await asyncio.sleep(1.0)

        tasks = [asyncio.create_task(bot(t, random.Random(i))) for i, t in enumerate(ids)]
        tasks.append(asyncio.create_task(archiver()))
        await asyncio.sleep(args.pace_seconds)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await room.table_deps.app.stop()
    await history.aclose()
    await admin.aclose()
    p50, p99 = quantile(lags, 0.5), quantile(lags, 0.99)
    print(f"  human pace: {args.pace_tables} tables for {args.pace_seconds:.0f} s, "
          f"{len(lags)} hands copied; lag from a hand's end to durable in PostgreSQL: "
          f"p50 {p50 * 1000:,.0f} ms, p99 {p99 * 1000:,.0f} ms")
    return {"rate": rate, "lag_p99_ms": p99 * 1000, "lag_p50_ms": p50 * 1000,
            "lags": float(len(lags))}


def generate_rows(pg: PostgresServer, rows: int, real: int) -> tuple[list[str], datetime]:
    """``rows`` hand rows from ``real`` hands played by the rules; returns the players."""
    rng = random.Random(3)
    hands = []
    for _ in range(real):
        recorded = record_hand(rng)
        result = settlement(recorded.after)
        if result is None or not result.seats:
            continue
        hands.append((result.amount_in, result.rake,
                      [(s.seat, s.net) for s in result.seats]))
    players = [f"p{i:05d}" for i in range(10_000)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with psycopg.connect(pg.dsn("archiver")) as conn:
        for month in range(13):
            conn.execute("SELECT history.ensure_month(%s)", (start + timedelta(days=31 * month),))
        conn.commit()
        with conn.cursor() as cur:
            made = 0
            for batch in range(0, rows, 100_000):
                hand_rows: list[tuple[Any, ...]] = []
                player_rows: list[tuple[Any, ...]] = []
                for n in range(batch, min(rows, batch + 100_000)):
                    pot, rake, seats = hands[n % len(hands)]
                    table, number = f"g{n // 1000:04d}", n % 1000 + 1
                    ended = start + timedelta(seconds=rng.randrange(365 * 86_400))
                    names = rng.sample(players, len(seats))
                    seat_names = {s: names[i] for i, (s, _) in enumerate(seats)}
                    nets = {str(s): net for s, net in seats}
                    hand_rows.append((table, number, ended, ended, 1, 40, 0, 0, 0, 0, pot, rake,
                                      list(seat_names.values()),
                                      Jsonb(
                                          {str(s): p for s, p in seat_names.items()}),
                                      Jsonb({}),
                                      Jsonb(nets)))
                    player_rows.extend((p, ended, table, number, s, dict(seats)[s], pot)
                                       for s, p in seat_names.items())
                with cur.copy("COPY history.hands (table_id, hand, started_at, ended_at, "
                              "first_sequence, last_sequence, ante, small_bet, big_bet, "
                              "bring_in, pot, rake, players, seats, winners, nets) FROM STDIN"
                              ) as hcopy:
                    for row in hand_rows:
                        hcopy.write_row(row)
                with cur.copy("COPY history.hand_players (player_id, ended_at, table_id, hand, "
                              "seat, net, pot) FROM STDIN") as pcopy:
                    for prow in player_rows:
                        pcopy.write_row(prow)
                made += len(hand_rows)
                conn.commit()
        conn.commit()
    with psycopg.connect(pg.dsn(ADMIN_USER), autocommit=True) as conn:
        conn.execute("ANALYZE")
    return players, start


async def phase_queries(pg: PostgresServer, redis: TestRedis, table_id: str,
                        archived_upto: int, args: argparse.Namespace) -> dict[str, float]:
    started = time.perf_counter()
    players, start = generate_rows(pg, args.rows, args.real_hands)
    made = time.perf_counter() - started
    with psycopg.connect(pg.dsn("support")) as conn:
        total = conn.execute("SELECT count(*) FROM history.hands").fetchone()
    rng = random.Random(4)
    listing: list[float] = []
    for _ in range(args.queries):
        who = rng.choice(players)
        since = start + timedelta(days=rng.randrange(330))
        t0 = time.perf_counter()
        archived_hands(pg.dsn("support"), who, since, since + timedelta(days=30), None, 0, 100)
        listing.append(time.perf_counter() - t0)
    source = ReplaySource(connect(redis.url), pg.dsn("support"))
    showing: list[float] = []
    for _ in range(args.queries):
        hand = rng.randrange(1, max(2, archived_upto))
        t0 = time.perf_counter()
        window = await source.hand_log(table_id, hand)
        showing.append(time.perf_counter() - t0)
        assert window is not None, hand
    await source.aclose()
    total_rows = int(total[0]) if total else 0
    lp50, lp99 = quantile(listing, 0.5) * 1000, quantile(listing, 0.99) * 1000
    sp50, sp99 = quantile(showing, 0.5) * 1000, quantile(showing, 0.99) * 1000
    print(f"== 4. Look-ups over {total_rows:,} archived hands ({args.rows:,} rows made in "
          f"{made:.0f} s from {args.real_hands:,} hands played by the rules, and phase 1's "
          "table archived by the archiver)")
    print(f"  a player's hands over 30 days (stud replay list --player's query): p50 "
          f"{lp50:.1f} ms, p99 {lp99:.1f} ms ({args.queries} queries)")
    print(f"  one archived hand's log (stud replay show's read: its segment, from PostgreSQL):"
          f" p50 {sp50:.1f} ms, p99 {sp99:.1f} ms ({args.queries} hands)")
    return {"query_p99_ms": max(lp99, sp99)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--players", type=int, default=4)
    parser.add_argument("--hot-hands", type=int, default=20)
    parser.add_argument("--wallet-hot", type=int, default=200,
                        help="WALLET_HOT_TRANSACTIONS: the wallet's ledger kept in Redis")
    parser.add_argument("--snapshot-every", type=int, default=25)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--idle-tables", type=int, default=100)
    parser.add_argument("--redis-memory-gib", type=float, default=8.0)
    parser.add_argument("--backlog", type=int, default=300)
    parser.add_argument("--pace-tables", type=int, default=20)
    parser.add_argument("--pace-seconds", type=float, default=120.0)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--real-hands", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=500)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    dev = DevKeys.generate()
    passwords = {name: secrets.token_urlsafe(12) for name in ("table", "dealer", "wallet")}
    with RedisServer(appendonly=True, appendfsync="everysec", passwords=passwords) as server, \
            PostgresServer() as pg:
        pg.prepare()
        redis = TestRedis(url=server.url, source=RedisSource.LOCAL, server=server)
        first = await phase_redis(redis, dev, pg, args)
        capacity = phase_capacity(first, args)
        with psycopg.connect(pg.dsn("support")) as conn:
            hands_row = conn.execute("SELECT max(hand) FROM history.hands WHERE table_id = %s",
                                     (first["table_id"],)).fetchone()
        archive = await phase_archive(redis, dev, pg, args)
        queries = await phase_queries(pg, redis, first["table_id"],
                                      int(hands_row[0] or 1) if hands_row else 1, args)
    ratio = capacity["mem_tables"] / capacity["cpu_tables"]
    print(f"redis_flat={'yes' if first['flat'] else 'no'} "
          f"mem_tables={capacity['mem_tables']:.0f} cpu_tables={capacity['cpu_tables']:.0f} "
          f"mem_cpu_ratio={ratio:.2f} archive_hands_s={archive['rate']:.0f} "
          f"lag_p99_ms={archive['lag_p99_ms']:.0f} query_p99_ms={queries['query_p99_ms']:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
