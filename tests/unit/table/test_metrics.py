"""The table's domain metrics (issue 33; docs/operations.md "Metrics"): the driver counts a
turn timed out, a hand voided and a hand settled; the gauges read the tables a replica holds.
With the fake port of tests/unit/table/fakes.py (the wiring across processes:
tests/e2e/test_traces.py)."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import Counter

from studkit.metrics import Metrics
from table import metrics
from table.room import Close
from tests.unit.table.fakes import FakeDealer
from tests.unit.table.test_driver import driver_for, run, two_players


def value(counter: Counter) -> float:
    return float(counter._value.get())


async def test_a_timed_out_turn_is_counted() -> None:
    driver, port, _, _, clock = driver_for(two_players())
    for _ in range(3):
        await driver.step()  # reconcile, start, deal
    wait = await driver.step()
    assert wait is not None
    before = value(metrics.TURN_TIMEOUTS)
    clock.now += wait + 1
    await driver.step()
    assert port.kinds()[-1] == "TimeOut"
    assert value(metrics.TURN_TIMEOUTS) == before + 1


async def test_a_voided_hand_and_its_settlement_are_counted() -> None:
    dealer = FakeDealer()
    driver, _, wallet, _, _ = driver_for(two_players(), dealer)
    await driver.step()
    await driver.step()
    voided, ended = value(metrics.HANDS_VOIDED), value(metrics.HANDS_ENDED)
    dealer.down = True
    await driver.step()
    assert value(metrics.HANDS_VOIDED) == voided + 1
    await driver.step()
    assert wallet.settled == [1]
    assert value(metrics.HANDS_ENDED) == ended + 1


def test_the_gauges_read_the_tables_held() -> None:
    rooms = {"t1": two_players(), "t2": two_players(), "t3": run(two_players(), Close("op"))}
    registry = Metrics()
    gauges = metrics.register(registry, lambda: {t: SimpleNamespace(room=r)
                                                 for t, r in rooms.items()})
    gauges.lengths = [40, 12]
    assert registry.sample("stud_table_tables_open") == 2  # a closed table is not open
    assert registry.sample("stud_table_seated_players") == 4
    assert registry.sample("stud_table_tables_stopped") == 0
    assert registry.sample("stud_table_stream_length", rank="1") == 40
    assert registry.sample("stud_table_stream_length", rank="2") == 12
    assert "stud_table_turn_timeouts_total" in {
        s.name for f in registry.registry.collect() for s in f.samples}
