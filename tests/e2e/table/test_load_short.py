"""``make load`` in short: the whole stack under a few bots, beside the ceiling, then two tables
at human pace; the last line has its three figures (no figure is asserted: tests never judge
speed)."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
LOAD = Path(__file__).resolve().parents[3] / "bench" / "load.py"


async def test_short_load_run() -> None:
    spec = importlib.util.spec_from_file_location("bench_load", LOAD)
    assert spec is not None and spec.loader is not None
    load = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load)
    args = argparse.Namespace(seconds=1.5, tables=2, bots=2, human_start=2, max_tables=2,
                              human_seconds=3.0)
    line = await load.main_async(args)
    assert re.fullmatch(r"ratio=[\d.]+ p99_ms=[\d.]+ tables_at_human_pace=\d+", line), line
