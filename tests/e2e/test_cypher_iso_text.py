"""``cairn.graph.dossiers.iso_text``: Cypher's text for a DateTime equals the driver's ``iso_format()``.

Fact search returns its hits' timestamps as this text instead of DateTimes (decoding one costs
the driver tens of microseconds); what a caller is shown must stay what ``mask`` showed before.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from neo4j import Driver

from cairn.graph.dossiers import iso_text
from cairn.policy.preselector import _plain

ZONED = [
    datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
    datetime(2026, 11, 26, 1, 34, 6, 966871, tzinfo=UTC),
    datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2024, 2, 29, 0, 0, tzinfo=timezone(timedelta(hours=-3, minutes=-30))),
    datetime(2024, 7, 1, 9, 5, 7, tzinfo=timezone(timedelta(hours=-11))),
    datetime(2024, 7, 1, 9, 5, 7, tzinfo=timezone(timedelta(minutes=-30))),
    datetime(1970, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime(2024, 7, 1, 12, tzinfo=ZoneInfo("Europe/Berlin")),
    datetime(987, 3, 4, 5, 6, 7, tzinfo=UTC),
]


@pytest.mark.parametrize("value", ZONED, ids=str)
def test_zoned_datetimes_read_as_the_driver_formats_them(driver: Driver, value: datetime) -> None:
    records, _, _ = driver.execute_query(f"WITH datetime($x) AS x RETURN x, {iso_text('x')} AS text", x=value)
    raw, text = records[0]["x"], records[0]["text"]
    assert isinstance(text, str)
    assert text == raw.iso_format() == _plain(raw)


@pytest.mark.parametrize(
    "value", [None, "2023-05-08", 7, 1.5, ["a"], datetime(2023, 5, 8, 13, 56), date(2023, 5, 8)], ids=str
)
def test_other_values_pass_through(driver: Driver, value: Any) -> None:
    # A stored property's type is known only when it is read; a list of mixed values is typed the same.
    query = f"WITH [$x, 1, 'a'][0] AS x RETURN x, {iso_text('x')} AS text"
    records, _, _ = driver.execute_query(query, x=value)
    assert records[0]["text"] == records[0]["x"]
    assert type(records[0]["text"]) is type(records[0]["x"])
