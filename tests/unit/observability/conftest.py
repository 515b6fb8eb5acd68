"""promtool for the rules' and dashboards' tests: Debian's, unpacked by ``make promtool``
under ``build/prometheus`` (``$STUD_PROMETHEUS_DIR``), else one on PATH. Without it the tests
that need it are skipped with the reason, except in CI (``CI`` set), where they fail."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from studtools.observe import binary


@pytest.fixture(scope="session")
def promtool() -> Path:
    found = binary("promtool")
    if found is None:
        message = "promtool is not unpacked: run `make promtool` (Debian's prometheus package)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found

