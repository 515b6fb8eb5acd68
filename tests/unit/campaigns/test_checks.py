"""Each campaign check is a comparison that can come out false: here each one does, on a bad
input (and holds on a good one)."""

from __future__ import annotations

from typing import Any

from campaigns.bot import Tally as BotTally
from campaigns.chaos import Outcome
from campaigns.checks import (
    REQUIRED_CHECKS,
    check_replay,
    count_commands,
    enough_play,
    gapless,
    untouched,
)
from campaigns.failover import Report
from campaigns.fuzz import QUIET, Case, Tally, judge, targets
from campaigns.secrecy import Capture, HandSecrets, Scrape, search_own_openings, search_public_proof
from rules.cards import card_from_index
from stud.v1 import dealer_pb2 as dpb
from studkit.mapping import card_to_proto

# --- failover: events counted per command id against the recorded outcome ------------------


def test_a_command_written_once_is_counted_once() -> None:
    stream = [("0-1", "open"), ("0-2", "a"), ("0-3", "a"), ("0-4", "b")]
    recorded = {b"open": b"1 0-1", b"a": b"3 0-2 0-3", b"a#fp": b"f", b"b": b"4 0-4"}
    counted = count_commands(stream, recorded, [(2, 3), (4,)])
    assert (counted.lost, counted.duplicate, counted.problems) == (0, 0, ())


def test_a_command_written_twice_back_to_back_is_a_duplicate() -> None:
    # Counted as runs of a command id (the old check), these two copies were one run: none.
    stream = [("0-1", "a"), ("0-2", "a")]
    counted = count_commands(stream, {"a": "1 0-1"})
    assert counted.duplicate == 1 and counted.problems


def test_a_command_written_twice_apart_is_a_duplicate() -> None:
    stream = [("0-1", "a"), ("0-2", "b"), ("0-3", "a")]
    counted = count_commands(stream, {"a": "1 0-1", "b": "2 0-2"})
    assert counted.duplicate == 1


def test_events_without_a_recorded_outcome_are_counted() -> None:
    assert count_commands([("0-1", "ghost")], {}).duplicate == 1


def test_an_acknowledged_command_missing_from_the_stream_is_lost() -> None:
    counted = count_commands([("0-1", "a")], {"a": "1 0-1"}, [(1,), (2,)])
    assert counted.lost == 1
    assert count_commands([], {}, [()]).lost == 1  # a reply naming no event is not proof


def test_a_recorded_event_missing_from_the_stream_is_lost() -> None:
    assert count_commands([("0-1", "a")], {"a": "2 0-1 0-2"}).lost == 1


def test_the_frozen_owners_command_must_change_nothing() -> None:
    stream = [("0-1", "open"), ("0-2", "c:player:ann:x1")]
    assert untouched("zz", stream, {"open": "1 0-1"}) is None  # wrote nothing
    assert untouched("x1", stream, {"c:player:ann:x1": "2 0-2"}) is None  # as recorded
    assert untouched("x1", stream, {}) is not None  # events with no outcome
    assert untouched("x1", [*stream, ("0-3", "c:player:ann:x1")],
                     {"c:player:ann:x1": "2 0-2"}) is not None  # more than recorded


def test_a_gap_or_a_repeat_in_the_sequences_fails() -> None:
    assert gapless([1, 2, 3]) is None
    assert gapless([1, 3]) is not None
    assert gapless([1, 2, 2]) is not None
    assert gapless([5, 6], first=5) is None


def test_a_run_with_no_action_or_no_hand_fails() -> None:
    assert enough_play(1, 1) == []
    assert enough_play(0, 1) and enough_play(1, 0) and len(enough_play(0, 0)) == 2


def _report_of_a_good_run() -> Report:
    report = Report(tables=2, hands=10, frozen_refused=1, stale_appends_refused=1,
                    tally=BotTally(actions=50), in_flight={"x1": "fo-0"})
    return report


def test_a_good_failover_run_passes() -> None:
    report = _report_of_a_good_run()
    report.judge()
    assert report.problems == []


def test_a_failover_run_that_never_exercised_the_fence_fails() -> None:
    report = _report_of_a_good_run()
    report.frozen_refused = report.stale_appends_refused = 0
    report.judge()
    assert any("fence" in p for p in report.problems)
    report = _report_of_a_good_run()
    report.in_flight = {}
    report.judge()
    assert report.problems


def test_a_failover_run_with_no_action_no_hand_or_a_bot_error_fails() -> None:
    for change in ({"hands": 0}, {"tally": BotTally(actions=0)},
                   {"tally": BotTally(actions=5, errors=["t Bet: INTERNAL"])},
                   {"duplicate_events": 1}, {"lost_events": 1}, {"chips_lost": 3}):
        report = _report_of_a_good_run()
        for name, value in change.items():
            setattr(report, name, value)
        report.judge()
        assert report.problems, change


# --- chaos: verified equals the hands played, and no "not checked" note ---------------------


def _report(hands: int, checks: tuple[str, ...] = REQUIRED_CHECKS, notes: tuple[str, ...] = (),
            failed: int = 0, top_notes: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"hands": hands, "verified": hands - failed, "failed": failed,
            "notes": list(top_notes),
            "results": [{"table": "t", "hand": n, "ok": n > failed, "checks": list(checks),
                         "notes": list(notes)} for n in range(1, hands + 1)]}


def test_every_hand_verified_in_full_passes() -> None:
    checked = check_replay(_report(3), 3)
    assert (checked.problems, checked.in_full, checked.unverified) == ([], 3, 0)


def test_fewer_hands_verified_than_played_fails() -> None:
    checked = check_replay(_report(2), 3)
    assert checked.unverified == 1 and checked.problems


def test_a_failed_hand_fails() -> None:
    checked = check_replay(_report(3, failed=1), 3)
    assert checked.unverified == 1 and checked.problems


def test_a_hand_whose_cards_were_not_checked_fails() -> None:
    checked = check_replay(_report(2, checks=("legal", "chips", "wallet")), 2)
    assert checked.unverified == 2 and checked.unchecked == 2


def test_a_note_that_something_was_not_checked_fails() -> None:
    checked = check_replay(_report(2, notes=("event #9: not re-decided: ...",)), 2)
    assert checked.unverified == 2
    checked = check_replay(_report(2, top_notes=("dealt cards not checked against the "
                                                  "decks",)), 2)
    assert checked.unverified == 2 and checked.problems


def test_a_chaos_run_with_unverified_hands_fails() -> None:
    out = Outcome(hands=3, tally=BotTally(actions=9))
    out.replay = check_replay(_report(2), 3)
    out.unverified = out.replay.unverified
    out.judge()
    assert out.unverified == 1 and out.problems
    good = Outcome(hands=3, tally=BotTally(actions=9))
    good.replay = check_replay(_report(3), 3)
    good.judge()
    assert good.problems == []


def test_no_report_fails() -> None:
    checked = check_replay({"notes": ["stud replay verify exited 2 without a report"]}, 4)
    assert checked.unverified == 4 and checked.problems


# --- secrecy: a scrape or capture that fails is a failure -----------------------------------


def test_a_failed_scrape_fails_the_audit() -> None:
    capture = Capture()
    capture.search_metrics(Scrape("table", None, "ConnectionRefusedError: refused"))
    assert not capture.ok and capture.failures and not capture.leaks


def test_an_empty_scrape_fails_the_audit() -> None:
    capture = Capture()
    capture.search_metrics(Scrape("table", "# HELP nothing\n"))
    assert not capture.ok


def test_a_scrape_naming_a_card_is_a_leak() -> None:
    capture = Capture()
    capture.search_metrics(Scrape("table", 'stud_requests_total{method="Ah"} 1\n'))
    assert capture.leaks and not capture.ok
    clean = Capture()
    clean.search_metrics(Scrape("table", 'stud_requests_total{method="Bet"} 3\n'))
    assert clean.ok


class Record:
    def __init__(self, sequence: int) -> None:
        self.sequence = sequence


def test_a_missing_log_fails_the_audit() -> None:
    capture = Capture()
    capture.search_log("dealer", "")
    assert not capture.ok


def test_a_watch_that_captured_nothing_fails() -> None:
    capture = Capture()
    capture.check_watches([("t", "observer")], {"t": [1, 2, 3]})
    assert not capture.ok


def test_a_watch_that_skipped_a_game_event_fails_and_room_events_are_not_due() -> None:
    """The stream's game events are 1, 2, 4, 5 (3 is a room event, never sent)."""
    capture = Capture()
    capture.watch[("t", "observer")] = [Record(1), Record(2), Record(4), Record(5)]
    capture.check_watches([("t", "observer")], {"t": [1, 2, 4, 5]})
    assert capture.ok, capture.failures
    capture.watch[("t", "observer")] = [Record(1), Record(2), Record(5)]
    capture.check_watches([("t", "observer")], {"t": [1, 2, 4, 5]})
    assert not capture.ok


# --- fuzz: a hang is a failure, not a refusal ------------------------------------------------


def test_a_unary_deadline_exceeded_is_a_hang() -> None:
    assert judge("DEADLINE_EXCEEDED", streaming=False, changed=False).failure == "hang"


def test_internal_and_unknown_fail() -> None:
    assert judge("INTERNAL", streaming=False, changed=False).failure == "internal"
    assert judge("UNKNOWN", streaming=True, changed=False).failure == "internal"


def test_a_refusal_that_changed_something_fails() -> None:
    assert judge("PERMISSION_DENIED", streaming=False, changed=True).failure == "changed"
    assert judge(QUIET, streaming=True, changed=True).failure == "changed"
    assert judge("PERMISSION_DENIED", streaming=False, changed=False).failure is None
    assert judge("OK", streaming=False, changed=True).failure is None  # accepted: may change


def test_the_fuzz_tally_counts_failures_in_its_last_line() -> None:
    tally = Tally()
    case = Case(targets()[0], None, "ours", b"")
    tally.add(case, "INTERNAL", judge("INTERNAL", streaming=False, changed=True))
    assert tally.line() == "cases=1 crashes=0 internal=1 changed=0"


# --- secrecy: the openings search (docs/fairness.md) ----------------------------------------


def _audit() -> Any:
    """A per-card hand's audit: seat 1 holds card 0, seat 2 (folded, never shown) card 1,
    card 2 was burned; each card's salt is 32 bytes of its own index."""
    audit = dpb.HandAudit(card_commitment="c" * 64,
                          deck=[card_to_proto(card_from_index(i)) for i in range(52)],
                          card_salts=[bytes([i]) * 32 for i in range(52)])
    street = audit.streets.add(burn=dpb.AuditDraw(index=0, card=card_to_proto(card_from_index(2))))
    street.cards.add(index=1, seat=1, card=card_to_proto(card_from_index(0)))
    street.cards.add(index=2, seat=2, card=card_to_proto(card_from_index(1)))
    return audit


def _opening(card: int, path: tuple[int, ...] = ()) -> Any:
    return dpb.CardOpening(position=card, card=card_to_proto(card_from_index(card)),
                           salt=bytes([card]) * 32, path=[bytes([c]) * 32 for c in path])


def _searched(*openings: Any) -> Capture:
    capture = Capture()
    capture.cards[("t", "ann")].append(dpb.MyCards(hand_number=1, seat=1,
                                                   down_openings=list(openings)))
    capture.cards[("t", "ann")].append(dpb.MyCards(hand_number=2, seat=1,
                                                   down_openings=[_opening(1)]))  # other hand
    search_own_openings("t", 1, HandSecrets.of(_audit(), shown=set()), capture)
    return capture


def test_an_opening_of_ones_own_card_is_no_leak() -> None:
    capture = _searched(_opening(0, path=(5, 6)))
    assert (capture.leaks, capture.openings, capture.own_openings) == ([], 1, 1)


def test_an_opening_carrying_a_hidden_or_burned_card_or_its_salt_is_a_leak() -> None:
    """Another seat's hidden card opened to ann, or its salt (or a burned card's) in the
    Merkle path of ann's own card: each is a leak."""
    for opening in (_opening(1), _opening(0, path=(1,)), _opening(0, path=(2,)),
                    _opening(2)):
        capture = _searched(opening)
        assert capture.leaks == ["t #1 ann's opening: another card"], opening


def test_a_public_proof_opening_a_hidden_card_is_a_leak() -> None:
    for shown, leaked in ((set(), True), ({2}, False)):  # seat 2 shown: its card is public
        capture = Capture()
        proof = dpb.HandProof(openings=[_opening(1)])
        search_public_proof("t", 1, HandSecrets.of(_audit(), shown), proof, capture)
        assert bool(capture.leaks) is leaked and capture.openings == 1
