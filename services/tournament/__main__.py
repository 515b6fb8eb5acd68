"""``python -m tournament``: serve the tournament service (gRPC and ``/metrics``) and run its
process manager until SIGTERM."""

from __future__ import annotations

import studkit.transport  # noqa: F401  (first: the gRPC transport, before grpc's import)
from studkit import service
from tournament.bootstrap import build_deps
from tournament.config import Settings
from tournament.server import create_server


def main() -> None:
    """Entry point of the tournament process."""
    service.main("tournament", Settings.from_env(), build_deps, create_server)


if __name__ == "__main__":
    main()
