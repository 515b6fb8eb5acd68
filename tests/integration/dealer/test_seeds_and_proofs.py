"""Seeds and per-card proofs at the dealer over real gRPC and Redis (docs/fairness.md): a
seed committed before the hand and opened after its card commitment shapes the deal order;
every refusal of CommitSeed, OpenSeed and GetHandProof is a clear status that changes
nothing; a player's openings prove their own down cards only, and the public proof opens only
what the public record shows."""

from __future__ import annotations

import secrets

import grpc
import pytest

from dealer.store import Recorded
from rules import Phase, Street
from rules.events import HandStarted
from studclient.fairness import own_from_proto, proof_from_proto
from studkit.cardcheck import verify_mine
from studkit.cardproof import seed_commitment
from studkit.deckproof import Draw, StreetDeal, audit_from_proto, verify_hand
from studkit.grpc_server import rpc_error_reason
from studkit.mapping import card_from_proto
from studtest.dealer import AUDITOR, TABLE, MakeTable, RunningDealer, player

from .test_refusals import UNDECODABLE, raw_call

pytestmark = pytest.mark.integration

PLAYERS = {1: "ann", 3: "bob", 6: "cat"}


async def refused(call: object) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value


def commitment(table_id: str, hand: int, name: str, seed: bytes) -> str:
    return seed_commitment(table_id, hand, name, seed)


class TestSeeds:
    async def test_seeds_committed_and_opened_shape_the_deal_and_verify(
            self, make_table: MakeTable, dealer: RunningDealer) -> None:
        """Ann and Bob commit before hand 1 and open after its card commitment; Cat gives
        none. The hand's proof lists both seeds, and each player verifies alone."""
        table = await make_table(PLAYERS)
        client = dealer.client
        seeds = {n: secrets.token_bytes(32) for n in ("ann", "bob")}
        for name, seed in seeds.items():
            await client.commit_seed(table.table_id, 1, commitment(table.table_id, 1, name,
                                                                   seed), player(name))
        await table.start_hand()
        started = table.t.events[-1 - len(PLAYERS)]
        assert isinstance(started, HandStarted) and len(started.card_commitment) == 64
        for name, seed in seeds.items():
            await client.open_seed(table.table_id, 1, seed, player(name))
        await table.deal()
        mine = await client.my_cards(table.table_id, player("ann"))
        await table.play_until(Phase.COMPLETE, folds={6: 4})
        proof = await client.hand_proof(table.table_id, 1, player("cat"))
        assert proof.complete and [s.player_id for s in proof.seeds] == ["ann", "bob"]
        assert not any(s.withheld for s in proof.seeds)
        events = table.t.events[table.t.events.index(started):]
        for name in ("ann", "bob", "cat"):
            cards = await client.my_cards(table.table_id, player(name), 1)
            verdict = verify_mine(table_id=table.table_id, player_id=name, events=events,
                                  burn_cards=False, proof=proof_from_proto(proof),
                                  mine=own_from_proto(cards))
            assert verdict.ok, (name, verdict.problems)
        assert len(mine.down_openings) == 2  # the openings arrive with the cards
        audit = audit_from_proto(await client.audit(table.table_id, 1))
        assert verify_hand(audit, table.t.events).ok

    async def test_a_seed_committed_but_not_opened_is_withheld(
            self, make_table: MakeTable, dealer: RunningDealer) -> None:
        """A dealt-in player who never opens delays the first deal by the wait at most and
        is listed as withheld; an opening after the first card is too late."""
        table = await make_table(PLAYERS)
        seed = secrets.token_bytes(32)
        await dealer.client.commit_seed(table.table_id, 1, commitment(
            table.table_id, 1, "bob", seed), player("bob"))
        await table.start_hand()
        await table.deal()
        error = await refused(dealer.client.open_seed(table.table_id, 1, seed, player("bob")))
        assert error.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert rpc_error_reason(error) == "seed_too_late"
        await table.play_until(Phase.COMPLETE)
        proof = await dealer.client.hand_proof(table.table_id, 1, player("ann"))
        assert [(s.player_id, s.withheld) for s in proof.seeds] == [("bob", True)]

    async def test_a_seed_committed_during_start_hand_is_bound_or_refused(
            self, make_table: MakeTable, dealer: RunningDealer,
            monkeypatch: pytest.MonkeyPatch) -> None:
        """StartHand reads the seed commitments with the table and creates the hand only
        with exactly those (issue 35: no close of its own first): a seed committed between
        the read and the deck's script is bound by the card commitment too (the commitments
        closed, then committed to); after it, a commitment is too late."""
        table = await make_table(PLAYERS)
        store = dealer.deps.store
        create, calls = store.create_hand, []
        seed = secrets.token_bytes(32)
        late = commitment(table.table_id, 1, "bob", seed)

        async def racing(*args: object, **kwargs: object) -> object:
            if not calls:  # bob commits between StartHand's read and its deck
                await dealer.client.commit_seed(table.table_id, 1, late, player("bob"))
            calls.append(await create(*args, **kwargs))  # type: ignore[arg-type]
            return calls[-1]

        monkeypatch.setattr(store, "create_hand", racing)
        await table.start_hand()
        assert calls[0] is None and calls[1] is not None  # refused, then created
        stored = await store.load_hand(table.table_id, 1)
        assert stored is not None and stored.fair is not None
        assert stored.fair.seeds == (("bob", late),)
        assert table.t.hand.card_commitment == stored.fair.commitment == \
            stored.fair.deck.header(stored.fair.seeds).commitment
        error = await refused(dealer.client.commit_seed(
            table.table_id, 1, commitment(table.table_id, 1, "ann", seed), player("ann")))
        assert rpc_error_reason(error) == "seed_too_late"
        await dealer.client.open_seed(table.table_id, 1, seed, player("bob"))
        await table.play_until(Phase.COMPLETE)
        proof = await dealer.client.hand_proof(table.table_id, 1, player("cat"))
        assert [(s.player_id, s.withheld) for s in proof.seeds] == [("bob", False)]

    async def test_the_first_street_freezes_exactly_the_seeds_it_was_drawn_from(
            self, make_table: MakeTable, dealer: RunningDealer) -> None:
        """The first street's record freezes the seeds (issue 35: no call of its own) only
        when the seeds opened are the ones its cards were drawn from: a seed opened between
        the draw and the record makes it draw again; after it, no seed is taken."""
        table = await make_table(PLAYERS)
        seeds = {n: secrets.token_bytes(32) for n in ("ann", "bob")}
        for name, seed in seeds.items():
            await dealer.client.commit_seed(table.table_id, 1, commitment(
                table.table_id, 1, name, seed), player(name))
        await table.start_hand()
        await dealer.client.open_seed(table.table_id, 1, seeds["ann"], player("ann"))
        store = dealer.deps.store
        stored = await store.load_hand(table.table_id, 1)
        assert stored is not None and stored.fair is not None and not stored.fair.frozen
        deal = StreetDeal(street=Street.THIRD, cards=(
            Draw(index=0, card=stored.dealing_deck().order[0], seat=1, up=False),))
        for drawn_from in ((), ("ann", "bob")):  # ann's seed is open, bob's is not
            outcome, _ = await store.record_deal(table.table_id, 1, deal, 0, drawn_from)
            assert outcome is Recorded.CONFLICT
        again = await store.load_hand(table.table_id, 1)
        assert again is not None and again.fair is not None and not again.fair.frozen
        assert again.deals == ()
        outcome, _ = await store.record_deal(table.table_id, 1, deal, 0, ("ann",))
        assert outcome is Recorded.RECORDED
        frozen = await store.load_hand(table.table_id, 1)
        assert frozen is not None and frozen.fair is not None and frozen.fair.frozen
        assert set(frozen.fair.opened) == {"ann"}
        error = await refused(dealer.client.open_seed(table.table_id, 1, seeds["bob"],
                                                      player("bob")))
        assert rpc_error_reason(error) == "seed_too_late"

    @pytest.mark.parametrize(("who", "code", "reason"), [
        (player("zed"), grpc.StatusCode.PERMISSION_DENIED, "not_seated"),
        (TABLE, grpc.StatusCode.PERMISSION_DENIED, "permission_denied"),
        (AUDITOR, grpc.StatusCode.PERMISSION_DENIED, "permission_denied"),
    ])
    async def test_only_a_seated_player_commits(self, make_table: MakeTable,
                                                dealer: RunningDealer, who: object,
                                                code: grpc.StatusCode, reason: str) -> None:
        """Someone not seated, the table service or an auditor cannot commit a seed, and the
        hand then lists no seed."""
        table = await make_table(PLAYERS)
        c = commitment(table.table_id, 1, "zed", bytes(32))
        error = await refused(dealer.client.commit_seed(table.table_id, 1, c, who))  # type: ignore[arg-type]
        assert (error.code(), rpc_error_reason(error)) == (code, reason)
        await table.start_hand()
        await table.play_until(Phase.COMPLETE)
        proof = await dealer.client.hand_proof(table.table_id, 1, player("ann"))
        assert not proof.header.seeds

    async def test_malformed_and_out_of_time_commitments_are_refused(
            self, make_table: MakeTable, dealer: RunningDealer) -> None:
        """A commitment that is not 64 hex digits, an odd table id, a made-up table, a hand
        too far ahead and a started hand: each refused, nothing kept."""
        table = await make_table(PLAYERS)
        client, ann = dealer.client, player("ann")
        good = commitment(table.table_id, 1, "ann", bytes(32))
        cases = [
            (client.commit_seed(table.table_id, 1, good.upper(), ann),
             grpc.StatusCode.INVALID_ARGUMENT, "malformed_commitment"),
            (client.commit_seed(table.table_id, 1, "ab", ann),
             grpc.StatusCode.INVALID_ARGUMENT, "malformed_commitment"),
            (client.commit_seed("bad id\n", 1, good, ann),
             grpc.StatusCode.INVALID_ARGUMENT, "malformed_id"),
            (client.commit_seed("t-nowhere", 1, good, ann),
             grpc.StatusCode.NOT_FOUND, "unknown_table"),
            (client.commit_seed(table.table_id, 3, good, ann),
             grpc.StatusCode.FAILED_PRECONDITION, "seed_too_early"),
            (client.commit_seed(table.table_id, 0, good, ann),
             grpc.StatusCode.INVALID_ARGUMENT, ""),
        ]
        for call, code, reason in cases:
            error = await refused(call)
            assert error.code() is code
            if reason:
                assert rpc_error_reason(error) == reason
        await table.start_hand()
        error = await refused(client.commit_seed(table.table_id, 1, good, ann))
        assert rpc_error_reason(error) == "seed_too_late"
        await table.play_until(Phase.COMPLETE)
        assert not (await client.hand_proof(table.table_id, 1, ann)).header.seeds

    async def test_openings_are_refused_until_public_and_checked_against_the_commitment(
            self, make_table: MakeTable, dealer: RunningDealer) -> None:
        """Opening before the hand starts is too early; another seed than the committed one
        is INVALID_ARGUMENT; a player who committed nothing (opening someone else's seed
        under their own name) is refused; none of it changes the hand's seeds."""
        table = await make_table(PLAYERS)
        client = dealer.client
        seed = secrets.token_bytes(32)
        await client.commit_seed(table.table_id, 1, commitment(table.table_id, 1, "ann", seed),
                                 player("ann"))
        error = await refused(client.open_seed(table.table_id, 1, seed, player("ann")))
        assert rpc_error_reason(error) == "seed_too_early"
        await table.start_hand()
        error = await refused(client.open_seed(table.table_id, 1, bytes(32), player("ann")))
        assert (error.code(), rpc_error_reason(error)) == (
            grpc.StatusCode.INVALID_ARGUMENT, "seed_mismatch")
        error = await refused(client.open_seed(table.table_id, 1, seed, player("bob")))
        assert rpc_error_reason(error) == "no_seed_committed"
        error = await refused(client.open_seed(table.table_id, 1, b"short", player("ann")))
        assert (error.code(), rpc_error_reason(error)) == (
            grpc.StatusCode.INVALID_ARGUMENT, "malformed_seed")
        error = await refused(client.open_seed(table.table_id, 1, seed, TABLE))
        assert error.code() is grpc.StatusCode.PERMISSION_DENIED
        await table.play_until(Phase.COMPLETE)
        proof = await client.hand_proof(table.table_id, 1, player("cat"))
        assert [(s.player_id, s.withheld) for s in proof.seeds] == [("ann", True)]

    @pytest.mark.parametrize("method", ["CommitSeed", "OpenSeed", "GetHandProof"])
    async def test_undecodable_bodies_are_invalid_argument(self, dealer: RunningDealer,
                                                           method: str) -> None:
        """Bytes that are no request are INVALID_ARGUMENT (undecodable_request)."""
        error = await raw_call(dealer, method, UNDECODABLE,
                               dealer.client.metadata(player("ann")))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert rpc_error_reason(error) == "undecodable_request"


class TestProofs:
    async def test_the_public_proof_opens_only_public_cards(
            self, make_table: MakeTable, dealer: RunningDealer) -> None:
        """During the hand the proof opens the up cards dealt so far and no seed; after it,
        the seeds too, and never a folded hand's down card (checked against the audit)."""
        table = await make_table(PLAYERS)
        await table.start_hand()
        await table.deal()
        during = await dealer.client.hand_proof(table.table_id, 1, player("bob"))
        assert not during.complete and not during.dealer_seed and not during.seeds
        assert len(during.openings) == 3 and all(o.draw >= 6 for o in during.openings)
        await table.play_until(Phase.COMPLETE, folds={3: 4, 6: 5})
        after = await dealer.client.hand_proof(table.table_id, 1, player("bob"))
        assert after.complete and len(after.dealer_seed) == 32
        audit = await dealer.client.audit(table.table_id, 1)
        folded = {(d.index, str(card_from_proto(d.card))) for s in audit.streets
                  for d in s.cards if not d.up and d.seat in (3, 6)}
        opened = {o.draw for o in after.openings}
        assert folded and not opened & {i for i, _c in folded}
        salts = {bytes(s) for s in audit.card_salts}
        assert len(salts) == 52

    async def test_refusals_of_the_proof(self, make_table: MakeTable,
                                         dealer: RunningDealer) -> None:
        """A hand not started is NOT_FOUND, a made-up table too, an odd id INVALID_ARGUMENT,
        no token UNAUTHENTICATED; a stacked-deck style hand has no card commitment."""
        table = await make_table(PLAYERS)
        client = dealer.client
        error = await refused(client.hand_proof(table.table_id, 1, player("ann")))
        assert (error.code(), rpc_error_reason(error)) == (grpc.StatusCode.NOT_FOUND,
                                                           "unknown_hand")
        error = await refused(client.hand_proof("t-nowhere", 1, player("ann")))
        assert error.code() is grpc.StatusCode.NOT_FOUND
        error = await refused(client.hand_proof("a|b", 1, player("ann")))
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        error = await refused(client.stub.GetHandProof(
            __import__("stud.v1.dealer_pb2", fromlist=["x"]).GetHandProofRequest(
                table_id=table.table_id, hand_number=1), timeout=10))
        assert error.code() is grpc.StatusCode.UNAUTHENTICATED
