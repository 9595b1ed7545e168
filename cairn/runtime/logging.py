"""Structured logs: one JSON object per line on stderr, level from CAIRN_LOG_LEVEL.

Stage logs carry ids, counts and token math for the audit trail; they never carry the
text of a node the caller could not see (the Pre-Selector never fetches it).
"""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure_logging(level: str | None = None) -> None:
    name = (level or os.environ.get("CAIRN_LOG_LEVEL", "INFO")).upper()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(sort_keys=True),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(name, logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
