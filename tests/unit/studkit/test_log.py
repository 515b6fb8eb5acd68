"""Logging setup: JSON lines with level, UTC timestamp and context; secrets redacted."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from studkit.log import REDACTED, configure_logging


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    out = io.StringIO()
    configure_logging("INFO", json=True, stream=out, cache_logger_on_first_use=False)
    yield out
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


class TestConfigureLogging:
    def test_writes_json_with_context_level_and_timestamp(self, stream: io.StringIO) -> None:
        """A line is JSON with the event, bound context, level and an ISO UTC timestamp."""
        structlog.contextvars.bind_contextvars(rpc="/stud.v1.WalletService/Deposit")
        structlog.get_logger().info("rpc_handled", code="OK")
        line = json.loads(stream.getvalue().splitlines()[-1])
        assert line["event"] == "rpc_handled" and line["level"] == "info"
        assert line["rpc"] == "/stud.v1.WalletService/Deposit"
        assert line["timestamp"].endswith("Z")

    def test_redacts_tokens(self, stream: io.StringIO) -> None:
        """A value under a secret-looking key (token, authorization) is never written."""
        structlog.get_logger().info("oops", token="eyJsecret", authorization="Bearer x")
        line = json.loads(stream.getvalue().splitlines()[-1])
        assert line["token"] == REDACTED and line["authorization"] == REDACTED
        assert "eyJsecret" not in stream.getvalue()

    def test_filters_below_the_level(self, stream: io.StringIO) -> None:
        """Debug lines are dropped at INFO."""
        structlog.get_logger().debug("noise")
        assert stream.getvalue() == ""


class TestTracebacksCarryNoLocals:
    def test_exception_log_omits_frame_locals(self) -> None:
        """A logged exception shows the frames but none of their local values (a local may
        hold a deck, a card or a token)."""
        out = io.StringIO()
        configure_logging(json=True, stream=out, cache_logger_on_first_use=False)
        try:
            deck_order = "Ah Kd 7c 2s"  # noqa: F841 - the local that must not leak
            raise RuntimeError("boom")
        except RuntimeError:
            structlog.get_logger().exception("rpc_failed")
        line = out.getvalue()
        assert "rpc_failed" in line and "RuntimeError" in line
        assert "Ah Kd 7c 2s" not in line
        assert json.loads(line)["exception"]
