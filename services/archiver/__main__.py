"""``python -m archiver``: archive every table's history to PostgreSQL until SIGTERM."""

from __future__ import annotations

import studkit.transport  # noqa: F401  (first: the gRPC transport, before grpc's import)
from archiver.bootstrap import build_deps
from archiver.config import Settings
from archiver.server import create_server
from studkit import service


def main() -> None:
    """Entry point of the archiver process."""
    service.main("archiver", Settings.from_env(), build_deps, create_server)


if __name__ == "__main__":
    main()
