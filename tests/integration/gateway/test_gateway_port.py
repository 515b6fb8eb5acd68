"""A port has one listener: a second gateway on a taken port fails to bind, instead of
sharing the first one's connections (Envoy's Linux default, SO_REUSEPORT, would let both
listen and split the browsers between them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from studtools.gateway import UPSTREAMS, Gateway, GatewaySettings
from studtools.redis_server import free_port

pytestmark = pytest.mark.integration


def test_a_second_gateway_on_a_taken_port_fails_to_bind(tmp_path: Path) -> None:
    settings = GatewaySettings(upstreams={n: "127.0.0.1:1" for n in UPSTREAMS},
                               port=free_port())
    first, second = Gateway(settings, tmp_path / "a"), Gateway(settings, tmp_path / "b")
    try:
        first.start()
        first.wait_ready()
        second.start()
        assert second.process is not None
        deadline = time.monotonic() + 20
        while second.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert second.process.poll() is not None, "two gateways listen on one port"
        assert "already in use" in second.logs()
    finally:
        second.stop()
        first.stop()
