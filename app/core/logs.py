"""How the service logs: one JSON object a line, of one shape, whoever writes it.

The service's own lines (the access line, errors, quotas), `petstore serve`'s
announcement, gunicorn's (start, workers, signals) and uvicorn's all go through the
formatter here: the fields time, level, logger and message, then whatever the record
carries as extras (request_id, ...).
uvicorn adds to some records a `color_message` field, the message again with terminal
escape codes: it is left out. PETSTORE_LOG_FORMAT=text gives plain lines instead.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.orjson import OrjsonFormatter

from app.core.config import Settings

FIELDS = "{asctime}{levelname}{name}{message}"
RENAMED = {"asctime": "time", "levelname": "level", "name": "logger"}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# Record attributes that are never written as extra fields.
UNWRITTEN = [*RESERVED_ATTRS, "color_message"]


class JsonLines(OrjsonFormatter):
    """The service's JSON line (python-json-logger over orjson: compact, no spaces)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(FIELDS, style="{", rename_fields=RENAMED, reserved_attrs=UNWRITTEN)


def formatter(settings: Settings) -> logging.Formatter:
    """The formatter PETSTORE_LOG_FORMAT names."""
    if settings.log_format == "json":
        return JsonLines()
    return logging.Formatter(TEXT_FORMAT)


def configure_logging(settings: Settings) -> None:
    """One handler on the root logger, writing to standard error."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(settings))
    handler.set_name("petstore")
    # No line shows the thread or process names, which every record would otherwise look
    # up: a tenth of what the access line costs.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    root = logging.getLogger()
    # Replace only our own handler: others (a test runner's, an embedding app's) stay.
    root.handlers[:] = [h for h in root.handlers if h.get_name() != "petstore"] + [handler]
    root.setLevel(settings.log_level.upper())


def gunicorn_logconfig(settings: Settings) -> dict[str, Any]:
    """gunicorn's logconfig_dict: its own loggers and uvicorn's, in the same lines as the
    service's. (The worker's app configures the root logger itself: configure_logging.)"""
    level = settings.log_level.upper()
    if settings.log_format == "json":
        chosen: dict[str, Any] = {"()": JsonLines}
    else:
        chosen = {"format": TEXT_FORMAT}
    own = {"handlers": ["stderr"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"line": chosen},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "line",
                                "stream": "ext://sys.stderr"}},
        "root": {"level": level, "handlers": []},
        "loggers": {name: own for name in ("gunicorn.error", "uvicorn.error", "uvicorn")},
    }
