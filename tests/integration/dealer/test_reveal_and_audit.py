"""Reveals and audits over real gRPC and Redis: hands are revealed only at the showdown or an
all-in runout and only while still in (checked by folding the public stream); after the hand an
auditor obtains the deck, and the verification function accepts the real hand and rejects any
altered card or salt."""

from __future__ import annotations

import dataclasses

import grpc
import pytest

from rules import Phase, TableConfig
from rules.events import HandExposed, HandMucked, HandShown
from studkit.deckproof import audit_from_proto, verify_hand
from studkit.grpc_server import rpc_error_reason
from studkit.mapping import event_from_envelope, game_envelopes
from studtest.dealer import AUDITOR, TABLE, MakeTable, TableRole

pytestmark = pytest.mark.integration

PLAYERS = {1: "ann", 4: "bob", 6: "cat"}


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value


async def public_events(table: TableRole) -> list[object]:
    """The table's stream as an auditor reads it."""
    stored = await table.events.read(table.table_id)
    return [event_from_envelope(e) for e in game_envelopes(s.envelope for s in stored)]


class TestReveal:
    async def test_refused_before_the_showdown(self, make_table: MakeTable) -> None:
        """While the hand is dealing or betting, no hand is revealed."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        error = await refused(table.dealer.reveal(table.table_id, 1))
        assert rpc_error_reason(error) == "not_at_showdown"
        await table.deal()
        for seats in ((), (1,), (4, 6)):
            error = await refused(table.dealer.reveal(table.table_id, 1, seats))
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert rpc_error_reason(error) == "not_at_showdown"
        await table.play_until(Phase.SHOWDOWN)
        error = await refused(table.dealer.reveal(table.table_id, 2))
        assert rpc_error_reason(error) == "not_current_hand"

    async def test_refused_for_a_folded_seat_at_the_showdown(
        self, make_table: MakeTable
    ) -> None:
        """At the showdown a folded seat, or a seat not dealt in, is never revealed."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.play_until(Phase.SHOWDOWN, folds={4: 5})
        assert table.t.hand.player(4).folded
        for seats in ((4,), (1, 4), (2,)):
            error = await refused(table.dealer.reveal(table.table_id, 1, seats))
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert rpc_error_reason(error) == "seat_not_in_hand"

    async def test_allowed_at_the_showdown(self, make_table: MakeTable) -> None:
        """At the showdown the hands still in are revealed, three down cards each, and the
        rules accept them to settle the hand; the folded seat stays secret in the record."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.play_until(Phase.SHOWDOWN, folds={4: 5})
        hands = await table.revealed()
        assert [h.seat for h in hands] == [1, 6] and all(len(h.down) == 3 for h in hands)
        await table.step()
        assert table.t.hand.is_over
        again = await table.dealer.reveal(table.table_id, 1, (1, 6))
        assert [h.seat for h in again.hands] == [1, 6]  # a retry after the showdown
        shown = {e.seat for e in await public_events(table)
                 if isinstance(e, HandShown | HandMucked)}
        assert shown == {1, 6}

    async def test_all_in_runout_reveals_then_deals_face_up(self, make_table: MakeTable) -> None:
        """A player all-in on 3rd street: both hands are turned up (REVEAL), the rest is dealt
        face up and the hand settles."""
        table = await make_table({2: "ann", 5: "bob"}, stacks={2: 90})
        await table.start_hand()
        await table.play_until(Phase.REVEAL)
        assert table.t.hand.phase == Phase.REVEAL
        await table.step()
        exposed = [e for e in table.t.events if isinstance(e, HandExposed)]
        assert [e.seat for e in exposed] == [2, 5]
        await table.play_until(Phase.COMPLETE)
        assert table.t.hand.is_over
        later = [r for r in table.replies[1:]]
        assert later and all(c.up for r in later for c in r.cards)

    async def test_only_the_table_service_reveals(self, make_table: MakeTable) -> None:
        """An auditor's token does not reveal hands during play."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.play_until(Phase.SHOWDOWN)
        error = await refused(table.dealer.reveal(table.table_id, 1, who=AUDITOR))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED


class TestAudit:
    async def test_refused_while_the_hand_is_played(self, make_table: MakeTable) -> None:
        """No deck is opened before the hand has ended, and no unstarted hand has one."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.deal()
        error = await refused(table.dealer.audit(table.table_id, 1))
        assert rpc_error_reason(error) == "hand_not_over"
        error = await refused(table.dealer.audit(table.table_id, 2))
        assert error.code() == grpc.StatusCode.NOT_FOUND

    @pytest.mark.parametrize("config,players,folds", [
        (TableConfig(), PLAYERS, {}),
        (TableConfig(), PLAYERS, {4: 3, 6: 6}),
        (TableConfig(burn_cards=True), {s: f"p{s}" for s in range(1, 9)}, {}),
        (TableConfig(burn_cards=True), {s: f"p{s}" for s in range(1, 8)}, {}),
    ], ids=["showdown", "folds", "burns-8-community", "burns-7-reshuffle"])
    async def test_a_real_hand_verifies(self, make_table: MakeTable, config: TableConfig,
                                        players: dict[int, str], folds: dict[int, int]) -> None:
        """The commitment in HandStarted opens with the audited deck, salt and reshuffle key,
        and every public card of the hand came from that deck in dealing order (burns and
        the reshuffle of burns included, RULES 10.4)."""
        table = await make_table(players, config)
        commitment = await table.start_hand()
        while not table.t.hand.is_over:
            await table.step(folds=folds)
        reply = await table.dealer.audit(table.table_id, 1)
        assert reply.commitment == commitment and len(reply.deck) == 52
        assert len(reply.salt) == 32 and reply.scheme.startswith("sha256(")
        audit = audit_from_proto(reply)
        result = verify_hand(audit, await public_events(table))  # type: ignore[arg-type]
        assert result.ok, result.problems
        assert result.draws == reply.cards_used

    async def test_an_altered_card_or_salt_fails(self, make_table: MakeTable) -> None:
        """Swapping two cards of the audited deck, or flipping a bit of the salt, fails the
        verification; so does a public up card that is not the deck's."""
        table = await make_table(PLAYERS)
        await table.play_hand()
        audit = audit_from_proto(await table.dealer.audit(table.table_id, 1))
        events = await public_events(table)
        order = list(audit.deck.order)
        order[0], order[-1] = order[-1], order[0]
        swapped = dataclasses.replace(audit, deck=dataclasses.replace(audit.deck,
                                                                      order=tuple(order)))
        assert not verify_hand(swapped, events).ok  # type: ignore[arg-type]
        salt = bytes([audit.deck.salt[0] ^ 0x01]) + audit.deck.salt[1:]
        salted = dataclasses.replace(audit, deck=dataclasses.replace(audit.deck, salt=salt))
        assert not verify_hand(salted, events).ok  # type: ignore[arg-type]

    async def test_a_second_hand_has_a_fresh_deck(self, make_table: MakeTable) -> None:
        """Each hand gets its own shuffle, salt and commitment."""
        table = await make_table(PLAYERS)
        await table.play_hand()
        await table.play_hand()
        first = await table.dealer.audit(table.table_id, 1)
        second = await table.dealer.audit(table.table_id, 2)
        assert first.commitment != second.commitment and first.salt != second.salt
        assert list(first.deck) != list(second.deck)
        assert verify_hand(audit_from_proto(second), await public_events(table)).ok  # type: ignore[arg-type]

    async def test_only_auditors(self, make_table: MakeTable) -> None:
        """The table service cannot open a deck, even after the hand."""
        table = await make_table(PLAYERS)
        await table.play_hand()
        error = await refused(table.dealer.audit(table.table_id, 1, who=TABLE))
        assert error.code() == grpc.StatusCode.PERMISSION_DENIED


class TestVerifyTool:
    async def test_reports_each_hand(self, make_table: MakeTable) -> None:
        """``python -m dealer.verify``'s core: a finished hand is OK, a hand that never
        started is reported as not verified, and no line names a card."""
        from dealer.verify import verify_hands

        table = await make_table(PLAYERS)
        await table.play_hand()
        token = table.dealer.tokens.token(AUDITOR)
        events = await public_events(table)
        reports = await verify_hands(table.dealer.stub, token, events,  # type: ignore[arg-type]
                                     table.table_id, [1, 2])
        assert [r.ok for r in reports] == [True, False]
        assert "OK" in reports[0].line() and "NOT_FOUND" in reports[1].line()
