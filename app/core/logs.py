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
import time
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
    """The service's JSON line (python-json-logger over orjson: compact, no spaces).

    One is written per request, so two of the formatter's steps are done more cheaply,
    with the same output (the two that cost most of the line):
    the time's text is made once a second, and the fields are gathered in one pass."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(FIELDS, style="{", rename_fields=RENAMED, reserved_attrs=UNWRITTEN)
        self._second: int | None = None
        self._stamp = ""
        # (attribute of the record, name in the line): time, level, logger, message
        self._named = [(field, RENAMED.get(field, field)) for field in self._required_fields]

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """logging.Formatter's text of the time, its seconds part made once a second."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        if self.default_msec_format:
            return self.default_msec_format % (self._stamp, record.msecs)
        return self._stamp

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord,
                   message_dict: dict[str, Any]) -> None:
        """What python-json-logger's add_fields gathers for this formatter's settings (no
        defaults, no static fields, no timestamp): the four fields renamed, then the
        logged dict, then the record's extras."""
        fields = record.__dict__
        for field, name in self._named:
            log_data[name] = fields.get(field)
        for key, value in message_dict.items():
            log_data[RENAMED.get(key, key)] = value
        skip = self._skip_fields
        for name, value in fields.items():
            if name not in skip and name[:1] != "_":
                log_data[name] = value


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
    # Nor the caller's file and line, which every record would otherwise find by walking
    # the stack (the logging HOWTO's "Optimization" names this switch).
    logging._srcfile = None
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
