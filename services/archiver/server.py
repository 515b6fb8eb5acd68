"""The archiver's gRPC server: standard health and reflection only (its probes), with the
same interceptors as every service."""

from __future__ import annotations

from archiver.bootstrap import ArchiverDeps
from archiver.config import Settings
from studkit.grpc_server import GrpcServer, create_grpc_server


def create_server(settings: Settings, deps: ArchiverDeps) -> tuple[GrpcServer, int]:
    """The archiver's server bound to ``settings.addr`` (not started) and its port."""
    server = create_grpc_server(settings.addr, [], verifier=deps.verifier,
                                metrics=deps.metrics)
    return server, server.port
