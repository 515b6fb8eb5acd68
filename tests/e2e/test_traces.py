"""One Bet traced across the room (issue 33): the dealer, the wallet and the table as separate
processes export their spans over OTLP/gRPC to a receiver this test runs
(``opentelemetry-proto``'s TraceService, :mod:`studtools.traces`). Two players play a hand to
the fourth street, where one bets and the other calls; the next street's deal and, when the
hand ends, the settlement follow. Then:

- the Bet's trace holds the table's server span, the append's span under it and the Redis
  call of the append under that; the envelopes it appended carry its ``traceparent``;
- the driver's deal of the next street (a trace of its own) links to the Bet's append, and
  its call to the dealer crosses the process (the dealer's server span is the table's client
  span's child); the settlement's trace holds the wallet's ``SettleHand``;
- the table's log line of the Bet carries the Bet's ``trace_id``;
- the Bet's latency bucket carries the trace id as an exemplar (OpenMetrics);
- ``stud trace show`` prints the Bet's trace with the deal linked to it.

And the tournament's steps likewise: the step that charges a registration links to it.
"""

from __future__ import annotations

import asyncio
import io
import json
import urllib.request
import uuid
from pathlib import Path

import grpc
import pytest

from stud.v1 import table_pb2 as pb
from stud.v1 import tournament_pb2 as tpb
from stud.v1 import tournament_pb2_grpc as tpb_grpc
from studkit.redis_client import connect
from studkit.store import EventStore
from studtest import redis as test_redis_source
from studtest.processes import ServiceProcess, restartable_port, room_processes
from studtest.table import TableClient, fast_settings, player
from studtest.tournament_service import TournamentClient
from studtools import cli
from studtools.devkeys import DevKeys
from studtools.traces import SpanRecord, receiving, render

pytestmark = pytest.mark.e2e

KEYS = DevKeys.generate()
BRING_IN, COMPLETE, BET, RAISE, CALL, CHECK, FOLD = range(1, 8)
METHODS = {BRING_IN: ("PostBringIn", pb.PostBringInRequest), BET: ("Bet", pb.BetRequest),
           CALL: ("Call", pb.CallRequest), CHECK: ("Check", pb.CheckRequest),
           FOLD: ("Fold", pb.FoldRequest), COMPLETE: ("Complete", pb.CompleteRequest)}
BET_RPC = "/stud.v1.TableService/Bet"
SNG = tpb.TournamentConfig(name="sng", format=tpb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=1000,
                           fee=100, seats=3, structure=tpb.TournamentStructure(preset="turbo"))


async def turn(client: TableClient, table_id: str, wanted: int,
               timeout: float = 30.0) -> pb.TableView:
    """The view once someone is to act and ``wanted`` is among their legal actions."""
    async with asyncio.timeout(timeout):
        while True:
            view = await client.view(table_id)
            hand = view.hand
            if (view.HasField("hand") and hand.phase == pb.HAND_PHASE_BETTING and hand.to_act
                    and any(a.kind == wanted for a in hand.legal_actions.actions)):
                return view
            await asyncio.sleep(0.02)


async def act(client: TableClient, table_id: str, kinds: tuple[int, ...]) -> tuple[str, int]:
    """Act for whoever is to act with the first of ``kinds`` legal for them; (their name,
    the action's kind)."""
    async with asyncio.timeout(30):
        while True:
            view = await client.view(table_id)
            hand = view.hand
            if view.HasField("hand") and hand.phase == pb.HAND_PHASE_BETTING and hand.to_act:
                legal = {a.kind: a for a in hand.legal_actions.actions}
                kind = next((k for k in kinds if k in legal), None)
                if kind is not None:
                    break
            await asyncio.sleep(0.02)
    holder = next(s.player_id for s in view.seats if s.seat == hand.to_act)
    method, request_type = METHODS[kind]
    request = request_type(table_id=table_id, seat=hand.to_act, expected_sequence=view.version,
                           command_id=uuid.uuid4().hex)
    if kind in (COMPLETE, BET):
        request.to = legal[kind].to
    await client.call(method, request, player(holder))
    return holder, kind


def scrape_openmetrics(port: int) -> str:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                     headers={"Accept": "application/openmetrics-text"})
    with urllib.request.urlopen(request, timeout=5) as reply:
        return str(reply.read().decode())


async def test_one_bet_traced_across_the_room(redis_server: test_redis_source.TestRedis,
                                              redis_url: str, tmp_path: Path) -> None:
    def url_for(service: str) -> str:
        return redis_server.server.url_for(service) if redis_server.server else redis_url

    spans_file = tmp_path / "traces.jsonl"
    async with receiving(file=spans_file) as (receiver, port):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
               "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_TRACES_SAMPLER": "always_on"}
        async with room_processes(url_for, KEYS, tmp_path, extra_env=env,
                                  metrics=True) as room, room.clients() as clients:
            table = clients.table
            table_id = await table.open_table(f"traced-{uuid.uuid4().hex[:6]}",
                                              settings=fast_settings())
            for seat, name in enumerate(("ann", "bob"), start=1):
                await clients.wallet.create_account(name)
                await clients.wallet.deposit(name, 100_000, f"dep-{name}-{table_id}")
                await table.call("SitDown", pb.SitDownRequest(
                    table_id=table_id, seat=seat, buy_in=10_000), player(name))
            # Third street: the bring-in, then calls (or checks) until a Bet is legal.
            while True:
                view = await table.view(table_id)
                if (view.HasField("hand") and view.hand.phase == pb.HAND_PHASE_BETTING
                        and any(a.kind == BET for a in view.hand.legal_actions.actions)):
                    break
                await act(table, table_id, (BRING_IN, CALL, CHECK))
            await turn(table, table_id, BET)
            bettor, _ = await act(table, table_id, (BET,))
            await act(table, table_id, (CALL,))  # the street is over: the driver deals
            await act(table, table_id, (BET,))
            await act(table, table_id, (FOLD,))  # the hand is over: the driver settles

            # The settlement ends after both Bets: once it is in, so are they (a process
            # exports its spans in the order they end). The first Bet is the one the Call
            # answered before the deal.
            settles = await receiver.wait_for(lambda s: s.name == "table.settle")
            bets = await receiver.wait_for(
                lambda s: s.name == BET_RPC and s.kind == "server" and s.service == "table")
            assert len(bets) == 2, bets
            bet = min(bets, key=lambda s: s.start_ns)
            trace = receiver.trace(bet.trace_id)
            [append] = [s for s in trace if s.name == "EventStore.append"
                        and s.parent_id == bet.span_id]
            assert append.attributes["stud.stream"] == table_id
            assert any(s.name == "EVALSHA" and s.parent_id == append.span_id for s in trace), \
                [(s.name, s.parent_id) for s in trace]

            # The Bet's envelopes carry its trace context.
            reader = connect(url_for("auditor"))
            try:
                stored = await EventStore(reader).read(table_id)
            finally:
                await reader.aclose()
            carried = [s.envelope for s in stored
                       if s.envelope.traceparent.split("-")[1:3] == [bet.trace_id,
                                                                     append.span_id]]
            assert carried, "no envelope carries the Bet's traceparent"
            assert all(e.traceparent == "" or e.traceparent.startswith("00-")
                       for e in (s.envelope for s in stored))

            # The next street's deal: a trace of its own, linked to the Bet's append, whose
            # call to the dealer crosses into the dealer's process.
            [deal] = await receiver.wait_for(
                lambda s: s.name == "table.deal" and (bet.trace_id, append.span_id) in s.links)
            assert deal.trace_id != bet.trace_id and not deal.parent_id
            deal_trace = await receiver.wait_for(
                lambda s: s.trace_id == deal.trace_id and s.service == "dealer"
                and s.name == "/stud.v1.DealerService/Deal")
            [client_call] = [s for s in receiver.trace(deal.trace_id)
                             if s.name == "/stud.v1.DealerService/Deal" and s.kind == "client"]
            assert deal_trace[0].parent_id == client_call.span_id
            # ... and the settlement's trace holds the wallet's SettleHand.
            await receiver.wait_for(
                lambda s: s.trace_id in {t.trace_id for t in settles} and s.service == "wallet"
                and s.name == "/stud.v1.WalletService/SettleHand" and s.kind == "server")

            # The table's log line of the Bet carries its trace id (and its span's).
            lines = [json.loads(line) for line in room.table.logs().splitlines()
                     if line.startswith("{")]
            logged = [line for line in lines if line.get("trace_id") == bet.trace_id]
            assert any(line.get("event") == "rpc_handled" and line.get("rpc") == BET_RPC
                       for line in logged), logged
            assert all(len(line["span_id"]) == 16 for line in logged)

            # The Bet's latency carries the trace id as an exemplar (OpenMetrics only).
            exposition = await asyncio.to_thread(scrape_openmetrics,
                                                 room.table.metrics_port)
            bet_buckets = [line for line in exposition.splitlines()
                           if line.startswith("stud_grpc_request_seconds_bucket")
                           and 'method="Bet"' in line]
            assert any("# {trace_id=\"" in line for line in bet_buckets), bet_buckets
            assert "stud_table_hands_ended_total" in exposition
            assert "\nstud_table_tables_open 1.0\n" in exposition
            assert "\nstud_table_seated_players 2.0\n" in exposition
            assert "\nstud_table_tables_stopped 0.0\n" in exposition
            assert "stud_event_loop_lag_seconds_bucket" in exposition
            assert 'stud_redis_call_seconds_bucket{command="EVALSHA"' in exposition
            wallet = await asyncio.to_thread(scrape_openmetrics, room.wallet.metrics_port)
            assert "stud_wallet_settlement_seconds_bucket" in wallet
            assert "\nstud_wallet_ledger_balance 0.0\n" in wallet

    # stud trace show: the Bet's trace as a tree, the deal linked to it.
    shown = render(bet.trace_id, [SpanRecord.from_json(line)
                                  for line in spans_file.read_text().splitlines()])
    out = io.StringIO()
    assert cli.main(["trace", "show", bet.trace_id, "--file", str(spans_file)], out=out,
                    env={}) == 0
    assert out.getvalue().strip() == shown
    assert f"linked from trace {deal.trace_id} (its table.deal follows EventStore.append" \
        in shown
    print(f"\n{bettor}'s Bet, as stud trace show prints it:\n{shown}")


async def test_a_tournament_step_links_to_the_registration(
        redis_server: test_redis_source.TestRedis, redis_url: str, tmp_path: Path) -> None:
    """The tournament's process manager charges a registration's buy-in at its next step: that
    step's trace links to the Register's append and holds the wallet's call."""
    def url_for(service: str) -> str:
        return redis_server.server.url_for(service) if redis_server.server else redis_url

    async with receiving() as (receiver, port):
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
               "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_TRACES_SAMPLER": "always_on"}
        async with room_processes(url_for, KEYS, tmp_path, extra_env=env) as room, \
                room.clients() as clients:
            tournament = ServiceProcess("tournament", {
                **env, "METRICS_PORT": str(restartable_port()), "METRICS_ADDR": "127.0.0.1",
                "LOG_LEVEL": "INFO", **KEYS.env("tournament"),
                "REDIS_URL": url_for("tournament"),
                "TOURNAMENT_WALLET_TARGET": room.wallet.target,
                "TOURNAMENT_TABLE_TARGET": room.table.target, "TOURNAMENT_TICK_S": "0.2",
                "TOURNAMENT_SHUTDOWN_GRACE": "1"}, tmp_path / "tournament.log")
            tournament.start()
            try:
                await tournament.wait_serving()
                await clients.wallet.create_account("ann")
                await clients.wallet.deposit("ann", 5_000, "dep-ann-sng")
                async with grpc.aio.insecure_channel(tournament.target) as channel:
                    client = TournamentClient(
                        tpb_grpc.TournamentServiceStub(channel),  # type: ignore[no-untyped-call]
                        KEYS)
                    await client.create("sng-traced", SNG)
                    # The step the creation wakes must be over before the registration: a
                    # step still running when Register appends would charge the buy-in in
                    # its own trace (linked to the creation), and the step linked to the
                    # Register would find nothing left to do (seen on a loaded machine).
                    [create] = await receiver.wait_for(
                        lambda s: s.name == "/stud.v1.TournamentService/CreateTournament"
                        and s.kind == "server")
                    [created] = [s for s in receiver.trace(create.trace_id)
                                 if s.name == "EventStore.append"
                                 and s.parent_id == create.span_id]
                    await receiver.wait_for(
                        lambda s: s.name == "tournament.step"
                        and (create.trace_id, created.span_id) in s.links)
                    await client.register("sng-traced", player("ann"), "reg-ann")
                [register] = await receiver.wait_for(
                    lambda s: s.name == "/stud.v1.TournamentService/Register"
                    and s.kind == "server")
                [append] = [s for s in receiver.trace(register.trace_id)
                            if s.name == "EventStore.append" and s.parent_id == register.span_id]
                steps = await receiver.wait_for(
                    lambda s: s.name == "tournament.step"
                    and (register.trace_id, append.span_id) in s.links)
                await receiver.wait_for(
                    lambda s: s.trace_id in {t.trace_id for t in steps}
                    and s.service == "wallet" and s.kind == "server")
                exposition = await asyncio.to_thread(scrape_openmetrics,
                                                     tournament.metrics_port)
                assert "\nstud_tournament_registrations_total 1.0\n" in exposition
                assert "\nstud_tournament_running 0.0\n" in exposition
            finally:
                tournament.terminate()
