"""The pure parts of ``stud replay``: a log cut into hands, every command rebuilt and decided
again, chips and wallet postings, cards merged, exports, and the connection settings."""

from __future__ import annotations

import random
from dataclasses import FrozenInstanceError, replace
from pathlib import Path

import pytest

from rules import DECK, Card, Event, TableConfig, public_event
from rules.betting import ActionKind, LegalActions
from rules.commands import AddChips, Command, DealStreet
from rules.events import Called, DownCardDealt, HandEnded, HandMucked, UpCardDealt
from rules.phh import Verdict, parse_phh, replay_phh
from rules.state import TableState
from rules.testing import StackedDeck, TableDriver, action_command
from studkit.auth import SigningKey
from studtools.replay_cli import export_text
from studtools.replay_hands import (
    HandLog,
    LedgerTx,
    Logged,
    _command_of,
    check_money,
    command_for,
    command_groups,
    expected_postings,
    iter_verify_hands,
    make_logged,
    merge_down_cards,
    split_hands,
    verify_hand_log,
    verify_hands,
    verify_log,
)
from studtools.replay_source import Settings, token_role


class Recording(TableDriver):
    """A driver keeping each command's events together (one command id each)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.groups: list[tuple[Event, ...]] = []
        super().__init__(*args, **kwargs)

    def apply(self, command: Command) -> tuple[Event, ...]:
        events = super().apply(command)
        self.groups.append(events)
        return events


def _act(rng: random.Random, legal: LegalActions) -> Command:
    kinds = [a.kind for a in legal.actions]
    if ActionKind.FOLD in kinds and rng.random() < 0.1:
        return action_command(legal.seat, ActionKind.FOLD)
    passive = [k for k in kinds if k in (ActionKind.CHECK, ActionKind.CALL,
                                         ActionKind.BRING_IN)]
    wagers = [k for k in kinds if k in (ActionKind.BET, ActionKind.RAISE,
                                        ActionKind.COMPLETE)]
    if wagers and rng.random() < 0.3:
        return action_command(legal.seat, wagers[0])
    return action_command(legal.seat, passive[0])


def played(hands: int = 4, seed: int = 1, config: TableConfig | None = None
           ) -> tuple[Recording, list[Logged]]:
    """A table of three players after ``hands`` random hands, and its public log."""
    rng = random.Random(seed)
    table = Recording(config or TableConfig(), stacks={1: 3000, 4: 3000, 6: 3000},
                      table_id="t1")
    for number in range(hands):
        if number == 2:
            table.apply(AddChips(seat=4, amount=500))
        deck = list(DECK)
        rng.shuffle(deck)
        table.play_hand(StackedDeck(deck), act=lambda legal: _act(rng, legal),
                        mucks=lambda shown: [h.seat for h in shown])
    log: list[Logged] = []
    for number, group in enumerate(table.groups):
        for event in group:
            log.append(Logged(len(log) + 1, f"c{number}", 1.0, public_event(event)))
    return table, log


def test_a_log_cuts_into_hands_with_their_states() -> None:
    table, log = played()
    hands, end = split_hands("t1", log)
    assert [h.number for h in hands] == [1, 2, 3, 4]
    assert all(h.complete for h in hands)
    assert isinstance(hands[-1].events[-1].event, HandEnded)
    assert [type(i.event).__name__ for i in hands[2].lead] == ["ChipsAdded"]
    assert end.seats == table.state.seats
    assert hands[1].before.seats == hands[0].after().seats


def test_a_legal_log_verifies_and_groups_are_commands() -> None:
    _table, log = played()
    assert len(command_groups(log)) == len({i.command_id for i in log})
    verdicts = verify_log("t1", log)
    assert [v.hand for v in verdicts] == [1, 2, 3, 4]
    assert all(v.ok for v in verdicts), [v.problems for v in verdicts]
    assert all("chips" in v.checks for v in verdicts)


def test_a_changed_amount_names_the_first_wrong_event() -> None:
    _table, log = played()
    at = next(i for i, item in enumerate(log) if isinstance(item.event, Called))
    called = log[at].event
    assert isinstance(called, Called)
    log[at] = replace(log[at], event=replace(called, amount=called.amount + 1))
    verdicts = verify_log("t1", log)
    failed = [v for v in verdicts if not v.ok]
    assert len(failed) == 1
    problem = failed[0].problems[0]
    assert problem.sequence == log[at].sequence
    assert "Called" in problem.what and problem.line("t1").startswith(
        f"table t1 hand {failed[0].hand}: event #{problem.sequence}: ")


@pytest.mark.parametrize("tamper", [None, "amount", "stack"])
def test_verify_hands_takes_each_state_from_the_verdict_before_and_agrees(
        tamper: str | None) -> None:
    """``verify_hands`` (``stud replay verify --all``) gives every hand the state before it
    that ``split_hands`` folds, and the same verdicts, on a legal log and on logs changed
    so that a hand fails (the hands after it are then given the log's own fold)."""
    _table, log = played(hands=6, seed=3)
    if tamper == "amount":  # a call for one chip more: its hand fails, the rest verify
        at = [i for i, item in enumerate(log) if isinstance(item.event, Called)][3]
        called = log[at].event
        assert isinstance(called, Called)
        log[at] = replace(log[at], event=replace(called, amount=called.amount + 1))
    elif tamper == "stack":  # the chips added between hands: the next hand starts richer
        at = next(i for i, item in enumerate(log) if type(item.event).__name__ == "ChipsAdded")
        added = log[at].event
        log[at] = replace(log[at], event=replace(added, amount=added.amount + 7))  # type: ignore[type-var]
    hands, _end = split_hands("t1", log)
    expected = [verify_hand_log(hand) for hand in hands]
    got = verify_hands("t1", log)
    assert [(h.number, h.before, h.start, h.events, h.lead) for h, _v in got] == [
        (h.number, h.before, h.start, h.events, h.lead) for h in hands]
    assert [(v.hand, v.problems, v.notes, v.checks, v.after) for _h, v in got] == [
        (v.hand, v.problems, v.notes, v.checks, v.after) for v in expected]
    assert (tamper == "amount") == any(not v.ok for _h, v in got)


def test_a_made_logged_is_the_value_logged_makes() -> None:
    """``make_logged`` (the decoder's) makes the very value ``Logged(...)`` does: its class,
    equality, hash and repr, and frozen."""
    event = Called(seat=2, amount=100)
    made, built = make_logged(7, "c7", 1.5, event), Logged(7, "c7", 1.5, event)
    assert type(made) is Logged
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert (made.sequence, made.command_id, made.occurred_at, made.event) == (7, "c7", 1.5,
                                                                              event)
    with pytest.raises(FrozenInstanceError):
        made.sequence = 8  # type: ignore[misc]


def test_kept_commands_are_the_ones_command_for_rebuilds() -> None:
    """A betting action's command is kept by its event's identity (the re-decision's fast
    path): it is the command ``command_for`` rebuilds, found again for the same event, and
    an equal or changed event of its own (another object) gets its own; every other event
    is left to ``command_for``."""
    _table, log = played(hands=6, seed=5)
    kinds = set()
    for item in log:
        event = item.event
        kept = _command_of(event)
        if kept is None:
            assert type(event).__name__ not in ("Called", "Checked", "Folded", "BetMade",
                                                 "Raised", "Completed", "BringInPosted")
            continue
        kinds.add(type(event).__name__)
        assert kept == command_for([event], TableState())
        assert _command_of(event) is kept
        other = replace(event, seat=event.seat % 8 + 1)  # type: ignore[attr-defined]
        assert _command_of(other) == command_for([other], TableState()) != kept
        assert _command_of(replace(event)) == kept
    assert {"Called", "Checked", "BringInPosted"} <= kinds, kinds


def test_kept_dealt_cards_rebuild_each_deal_as_made() -> None:
    """A deal's cards are kept by their events' identity: the same events, equal events of
    their own and a changed up card (another object) each rebuild the deal they show."""
    _table, log = played(hands=4, seed=6)
    deals = [[item.event for item in group] for group in command_groups(log)
             if any(isinstance(item.event, UpCardDealt) for item in group)]
    assert deals
    for events in deals:
        made = command_for(events, TableState())
        assert command_for(events, TableState()) == made
        assert command_for([replace(e) for e in events], TableState()) == made
        at = next(i for i, e in enumerate(events) if isinstance(e, UpCardDealt))
        up = events[at]
        assert isinstance(up, UpCardDealt)
        other = next(c for c in DECK if c != up.card)
        changed = command_for([*events[:at], replace(up, card=other), *events[at + 1:]],
                              TableState())
        assert isinstance(changed, DealStreet) and isinstance(made, DealStreet)
        assert [d.card for d in changed.cards] == [
            other if i == at - (len(events) - len(made.cards)) else d.card
            for i, d in enumerate(made.cards)]


def test_iter_verify_hands_gives_what_verify_hands_does() -> None:
    """Each hand's verdict as the hand alone gets it (``split_hands`` then
    ``verify_hand_log``, which fold the log's own events), the tampered call named in its own
    hand, every other hand sound."""
    _table, log = played(hands=5, seed=4)
    at = [i for i, item in enumerate(log) if isinstance(item.event, Called)][2]
    called = log[at].event
    assert isinstance(called, Called)
    log[at] = replace(log[at], event=replace(called, amount=called.amount + 1))
    pairs = list(iter_verify_hands("t1", log))
    assert [(h.number, v.problems, v.after) for h, v in pairs] == [
        (h.number, v.problems, v.after) for h, v in verify_hands("t1", log)]
    alone = [(hand.number, verify_hand_log(hand)) for hand in split_hands("t1", log)[0]]
    assert [h.number for h, _v in pairs] == [n for n, _v in alone] == [1, 2, 3, 4, 5]
    assert [(v.ok, v.problems) for _h, v in pairs] == [(v.ok, v.problems) for _n, v in alone]
    tampered = next(h.number for h, _v in pairs if log[at] in h.events)
    assert [h.number for h, v in pairs if not v.ok] == [tampered]
    assert next(v for h, v in pairs if not v.ok).problems[0].sequence == log[at].sequence


def test_an_event_no_command_gives_is_found() -> None:
    _table, log = played(hands=1)
    # An extra, forged award in its own command.
    award = next(i for i in log if type(i.event).__name__ == "PotAwarded")
    forged = Logged(10_000, "forged", 1.0, award.event)
    log.insert(log.index(award) + 1, forged)
    verdict = verify_log("t1", log)[0]
    assert not verdict.ok and verdict.problems[0].sequence == 10_000
    assert "stops short" in verdict.problems[0].what


def test_hidden_mucked_cards_are_a_note_not_a_failure() -> None:
    config = TableConfig(history_reveals_mucked=False)
    for seed in range(30):
        _table, log = played(hands=3, seed=seed, config=config)
        if any(isinstance(i.event, HandMucked) and not i.event.down for i in log):
            break
    else:
        pytest.skip("no hidden muck in these seeds")
    verdicts = verify_log("t1", log)
    assert all(v.ok for v in verdicts)
    assert any("not re-decided" in note for v in verdicts for note in v.notes)


def _hand(number: int = 1) -> tuple[HandLog, TableState]:
    _table, log = played(hands=2)
    hand = split_hands("t1", log)[0][number - 1]
    verdict = verify_hand_log(hand)
    assert verdict.after is not None
    return hand, verdict.after


def test_wallet_postings_must_match_the_folded_result() -> None:
    hand, after = _hand()
    want = expected_postings("t1", after)
    assert sum(want.values()) == 0 or "house" in want
    right = LedgerTx("1-0", tuple(want.items()))
    assert check_money(hand, after, [right]) == []
    assert "no settlement" in check_money(hand, after, [])[0].what
    assert "2 times" in check_money(hand, after, [right, right])[0].what
    account, amount = next(iter(want.items()))
    wrong = LedgerTx("1-0", ((account, amount + 1),
                             *((a, v) for a, v in want.items() if a != account)))
    problems = check_money(hand, after, [wrong])
    assert len(problems) == 1 and account in problems[0].what
    assert problems[0].sequence is not None


def test_down_cards_merge_for_the_seats_given_only() -> None:
    table, log = played(hands=1)
    hand = split_hands("t1", log)[0][0]
    full = [e for e in table.events if isinstance(e, DownCardDealt) and e.seat == 1]
    cards = [e.card for e in full]
    assert all(c is not None for c in cards)
    merged = merge_down_cards(hand.events, {1: cards})  # type: ignore[dict-item]
    seat1 = [i.event for i in merged if isinstance(i.event, DownCardDealt)
             and i.event.seat == 1]
    assert [e.card for e in seat1] == cards[:len(seat1)]
    assert all(i.event.card is None for i in merged
               if isinstance(i.event, DownCardDealt) and i.event.seat != 1)


def test_exports_read_back() -> None:
    table, log = played(hands=3)
    hands = split_hands("t1", log)[0]
    text = export_text("t1", hands[:1], "phh")
    result = replay_phh(parse_phh(text))
    assert result.verdict == Verdict.OK, result
    # The auditor's export: every down card of the first hand filled in.
    first_hand = table.events[:next(i for i, e in enumerate(table.events)
                                    if isinstance(e, HandEnded)) + 1]
    down: dict[int, list[Card]] = {}
    for event in first_hand:
        if isinstance(event, DownCardDealt) and event.card is not None:
            down.setdefault(event.seat, []).append(event.card)
    full = export_text("t1", hands[:1], "phh", {1: down})
    assert "??" not in full
    assert replay_phh(parse_phh(full)).verdict == Verdict.OK
    many = export_text("t1", hands, "phh")
    assert many.count('["t1-h') == 3
    lines = export_text("t1", hands, "jsonl").splitlines()
    assert len(lines) == sum(len(h.events) for h in hands)
    assert export_text("t1", hands[:1], "text").startswith("Hand #1")


def test_settings_default_to_the_make_run_stack(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "redis").mkdir(parents=True)
    (run / "keys").mkdir()
    (run / "redis" / "admin.url").write_text("redis://admin:pw@127.0.0.1:7000/0\n")
    key = SigningKey.generate()
    (run / "keys" / "issuer.pem").write_text(key.pem())
    settings = Settings.from_env({"STUD_RUN_DIR": str(run)})
    assert settings.redis_url == "redis://admin:pw@127.0.0.1:7000/0"
    assert token_role(settings.auditor_token) == "auditor"
    assert settings.dealer_target == ""
    (run / "env").write_text("export DEALER_ADDR=127.0.0.1:7001\n"
                             "STUD_REPLAY_REDIS_URL='redis://auditor:x@127.0.0.1:7000/0'\n")
    settings = Settings.from_env({"STUD_RUN_DIR": str(run)})
    assert settings.dealer_target == "127.0.0.1:7001"
    assert settings.redis_url.startswith("redis://auditor:")
    explicit = Settings.from_env({"STUD_RUN_DIR": str(run), "STUD_REPLAY_REDIS_URL": "redis://x",
                                  "STUD_DEALER_TARGET": "h:1", "STUD_AUDITOR_TOKEN": "tok",
                                  "STUD_REPLAY_TOKEN": "mine"})
    assert (explicit.redis_url, explicit.dealer_target, explicit.auditor_token,
            explicit.token) == ("redis://x", "h:1", "tok", "mine")
    assert token_role("not a token") == ""


def test_time_outs_voids_and_table_events_between_hands_verify() -> None:
    from rules.commands import LeaveSeat, SitDown, SitIn, SitOut, TimeOut, VoidHand

    table = Recording(TableConfig(), stacks={1: 3000, 4: 3000, 6: 3000}, table_id="t1")
    rng = random.Random(5)
    deck = list(DECK)
    rng.shuffle(deck)

    def act(legal: LegalActions) -> Command:
        return TimeOut(seat=legal.seat) if rng.random() < 0.3 else _act(rng, legal)

    table.play_hand(StackedDeck(deck), act=act, mucks=lambda shown: [])
    table.apply(SitOut(seat=6))
    table.apply(SitIn(seat=6))
    table.apply(LeaveSeat(seat=4))
    table.apply(SitDown(seat=2, player_id="p2", stack=2000))
    table.start()
    table.apply(VoidHand(reason="the dealer is gone"))
    log: list[Logged] = []
    for number, group in enumerate(table.groups):
        for event in group:
            log.append(Logged(len(log) + 1, f"c{number}", 1.0, public_event(event)))
    verdicts = verify_log("t1", log)
    assert [v.hand for v in verdicts] == [1, 2]
    assert all(v.ok for v in verdicts), [v.problems for v in verdicts]
    assert any(type(i.event).__name__ == "ActionTimedOut" for i in log)
    hands = split_hands("t1", log)[0]
    assert [type(i.event).__name__ for i in hands[1].lead] == [
        "PlayerSatOut", "PlayerSatIn", "PlayerLeft", "PlayerSeated"]
    assert hands[1].after().hand.voided  # type: ignore[union-attr]
