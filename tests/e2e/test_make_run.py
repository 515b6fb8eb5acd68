"""``make run`` brings everything up: Redis and every service, each answering health checks."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from studtools import devrun
from studtools.devkeys import DevKeys
from studtools.devrun import available_services

ROOT = Path(__file__).resolve().parents[2]


class TestDevRun:
    def test_every_service_starts_and_serves(self, tmp_path: Path) -> None:
        """``python -m studtools.devrun --once`` starts Redis and each service, all SERVING."""
        result = subprocess.run(
            [sys.executable, "-m", "studtools.devrun", "--once", "--data-dir",
             str(tmp_path / "redis"), "--keys-dir", str(tmp_path / "keys")],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        services = available_services(ROOT)
        assert {"dealer", "wallet"} <= set(services)
        for name in services:
            assert f"{name:<10}" in result.stdout and "NOT SERVING" not in result.stdout
        assert "player:alice" in result.stdout
        # The generated dev keys are kept for the next run and sign the printed tokens.
        keys = DevKeys.load(tmp_path / "keys")
        token = next(line.split()[1] for line in result.stdout.splitlines()
                     if line.strip().startswith("operator:ops"))
        assert keys.verifier().verify(token).subject == "operator:ops"

    def test_a_service_whose_port_is_taken_before_it_binds_starts_on_another(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> None:
        """Two launchers (two `make run`s, or a test beside one) can find the same port free;
        the one that binds second gets it taken from under it. Its service exits on the bind,
        and the launcher starts it again on a free port instead of failing."""
        with socket.socket() as taken:
            taken.bind((devrun.LOOPBACK, 0))
            taken.listen()
            port = taken.getsockname()[1]
            chosen = devrun.service_port
            monkeypatch.setattr(devrun, "service_port",
                                lambda name: port if name == "dealer" else chosen(name))
            # main() takes the stop signals (and ignores them while it stops): given back
            # after, or every process this pytest worker starts later inherits SIGTERM
            # ignored (a later test's server then outlived its terminate()).
            handlers = {signum: signal.getsignal(signum) for signum in devrun.STOP_SIGNALS}
            try:
                status = devrun.main(["--once", "--data-dir", str(tmp_path / "redis"),
                                      "--keys-dir", str(tmp_path / "keys"),
                                      "--logs-dir", str(tmp_path / "logs"),
                                      "--env-file", str(tmp_path / "env")])
            finally:
                for signum, handler in handlers.items():
                    signal.signal(signum, handler)
        said = capsys.readouterr()
        assert status == 0, said.out + said.err
        dealer = next(line for line in said.out.splitlines() if line.startswith("dealer "))
        assert "SERVING" in dealer and "NOT SERVING" not in dealer
        assert f":{port} " not in dealer, dealer  # on another port
        assert "Failed to bind" in (tmp_path / "logs" / "dealer.log").read_text()
        assert f"DEALER_ADDR={devrun.LOOPBACK}:{port}" not in (tmp_path / "env").read_text()
