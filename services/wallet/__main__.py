"""``python -m wallet``: serve the wallet (gRPC and ``/metrics``) until SIGTERM."""

from __future__ import annotations

import studkit.transport  # noqa: F401  (first: the gRPC transport, before grpc's import)
from studkit import service
from wallet.bootstrap import build_deps
from wallet.config import Settings
from wallet.server import create_server


def main() -> None:
    """Entry point of the wallet process."""
    service.main("wallet", Settings.from_env(), build_deps, create_server)


if __name__ == "__main__":
    main()
