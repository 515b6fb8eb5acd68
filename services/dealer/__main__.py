"""``python -m dealer``: serve the dealer (gRPC and ``/metrics``) until SIGTERM."""

from __future__ import annotations

from dealer.bootstrap import build_deps
from dealer.config import Settings
from dealer.server import create_server
from studkit import service


def main() -> None:
    """Entry point of the dealer process."""
    settings = Settings.from_env()
    service.main("dealer", settings, build_deps, create_server,
                 table_services=list(settings.table_services))


if __name__ == "__main__":
    main()
