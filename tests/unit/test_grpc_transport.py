"""Every service process runs gRPC on the transport ``studkit.transport.GRPC_EXPERIMENTS`` names
(issue 35: grpcio's own I/O path, not the EventEngine, measured cheaper per call). gRPC reads
the variable once, when ``grpc`` is first imported, so ``studkit.transport`` must come before
it in each service's entry module; the library and the SDK leave it alone. A fresh
interpreter imports the entry with the variable unset and records what the environment held
at the moment ``grpc`` was imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import studkit.transport

ROOT = Path(__file__).resolve().parents[2]
SERVICES = tuple(sorted(p.name for p in (ROOT / "services").iterdir()
                        if (p / "__main__.py").is_file()))

RECORD = """
import importlib.abc, json, os, sys
seen = {}
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "grpc" and "grpc" not in seen:
            seen["grpc"] = os.environ.get("GRPC_EXPERIMENTS")
        return None
sys.meta_path.insert(0, Watch())
import importlib
importlib.import_module(sys.argv[1] + ".__main__")
print(json.dumps(seen))
"""


def test_every_service_has_an_entry() -> None:
    assert {"table", "wallet", "dealer", "tournament", "archiver"} <= set(SERVICES)


@pytest.mark.parametrize("service", SERVICES)
def test_grpc_is_imported_with_the_setting_in_place(service: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    run = subprocess.run([sys.executable, "-c", RECORD, service], capture_output=True,
                         text=True, timeout=120, cwd=ROOT, env=env, check=False)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {"grpc": studkit.transport.GRPC_EXPERIMENTS}


def test_an_operators_setting_is_kept() -> None:
    env = {**os.environ, "GRPC_EXPERIMENTS": "-event_engine_dns"}
    run = subprocess.run([sys.executable, "-c",
                          "import studkit.transport, os; print(os.environ['GRPC_EXPERIMENTS'])"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
                         check=False)
    assert run.stdout.strip() == "-event_engine_dns", run.stderr


def test_the_library_and_the_sdk_leave_grpc_alone() -> None:
    """Importing ``studkit`` or the SDK changes neither the host process's gRPC nor the
    environment its children inherit (an application chooses its own transport)."""
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    run = subprocess.run([sys.executable, "-c",
                          "import studkit, studclient.client, os; "
                          "print(repr(os.environ.get('GRPC_EXPERIMENTS')))"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT, env=env,
                         check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "None"
