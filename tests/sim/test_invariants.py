"""Every invariant of the simulator can fail: each test breaks one on purpose (a chip made
from nothing, a ledger entry that does not balance, a hand settled twice, a live state the
log does not give, a down card in the stream, a store that drops an event, a fence that
lets a former owner write, a dealer that never starts a hand, an escrow moved, a settlement
lost) and sees the violation reported, with its first step."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import pytest

from rules.cards import parse_cards
from rules.events import DownCardDealt
from sim import checks, scripts
from sim.run import Run, run_seed
from sim.world import Probabilities, World
from stud.v1 import envelope_pb2 as epb_envelope
from stud.v1 import events_pb2 as epb
from studkit import keys
from studkit.chain import digest
from studkit.errors import FailedPrecondition
from studkit.mapping import card_to_proto
from table.actor import decode
from wallet.store import BALANCES, LEDGER

HANDS = 30


def violations(*, sabotage: Callable[[Run], None] | None = None,
               tweak: Callable[[World], None] | None = None,
               probabilities: Probabilities | None = None, hands: int = HANDS) -> list[str]:
    result = run_seed(21, tables=2, hands=hands, probabilities=probabilities,
                      tweak=tweak, sabotage=sabotage)
    assert result.violations == [] or result.first_step is not None
    return result.violations


def once(step: int, action: Callable[[Run], None]) -> Callable[[Run], None]:
    def sabotage(run: Run) -> None:
        if run.result.steps == step and not run.ending:
            action(run)
    return sabotage


def at_end(action: Callable[[Run], None]) -> Callable[[Run], None]:
    def sabotage(run: Run) -> None:
        if run.ending:
            action(run)
    return sabotage


def found(lines: list[str], prefix: str) -> bool:
    return any(line.startswith(prefix) for line in lines)


def test_an_unbroken_run_has_no_violation() -> None:
    assert violations() == []


def test_a_chip_made_from_nothing_is_seen() -> None:
    def mint(run: Run) -> None:
        run.world.data.hashes[BALANCES.encode()][b"player:s21t0-p0"] = b"%d" % (
            int(run.world.data.hashes[BALANCES.encode()][b"player:s21t0-p0"]) + 7)
    assert found(violations(sabotage=once(20, mint)), "chips:")


def _ledger_entry(run: Run, kind: str, postings: list[list[object]], hand: str = "") -> None:
    run.world.data.xadd(LEDGER.encode(), None, {b"tx": json.dumps({
        "kind": kind, "postings": postings, "table_id": "s21t0", "hand_id": hand}).encode(),
        b"scope": b"sabotage"})


def test_a_transaction_that_does_not_balance_is_seen() -> None:
    sabotage = once(20, lambda run: _ledger_entry(run, "deposit", [["player:x", 5]]))
    assert found(violations(sabotage=sabotage), "ledger: transaction")


def test_a_hand_settled_twice_is_seen() -> None:
    def settle_again(run: Run) -> None:
        _ledger_entry(run, "settlement", [["seat:s21t0:1", 0]], "h1")
    lines = violations(sabotage=once(60, settle_again))
    assert any(line.startswith("ledger: hand h1 of s21t0 settled 2 times") for line in lines)


def test_a_live_state_the_log_does_not_give_is_seen() -> None:
    def drift(run: Run) -> None:
        actor = run.world.owner["s21t0"].actor("s21t0")
        assert actor is not None
        actor.room = replace(actor.room, muck=actor.room.muck | {8})
    assert found(violations(sabotage=once(30, drift)), "fold:")


def test_a_live_state_changed_in_place_is_seen() -> None:
    """The per-step comparison skips the fields that still hold the objects found equal
    last time; the full one every FULL_EVERY steps still sees one changed in place."""
    def mutate(run: Run) -> None:
        actor = run.world.owner["s21t0"].actor("s21t0")
        assert actor is not None
        cast(dict[int, str], actor.room.leaving)[9] = "nobody"
    result = run_seed(21, tables=2, hands=HANDS, sabotage=once(30, mutate))
    assert found(result.violations, "fold:")
    assert result.first_step is not None and result.first_step <= 30 + checks.FULL_EVERY, \
        "seen only at the end, not by a step's full comparison"


def test_a_down_card_in_the_stream_is_seen() -> None:
    def leak(run: Run) -> None:
        stream = run.world.data.streams[b"stud:table:{s21t0}:events"]
        for n in range(run.followers["s21t0"].read, len(stream)):
            entry_id, _fields = stream[n]
            envelope = checks.envelopes(run.world, "s21t0")[n]
            if isinstance(decode(envelope), DownCardDealt):
                # written behind the product's guard (envelope_for refuses a down card)
                message = epb.DownCardDealt.FromString(envelope.payload)
                message.card.CopyFrom(card_to_proto(parse_cards("As")[0]))
                envelope.payload = message.SerializeToString()
                stream[n] = (entry_id, {b"envelope": envelope.SerializeToString()})
                return

    def every_step(run: Run) -> None:
        if not run.ending and run.result.steps >= 20:
            leak(run)
    assert found(violations(sabotage=every_step), "secrecy:")


def at_append(lines: list[str], prefix: str, *words: str) -> bool:
    """Seen by the per-append audit (at the append itself, not at the next step)."""
    return any(line.startswith(prefix) and "at its append" in line
               and all(w in line for w in words) for line in lines)


def test_a_store_that_drops_an_event_is_seen() -> None:
    def drop(world: World) -> None:
        world.data.drop_every = 150
    lines = violations(tweak=drop)
    assert found(lines, "commands:")
    assert at_append(lines, "commands:", "a gap")


def test_a_stored_event_changed_is_seen_by_the_chain_at_the_next_append() -> None:
    """One stored event's bytes changed behind the store (its time, which nothing else
    reads): the next append links to the bytes the owner wrote, not to these."""
    def touch(run: Run) -> None:
        stream = run.world.data.streams[keys.table_stream("s21t0").encode()]
        entry_id, fields = stream[-1]
        envelope = epb_envelope.EventEnvelope.FromString(fields[b"envelope"])
        envelope.occurred_at.nanos += 1
        stream[-1] = (entry_id, {b"envelope": envelope.SerializeToString()})
    lines = violations(sabotage=once(20, touch))
    assert at_append(lines, "chain:", "s21t0"), lines


def test_a_former_owner_that_writes_past_the_fence_is_seen() -> None:
    def unfence(world: World) -> None:
        world.data.unfenced = True
    p = Probabilities(takeover_per_s=0.05, crash_per_s=0.0)
    lines = violations(tweak=unfence, probabilities=p, hands=60)
    assert found(lines, "fence:")
    assert at_append(lines, "fence:")


def test_a_command_appended_twice_is_seen_at_its_append() -> None:
    """A store that lost a command's record appends the command again when it is retried:
    the last command's events written a second time, under the same id, by the owner."""
    def again(run: Run) -> None:
        data, table = run.world.data, "s21t0"
        stream, commands = keys.table_stream(table).encode(), keys.table_commands(table).encode()
        last = epb_envelope.EventEnvelope.FromString(data.streams[stream][-1][1][b"envelope"])
        command = last.command_id.encode()
        del data.hashes[commands][command]
        version = int(data.strings[keys.table_version(table).encode()])
        last.sequence = version + 1
        epoch = b"%d" % run.world.epoch[table]
        chain = keys.table_key(table, "chain").encode()
        key_names = (stream, commands, keys.table_version(table).encode(),
                     keys.table_owner(table).encode(), keys.table_key(table, "trimmed").encode(),
                     chain)
        head = data.hashes[chain][b"head"]
        last.prev_digest = head
        payload = last.SerializeToString()
        reply = scripts.append_script(data, list(key_names), [
            b"%d" % version, command, table.encode(), b"", epoch, head, digest(payload),
            payload])
        assert reply[0] == b"appended"
    assert at_append(violations(sabotage=once(20, again)), "commands:", "a second time")


def test_a_wallet_transaction_that_mints_a_chip_is_seen_at_its_apply() -> None:
    def mint(world: World) -> None:
        world.data.mint_every = 40
    lines = violations(tweak=mint)
    assert any(line.startswith("chips: wallet transaction") and "created 1 chips" in line
               for line in lines)


def test_a_table_that_never_deals_again_is_seen() -> None:
    def refuse(world: World) -> None:
        async def start_hand(*_args: object) -> object:
            raise FailedPrecondition("sabotaged", reason="sabotaged")
        world.dealer.start_hand = start_hand  # type: ignore[method-assign]
    assert found(violations(tweak=refuse), "stuck:")


def test_an_escrow_moved_at_the_wallet_is_seen_at_the_end() -> None:
    def move(run: Run) -> None:
        balances = run.world.data.hashes[BALANCES.encode()]
        seats = [k for k, v in balances.items() if k.startswith(b"seat:s21t0:") and int(v)]
        assert len(seats) >= 2
        balances[seats[0]] = b"%d" % (int(balances[seats[0]]) - 3)
        balances[seats[1]] = b"%d" % (int(balances[seats[1]]) + 3)
    assert found(violations(sabotage=at_end(move)), "escrow:")


def test_a_settlement_lost_at_the_wallet_is_seen_at_the_end() -> None:
    def lose(run: Run) -> None:
        ledger = run.world.data.streams[LEDGER.encode()]
        for n, (_id, fields) in enumerate(ledger):
            record = json.loads(fields[b"tx"])
            if record["kind"] == "settlement" and record["table_id"] == "s21t1":
                del ledger[n]
                return
        pytest.fail("no settlement to lose")
    assert found(violations(sabotage=at_end(lose)), "settle:")


def test_a_watcher_that_misses_an_event_is_seen() -> None:
    def miss(run: Run) -> None:
        received = run.watchers["s21t0"].received
        assert len(received) > 3
        del received[1]
    assert found(violations(sabotage=once(60, miss)), "watch:")


def test_an_entry_rewritten_after_it_was_read_is_seen_at_the_end() -> None:
    """The end's fold check reuses the follower's fold only for entries unchanged since it
    read them; one rewritten behind its back is reported, and the whole log checked again."""
    def rewrite(run: Run) -> None:
        stream = run.world.data.streams[b"stud:table:{s21t0}:events"]
        entry_id, fields = stream[0]
        envelope = epb_envelope.EventEnvelope.FromString(fields[b"envelope"])
        envelope.command_id = "rewritten"
        stream[0] = (entry_id, {b"envelope": envelope.SerializeToString()})
    lines = violations(sabotage=at_end(rewrite))
    assert found(lines, "log: table s21t0: a stored entry changed")
    assert found(lines, "commands: table s21t0: rewritten has events but no record")


def test_a_live_state_the_log_does_not_give_is_seen_at_the_end() -> None:
    def drift(run: Run) -> None:
        actor = run.world.owner["s21t1"].actor("s21t1")
        assert actor is not None
        actor.room = replace(actor.room, muck=actor.room.muck | {9})
    assert found(violations(sabotage=at_end(drift)), "fold: table s21t1")
