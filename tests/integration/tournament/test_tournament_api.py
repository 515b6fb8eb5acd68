"""The tournament service over real gRPC and a real Redis, with a real wallet: a sit & go
filled and started with every buy-in charged through the wallet's tournament pool;
unregistering and an operator's cancel refunded through the wallet; a retried command
answered from the log; the watch resumed; a restart that carries a pending entry on from the
log; and hostile requests (registering twice or as someone else, odd ids, forged tokens,
undecodable bodies), each with its status and reason, counted, changing nothing (the
tournament's stream version)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

import tournament.app as tournament_app
import tournament.server as tournament_server
from stud.v1 import tournament_pb2 as pb
from studkit.auth import Principal, Role, TokenBook
from studkit.grpc_server import rpc_error_reason
from studtest.tournament_service import (
    OPERATOR,
    RunningTournament,
    TournamentClient,
    eventually,
    running_tournament,
)
from studtest.wallet import RunningWallet
from studtools.devkeys import DevKeys
from tournament.state import Tournament
from tournament.views import summary

pytestmark = pytest.mark.integration

C = grpc.StatusCode
SNG = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100,
                          fee=10, seats=3,
                          structure=pb.TournamentStructure(preset="turbo"))


def player(name: str) -> Principal:
    return Principal(Role.PLAYER, name)


async def funded(wallet: RunningWallet, *names: str, funds: int = 1000) -> None:
    for name in names:
        await wallet.client.create_account(name)
        await wallet.client.deposit(name, funds, f"d-{name}")


async def version(t: RunningTournament, tid: str) -> int:
    return (await t.client.get(tid)).version


async def test_a_sit_and_go_fills_and_starts_with_every_buy_in_in_the_pool(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    client = tournament.client
    await funded(wallet, "ann", "bob", "cy", "dee")
    await client.create("sng1", SNG)
    for name in ("ann", "bob"):
        await client.register("sng1", player(name), f"reg-{name}")
    await client.register("sng1", player("dee"), "reg-dee")

    async def paid(n: int) -> bool:
        return sum(e.paid for e in (await client.get("sng1")).entries) == n
    await eventually(lambda: paid(3))
    view = await client.get("sng1")
    assert view.phase == pb.TOURNAMENT_PHASE_RUNNING
    assert sorted(e.player_id for e in view.entries) == ["ann", "bob", "dee"]
    assert all(e.table_id == "sng1.1" and 1 <= e.seat <= 3 and e.chips == 20000
               for e in view.entries)
    assert len({e.seat for e in view.entries}) == 3
    assert view.prize_pool == 300 and sum(view.prizes) == 300
    assert (view.clock.level, view.clock.stakes.big_bet) == (1, 1000)
    pool = await wallet.client.pool("sng1")
    assert pool.balance == 300 and len(pool.entries) == 3
    assert await wallet.client.player_balance("ann") == 890
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await client.register("sng1", player("cy"), "reg-cy")
    assert late.value.code() is C.FAILED_PRECONDITION
    assert rpc_error_reason(late.value) == "registration_closed"


async def test_unregistering_and_a_cancel_are_refunded_through_the_wallet(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    client = tournament.client
    await funded(wallet, "ann", "bob")
    mtt = pb.TournamentConfig(name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=50,
                              fee=5, seats=8, min_entrants=2,
                              start_at={"seconds": 4_000_000_000},
                              structure=pb.TournamentStructure(preset="default"))
    await client.create("mtt1", mtt)
    await client.register("mtt1", player("ann"), "r-ann")
    await client.register("mtt1", player("bob"), "r-bob")

    async def both_paid() -> bool:
        return sum(e.paid for e in (await client.get("mtt1")).entries) == 2
    await eventually(both_paid)
    assert await wallet.client.player_balance("ann") == 945
    await client.unregister("mtt1", player("ann"), "u-ann")

    async def refunded(name: str) -> bool:
        return await wallet.client.player_balance(name) == 1000
    await eventually(lambda: refunded("ann"))
    reply = await client.cancel("mtt1", "the room closes", "c-1")
    kinds = [r.event.WhichOneof("kind") for r in reply.events]
    assert kinds == ["cancelled", "refund_due"]
    await eventually(lambda: refunded("bob"))
    assert (await wallet.client.pool("mtt1")).balance == 0
    with pytest.raises(grpc.aio.AioRpcError) as over:
        await client.cancel("mtt1", "again", "c-2")
    assert rpc_error_reason(over.value) == "over"


async def test_a_retried_command_answers_from_the_log(tournament: RunningTournament,
                                                      wallet: RunningWallet) -> None:
    client = tournament.client
    await funded(wallet, "ann")
    first = await client.create("t1", SNG, "same-id")
    again = await client.create("t1", SNG, "same-id")
    assert not first.duplicate and again.duplicate
    assert [r.sequence for r in again.events] == [r.sequence for r in first.events] == [1]
    reg = await client.register("t1", player("ann"), "reg-1")
    assert (await client.register("t1", player("ann"), "reg-1")).duplicate
    assert reg.events[0].event.entry_requested.player_id == "ann"


async def test_the_watch_resumes_after_the_last_sequence_seen(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    client = tournament.client
    await funded(wallet, "ann", "bob")
    await client.create("w1", SNG)
    await client.register("w1", player("ann"), "r-ann")
    seen: list[int] = []
    stream = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id="w1"),
                                         metadata=client.md(player("bob")))
    async for record in stream:
        seen.append(record.sequence)
        if record.event.HasField("entry_paid"):
            break
    stream.cancel()
    assert seen == list(range(1, len(seen) + 1)) and len(seen) >= 3
    await client.register("w1", player("bob"), "r-bob")
    resumed = client.stub.WatchTournament(
        pb.WatchTournamentRequest(tournament_id="w1", after_sequence=seen[-1]),
        metadata=client.md(player("bob")))
    first = await resumed.read()
    resumed.cancel()
    assert first.sequence == seen[-1] + 1


async def test_a_restart_carries_a_pending_entry_on_from_the_log(
        tournament: RunningTournament, wallet: RunningWallet, dev_keys: DevKeys) -> None:
    await funded(wallet, "ann")
    await tournament.client.create("r1", SNG)
    await tournament.deps.stop_driver()  # the process manager stops before the buy-in
    await tournament.client.register("r1", player("ann"), "r-ann")
    assert not (await tournament.client.get("r1")).entries[0].paid
    settings = tournament.settings
    async with running_tournament(settings, dev_keys) as second:
        async def paid() -> bool:
            return (await second.client.get("r1")).entries[0].paid
        await eventually(paid)
    assert (await wallet.client.pool("r1")).balance == 100


async def test_a_player_the_wallet_refuses_is_dropped_and_charged_nothing(
        tournament: RunningTournament, wallet: RunningWallet, dev_keys: DevKeys) -> None:
    """The money was there at Register (checked at once) and gone at the charge: the entry
    is dropped, charged nothing, and GetTournament lists it apart with the wallet's reason."""
    await funded(wallet, "poor", funds=200)
    await tournament.client.create("p1", SNG)
    await tournament.deps.stop_driver()  # the charge comes after the money went elsewhere
    await tournament.client.register("p1", player("poor"), "r-poor")
    await wallet.client.enter("poor", "elsewhere", "x1", 150, 0, "k-elsewhere")
    async with running_tournament(tournament.settings, dev_keys) as second:
        async def dropped() -> bool:
            return bool((await second.client.get("p1")).dropped_entries)
        await eventually(dropped)
        view = await second.client.get("p1")
    assert not view.entries
    assert [(e.player_id, e.dropped_reason) for e in view.dropped_entries] == [
        ("poor", "insufficient_funds")]
    assert await wallet.client.player_balance("poor") == 50


def mtt_starting(start_at: dict[str, int]) -> pb.TournamentConfig:
    return pb.TournamentConfig(name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=50,
                               fee=5, seats=8, min_entrants=2, start_at=start_at,
                               structure=pb.TournamentStructure(preset="default"))


def refusals(t: RunningTournament, method: str, code: grpc.StatusCode) -> float:
    return t.deps.metrics.sample("stud_grpc_requests_total",
                                 service="stud.v1.TournamentService", method=method,
                                 code=code.name)


@pytest.mark.parametrize(("name", "method", "request_", "who", "code", "reason"), [
    ("twice", "Register", pb.RegisterRequest(tournament_id="h1", command_id="again"),
     player("ann"), C.ALREADY_EXISTS, "already_registered"),
    ("operator_registers", "Register", pb.RegisterRequest(tournament_id="h1", command_id="x"),
     OPERATOR, C.PERMISSION_DENIED, "players_only"),
    ("service_registers", "Register", pb.RegisterRequest(tournament_id="h1", command_id="x"),
     Principal(Role.SERVICE, "table"), C.PERMISSION_DENIED, "players_only"),
    ("player_creates", "CreateTournament",
     pb.CreateTournamentRequest(tournament_id="h2", config=SNG, command_id="x"),
     player("ann"), C.PERMISSION_DENIED, "permission_denied"),
    ("player_cancels", "CancelTournament",
     pb.CancelTournamentRequest(tournament_id="h1", reason="mine", command_id="x"),
     player("ann"), C.PERMISSION_DENIED, "permission_denied"),
    ("nul_in_cancel_reason", "CancelTournament",
     pb.CancelTournamentRequest(tournament_id="h1", reason="x\x00y", command_id="x"),
     OPERATOR, C.INVALID_ARGUMENT, "bad_request"),
    ("odd_id", "Register", pb.RegisterRequest(tournament_id="h1\n", command_id="x"),
     player("bob"), C.INVALID_ARGUMENT, "malformed_id"),
    ("odd_command_id", "Register", pb.RegisterRequest(tournament_id="h1", command_id="a b"),
     player("bob"), C.INVALID_ARGUMENT, "malformed_id"),
    ("huge_id", "Register", pb.RegisterRequest(tournament_id="h" * 10_000, command_id="x"),
     player("bob"), C.INVALID_ARGUMENT, "malformed_id"),
    ("unknown", "Register", pb.RegisterRequest(tournament_id="nope", command_id="x"),
     player("bob"), C.NOT_FOUND, "no_tournament"),
    ("not_registered", "Unregister", pb.UnregisterRequest(tournament_id="h1", command_id="x"),
     player("bob"), C.NOT_FOUND, "not_registered"),
    ("re_entry_in_a_sit_and_go", "ReEnter",
     pb.ReEnterRequest(tournament_id="h1", command_id="x"), player("ann"),
     C.FAILED_PRECONDITION, "still_in"),
    ("bad_stakes", "CreateTournament",
     pb.CreateTournamentRequest(tournament_id="h3", command_id="x", config=pb.TournamentConfig(
         name="x", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=1, seats=2,
         structure=pb.TournamentStructure(starting_stack=100, levels=[pb.TournamentLevel(
             ante=1, bring_in=50, small_bet=50, big_bet=100, seconds=60)]))),
     OPERATOR, C.INVALID_ARGUMENT, "invalid_stakes"),
    ("no_config", "CreateTournament", pb.CreateTournamentRequest(tournament_id="h4",
                                                                command_id="x"),
     OPERATOR, C.INVALID_ARGUMENT, "bad_request"),
    *[(f"start_at_{n}", "CreateTournament", pb.CreateTournamentRequest(
        tournament_id="h5", command_id="x", config=mtt_starting(start)),
       OPERATOR, C.INVALID_ARGUMENT, "bad_request")
      for n, start in (("nanos_negative", {"seconds": 4_000_000_000, "nanos": -5}),
                       ("nanos_past", {"seconds": 4_000_000_000, "nanos": 10**9}),
                       ("seconds_huge", {"seconds": 2**62}),
                       ("seconds_negative", {"seconds": -(2**62)}),
                       ("year_10000", {"seconds": 253_402_300_800}))],
    *[(f"unplayable_{n}", "CreateTournament", pb.CreateTournamentRequest(
        tournament_id="h6", command_id="x", config=config), OPERATOR, C.INVALID_ARGUMENT,
        "bad_request")
      for n, config in (
          ("sum_overflows", pb.TournamentConfig(
              name="x", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=2**62, fee=2**62,
              seats=3, structure=pb.TournamentStructure(preset="turbo"))),
          ("nul_name", pb.TournamentConfig(
              name="a\x00b", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=10, seats=3,
              structure=pb.TournamentStructure(preset="turbo"))),
          ("min_entrants_0", pb.TournamentConfig(
              name="x", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=10, seats=8,
              start_at={"seconds": 4_000_000_000},
              structure=pb.TournamentStructure(preset="turbo"))))],
])
async def test_a_hostile_request_gets_its_status_and_changes_nothing(
        tournament: RunningTournament, wallet: RunningWallet, name: str, method: str,
        request_: object, who: Principal, code: grpc.StatusCode, reason: str) -> None:
    client = tournament.client
    await funded(wallet, "ann")
    await client.create("h1", SNG)
    await client.register("h1", player("ann"), "first")
    before = await version(tournament, "h1")
    counted = refusals(tournament, method, code)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await getattr(client.stub, method)(request_, metadata=client.md(who), timeout=10)
    assert info.value.code() is code, info.value.details()
    assert rpc_error_reason(info.value) == reason
    assert refusals(tournament, method, code) == counted + 1
    await asyncio.sleep(0.2)  # the process manager's rounds add only the entry's payment
    view = await client.get("h1")
    assert view.version <= before + 1 and [e.player_id for e in view.entries] == ["ann"]
    assert (await wallet.client.pool("h1")).balance == 100


async def test_forged_tokens_and_undecodable_bodies(tournament: RunningTournament,
                                                    wallet: RunningWallet) -> None:
    client = tournament.client
    await client.create("f1", SNG)
    before = await version(tournament, "f1")
    forger = TournamentClient(client.stub, DevKeys.generate().issuer())
    forged = TokenBook(DevKeys.generate().issuer())
    for md in (forger.md(OPERATOR), forged.metadata(player("ann")),
               (("authorization", "Bearer not-a-token"),), ()):
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await client.stub.Register(pb.RegisterRequest(tournament_id="f1", command_id="x"),
                                       metadata=md, timeout=10)
        assert info.value.code() is C.UNAUTHENTICATED
    async with grpc.aio.insecure_channel(f"127.0.0.1:{tournament.port}") as channel:
        for method in ("Register", "CreateTournament", "GetTournament"):
            call = channel.unary_unary(f"/stud.v1.TournamentService/{method}")
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await call(b"\xff\xff\xff", metadata=client.md(player("ann")), timeout=10)
            assert info.value.code() is C.INVALID_ARGUMENT
            assert rpc_error_reason(info.value) == "undecodable_request"
    assert await version(tournament, "f1") == before


@pytest.mark.parametrize("token", [
    "\u0661\u0662",  # Arabic-Indic "12": str.isdigit() took it for a number
    "1" * 10_000,  # past Python's 4,300-digit int() limit: ValueError, then INTERNAL
    "+1", " 1", "1\n", "0x1", "-1",
    "after:", "after:p 1", "after:" + "p" * 65, "p1", "10001",  # a legacy offset too deep
])
async def test_list_tournaments_refuses_a_page_token_that_is_not_ascii_digits(
        tournament: RunningTournament, token: str) -> None:
    """Issue 17, F9's class of bug in the tournament's lobby: a page token is ``after:`` and
    an id (keyset paging), or a legacy offset of 1 to 9 ASCII digits (up to 10,000), anything
    else ``INVALID_ARGUMENT``, counted, never ``INTERNAL``."""
    client = tournament.client
    await client.create("p1", SNG)
    await client.create("p2", SNG)
    first = await client.stub.ListTournaments(pb.ListTournamentsRequest(page_size=1),
                                              metadata=client.md(player("ann")), timeout=10)
    assert first.next_page_token == "after:p2"  # the token a client is given is taken
    for given in (first.next_page_token, "1"):  # a legacy offset (across the deploy) too
        second = await client.stub.ListTournaments(
            pb.ListTournamentsRequest(page_size=1, page_token=given),
            metadata=client.md(player("ann")), timeout=10)
        assert [t.tournament_id for t in second.tournaments] == ["p1"]
        assert second.next_page_token == ""
    counted = refusals(tournament, "ListTournaments", C.INVALID_ARGUMENT)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.stub.ListTournaments(pb.ListTournamentsRequest(page_token=token),
                                          metadata=client.md(player("ann")), timeout=10)
    assert info.value.code() is C.INVALID_ARGUMENT, info.value.details()
    assert rpc_error_reason(info.value) == "bad_request"
    assert refusals(tournament, "ListTournaments", C.INVALID_ARGUMENT) == counted + 1


async def test_the_lobby_folds_only_a_tournament_that_changed(
        tournament: RunningTournament, wallet: RunningWallet,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The app keeps the states of the tournaments read last only (one here): a lobby that
    walks them all reads each one's version and folds again only one whose version moved,
    and shows it as it now is."""
    monkeypatch.setattr(tournament_app, "STATES_KEPT", 1)
    client = tournament.client
    for tid in ("l1", "l2", "l3"):
        await client.create(tid, SNG)
    loads: list[str] = []  # the lobby's folds (the process manager's own loads not counted)

    def counted(t: Tournament) -> pb.TournamentSummary:
        loads.append(t.tournament_id)
        return summary(t)

    monkeypatch.setattr(tournament_server, "summary", counted)

    async def lobby() -> dict[str, int]:
        page = await client.stub.ListTournaments(pb.ListTournamentsRequest(),
                                                 metadata=client.md(player("ann")), timeout=10)
        return {t.tournament_id: t.entries for t in page.tournaments}

    first = await lobby()
    assert first == {"l1": 0, "l2": 0, "l3": 0}
    loads.clear()
    assert await lobby() == first and loads == []  # nothing moved: nothing folded
    await funded(wallet, "ann")
    await client.register("l2", player("ann"), "reg-ann-l2")
    await eventually(lambda: _entries(client, "l2", 1))
    loads.clear()
    assert await lobby() == {"l1": 0, "l2": 1, "l3": 0} and loads == ["l2"]


async def _entries(client: TournamentClient, tid: str, n: int) -> bool:
    return sum(e.paid for e in (await client.get(tid)).entries) == n


async def test_a_watch_ends_when_its_token_expires_mid_stream(
        tournament: RunningTournament) -> None:
    """WatchTournament delivers while the token is valid and ends UNAUTHENTICATED
    token_expired once it expires, with the stream open; a fresh token resumes it."""
    client = tournament.client
    await client.create("x1", SNG)
    short = TokenBook(client.keys, ttl_seconds=2)
    call = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id="x1"),
                                       metadata=tuple(short.metadata(player("eve"))))
    first = await call.read()
    assert first.sequence == 1
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async with asyncio.timeout(30):
            while True:
                await call.read()
    assert caught.value.code() is C.UNAUTHENTICATED
    assert rpc_error_reason(caught.value) == "token_expired"
    again = client.stub.WatchTournament(
        pb.WatchTournamentRequest(tournament_id="x1", after_sequence=0),
        metadata=client.md(player("eve")))
    assert (await again.read()).sequence == 1
    again.cancel()


async def test_floods_of_watches_are_limited(tournament: RunningTournament) -> None:
    """One caller may hold a bounded number of open watches (RESOURCE_EXHAUSTED
    too_many_streams past it, counted); another caller still watches; a closed one frees
    its place."""
    client = tournament.client
    await client.create("x2", SNG)
    limit = tournament.settings.watches_per_player
    calls = []
    for _ in range(limit):
        call = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id="x2"),
                                           metadata=client.md(player("zed")))
        await call.read()  # open and delivering
        calls.append(call)
    counted = refusals(tournament, "WatchTournament", C.RESOURCE_EXHAUSTED)
    extra = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id="x2"),
                                        metadata=client.md(player("zed")))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await extra.read()
    assert caught.value.code() is C.RESOURCE_EXHAUSTED
    assert rpc_error_reason(caught.value) == "too_many_streams"
    assert refusals(tournament, "WatchTournament", C.RESOURCE_EXHAUSTED) == counted + 1
    other = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id="x2"),
                                        metadata=client.md(player("amy")))
    assert (await other.read()).sequence == 1
    other.cancel()
    calls.pop().cancel()

    async def reopened() -> bool:
        again = client.stub.WatchTournament(pb.WatchTournamentRequest(tournament_id="x2"),
                                            metadata=client.md(player("zed")))
        try:
            return (await again.read()).sequence == 1
        except grpc.aio.AioRpcError:
            return False
        finally:
            again.cancel()

    await eventually(reopened)
    for call in calls:
        call.cancel()


@pytest.mark.parametrize("after", [2**64 - 1, 2])
async def test_a_watch_after_the_end_is_out_of_range(tournament: RunningTournament,
                                                      wallet: RunningWallet,
                                                      after: int) -> None:
    """G5: a resume point past the tournament's last event is OUT_OF_RANGE ``after_the_end``
    at once, as the table's watch answers (it stayed open and silent); the last event's own
    sequence still resumes (nothing after it yet)."""
    client = tournament.client
    await funded(wallet, "bob")
    await client.create("o1", SNG)  # version 1
    counted = refusals(tournament, "WatchTournament", C.OUT_OF_RANGE)
    call = client.stub.WatchTournament(
        pb.WatchTournamentRequest(tournament_id="o1", after_sequence=after),
        metadata=client.md(player("ann")), timeout=10)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call.read()
    assert info.value.code() is C.OUT_OF_RANGE, info.value.details()
    assert rpc_error_reason(info.value) == "after_the_end"
    assert refusals(tournament, "WatchTournament", C.OUT_OF_RANGE) == counted + 1
    at_end = client.stub.WatchTournament(
        pb.WatchTournamentRequest(tournament_id="o1", after_sequence=1),
        metadata=client.md(player("ann")))
    await client.register("o1", player("bob"), "r-bob")
    assert (await at_end.read()).sequence == 2
    at_end.cancel()


async def test_a_past_start_is_refused_and_the_id_stays_free(
        tournament: RunningTournament) -> None:
    """G5 over gRPC: a multi-table start in the past is INVALID_ARGUMENT (it was created and
    cancelled below_minimum in the same reply, the id burnt); the id is still free."""
    client = tournament.client
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.create("past1", mtt_starting({"seconds": 1_000_000_000}))
    assert info.value.code() is C.INVALID_ARGUMENT
    assert "config.start_at" in (info.value.details() or "")
    created = await client.create("past1", mtt_starting({"seconds": 4_000_000_000}), "c-2")
    assert created.events[0].event.HasField("created") and len(created.events) == 1


async def test_register_answers_the_entry_id_and_a_retry_the_same(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    """Issue 29: the entry id of a registration was only inside the reply's events; the
    reply names it (``entry_id``), a retry too, and Unregister names the entry withdrawn."""
    client = tournament.client
    await funded(wallet, "ann", "bob")
    await client.create("id1", SNG)
    first = await client.register("id1", player("ann"), "r-ann")
    second = await client.register("id1", player("bob"), "r-bob")
    assert (first.entry_id, second.entry_id) == ("e1", "e2")
    again = await client.register("id1", player("bob"), "r-bob")
    assert again.duplicate and again.entry_id == "e2"
    await eventually(lambda: _entries(client, "id1", 2))
    gone = await client.unregister("id1", player("ann"), "u-ann")
    assert gone.entry_id == "e1"
    created = await client.create("id2", SNG)
    assert created.entry_id == ""


async def test_unregister_while_the_buy_in_is_charged_says_when_to_retry(
        tournament: RunningTournament, wallet: RunningWallet) -> None:
    """Issue 29: Unregister right after Register was ``payment_pending`` with no hint of
    when to retry; the refusal carries ``retry_after_ms`` (ErrorInfo metadata, the process
    manager's round) and says it, and a retry after the charge is taken."""
    from studkit.grpc_errors import rpc_error_info
    client = tournament.client
    await funded(wallet, "ann")
    await client.create("u1", SNG)
    await tournament.deps.stop_driver()  # nothing charges the buy-in meanwhile
    await client.register("u1", player("ann"), "r-ann")
    before = await version(tournament, "u1")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.unregister("u1", player("ann"), "u-ann")
    assert info.value.code() is C.FAILED_PRECONDITION
    assert rpc_error_reason(info.value) == "payment_pending"
    details = rpc_error_info(info.value)
    assert details is not None and details.metadata["retry_after_ms"] == "50"
    assert "retry in" in (info.value.details() or "")
    assert await version(tournament, "u1") == before


@pytest.mark.parametrize(("funds", "reason"), [(None, "unknown_account"),
                                               (109, "insufficient_funds")])
async def test_register_without_the_money_is_refused_at_once(
        tournament: RunningTournament, wallet: RunningWallet, funds: int | None,
        reason: str) -> None:
    """Issue 29: Register answered OK for a player with no account or short funds, the
    refusal coming later as EntryDropped on the stream only. What the wallet's balance
    shows is refused at once (FAILED_PRECONDITION, the wallet's reason), nothing written;
    with the money there, the same player registers."""
    client = tournament.client
    if funds is not None:
        await funded(wallet, "poor", funds=funds)
    await client.create("m1", SNG)  # 100 + 10
    before = await version(tournament, "m1")
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await client.register("m1", player("poor"), "r-poor")
    assert info.value.code() is C.FAILED_PRECONDITION, info.value.details()
    assert rpc_error_reason(info.value) == reason
    assert await version(tournament, "m1") == before
    if funds is None:
        await wallet.client.create_account("poor")
    await wallet.client.deposit("poor", 1, "d-poor-more")
    if funds is None:
        await wallet.client.deposit("poor", 109, "d-poor-rest")
    ok = await client.register("m1", player("poor"), "r-poor-2")
    assert ok.entry_id == "e1"
    await eventually(lambda: _entries(client, "m1", 1))


AUDITOR = Principal(Role.AUDITOR, "audit")


async def test_an_auditor_asks_whether_a_tournament_checks_out(
        tournament: RunningTournament, wallet: RunningWallet, dev_keys: DevKeys) -> None:
    """Issue 29: an auditor with a token and gRPC could not ask whether a tournament's
    history checks out (``stud replay tournament`` needs Redis). VerifyTournament: not
    verified while a cancel's refund is unpaid (G2's case said verified), verified once the
    wallet has refunded it and the pool is empty; a player may not ask."""
    client = tournament.client
    await funded(wallet, "ann")
    await client.create("v1", SNG)
    await tournament.deps.stop_driver()  # nothing charges or pays meanwhile
    await client.register("v1", player("ann"), "r-ann")
    verify = client.stub.VerifyTournament
    request = pb.VerifyTournamentRequest(tournament_id="v1")
    first = await verify(request, metadata=client.md(AUDITOR), timeout=10)
    assert first.verified and first.pool_checked and first.problems == []
    assert (first.pool, first.pool_held) == (0, 0)  # registering, the entry being charged
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await verify(request, metadata=client.md(player("ann")), timeout=10)
    assert info.value.code() is C.PERMISSION_DENIED
    async with running_tournament(tournament.settings, dev_keys) as second:
        await eventually(lambda: _entries(second.client, "v1", 1))
        await second.deps.stop_driver()
        await client.cancel("v1", "no field", "c-v1")
        stuck = await verify(request, metadata=client.md(AUDITOR), timeout=10)
        assert not stuck.verified and stuck.problems == []
        assert [u for u in stuck.unpaid if "refund/e1" in u]
        assert (stuck.pool, stuck.pool_held) == (100, 100)
    async with running_tournament(tournament.settings, dev_keys) as third:
        async def settled() -> bool:
            v = await third.client.stub.VerifyTournament(
                request, metadata=client.md(OPERATOR), timeout=10)
            return v.verified
        await eventually(settled)
        done = await verify(request, metadata=client.md(AUDITOR), timeout=10)
    assert done.pool_held == 0 and done.unpaid == [] and done.phase == pb.TOURNAMENT_PHASE_CANCELLED
