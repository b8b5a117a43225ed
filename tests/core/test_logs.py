"""The service's JSON line writes what python-json-logger's own formatter writes, with the
same settings: JsonLines only does two of its steps more cheaply (issue 27)."""

from __future__ import annotations

import json
import logging
import sys

from pythonjsonlogger.orjson import OrjsonFormatter

from app.core.logs import FIELDS, RENAMED, UNWRITTEN, JsonLines


def _record(msg: object, *args: object, **extra: object) -> logging.LogRecord:
    exc_info = None
    if extra.pop("failing", False):
        try:
            raise ValueError("boom")
        except ValueError:
            exc_info = sys.exc_info()
    return logging.getLogger("petstore.access").makeRecord(
        "petstore.access", logging.INFO, __file__, 1, msg, args, exc_info, extra=extra)


def test_json_lines_match_the_library_formatter_field_for_field() -> None:
    ours = JsonLines()
    library = OrjsonFormatter(FIELDS, style="{", rename_fields=RENAMED,
                              reserved_attrs=UNWRITTEN)
    records = [
        _record("%s %s %d", "GET", "/v1/store/orders", 200, request_id="r1", status=200,
                duration_ms=1.5, key_id=None),
        _record("plain", color_message="\x1b[1mplain\x1b[0m", _private=1),
        _record({"event": "dict message", "levelname": "renamed"}),
        _record("failed", failing=True, request_id="r2"),
    ]
    for record in records:
        line, expected = ours.format(record), library.format(record)
        assert line == expected
        assert list(json.loads(line))[:4] == ["time", "level", "logger", "message"]


def test_the_time_is_the_formatters_own_across_seconds() -> None:
    ours, plain = JsonLines(), logging.Formatter()
    for created in (1_700_000_000.25, 1_700_000_000.75, 1_700_000_001.5, 1_800_000_000.0):
        record = _record("x")
        record.created, record.msecs = created, (created % 1) * 1000
        assert ours.formatTime(record) == plain.formatTime(record)
        assert ours.formatTime(record, "%Y") == plain.formatTime(record, "%Y")
