"""The metrics building blocks: per-instance registries, counters whose label values are
declared up front, and METRICS_PORT read by each service's Settings.from_env."""

from __future__ import annotations

import grpc
import pytest

from dealer.config import Settings as DealerSettings
from studkit.metrics import Metrics, host_address, port_number, split_method
from studtools.devkeys import DevKeys
from wallet.config import Settings as WalletSettings

KEYS = DevKeys.generate(services=())


class TestMetrics:
    def test_rpc_is_counted_by_service_method_and_code(self) -> None:
        """observe_rpc splits the method path into service and method labels."""
        metrics = Metrics()
        metrics.observe_rpc("/stud.v1.WalletService/Deposit", grpc.StatusCode.OK, 0.003)
        metrics.observe_rpc("/stud.v1.WalletService/Deposit", grpc.StatusCode.NOT_FOUND, 0.2)
        labels = {"service": "stud.v1.WalletService", "method": "Deposit"}
        assert metrics.sample("stud_grpc_requests_total", **labels, code="OK") == 1
        assert metrics.sample("stud_grpc_requests_total", **labels, code="NOT_FOUND") == 1
        assert metrics.sample("stud_grpc_request_seconds_count", **labels) == 2
        assert metrics.sample("stud_grpc_request_seconds_bucket", **labels, le="0.005") == 1
        assert split_method("/a.B/C") == ("a.B", "C")

    def test_each_instance_has_its_own_registry(self) -> None:
        """Two Metrics in one process register the same names without colliding."""
        first, second = Metrics(), Metrics()
        first.observe_rpc("/a.B/C", grpc.StatusCode.OK, 0.1)
        assert second.sample("stud_grpc_requests_total", service="a.B", method="C",
                             code="OK") == 0

    def test_declared_values_start_at_zero_and_others_are_refused(self) -> None:
        """Every declared combination is exported at 0; an undeclared value (an id, a card)
        raises instead of becoming a series."""
        metrics = Metrics()
        dealt = metrics.counter("stud_test_dealt", "cards", {"face": ("up", "down")})
        assert metrics.sample("stud_test_dealt_total", face="down") == 0
        dealt.inc(3, face="up")
        assert metrics.sample("stud_test_dealt_total", face="up") == 3
        for bad in ({"face": "As"}, {"face": "up", "player": "alice"}, {}):
            with pytest.raises(ValueError):
                dealt.inc(**bad)

    def test_counter_without_labels(self) -> None:
        """A labelless domain counter counts plainly and refuses labels."""
        metrics = Metrics()
        started = metrics.counter("stud_test_started", "hands")
        started.inc()
        assert metrics.sample("stud_test_started_total") == 1
        with pytest.raises(ValueError):
            started.inc(table="t-1")


class TestPort:
    @pytest.mark.parametrize(("raw", "port"), [("9102", 9102), (" 0 ", 0), ("65535", 65535)])
    def test_valid(self, raw: str, port: int) -> None:
        assert port_number(raw) == port

    @pytest.mark.parametrize("raw", ["", "http", "-1", "65536"])
    def test_invalid(self, raw: str) -> None:
        with pytest.raises(ValueError, match="METRICS_PORT"):
            port_number(raw)

    @pytest.mark.parametrize(("settings", "default"),
                             [(DealerSettings, 9102), (WalletSettings, 9103)])
    def test_services_read_metrics_port(
        self, settings: type[DealerSettings] | type[WalletSettings], default: int
    ) -> None:
        """Each service defaults to its own port; METRICS_PORT overrides it, 0 included."""
        env = KEYS.env("any")
        assert settings.from_env(env).metrics_port == default
        assert settings.from_env({**env, "METRICS_PORT": "9200"}).metrics_port == 9200
        assert settings.from_env({**env, "METRICS_PORT": "0"}).metrics_port == 0
        with pytest.raises(ValueError):
            settings.from_env({**env, "METRICS_PORT": "nine"})

    @pytest.mark.parametrize("settings", [DealerSettings, WalletSettings])
    def test_services_read_metrics_addr(
        self, settings: type[DealerSettings] | type[WalletSettings]
    ) -> None:
        """/metrics binds all interfaces unless METRICS_ADDR names one (``make run``:
        loopback); a host name is refused, not resolved."""
        env = KEYS.env("any")
        assert settings.from_env(env).metrics_addr == "0.0.0.0"
        loopback = settings.from_env({**env, "METRICS_ADDR": "127.0.0.1"})
        assert loopback.metrics_addr == "127.0.0.1"
        with pytest.raises(ValueError, match="METRICS_ADDR"):
            settings.from_env({**env, "METRICS_ADDR": "localhost"})

    @pytest.mark.parametrize("raw", ["0.0.0.0", "127.0.0.1", "::1", " :: "])
    def test_valid_address(self, raw: str) -> None:
        assert host_address(raw) == raw.strip()
