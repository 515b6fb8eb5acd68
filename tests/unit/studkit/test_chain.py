"""The chain verifier (studkit.chain): a whole chain passes; one byte changed anywhere in a
stored envelope is found and the changed event named, with the digest expected and found;
a chain continued from an archive, a table's pre-chain events, a missing event and a wrong
head."""

from __future__ import annotations

import pytest

from stud.v1.envelope_pb2 import EventEnvelope
from studkit.chain import GENESIS, ChainVerifier, digest, verify_chain


def chained(count: int, *, first: int = 1, start: bytes = GENESIS,
            legacy: int = 0) -> list[bytes]:
    """``count`` stored envelopes from sequence ``first``, linked from ``start``; the first
    ``legacy`` of them carry no link (written before the chain)."""
    out: list[bytes] = []
    prev = start
    for sequence in range(first, first + count):
        envelope = EventEnvelope(event_type="Called", table_id="t1", sequence=sequence,
                                 command_id=f"c{sequence}", payload=b"p" * 40)
        if sequence - first >= legacy:
            envelope.prev_digest = prev
        raw = envelope.SerializeToString(deterministic=True)
        out.append(raw)
        prev = digest(raw)
    return out


def flip(raw: bytes, at: int) -> bytes:
    return raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1:]


def test_an_intact_chain_passes_and_its_head_is_the_last_digest() -> None:
    log = chained(6)
    assert verify_chain("t1", log) is None
    assert verify_chain("t1", log, head=digest(log[-1])) is None
    verifier = ChainVerifier("t1")
    assert all(verifier.feed(raw) is None for raw in log)
    assert verifier.finish() is None and verifier.last == digest(log[-1])
    assert verifier.chained == 6


@pytest.mark.parametrize("victim", [1, 3, 5])
def test_one_byte_changed_anywhere_names_that_event(victim: int) -> None:
    """Every byte of event ``victim`` in turn (its link field included): the break names
    event ``victim`` (sequence = index + 1) and the digests."""
    log = chained(6)
    original = log[victim]
    for at in range(len(original)):
        tampered = list(log)
        tampered[victim] = flip(original, at)
        broken = verify_chain("t1", tampered, head=digest(log[-1]))
        assert broken is not None, at
        assert broken.table_id == "t1"
        try:
            sequence = EventEnvelope.FromString(tampered[victim]).sequence
        except Exception:
            sequence = victim + 1
        if sequence != victim + 1:  # the byte was in the sequence itself
            continue
        assert broken.sequence == victim + 1, (at, broken)
        if broken.found == digest(tampered[victim]):
            assert broken.expected == digest(original)
        assert f"event #{victim + 1}" in broken.line()


def test_the_last_event_changed_is_found_against_the_head() -> None:
    log = chained(4)
    tampered = [*log[:-1], flip(log[-1], log[-1].index(b"pppp"))]  # its payload
    assert verify_chain("t1", tampered) is None  # nothing after it links to it
    broken = verify_chain("t1", tampered, head=digest(log[-1]))
    assert broken is not None and broken.sequence == 4
    assert (broken.expected, broken.found) == (digest(log[-1]), digest(tampered[-1]))


def test_a_missing_event_breaks_the_chain() -> None:
    log = chained(5)
    broken = verify_chain("t1", log[:2] + log[3:])
    assert broken is not None and broken.sequence == 3 and "missing" in broken.detail
    assert broken.expected == digest(log[2]) and broken.found == digest(log[1])


def test_a_chain_continues_from_the_archives_last_digest() -> None:
    archived = chained(3)
    hot = chained(3, first=4, start=digest(archived[-1]))
    assert verify_chain("t1", archived + hot) is None
    assert verify_chain("t1", hot, start=digest(archived[-1])) is None
    assert verify_chain("t1", hot, start=None) is None  # the archive unknown: taken as is
    broken = verify_chain("t1", hot, start=digest(b"another archive"))
    assert broken is not None and broken.sequence == 4
    assert broken.expected == digest(b"another archive")
    assert broken.found == digest(archived[-1])


def test_a_tables_chain_starts_at_its_recorded_point() -> None:
    """Events 1..3 predate the chain; event 4 links to event 3's bytes (``since`` = 4)."""
    log = chained(6, legacy=3)
    assert EventEnvelope.FromString(log[2]).prev_digest == b""
    assert verify_chain("t1", log, since=4) is None
    assert verify_chain("t1", log) is None
    changed = [flip(log[2], len(log[2]) - 1), *log[3:]]  # the anchor event's bytes
    assert verify_chain("t1", log[:2] + changed, since=4) is not None
    # From the recorded point on, an envelope without a link is a break, even the first.
    stripped = EventEnvelope.FromString(log[3])
    stripped.prev_digest = b""
    unlinked = [*log[:3], stripped.SerializeToString(deterministic=True), *log[4:]]
    broken = verify_chain("t1", unlinked, since=4)
    assert broken is not None and broken.sequence == 4
    # Without the recorded point, a stripped link after the chain began is a break too.
    later = EventEnvelope.FromString(log[4])
    later.prev_digest = b""
    broken = verify_chain("t1", [*log[:4], later.SerializeToString(deterministic=True), *log[5:]])
    assert broken is not None and broken.sequence == 5


def test_a_wrong_genesis_is_named_at_the_first_event() -> None:
    log = chained(3, start=b"\x01" * 32)
    broken = verify_chain("t1", log)
    assert broken is not None and broken.sequence == 1
    assert broken.expected == GENESIS and broken.found == b"\x01" * 32


def test_a_chain_started_unanchored_at_its_recorded_point() -> None:
    """A table whose last old event had left Redis when its chain began: the first link is
    GENESIS, accepted at ``since`` only."""
    old = chained(2, legacy=2)
    log = [*old, *chained(2, first=3)]
    assert verify_chain("t1", log, since=3) is None
    assert verify_chain("t1", log, since=2) is not None
    assert verify_chain("t1", log) is not None
