"""The SDK's keepalive pings and the servers' ping policy agree: a client that pings more
often than a server allows on a quiet connection is sent ``GOAWAY ENHANCE_YOUR_CALM``
("too_many_pings") after two strikes, which dropped quiet watches (a busted bot's) every few
minutes until the servers' floor was set below the SDK's interval."""

from __future__ import annotations

from studclient.client import CHANNEL_OPTIONS
from studkit.grpc_server import DEFAULT_OPTIONS

GRPC_SERVER_DEFAULT_FLOOR_MS = 300_000
"""gRPC core's default minimum interval between pings without data (5 minutes)."""


def test_the_servers_accept_the_sdks_keepalive_pings_on_a_quiet_connection() -> None:
    client = dict(CHANNEL_OPTIONS)
    server = dict(DEFAULT_OPTIONS)
    ping_every = client["grpc.keepalive_time_ms"]
    floor = server.get("grpc.http2.min_ping_interval_without_data_ms",
                       GRPC_SERVER_DEFAULT_FLOOR_MS)
    assert floor < ping_every, (floor, ping_every)
