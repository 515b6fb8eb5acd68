"""A stream's tail read with the dealer's hand (``EventStore.tail(hash_key=...)``) carries the
hand's hash: its deck's order and salts. A deck is never printed (``HandDeck.__repr__``), so
neither is the tail's hash, in a repr, a log line or a traceback's locals."""

from studkit.store import Tail


def test_a_tails_repr_never_shows_the_hash_it_read() -> None:
    secret = {b"order": b"51,3,17", b"salt": b"s3cr3t-salt", b"dealer_seed": b"d34d"}
    tail = Tail(version=7, trimmed=0, events=[], hash=secret)
    text = repr(tail) + str(tail)
    assert "version=7" in text
    for value in secret.values():
        assert value.decode() not in text
    assert tail.hash == secret
