"""``cairn.graph.dossiers.iso_text``: Cypher's text for a DateTime equals the driver's ``iso_format()``.

Fact search returns its hits' timestamps as this text instead of DateTimes (decoding one costs
the driver tens of microseconds); what a caller is shown must stay what ``mask`` showed before.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import pytest
from neo4j import Driver

from cairn.graph.dossiers import iso_text
from cairn.policy.preselector import _plain

# Made by Cypher from text: a named zone or a year below 1000 sent as a Python datetime goes
# through the driver's zone arithmetic, which is not what is under test here (and once crashed
# the test process inside zoneinfo).
ZONED = [
    "2023-05-08T13:56:00Z",
    "2026-11-26T01:34:06.966871Z",
    "1999-12-31T23:59:59.000001+05:30",
    "2024-02-29T00:00:00-03:30",
    "2024-07-01T09:05:07-11:00",
    "2024-07-01T09:05:07-00:30",
    "1970-01-01T00:00:00+14:00",
    "2024-07-01T12:00:00[Europe/Berlin]",
    "0987-03-04T05:06:07Z",
]


@pytest.mark.parametrize("value", ZONED)
def test_zoned_datetimes_read_as_the_driver_formats_them(driver: Driver, value: str) -> None:
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
