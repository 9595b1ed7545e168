"""Date-times the graph can store *and give back* (docs/design.md §Graph model).

Neo4j stores any year up to 999,999,999, but Python's ``datetime`` covers years 1 to 9999 only,
so the driver hands a node whose date-time lies outside them back as a broken value: every read
of that node (``node``, ``ask``, a neighbourhood, gardening its block) then failed, for every
role that may see it. ``0001-01-01T00:00:00+14:00`` is such a moment (0000-12-31 in UTC), and so
is ``9999-12-31T23:59:59-14:00``. Nor does Neo4j take every offset Python reads: it keeps
``java.time.ZoneOffset``'s range, -18:00 to +18:00, and the driver sends whole minutes only, so a
moment at ``-23:59`` (ISO-8601 and Python allow any offset under a day) was refused by the server,
which closed the connection: ``INTERNAL_SERVER_ERROR`` for every date-time argument and write that
carried one (red-team pass 21). Every date-time a write or an argument takes is checked here first
(``storable_problem``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator, AwareDatetime

OUTSIDE_UTC_YEARS = "is a moment outside the years 1 to 9999 in UTC"
OFFSET_BEYOND = "has a UTC offset beyond -18:00..+18:00, which the graph cannot store"
OFFSET_NOT_MINUTES = "has a UTC offset that is not a whole number of minutes, which the graph cannot store"
MAX_OFFSET = timedelta(hours=18)


def storable_problem(value: datetime) -> str | None:
    """Why the graph could not store ``value`` and give it back (its offset, or its UTC instant
    outside years 1..9999), or None. A naive value is read as UTC, so it always may."""
    offset = value.utcoffset()
    if offset is None:
        return None
    if abs(offset) > MAX_OFFSET:
        return OFFSET_BEYOND
    if offset % timedelta(minutes=1):
        return OFFSET_NOT_MINUTES
    try:
        value.astimezone(UTC)
    except (OverflowError, ValueError):
        return OUTSIDE_UTC_YEARS
    return None


def storable(value: datetime) -> datetime:
    """``value`` unchanged when the graph can store it and give it back; otherwise ValueError
    saying why (``storable_problem``)."""
    if (why := storable_problem(value)) is not None:
        raise ValueError(why)
    return value


# An aware date-time (fixtures and org memory), and one that may be naive (packets, blocks).
StoredDateTime = Annotated[AwareDatetime, AfterValidator(storable)]
StoredNaiveOrAware = Annotated[datetime, AfterValidator(storable)]
