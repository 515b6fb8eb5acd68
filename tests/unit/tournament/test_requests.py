"""What the tournament checks at its edge (services/tournament/codec.py and decide.py's
create): a request that cannot be played or paid is refused ``BadRequest``
(INVALID_ARGUMENT) with the field named, and nothing is decided (issue 29, G4 and G5)."""

from __future__ import annotations

import pytest

from stud.v1 import tournament_pb2 as pb
from studkit.errors import BadRequest
from tournament.codec import config_from_proto

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
