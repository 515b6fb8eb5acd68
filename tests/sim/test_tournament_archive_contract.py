"""The simulated tournament archive against the real one: the same tournaments written by
the tournament service's app (the model's commands, at the same clock and seed) into a real
Redis and into the simulator's (:class:`sim.redis.SimRedis`: the append's port, XLEN, the
wake set, the trim script's port), then the same steps of
``studhistory.tournament_archive.archive_tournaments`` into a real PostgreSQL and into
:class:`sim.tournament_db.SimTournamentDb` (through
:class:`sim.tournament_db.SimConn`, which answers the module's statements): a
tournament still running, one over within its command window, past it, a step again after
the script and before the index; the streams, the outcomes, the rows of every table, the
keys left in each Redis, the trim script's every reply, and the tournament service's read
of the archive must agree, step by step."""

from __future__ import annotations

import random
import uuid
from typing import Any, cast

import psycopg

from sim.redis import Data, SimRedis, as_client
from sim.tournament_db import FACTS, SimConn, SimTournamentDb
from sim.tournaments import Played, caller, planned
from studhistory import tournament_archive as archiving
from studhistory.tournament_archive import (
    KEYS,
    TOMBSTONE,
    TRIM_LUA,
    WOKEN,
    TournamentOutcome,
    archive_tournaments,
    record_of,
)
from studkit import keys
from studkit.chain import digest
from studkit.commandwindow import COMMAND_WINDOW_S
from studkit.redis_client import Client, connect
from tournament.app import TournamentApp, tournament_store
from tournament.history import ArchivedTournaments

START = 1_800_000_000.0
_COLUMNS = {
    "events": "tournament_id, sequence, occurred_at, event_type, command_id, envelope, "
              "digest",
    "tournaments": "tournament_id, name, format, buy_in, fee, config, created_at",
    "entries": "tournament_id, entry_id, player_id, buy_in, fee, requested_at",
    "busts": "tournament_id, entry_id, player_id, table_id, seat, hand, start_stack, round, "
             "busted_at",
    "places": "tournament_id, entry_id, player_id, place, place_to",
    "prizes": "tournament_id, payment_id, entry_id, player_id, amount, place, place_to, "
              "paid_at",
    "refunds": "tournament_id, payment_id, entry_id, player_id, buy_in, fee, paid_at",
    "endings": "tournament_id, outcome, reason, winner, ended_at"}


async def _write(client: Client, run: Played, upto: int | None = None) -> None:
    """The model's commands (the first ``upto``) through the service's app."""
    at = [run.steps[0]]
    app = TournamentApp(tournament_store(client), clock=lambda: at[0].now,
                        seed=lambda: at[0].seed)
    for step in run.steps[:upto]:
        at[0] = step
        await app.execute(run.tournament_id, step.command, step.command_id,
                          by=caller(step.command))


def _rows(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview | bytes) else value


async def _archived(conn: psycopg.AsyncConnection[Any], db: SimTournamentDb
                    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    real, sim = {}, {}
    for table, columns in _COLUMNS.items():
        cur = await conn.execute(f"SELECT {columns} FROM tournaments.{table}")
        real[table] = sorted((tuple(_rows(v) for v in r) for r in await cur.fetchall()),
                             key=repr)
        held = ([r for rows in db.events.values() for r in rows] if table == "events"
                else db.tables[table])
        sim[table] = sorted((tuple(_rows(v) for v in r) for r in held), key=repr)
    return real, sim


async def _keys(real: Client, data: Data, ids: list[str]) -> tuple[Any, Any]:
    """What each Redis holds of the tournaments: each key's presence, the tombstone, the
    index and the wake set."""
    out_real, out_sim = [], []
    for tid in ids:
        names = [keys.tournament_key(tid, k) for k in KEYS]
        tomb = keys.tournament_key(tid, TOMBSTONE)
        out_real.append((tid, [bool(await real.exists(n)) for n in names],
                         await real.get(tomb),
                         bool(await real.sismember(keys.tournament_index(), tid)),
                         await real.zscore(WOKEN, tid) is not None))
        present = [n.encode() in data.strings or n.encode() in data.hashes
                   or n.encode() in data.streams for n in names]
        out_sim.append((tid, present, data.strings.get(tomb.encode()),
                        tid.encode() in data.sets.get(keys.tournament_index().encode(), set()),
                        tid.encode() in data.zsets.get(WOKEN.encode(), {})))
    return out_real, out_sim


def _outcome(out: TournamentOutcome) -> tuple[Any, ...]:
    return (sorted(out.archived), out.copied, sorted(out.trimmed), sorted(out.busy),
            sorted(out.failed))


def _reply(reply: Any) -> list[Any]:
    return [v.decode() if isinstance(v, bytes) else v for v in reply]


async def test_the_simulated_tournament_archive_answers_as_postgres_and_redis(
        redis_url: str, history_dsns: Any) -> None:
    real = connect(redis_url)
    conn = await psycopg.AsyncConnection.connect(history_dsns.archiver, autocommit=True)
    admin = await psycopg.AsyncConnection.connect(history_dsns.admin, autocommit=True)
    data, db = Data(), SimTournamentDb()
    sim = as_client(SimRedis(data))
    sim_conn = cast(psycopg.AsyncConnection[Any], SimConn(db))
    rng = random.Random(31)
    tag = uuid.uuid4().hex[:6]
    runs = [planned(f"c{tag}-{i}", rng, START + 100 * i) for i in range(3)]
    done, running = runs[:2], runs[2]
    ids = [r.tournament_id for r in runs]
    try:
        for run in done:
            await _write(real, run)
            await _write(sim, run)
        half = len(running.steps) // 2  # still running: never written nor trimmed
        await _write(real, running, half)
        await _write(sim, running, half)
        for tid in ids:
            assert await archiving.stream_raw(sim, tid) == \
                await archiving.stream_raw(real, tid), tid
        ends = [record_of((await archiving.stream_raw(real, r.tournament_id))[-1][1]).seconds
                for r in done]
        last = max(ends)

        async def step(now: float, seen: tuple[dict[str, int], dict[str, int]]) -> Any:
            want = await archive_tournaments(real, conn, seen[0],
                                             command_window_s=COMMAND_WINDOW_S,
                                             clock=lambda: now)
            have = await archive_tournaments(sim, sim_conn, seen[1],
                                             command_window_s=COMMAND_WINDOW_S,
                                             clock=lambda: now)
            assert _outcome(have) == _outcome(want)
            assert seen[1] == seen[0]
            in_real, in_sim = await _archived(admin, db)
            assert in_sim == in_real
            k_real, k_sim = await _keys(real, data, ids)
            assert k_sim == k_real
            return want, in_real, k_real

        seen: tuple[dict[str, int], dict[str, int]] = ({}, {})
        # Over, within the window: written and verified, not trimmed; the running one
        # untouched.
        out, rows, held = await step(last + 10, seen)
        assert sorted(out.archived) == sorted(r.tournament_id for r in done)
        assert not out.trimmed and running.tournament_id in seen[0]
        assert all(rows[t] for t in FACTS if t not in ("busts", "places", "prizes",
                                                       "refunds"))
        # events, version, commands and chain in Redis still (no owner: no lease was taken;
        # no trimmed count: a tournament's stream is never trimmed in part)
        assert [present for _, present, *_ in held] == [
            [True, True, True, False, False, True]] * 3
        # The trim script's refusals: a wrong version, a wrong head; nothing removed.
        for tid in (done[0].tournament_id, running.tournament_id):
            names = [keys.tournament_key(tid, k) for k in (*KEYS, TOMBSTONE)]
            raws = await archiving.stream_raw(real, tid)
            head = digest(raws[-1][1])
            for version, link in ((len(raws) + 1, head), (len(raws), b"x" * 32)):
                assert _reply(await sim.eval(TRIM_LUA, len(names), *names, version, link)) == \
                    _reply(await real.eval(TRIM_LUA, len(names), *names, version, link))
        # Past the window: trimmed, the tombstones left; a step stopped after the script
        # (before the index) is finished by the next.
        first = done[0].tournament_id
        names = [keys.tournament_key(first, k) for k in (*KEYS, TOMBSTONE)]
        raws = await archiving.stream_raw(real, first)
        args = (len(raws), digest(raws[-1][1]))
        assert _reply(await sim.eval(TRIM_LUA, len(names), *names, *args)) == \
            _reply(await real.eval(TRIM_LUA, len(names), *names, *args)) == \
            ["trimmed", len(raws)]
        later = last + COMMAND_WINDOW_S + 1
        out, rows, held = await step(later, seen)
        assert out.trimmed == [done[1].tournament_id]
        assert [h[2] is not None for h in held] == [True, True, False]
        assert _reply(await sim.eval(TRIM_LUA, len(names), *names, *args)) == \
            _reply(await real.eval(TRIM_LUA, len(names), *names, *args)) == ["gone", 0]
        out, _, _ = await step(later + 1, seen)  # again: nothing more
        assert not (out.archived or out.trimmed or out.failed)
        # The tournament service reads each from the archive as from the other.
        real_reader = ArchivedTournaments(history_dsns.tournament)
        sim_reader = ArchivedTournaments("simulated")
        sim_reader._conn = sim_conn
        try:
            for run in done:
                tid = run.tournament_id
                assert await sim_reader.events(tid) == await real_reader.events(tid)
                assert len(await real_reader.events(tid, 3)) == len(run.log) - 3
                command = run.steps[1].command_id
                assert await sim_reader.applied(tid, command) == \
                    await real_reader.applied(tid, command)
        finally:
            await real_reader.aclose()
    finally:
        await admin.close()
        await conn.close()
        await real.aclose()
