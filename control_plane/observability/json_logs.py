"""Logs as JSON lines, with the request id."""

from __future__ import annotations

import json
import logging
from typing import Any

from ..kit import request_id_var


class RequestIdFilter(logging.Filter):
    """Stamps each record with the request id of the context that logged it (a request, or
    a job the request queued), whichever thread or handler formats it later."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line, with the request id. Never log memory content here."""

    _std = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "request_id"}

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        payload.update({k: v for k, v in record.__dict__.items() if k not in self._std})
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


def configure_logging(level: str = "INFO") -> None:
    """JSON lines at ``level``; client libraries capped and credentials redacted
    (log_guard.py) whatever the level."""
    from ..log_guard import guard

    handler = guard(logging.StreamHandler())
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
