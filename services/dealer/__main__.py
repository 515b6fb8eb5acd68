"""``python -m dealer``: serve the dealer (gRPC and ``/metrics``) until SIGTERM.

It always deals honestly (:data:`dealer.dealing.HONEST`). With a test-only setting in the
environment (``DEALER_CORRUPT``, ``DEALER_STACKED_DECKS``: the rigged test dealer's, which
the service does not contain) it logs one ``test_only_setting_refused`` error and exits with
status 2 before touching anything, whatever ``STUD_ENV`` says."""

from __future__ import annotations

import os
import sys

import structlog

import studkit.transport  # noqa: F401  (first: the gRPC transport, before grpc's import)
from dealer.bootstrap import build_deps
from dealer.config import Settings, test_only_settings
from dealer.server import create_server
from studkit import service
from studkit.log import configure_logging

EXIT_TEST_ONLY_SETTING = 2


def main() -> None:
    """Entry point of the dealer process."""
    refused = test_only_settings(os.environ)
    if refused:
        try:
            configure_logging(os.environ.get("LOG_LEVEL", "INFO"))
        except ValueError:  # a bad level too: the refusal is still said
            configure_logging("INFO")
        structlog.get_logger("dealer").error(
            "test_only_setting_refused", settings=refused,
            hint="the production dealer always deals honestly and has no test dealer; unset "
                 "these (the rigged test dealer is python -m studtest.rigged_dealer, in the "
                 "repository's test support only)")
        sys.exit(EXIT_TEST_ONLY_SETTING)
    settings = Settings.from_env()
    service.main("dealer", settings, build_deps, create_server,
                 table_services=list(settings.table_services))


if __name__ == "__main__":
    main()
