"""``python -m table``: serve the table service (gRPC and ``/metrics``) until SIGTERM."""

from __future__ import annotations

import studkit.transport  # noqa: F401  (first: the gRPC transport, before grpc's import)
from studkit import service
from table.bootstrap import build_deps
from table.config import Settings
from table.server import create_server


def main() -> None:
    """Entry point of the table-service process."""
    service.main("table", Settings.from_env(), build_deps, create_server)


if __name__ == "__main__":
    main()
