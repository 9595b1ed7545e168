"""Date-times the graph can store *and give back* (docs/design.md §Graph model).

Neo4j stores any year up to 999,999,999, but Python's ``datetime`` covers years 1 to 9999 only,
so the driver hands a node whose date-time lies outside them back as a broken value: every read
of that node (``node``, ``ask``, a neighbourhood, gardening its block) then failed, for every
role that may see it. ``0001-01-01T00:00:00+14:00`` is such a moment (0000-12-31 in UTC), and so
is ``9999-12-31T23:59:59-14:00``. Every date-time a write accepts is checked here first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime

OUTSIDE_UTC_YEARS = "is a moment outside the years 1 to 9999 in UTC"


def within_utc_years(value: datetime) -> datetime:
    """``value`` unchanged when its UTC instant lies in years 1..9999 (a naive value is read as
    UTC, so it always does); otherwise ValueError."""
    if value.tzinfo is not None:
        try:
            value.astimezone(UTC)
        except (OverflowError, ValueError):
            raise ValueError(OUTSIDE_UTC_YEARS) from None
    return value


# An aware date-time (fixtures and org memory), and one that may be naive (packets, blocks).
StoredDateTime = Annotated[AwareDatetime, AfterValidator(within_utc_years)]
StoredNaiveOrAware = Annotated[datetime, AfterValidator(within_utc_years)]
