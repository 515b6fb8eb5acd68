"""A table config in a request takes the RULES defaults for what it leaves unset (issue 17):
each field of ``TableConfig`` left out of an OpenTable request takes its RULES 2.1 default,
and the big bet, ante and bring-in derive from the small bet (2.2). A stored record (an
event, a command) is still read exactly as written."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given

from rules.config import HeadsUpRaises, Rake, ShowdownOpener, TableConfig
from rules.events import TableOpened
from stud.v1 import common_pb2 as pb
from stud.v1 import events_pb2 as epb
from studkit.errors import BadRequest
from studkit.mapping import config_from_proto, config_to_proto, event_from_proto

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: shared helpers
from strategies import configs

GIVEN = TableConfig(
    seats=6, min_players=3, small_bet=1000, big_bet=3000, ante=0, bring_in=300,
    max_raises=0, heads_up_raises=HeadsUpRaises.HEADS_UP_BEFORE_CAP, burn_cards=True,
    showdown_opener=ShowdownOpener.FIRST_TO_ACT, history_reveals_mucked=False,
    rake=Rake(500, 30))
"""A config where every field differs from its default (and the three that may be zero
are zero)."""


def request(config: TableConfig = GIVEN, *, leave_out: tuple[str, ...] = ()) -> pb.TableConfig:
    """``config`` on the wire with the fields ``leave_out`` unset, as a client leaves them."""
    msg = config_to_proto(config)
    for name in leave_out:
        msg.ClearField(name)
    return msg


def read(msg: pb.TableConfig) -> TableConfig:
    return config_from_proto(msg, defaults=True)


# Each field left out of GIVEN, and what it becomes (RULES 2.1-2.2); the small bet, which
# GIVEN's other amounts must fit, has a test of its own.
LEFT_OUT: list[tuple[str, dict[str, Any]]] = [
    ("seats", {"seats": 8}),
    ("min_players", {"min_players": 2}),
    ("big_bet", {"big_bet": 2000}),  # 2 x small_bet
    ("ante", {"ante": 200}),  # small_bet / 5
    ("bring_in", {"bring_in": 250}),  # small_bet / 4
    ("max_raises", {"max_raises": 3}),
    ("heads_up_raises", {"heads_up_raises": HeadsUpRaises.CAPPED}),
    ("burn_cards", {"burn_cards": False}),
    ("showdown_opener", {"showdown_opener": ShowdownOpener.LAST_AGGRESSOR}),
    ("history_reveals_mucked", {"history_reveals_mucked": True}),
    ("rake", {"rake": None}),
]


class TestRequestDefaults:
    @pytest.mark.parametrize(("name", "expected"), LEFT_OUT, ids=[n for n, _ in LEFT_OUT])
    def test_a_field_left_out_takes_its_default(self, name: str, expected: dict[str, Any]
                                                ) -> None:
        """Every other field as given; the one left out takes its RULES default."""
        assert read(request(leave_out=(name,))) == replace(GIVEN, **expected)

    def test_small_bet_left_out_is_two_dollars(self) -> None:
        """With every other amount given, a missing small bet is 2.1's 200 (the given big bet,
        ante and bring-in stay, and must still fit it)."""
        given = replace(GIVEN, small_bet=150, big_bet=1000, bring_in=100)
        assert read(request(given, leave_out=("small_bet",))) == replace(given, small_bet=200)

    def test_only_the_small_bet(self) -> None:
        """RULES 2.2's examples: $1/$2 gives ante 20, bring-in 25; $3/$6 60 and 75;
        $0.10/$0.20 2 and 3; every option at its default."""
        for small, big, ante, bring_in in ((100, 200, 20, 25), (300, 600, 60, 75),
                                           (10, 20, 2, 3)):
            config = read(pb.TableConfig(small_bet=small))
            assert config == TableConfig(small_bet=small, big_bet=big, ante=ante,
                                         bring_in=bring_in)

    def test_nothing_set_is_the_default_table(self) -> None:
        assert read(pb.TableConfig()) == TableConfig()

    def test_zero_may_be_given_where_zero_is_valid(self) -> None:
        """No ante, no raise after the bet and mucked hands kept from the history are
        given as zero and stay zero (they are unset only when absent)."""
        config = read(pb.TableConfig(small_bet=100, ante=0, max_raises=0,
                                     history_reveals_mucked=False))
        assert (config.ante, config.max_raises, config.history_reveals_mucked) == (0, 0, False)

    @given(configs())
    def test_the_config_in_force_reads_back_as_itself(self, config: TableConfig) -> None:
        """What the table writes (every field set) needs no default."""
        assert read(config_to_proto(config)) == config

    def test_the_config_in_force_has_every_field(self) -> None:
        """The wire form of a config sets the three fields with presence, zero or not."""
        msg = config_to_proto(read(pb.TableConfig(small_bet=100, ante=0, max_raises=0)))
        assert all(msg.HasField(f) for f in ("ante", "max_raises", "history_reveals_mucked"))

    @pytest.mark.parametrize(("msg", "field", "reason"), [
        (pb.TableConfig(small_bet=1), "config", "invalid_config"),  # 2.2: deriving needs 2
        (pb.TableConfig(small_bet=-5), "config.small_bet", None),
        (pb.TableConfig(ante=-1), "config.ante", None),
        (pb.TableConfig(small_bet=100, bring_in=100), "config", "invalid_config"),
        (pb.TableConfig(heads_up_raises=99), "config.heads_up_raises", None),  # type: ignore[arg-type]
        (pb.TableConfig(showdown_opener=99), "config.showdown_opener", None),  # type: ignore[arg-type]
        (pb.TableConfig(seats=9), "config", "invalid_config"),
    ], ids=["small_bet_1", "negative_small_bet", "negative_ante", "bring_in_not_below",
            "unknown_heads_up", "unknown_opener", "nine_seats"])
    def test_what_is_given_is_still_checked(self, msg: pb.TableConfig, field: str,
                                            reason: str | None) -> None:
        with pytest.raises(BadRequest) as caught:
            read(msg)
        assert caught.value.field == field
        if reason is not None:
            assert caught.value.reason == reason


class TestStoredRecords:
    def test_a_record_is_read_as_written(self) -> None:
        """Without defaults nothing is filled in: an unspecified option is refused."""
        with pytest.raises(BadRequest) as caught:
            config_from_proto(request(leave_out=("heads_up_raises",)))
        assert caught.value.field == "config.heads_up_raises"

    def test_an_old_event_without_presence_keeps_its_zeros(self) -> None:
        """A TableOpened written before ante, max_raises and history_reveals_mucked had
        presence omitted them when zero: it still reads as ante 0, no raise, no mucked
        hands in the history (not as the request defaults)."""
        old = request(leave_out=("ante", "max_raises", "history_reveals_mucked"))
        event = epb.TableEvent(table_opened=epb.TableOpened(table_id="t", config=old))
        parsed = event_from_proto(epb.TableEvent.FromString(event.SerializeToString()))
        assert parsed == TableOpened(table_id="t", config=GIVEN)
