"""Which command ids say when they were made (docs/history.md, "Expired commands"): the
``t<ms>-...`` form and RFC 9562 UUIDv7s; anything else carries no time."""

from __future__ import annotations

import time
import uuid

from studkit.commandwindow import id_time_ms, new_id, timed_id, uuid7
from studkit.mapping.common import check_ident


def test_a_uuid7_carries_its_first_48_bits_as_unix_ms_in_either_case() -> None:
    for ms in (0, 1, 1_764_979_200_123, 2**48 - 1):
        made = uuid7(ms)
        assert uuid.UUID(made).version == 7 and uuid.UUID(made).variant == uuid.RFC_4122
        assert id_time_ms(made) == ms
        assert id_time_ms(made.upper()) == ms
        assert check_ident(made, "command_id") == made
    assert id_time_ms("019AF0F5-5000-7ABC-9DEF-0123456789AB") == 1_764_979_200_000


def test_other_uuids_and_malformed_ones_carry_no_time() -> None:
    assert id_time_ms(str(uuid.uuid4())) is None
    assert id_time_ms(str(uuid.uuid1())) is None
    v7 = "019af0f5-5000-7abc-9def-0123456789ab"
    for other in (
            v7.replace("-7abc", "-4abc"),   # version 4
            v7.replace("-7abc", "-8abc"),   # version 8
            v7.replace("-9def", "-cdef"),   # variant 110x (Microsoft's)
            v7.replace("-9def", "-1def"),   # variant 0xxx (NCS)
            v7.replace("-", ""),            # not the text form
            v7[:-1],                        # one digit short
            v7 + "0",                       # one digit long
            v7 + "-x",                      # something after it
            "x" + v7,                       # something before it
            v7.replace("0123", "g123"),     # not hex
            "{" + v7 + "}"):
        assert id_time_ms(other) is None, other


def test_ids_not_in_either_timed_form_carry_no_time() -> None:
    for other in ("", "0f3a9c", "t12-x", "t0000000000000", "t-1234567890123-x",
                  "x1234567890123-y", "t12345678901234-x", "T1234567890123-x"):
        assert id_time_ms(other) is None, other
    assert id_time_ms("t0000000000000-x") == 0
    assert id_time_ms(timed_id(1_764_979_200_000, "sit")) == 1_764_979_200_000


def test_a_new_id_is_timed_now_and_a_valid_id() -> None:
    before = int(time.time() * 1000)
    made, labelled = new_id(), new_id("sit-ann")
    after = int(time.time() * 1000)
    for command_id in (made, labelled):
        at = id_time_ms(command_id)
        assert at is not None and before <= at <= after
        assert check_ident(command_id, "command_id") == command_id
    assert labelled.endswith("-sit-ann") and new_id() != made


def test_a_timed_id_has_ascii_digits_only() -> None:
    # \d matches any Unicode digit: an Arabic-Indic one (U+0661) read int() as 1.
    arabic = "t" + "\u0661" * 13 + "-x"
    assert id_time_ms(arabic) is None
    assert id_time_ms("t176497920000\u0660-x") is None  # one digit of thirteen is enough
    assert id_time_ms("t1764979200000-x") == 1_764_979_200_000
