"""Hole-card secrecy over real gRPC and Redis: a player reads their own down cards with their
own token and nobody else's; other players, the table service, auditors, forged, expired and
malformed tokens get nothing; the table's Redis user cannot touch the dealer's keys; and no
card value reaches a log line."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import AsyncIterator

import grpc
import pytest
import redis.asyncio as aredis
from redis.exceptions import NoPermissionError
from structlog.testing import capture_logs

import dealer.tables as dealer_tables
from dealer.store import hand_key
from rules import Phase, TableConfig
from stud.v1 import dealer_pb2 as pb
from studkit.auth import Principal, bearer_metadata
from studkit.mapping import card_from_proto
from studkit.redis_client import connect
from studtest import redis as test_redis_source
from studtest.dealer import AUDITOR, TABLE, MakeTable, RunningDealer, deal_request, player
from studtools.devkeys import DevKeys
from studtools.redis_server import acl_rules

pytestmark = pytest.mark.integration

PLAYERS = {2: "ann", 5: "bob", 7: "cat"}
CARD_TEXT = re.compile(r"(?<![A-Za-z0-9])[2-9TJQKA][cdhs](?![A-Za-z0-9])")


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value


def cards_of(reply: pb.MyCards) -> tuple[list[str], list[str]]:
    return ([str(card_from_proto(c)) for c in reply.down],
            [str(card_from_proto(c)) for c in reply.up])


class TestOwnCards:
    async def test_each_player_reads_only_their_own_down_cards(
        self, make_table: MakeTable
    ) -> None:
        """Each token gets the two down cards of its own seat; the three hands are disjoint
        and agree with what the showdown later reveals."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.deal()
        seen = {}
        for seat, name in PLAYERS.items():
            reply = await table.dealer.my_cards(table.table_id, player(name))
            down, up = cards_of(reply)
            assert reply.seat == seat and reply.hand_number == 1
            assert len(down) == 2 and len(up) == 1
            assert up == [str(table.t.hand.player(seat).up[0])]
            seen[seat] = down
        everything = [c for down in seen.values() for c in down]
        assert len(set(everything)) == 6
        await table.play_until(Phase.SHOWDOWN)
        revealed = {h.seat: [str(c) for c in h.down] for h in await table.revealed()}
        for seat, down in seen.items():
            assert revealed[seat][:2] == down

    async def test_a_card_the_table_has_not_recorded_is_not_yet_the_players(
        self, make_table: MakeTable
    ) -> None:
        """Cards drawn for a street that is not in the public stream yet are not shown."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.dealer.deal(deal_request(table.table_id, 1, table.t))
        reply = await table.dealer.my_cards(table.table_id, player("ann"))
        assert list(reply.down) == [] and list(reply.up) == []
        await table.deal()  # now recorded: the same cards
        reply = await table.dealer.my_cards(table.table_id, player("ann"))
        assert len(reply.down) == 2

    @pytest.mark.parametrize("who", [TABLE, AUDITOR, player("eve")])
    async def test_nobody_else_reads_them(self, make_table: MakeTable, who: Principal) -> None:
        """The table service, an auditor and a player not dealt in are refused."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.deal()
        error = await refused(table.dealer.my_cards(table.table_id, who))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED

    @pytest.mark.parametrize("kind", ["forged", "expired", "malformed", "missing"])
    async def test_bad_tokens_read_nothing(self, make_table: MakeTable, dev_keys: DevKeys,
                                           kind: str) -> None:
        """A token signed with another key, an expired one, garbage or none at all is
        UNAUTHENTICATED."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.deal()
        ann = player("ann")
        metadata: tuple[tuple[str, str], ...] = ()
        if kind == "forged":
            forger = DevKeys.generate(services=()).issuer()
            metadata = bearer_metadata(forger.issue(ann))
        elif kind == "expired":
            old = dev_keys.issuer(clock=lambda: time.time() - 7200)
            metadata = bearer_metadata(old.issue(ann, ttl_seconds=60))
        elif kind == "malformed":
            metadata = bearer_metadata("not.a.jwt")
        request = pb.GetMyCardsRequest(table_id=table.table_id)
        error = await refused(table.dealer.stub.GetMyCards(request, metadata=metadata,
                                                           timeout=5))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED

    async def test_players_cannot_reveal_or_audit(self, make_table: MakeTable) -> None:
        """The other ways to down cards are closed to players."""
        table = await make_table(PLAYERS)
        await table.play_hand()
        error = await refused(table.dealer.reveal(table.table_id, 1, who=player("ann")))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        error = await refused(table.dealer.audit(table.table_id, 1, who=player("ann")))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        error = await refused(table.dealer.audit(table.table_id, 1, who=TABLE))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED

    async def test_earlier_hands_by_number(self, make_table: MakeTable) -> None:
        """A player reads their cards of an earlier hand they were dealt into."""
        table = await make_table(PLAYERS)
        await table.play_hand()
        await table.start_hand()
        first = await table.dealer.my_cards(table.table_id, player("bob"), hand_number=1)
        assert first.hand_number == 1 and len(first.down) == 3
        latest = await table.dealer.my_cards(table.table_id, player("bob"))
        assert latest.hand_number == 2 and list(latest.down) == []
        error = await refused(table.dealer.my_cards(table.table_id, player("bob"), 3))
        assert error.code() == grpc.StatusCode.NOT_FOUND


    @pytest.mark.parametrize("runs", [dealer_tables.SEATING_RUNS_KEPT, 0])
    async def test_hands_older_than_a_view_keeps(self, make_table: MakeTable,
                                                 dealer: RunningDealer, runs: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """A hand older than the dealer's view keeps notes of (``HANDS_KEPT``, 1 here) has
        its seating from the view's runs and its cards counted from its events, or, older
        than the runs (none kept here), the stream folded again: the same cards and the
        same proof as when it was the latest, and still nothing for a player not dealt
        into it."""
        monkeypatch.setattr(dealer_tables, "HANDS_KEPT", 1)
        monkeypatch.setattr(dealer_tables, "SEATING_RUNS_KEPT", runs)
        table = await make_table(PLAYERS)
        await table.play_hand(folds={2: 3})
        first = await table.dealer.my_cards(table.table_id, player("bob"), hand_number=1)
        proof = await dealer.client.hand_proof(table.table_id, 1, player("ann"))
        await table.play_hand()
        await table.start_hand()
        view = await dealer.deps.app._tables.view(table.table_id)
        assert view.record(3) is not None and view.record(3).counted  # type: ignore[union-attr]
        assert view.record(1) == (None if not runs else dealer_tables.HandRecord(
            {2: "ann", 5: "bob", 7: "cat"}, counted=False))
        for _ in range(2):  # folded again, then from the cache of older hands
            again = await table.dealer.my_cards(table.table_id, player("bob"), hand_number=1)
            assert again == first and len(again.down) == 3
            assert await dealer.client.hand_proof(table.table_id, 1, player("ann")) == proof
        assert proof.complete and proof.openings
        error = await refused(table.dealer.my_cards(table.table_id, player("dan"), 1))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED
        error = await refused(table.dealer.my_cards(table.table_id, player("bob"), 4))
        assert error.code() == grpc.StatusCode.NOT_FOUND


class TestWatchMyCards:
    async def test_the_stream_follows_the_players_cards(
        self, make_table: MakeTable, dealer: RunningDealer
    ) -> None:
        """The stream sends the cards as they are, then again after each street dealt to
        the player; it never carries another seat's cards."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        call = dealer.client.stub.WatchMyCards(
            pb.WatchMyCardsRequest(table_id=table.table_id),
            metadata=dealer.client.metadata(player("cat")), timeout=30)
        stream: AsyncIterator[pb.MyCards] = call.__aiter__()
        try:
            first = await asyncio.wait_for(anext(stream), 10)
            assert first.seat == 7 and list(first.down) == []
            await table.deal()
            third = await asyncio.wait_for(anext(stream), 10)
            assert (len(third.down), len(third.up)) == (2, 1)
            await table.play_until(Phase.DEALING)  # 3rd street betting done
            await table.deal()
            fourth = await asyncio.wait_for(anext(stream), 10)
            assert (len(fourth.down), len(fourth.up)) == (2, 2)
            assert list(fourth.down) == list(third.down)
            direct = await table.dealer.my_cards(table.table_id, player("cat"))
            assert direct == fourth
        finally:
            call.cancel()

    async def test_cards_are_looked_up_only_when_the_players_change(
        self, make_table: MakeTable, dealer: RunningDealer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Every player watching, two hands played: each stream ends each hand with exactly
        what GetMyCards gives, never sends the same cards twice in a row, and the dealer
        looked the cards up (the hand's record read, the openings made) once per message,
        not at every card dealt to anyone (issue 35: 3 watchers x every card event)."""
        table = await make_table(PLAYERS)
        players = dealer.deps.app._players
        look_up, lookups = players._own_cards, [0]

        async def counted(*args: object) -> object:
            lookups[0] += 1
            return await look_up(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(players, "_own_cards", counted)
        received: dict[str, list[pb.MyCards]] = {name: [] for name in PLAYERS.values()}
        calls = {name: dealer.client.stub.WatchMyCards(
            pb.WatchMyCardsRequest(table_id=table.table_id),
            metadata=dealer.client.metadata(player(name)), timeout=60)
            for name in PLAYERS.values()}

        async def read(name: str) -> None:
            async for cards in calls[name]:
                received[name].append(cards)

        readers = [asyncio.create_task(read(name)) for name in PLAYERS.values()]
        try:
            await table.play_hand()
            await table.play_hand()
            deadline = time.monotonic() + 10
            while not all(got and got[-1].hand_number == 2 and len(got[-1].down) == 3
                          for got in received.values()):
                assert time.monotonic() < deadline, {n: len(g) for n, g in received.items()}
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)  # anything further would have come by now
            assert lookups[0] == sum(len(got) for got in received.values())
        finally:
            for call in calls.values():
                call.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
        for name, got in received.items():
            assert all(a != b for a, b in itertools.pairwise(got)), name
            for hand in (1, 2):
                last = [cards for cards in got if cards.hand_number == hand][-1]
                assert last == await table.dealer.my_cards(table.table_id, player(name), hand)
                assert (len(last.down), len(last.up)) == (3, 4)
            # the cards as they were, then a message per street dealt to them (3rd: up to 3)
            assert 2 * 6 <= len(got) <= 1 + 2 * 8, [len(c.down) + len(c.up) for c in got]

    async def test_the_table_cannot_watch(self, make_table: MakeTable,
                                          dealer: RunningDealer) -> None:
        """Only players may watch their cards."""
        table = await make_table(PLAYERS)
        call = dealer.client.stub.WatchMyCards(
            pb.WatchMyCardsRequest(table_id=table.table_id),
            metadata=dealer.client.metadata(TABLE), timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for _ in call:
                pass
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def table_user(redis_server: test_redis_source.TestRedis, admin_url: str) -> aredis.Redis:
    """A client logged in as the table service's Redis user: the launcher's, or one created
    with the same ACL rules when the session's Redis comes from elsewhere."""
    if redis_server.server is not None:
        return connect(redis_server.server.url_for("table"))
    admin = connect(admin_url)
    info = await admin.info("server")
    version = tuple(int(p) for p in str(info["redis_version"]).split("."))
    password = "table-acl-test-pw"
    await admin.execute_command("ACL", "SETUSER", "table-acl-test", "reset", "on",
                                f">{password}", *acl_rules("table", version))
    await admin.aclose()
    host_port = admin_url.split("://", 1)[1].split("/", 1)[0].split("@")[-1]
    return connect(f"redis://table-acl-test:{password}@{host_port}/0")


class TestRedisAcl:
    async def test_the_table_user_gets_noperm_on_dealer_keys(
        self, make_table: MakeTable, redis_server: test_redis_source.TestRedis, redis_url: str
    ) -> None:
        """Reading, writing or deleting a hand's deck as the table's Redis user fails with
        NOPERM, while the table's own stream stays readable to it."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.deal()
        client = await table_user(redis_server, redis_url)
        key = hand_key(table.table_id, 1)
        try:
            for attempt in (client.hgetall(key), client.hget(key, "order"),
                            client.hset(key, "order", b"x"), client.delete(key),
                            client.type(key)):
                with pytest.raises(NoPermissionError):
                    await attempt
            assert await client.xlen(f"stud:table:{{{table.table_id}}}:events") > 0
        finally:
            await client.aclose()


class TestLogs:
    async def test_no_card_value_reaches_a_log_line(
        self, make_table: MakeTable, dealer: RunningDealer
    ) -> None:
        """A whole hand (deals, a refused deal, own cards, reveals, audit) logs ids and counts
        only: no card written as text, no deck, no salt, no token."""
        table = await make_table({1: "ann", 2: "bob", 3: "cat", 4: "dan"},
                                 TableConfig(burn_cards=True))
        with capture_logs() as logs:
            await table.start_hand()
            wrong = deal_request(table.table_id, 1, table.t)
            wrong.slots[0].up = True
            await refused(table.dealer.deal(wrong))  # its refusal is logged too
            await table.deal()
            for name in ("ann", "bob"):
                await table.dealer.my_cards(table.table_id, player(name))
            await table.play_until(Phase.SHOWDOWN, folds={4: 4})
            await table.step()
            audit = await table.dealer.audit(table.table_id, 1)
            await refused(table.dealer.my_cards(table.table_id, TABLE))
        assert table.t.hand.is_over and logs
        text = json.dumps(logs, default=str)
        assert not CARD_TEXT.findall(text)
        assert audit.salt.hex()[:16] not in text
        assert "eyJ" not in text  # no JWT
        events = {entry.get("event") for entry in logs}
        assert {"street_dealt", "hands_revealed", "hand_audited", "rpc_rejected"} <= events
        order = [card_from_proto(c).index for c in audit.deck]
        assert json.dumps(order[:4])[1:-1] not in text


class TestOpeningsSecrecy:
    async def test_no_opening_carries_another_players_hidden_card_or_salt(
        self, make_table: MakeTable
    ) -> None:
        """Street by street, each player's openings (GetMyCards) carry the salts of their own
        down cards only, and the public proof (asked as an outsider) the salts of the cards
        the record shows only: no folded card's salt or value ever reaches anyone but its
        owner (checked against the auditor's record of every salt)."""
        table = await make_table(PLAYERS, TableConfig(burn_cards=True))
        await table.start_hand()
        received: dict[str, list[pb.MyCards]] = {name: [] for name in PLAYERS.values()}
        proofs: list[pb.HandProof] = []
        while not table.t.hand.is_over:
            await table.step(folds={5: 4, 7: 5})
            for name in PLAYERS.values():
                received[name].append(await table.dealer.my_cards(table.table_id,
                                                                  player(name), 1))
            proofs.append(await table.dealer.hand_proof(table.table_id, 1,
                                                        player("outsider")))
        audit = await table.dealer.audit(table.table_id, 1)
        salts = [bytes(s) for s in audit.card_salts]
        base = [card_from_proto(c).index for c in audit.deck]
        salt_of_card = {base[i]: salts[i] for i in range(52)}
        down: dict[int, set[int]] = {}
        for street in audit.streets:
            for d in street.cards:
                if not d.up and d.seat:
                    down.setdefault(d.seat, set()).add(card_from_proto(d.card).index)
        shown = {e.seat for e in table.t.events if type(e).__name__ in ("HandShown",
                                                                        "HandExposed")}
        for seat, name in PLAYERS.items():
            others_hidden = {salt_of_card[c] for s, cards in down.items() if s != seat
                             and s not in shown for c in cards}
            for reply in received[name]:
                blob = b"".join(o.SerializeToString() for o in reply.down_openings)
                assert not any(salt in blob for salt in others_hidden), name
                own = {salt_of_card[c] for c in down[seat]}
                assert {bytes(o.salt) for o in reply.down_openings} <= own
        hidden = {salt_of_card[c] for s, cards in down.items() if s not in shown
                  for c in cards}
        burned = {salt_of_card[card_from_proto(s.burn.card).index] for s in audit.streets
                  if s.HasField("burn")}
        assert hidden and burned
        for proof in proofs:
            blob = proof.SerializeToString()
            assert not any(salt in blob for salt in hidden | burned)
