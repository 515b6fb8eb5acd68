"""A Play reply's bytes made of its records' bytes (``table.play.reply_message``, issue 35):
the same bytes protobuf writes for the message, whatever the version, the records and the
command id (none, long, not ASCII), so a client reads it as the ``CommandReply`` its unary
call returns."""

from __future__ import annotations

import pytest

from stud.v1 import table_pb2 as pb
from table.play import reply_message


def record(sequence: int, filler: int = 0) -> bytes:
    data: bytes = pb.TableEventRecord(sequence=sequence, hand_number=3,
                                      event_id="x" * filler).SerializeToString()
    return data


@pytest.mark.parametrize("command_id", ["", "0193a0b1-c2d3", "é" * 40, "c" * 300])
@pytest.mark.parametrize("version", [0, 1, 127, 128, 2**40])
@pytest.mark.parametrize("duplicate", [False, True])
@pytest.mark.parametrize("records", [[], [record(7)], [record(7), record(8, 200)],
                                     [record(i, i) for i in range(1, 40)]])
def test_the_reply_is_the_message_protobuf_writes(command_id: str, version: int,
                                                  duplicate: bool, records: list[bytes]
                                                  ) -> None:
    reply = pb.CommandReply(version=version, duplicate=duplicate)
    for one in records:
        reply.events.add().MergeFromString(one)
    expected = pb.PlayMessage(reply=pb.PlayReply(command_id=command_id, reply=reply))
    data = reply_message(command_id, version, duplicate, records)
    assert data == expected.SerializeToString()
    assert pb.PlayMessage.FromString(data) == expected
