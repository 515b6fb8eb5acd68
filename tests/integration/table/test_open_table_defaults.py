"""OpenTable with a partial config (issue 17): fields left unset take the RULES defaults
(2.1-2.2), and the reply, GetTable and the lobby show the config in force, every field
filled. Over real gRPC against the whole room on a real Redis."""

from __future__ import annotations

import uuid

import grpc
import pytest

from rules import TableConfig
from stud.v1 import common_pb2 as cpb
from stud.v1 import table_pb2 as pb
from studkit.grpc_server import rpc_error_reason
from studkit.mapping import config_to_proto
from studtest.table import OPERATOR, Room, fast_settings

pytestmark = pytest.mark.integration


async def open_with(room: Room, config: cpb.TableConfig) -> tuple[str, pb.CommandReply]:
    table_id = f"partial-{uuid.uuid4().hex[:8]}"
    reply: pb.CommandReply = await room.client.call("OpenTable", pb.OpenTableRequest(
        table_id=table_id, config=config, settings=fast_settings()), OPERATOR)
    return table_id, reply


def filled(config: cpb.TableConfig) -> None:
    """Every field of a config in force is set (the three with presence explicitly)."""
    assert config.seats and config.min_players and config.small_bet and config.big_bet
    assert config.bring_in
    assert config.heads_up_raises != cpb.HEADS_UP_RAISES_UNSPECIFIED
    assert config.showdown_opener != cpb.SHOWDOWN_OPENER_UNSPECIFIED
    assert all(config.HasField(f) for f in ("ante", "max_raises", "history_reveals_mucked"))


async def test_only_the_small_bet_opens_a_table_with_every_field_filled(room: Room) -> None:
    """`config { small_bet: 100 }`: a $1/$2 table, ante 20, bring-in 25 (RULES 2.2), every
    option at its RULES 2.1 default, shown whole in the reply, GetTable and ListTables."""
    table_id, reply = await open_with(room, cpb.TableConfig(small_bet=100))
    expected = config_to_proto(TableConfig(small_bet=100, big_bet=200, ante=20, bring_in=25))
    opened = [r.event.table_opened for r in reply.events
              if r.event.WhichOneof("event") == "table_opened"]
    assert [o.config for o in opened] == [expected]

    view = await room.client.view(table_id)
    assert view.config == expected
    filled(view.config)
    assert (view.config.seats, view.config.min_players, view.config.max_raises) == (8, 2, 3)
    assert view.config.heads_up_raises == cpb.HEADS_UP_RAISES_CAPPED
    assert view.config.showdown_opener == cpb.SHOWDOWN_OPENER_LAST_AGGRESSOR
    assert view.config.history_reveals_mucked and not view.config.burn_cards
    assert not view.config.HasField("rake")

    lobby = await room.client.stub.ListTables(pb.ListTablesRequest(),
                                              metadata=room.client.md(OPERATOR), timeout=10)
    assert [t.config for t in lobby.tables if t.table_id == table_id] == [expected]


async def test_options_left_out_take_their_defaults(room: Room) -> None:
    """The newcomer's report: every field set but heads_up_raises and showdown_opener (their
    proto3 zero) opened nothing (INVALID_ARGUMENT); they are now capped and last aggressor,
    and the zeros that are given (no ante, no raise) stay zero."""
    config = cpb.TableConfig(seats=6, min_players=2, small_bet=400, big_bet=800, ante=0,
                             bring_in=100, max_raises=0, burn_cards=True,
                             history_reveals_mucked=False)
    table_id, _reply = await open_with(room, config)
    view = await room.client.view(table_id)
    expected = cpb.TableConfig()
    expected.CopyFrom(config)
    expected.heads_up_raises = cpb.HEADS_UP_RAISES_CAPPED
    expected.showdown_opener = cpb.SHOWDOWN_OPENER_LAST_AGGRESSOR
    assert view.config == expected
    filled(view.config)


async def test_what_is_given_is_still_checked(room: Room) -> None:
    """A small bet of 1 cannot derive a bring-in below it (RULES 2.2): INVALID_ARGUMENT,
    and no table."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await open_with(room, cpb.TableConfig(small_bet=1))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert rpc_error_reason(caught.value) == "invalid_config"


async def test_seats_and_big_bet_given_as_zero_are_the_defaults(room: Room) -> None:
    """The hostile test's `OpenTable` with `seats: 0` and `big_bet: 0` (issue 29; turn 3
    refused it INVALID_ARGUMENT): since issue 17 a zero there is "unset", as common.proto's
    TableConfig and OpenTableRequest.config say, so the table opens with 8 seats and the big
    bet twice the small one, and the reply says so; a value the rules refuse still is."""
    table_id, reply = await open_with(room, cpb.TableConfig(seats=0, big_bet=0))
    (opened,) = [r.event.table_opened.config for r in reply.events
                 if r.event.WhichOneof("event") == "table_opened"]
    assert (opened.seats, opened.small_bet, opened.big_bet) == (8, 200, 400)
    assert (await room.client.view(table_id)).config == opened
    _, reply = await open_with(room, cpb.TableConfig(seats=0, small_bet=50, big_bet=0))
    (opened,) = [r.event.table_opened.config for r in reply.events
                 if r.event.WhichOneof("event") == "table_opened"]
    assert (opened.seats, opened.small_bet, opened.big_bet) == (8, 50, 100)
    for refused in (cpb.TableConfig(seats=1), cpb.TableConfig(seats=9),
                    cpb.TableConfig(small_bet=100, big_bet=100)):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await open_with(room, refused)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused
        assert rpc_error_reason(caught.value) == "invalid_config", refused
