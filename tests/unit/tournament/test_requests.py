"""What the tournament checks at its edge (services/tournament/codec.py and decide.py's
create): a request that cannot be played or paid is refused ``BadRequest``
(INVALID_ARGUMENT) with the field named, and nothing is decided (issue 29, G4 and G5)."""

from __future__ import annotations

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from stud.v1 import tournament_pb2 as pb
from studkit.errors import BadRequest
from tournament import commands as c
from tournament import events as ev
from tournament.codec import config_from_proto, config_from_request, config_to_proto
from tournament.decide import decide
from tournament.events import CHIPS_MAX, MAX_AMOUNT, MAX_FIELD
from tournament.state import Tournament

MTT = pb.TournamentConfig(name="mtt", format=pb.TOURNAMENT_FORMAT_MULTI_TABLE, buy_in=100,
                          fee=10, seats=8, min_entrants=2, start_at={"seconds": 4_000_000_000},
                          structure=pb.TournamentStructure(preset="turbo"))


def with_start(seconds: int, nanos: int = 0) -> pb.TournamentConfig:
    m = pb.TournamentConfig()
    m.CopyFrom(MTT)
    m.start_at.seconds = seconds
    m.start_at.nanos = nanos
    return m


@pytest.mark.parametrize(("seconds", "nanos"), [
    (4_000_000_000, -5),  # nanos below 0
    (4_000_000_000, 10**9),  # nanos past 999,999,999
    (2**62, 0),
    (-(2**62), 0),
    (253_402_300_800, 0),  # 10000-01-01T00:00:00Z, a year past Timestamp's 9999
    (-62_135_596_801, 0),  # a second before 0001-01-01
])
def test_a_start_at_outside_the_timestamp_range_is_a_bad_request(seconds: int,
                                                                   nanos: int) -> None:
    """G4: ``Timestamp.ToNanoseconds`` raised on these (INTERNAL at the edge)."""
    with pytest.raises(BadRequest) as refused:
        config_from_proto(with_start(seconds, nanos))
    assert refused.value.field == "config.start_at"
    assert refused.value.reason == "bad_request"


def test_the_last_valid_instants_are_taken() -> None:
    assert config_from_proto(with_start(253_402_300_799, 999_999_999)).start_at \
        == pytest.approx(253_402_300_800.0)
    assert config_from_proto(with_start(4_000_000_000, 500_000_000)).start_at \
        == pytest.approx(4e9 + 0.5)


def create(config: pb.TournamentConfig, now: float = 1_000.0) -> list[ev.Event]:
    return decide(Tournament(), c.Create("T", config_from_request(config)), now)


def changed(base: pb.TournamentConfig, **fields: object) -> pb.TournamentConfig:
    m = pb.TournamentConfig()
    m.CopyFrom(base)
    for name, value in fields.items():
        if name in ("starting_stack", "levels"):
            m.structure.ClearField("preset")
            if name == "levels":
                m.structure.ClearField("levels")
                m.structure.levels.extend(value)  # type: ignore[arg-type]
            else:
                setattr(m.structure, name, value)
            if not m.structure.levels:
                m.structure.levels.extend(LEVELS)
            if not m.structure.starting_stack:
                m.structure.starting_stack = 1000
        elif name == "start_at":
            m.start_at.CopyFrom(Timestamp(**value))  # type: ignore[arg-type]
        else:
            setattr(m, name, value)
    return m


LEVELS = [pb.TournamentLevel(ante=10, bring_in=20, small_bet=50, big_bet=100, seconds=60)] * 8
SNG = pb.TournamentConfig(name="sng", format=pb.TOURNAMENT_FORMAT_SIT_AND_GO, buy_in=100,
                          fee=10, seats=3, structure=pb.TournamentStructure(preset="turbo"))
INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(("name", "config", "field"), [
    ("buy_in_int64_max", changed(MTT, buy_in=INT64_MAX), "config.buy_in"),
    ("fee_int64_max", changed(MTT, fee=INT64_MAX), "config.fee"),
    ("sum_overflows_int64", changed(MTT, buy_in=2**62, fee=2**62), "config.buy_in"),
    ("sng_pool_past_the_wallet", changed(SNG, buy_in=2**52), "config.buy_in"),
    ("stack_int64_max", changed(MTT, starting_stack=INT64_MAX), "config.structure"),
    ("big_bet_int64_max", changed(MTT, levels=[pb.TournamentLevel(
        ante=10, bring_in=20, small_bet=INT64_MAX // 2, big_bet=INT64_MAX - 1, seconds=60)]),
     "config.structure"),
    ("min_entrants_0", changed(MTT, min_entrants=0), "config.min_entrants"),
    ("late_past_the_levels", changed(MTT, late_through_level=1000, levels=LEVELS),
     "config.late_through_level"),
    ("nul_in_name", changed(MTT, name="a\x00b"), "config.name"),
    ("bidi_override_in_name", changed(MTT, name="a\u202eb"), "config.name"),
    ("mtt_start_in_the_past", changed(MTT, start_at={"seconds": 999}), "config.start_at"),
    ("mtt_start_now", changed(MTT, start_at={"seconds": 1000}), "config.start_at"),
])
def test_a_tournament_that_cannot_be_played_or_paid_is_refused(
        name: str, config: pb.TournamentConfig, field: str) -> None:
    """G5: each of these was created (and the past start cancelled in the same reply,
    burning the id)."""
    with pytest.raises(BadRequest) as refused:
        create(config)
    assert refused.value.field.startswith(field), refused.value.detail


def test_the_largest_playable_tournaments_are_created() -> None:
    most = changed(MTT, buy_in=MAX_AMOUNT // MAX_FIELD, fee=MAX_AMOUNT - MAX_AMOUNT // MAX_FIELD,
                   late_through_level=8, levels=LEVELS, starting_stack=CHIPS_MAX // MAX_FIELD)
    (created,) = create(most)
    assert isinstance(created, ev.Created) and created.config.late_through_level == 8
    sng = changed(SNG, buy_in=MAX_AMOUNT // 3 - 10)
    assert len(create(sng)) == 1
    assert len(create(changed(MTT, start_at={"seconds": 1001}))) == 1
    assert len(create(changed(SNG, start_at={"seconds": 1}))) == 1  # a sit & go ignores it


@pytest.mark.parametrize(("pace", "field"), [
    ({"action_time_s": 3601}, "config.pace.action_time_s"),
    ({"time_bank_s": 3601}, "config.pace.time_bank_s"),
    ({"next_hand_delay_ms": 600_001}, "config.pace.next_hand_delay_ms"),
])
def test_a_pace_past_what_a_table_takes_is_refused(pace: dict[str, int], field: str) -> None:
    m = changed(SNG)
    m.pace.CopyFrom(pb.TournamentPace(**pace))
    with pytest.raises(BadRequest) as refused:
        create(m)
    assert refused.value.field == field


def test_a_pace_round_trips_and_an_old_config_has_the_services() -> None:
    m = changed(SNG)
    m.pace.CopyFrom(pb.TournamentPace(action_time_s=7, time_bank_s=0, next_hand_delay_ms=1500))
    cfg = config_from_request(m)
    assert cfg.pace == ev.Pace(7, 0, 1500)
    assert config_from_proto(pb.TournamentConfig.FromString(
        config_to_proto(cfg).SerializeToString())) == cfg
    old = config_from_proto(SNG)  # a config stored before the pace: every field the service's
    assert old.pace == ev.Pace() and not config_to_proto(old).HasField("pace")
