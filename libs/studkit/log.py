"""structlog setup, once per process (called from each service's ``__main__``): JSON lines on
stdout, or a console renderer on a TTY; per-RPC context comes from contextvars."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Final, TextIO

import structlog
import structlog.tracebacks
from structlog.typing import EventDict, Processor, WrappedLogger

from studkit.telemetry import add_trace_context

REDACTED: Final = "[redacted]"
SECRET_KEYS: Final = frozenset({"authorization", "token", "secret", "password", "jwt"})


def redact_secrets(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """Replace the value of any key that names a secret: tokens are never logged."""
    for key in event_dict.keys() & SECRET_KEYS:
        event_dict[key] = REDACTED
    return event_dict


def _level_number(level: int | str) -> int:
    if isinstance(level, int):
        return level
    number = logging.getLevelNamesMapping().get(level.upper())
    if number is None:
        raise ValueError(f"unknown log level {level!r}")
    return number


def configure_logging(
    level: int | str = "INFO",
    *,
    json: bool | None = None,
    stream: TextIO | None = None,
    cache_logger_on_first_use: bool = True,
) -> None:
    """Configure structlog: merge contextvars, level, ISO UTC timestamp, dict tracebacks and
    JSON (or the console renderer when ``json`` is None and ``stream`` is a TTY)."""
    out = stream or sys.stdout
    use_json = json if json is not None else not out.isatty()
    # Tracebacks never carry frame locals: a local may hold a deck, a card or a token.
    renderer: Processor = (
        structlog.processors.JSONRenderer() if use_json
        else structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
    )
    processors: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        add_trace_context,  # trace_id and span_id inside a span (studkit.telemetry)
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]
    if use_json:
        processors.append(structlog.processors.ExceptionRenderer(
            structlog.tracebacks.ExceptionDictTransformer(show_locals=False)))
    processors.append(renderer)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_level_number(level)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=cache_logger_on_first_use,
    )


def bind(**values: Any) -> None:
    """Bind values to the current (per-RPC) log context."""
    structlog.contextvars.bind_contextvars(**values)


def context() -> MutableMapping[str, Any]:
    """The current log context (a copy)."""
    return dict(structlog.contextvars.get_contextvars())
