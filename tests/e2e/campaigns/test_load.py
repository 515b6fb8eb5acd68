"""``make load`` in short: the whole stack under a few bots (in processes of their own), beside
the bare and the fair ceilings, then two tables at human pace; the last line has its six
figures (no figure is asserted: tests never judge speed)."""

from __future__ import annotations

import re

import pytest

from campaigns.load import main_async, parser

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


async def test_short_load_run() -> None:
    args = parser().parse_args(["--seconds", "1.5", "--tables", "2", "--bots", "2",
                                "--human-start", "2", "--max-tables", "2",
                                "--human-seconds", "3", "--bot-processes", "1"])
    line = await main_async(args)
    assert re.fullmatch(r"ratio=[\d.]+ fair_ratio=[\d.]+ table_cpu_ms=[\d.]+ p99_ms=[\d.]+ "
                        r"tables_at_human_pace=\d+ "
                        r"limit=(none|p99|cpu|rss|errors|idle|bots)", line), line
