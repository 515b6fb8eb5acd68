"""make run never gives one port to two of its listeners: a port chosen free stays free until
its owner binds it, so a metrics port chosen later could be a service's gRPC port not yet
bound (seen in CI: the archiver's gRPC and metrics ports were both 54347, and it failed to
start with 'Address already in use')."""

from __future__ import annotations

import pytest

from studtools import devrun


def test_a_port_already_planned_is_never_chosen_again(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    handed = iter([54347, 54347, 54347, 40001, 54347, 40002])
    monkeypatch.setattr(devrun, "free_port", lambda: next(handed))
    monkeypatch.setattr(devrun, "PLANNED_PORTS", {54347})
    assert devrun.free_port_but_planned() == 40001
    assert devrun.free_port_but_planned() == 40002
    assert {54347, 40001, 40002} == devrun.PLANNED_PORTS


def test_the_usual_port_when_free_else_an_unplanned_one(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    handed = iter([50055, 41000])
    monkeypatch.setattr(devrun, "free_port", lambda: next(handed))
    monkeypatch.setattr(devrun, "PLANNED_PORTS", {50055})
    monkeypatch.setattr(devrun, "port_free", lambda port: False)
    assert devrun.service_port("archiver") == 41000
