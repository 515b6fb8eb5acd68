"""``make run`` brings everything up: Redis and every service, each answering health checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
