"""studhistory.pg: the roles' variables and a ledger transaction's time as the archive's
CHECK computes it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from studhistory import pg
from studtools.pg_server import ROLE_USERS


def test_each_login_role_has_its_variable() -> None:
    assert set(pg.ROLE_DSN_ENV) == set(ROLE_USERS)
    assert pg.ROLE_DSN_ENV == {"archiver": "STUD_HISTORY_DSN", "support": "STUD_SUPPORT_DSN",
                               "auditor": "STUD_AUDITOR_DSN",
                               "tournament": "TOURNAMENT_HISTORY_DSN"}
    env = {"STUD_SUPPORT_DSN": "postgresql://support@h/stud"}
    assert pg.dsn_from_env("support", env) == "postgresql://support@h/stud"
    assert pg.dsn_from_env("auditor", env) == ""


def test_connecting_without_a_url_says_which_to_set() -> None:
    with pytest.raises(ValueError, match="STUD_HISTORY_DSN"):
        pg.connect("")


@pytest.mark.parametrize(("tx", "at"), [
    ("0-0", datetime(1970, 1, 1, tzinfo=UTC)),
    ("1764936000123-7", datetime(2025, 12, 5, 12, 0, 0, 123000, tzinfo=UTC)),
    # The last millisecond of a month stays in that month (a float division could round up).
    ("1767225599999-0", datetime(2025, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
])
def test_a_ledger_transactions_time_is_its_ids_milliseconds(tx: str, at: datetime) -> None:
    assert pg.ledger_time(tx) == at


@pytest.mark.parametrize("bad", ["", "12", "12-", "-1", "a-1", "1-2-3", "1.5-0"])
def test_a_ledger_time_needs_a_stream_id(bad: str) -> None:
    with pytest.raises(ValueError):
        pg.ledger_time(bad)
