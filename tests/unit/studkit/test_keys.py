"""Key-safe ids: the whole string must be 1-64 of ``[A-Za-z0-9_.-]``; anything else, a
trailing newline included, is refused before it can name a key or a principal."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from studkit import keys
from studkit.keys import check_id

ALPHABET = "ABCxyz019_.-"
VALID = st.text(alphabet=ALPHABET, min_size=1, max_size=64)
REFERENCE = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")


class TestCheckId:
    @pytest.mark.parametrize("value", ["alice\n", "alice\r\n", "\nalice", "alice ", " alice",
                                       "al\nice", "alice\x00", "alice\t", "ａlice", "alice٣"])
    def test_refuses_ids_with_whitespace_or_other_characters(self, value: str) -> None:
        """An id with a newline (trailing, leading or inside), a space, a NUL or a
        non-ASCII letter or digit is refused."""
        with pytest.raises(ValueError):
            check_id(value)

    def test_refuses_empty_and_overlong_ids(self) -> None:
        """The empty id and one of 65 characters are refused; 64 is accepted."""
        with pytest.raises(ValueError):
            check_id("")
        with pytest.raises(ValueError):
            check_id("a" * 65)
        assert check_id("a" * 64) == "a" * 64

    @given(VALID, st.sampled_from(["\n", "\r", "\r\n", " ", "\t", "\x0b", "\x0c", "\x00"]))
    def test_a_valid_id_plus_any_whitespace_is_refused(self, value: str, tail: str) -> None:
        """A valid id followed or preceded by whitespace of any kind is refused."""
        for candidate in (value + tail, tail + value):
            with pytest.raises(ValueError):
                check_id(candidate)

    @given(VALID)
    def test_every_valid_id_is_returned_unchanged(self, value: str) -> None:
        """Ids of the allowed alphabet and length are returned as given."""
        assert check_id(value) is value

    @given(st.text(max_size=80))
    @example("alice\n")
    @example("a" * 64 + "\n")
    def test_accepts_exactly_what_the_reference_pattern_fully_matches(self, value: str) -> None:
        """On any text, check_id accepts exactly the strings a ``\\Z``-anchored reference
        pattern matches whole."""
        if REFERENCE.match(value):
            assert check_id(value) == value
        else:
            with pytest.raises(ValueError):
                check_id(value)

    @given(st.text(max_size=70))
    def test_key_builders_refuse_what_check_id_refuses(self, value: str) -> None:
        """Every key that embeds a table id refuses an id that check_id refuses."""
        builders = (keys.table_stream, keys.table_commands, keys.table_version,
                    lambda t: keys.dealer_key(t, "hand:1"))
        try:
            check_id(value)
        except ValueError:
            for build in builders:
                with pytest.raises(ValueError):
                    build(value)
        else:
            for build in builders:
                assert "{" + value + "}" in build(value)
