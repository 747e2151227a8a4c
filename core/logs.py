"""One log format per mode: JSON lines in a RIC, text when run by hand.

In a RIC the log collectors read the O-RAN SC mdclog shape, one JSON object a line:
``{"ts": <ms since the epoch>, "crit": "INFO", "id": <logger>, "mdc": {...}, "msg": "..."}``.
Third-party libraries speak through Python's logging too, and are held at WARNING: pycrate
sets its own logger to INFO and says one line per undecodable message; httpx one per request.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Literal

LogFormat = Literal["json", "text"]
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries whose INFO lines are noise to an operator (or come once per message received).
QUIETENED = ("pycrate", "ricxappframe", "mdclogpy", "httpx", "httpcore", "uvicorn", "asyncio")


class JsonLines(logging.Formatter):
    """mdclog's shape: ts (ms), crit, id, mdc, msg; the exception, if any, inside msg."""

    def __init__(self, mdc: dict[str, str] | None = None) -> None:
        super().__init__()
        self._mdc = dict(mdc or {})

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        document = {
            "ts": int(record.created * 1000),
            "crit": record.levelname,
            "id": record.name,
            "mdc": {**self._mdc, "thread": record.threadName or ""},
            "msg": message,
        }
        return json.dumps(document, ensure_ascii=False)


def use_format(log_format: LogFormat, service: str = "atsss-xapp") -> None:
    """Every handler of the root logger writes ``log_format`` from now on; third-party loggers
    at WARNING (unless ATSSS_LOG_LEVEL asks for DEBUG)."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    formatter: logging.Formatter = (
        JsonLines({"service": service, "host": os.environ.get("HOSTNAME", "")})
        if log_format == "json"
        else logging.Formatter(TEXT_FORMAT)
    )
    for handler in root.handlers:
        handler.setFormatter(formatter)
    if os.environ.get("ATSSS_LOG_LEVEL", "").upper() != "DEBUG":
        for name in QUIETENED:
            logging.getLogger(name).setLevel(logging.WARNING)
