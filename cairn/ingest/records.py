"""Typed records of the org-memory fixture format (docs/design.md §Graph model), validated with pydantic.

The same models validate fixture files and GraphQL upserts, so both paths refuse the same
bad input with the same messages.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cairn.schema.catalog import CAUSAL_RELATIONS, STATED_ON_CAUSE, relation_name
from cairn.schema.nodes import MAX_INDEXED_CHARS
from cairn.schema.timestamps import StoredDateTime

Sensitivity = Literal["low", "medium", "high"]
DOMAIN_PATTERN = (
    r"^[a-z0-9_-]+(/[a-z0-9_*-]+)*$"  # at most MAX_INDEXED_CHARS long (each field says max_length)
)
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$"
DATE_FORMAT = (
    "an ISO-8601 date-time with a UTC offset, e.g. 2024-03-01T09:30:00Z, "
    "or a date, e.g. 2024-03-01 or 1 March 2024"
)
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# A day with its month named, as ADR logs and minutes write it ("Date: 1 April 2019",
# "April 1, 2019"): English month names or their three-letter forms (the C locale's).
NAMED_MONTH_DAYS = ("%d %B %Y", "%d %b %Y", "%B %d, %Y", "%b %d, %Y", "%B %d %Y", "%b %d %Y")
NUMERIC_DAY = re.compile(r"^\d{1,2}[-/.]\d{1,2}[-/.]\d{4}$")


def _named_month_day(value: str) -> date | None:
    """The day of "1 April 2019", "1 Apr 2019" or "April 1, 2019"; None for any other text."""
    words = " ".join(value.replace(",", ", ").split()).replace(" ,", ",")
    for pattern in NAMED_MONTH_DAYS:
        try:
            return datetime.strptime(words, pattern).date()
        except ValueError:
            continue
    return None


def _iso_text(value: Any) -> Any:
    """Dates are ISO-8601 text: a bare number (read by pydantic as a Unix time) is refused.

    A date without a time is that day at midnight UTC: public decision records carry days
    (a PEP's "Created", a KEP's "creation-date", an ADR's "Date"), and a day names no zone. A
    day with its month named ("1 April 2019", "April 1, 2019") is read the same; one in numbers
    only ("28-04-2021", as some ADR logs write it) is refused, since "04-05-2021" could be
    either day: the message says so.
    A time without an offset stays refused: that instant depends on a zone nobody wrote.
    Surrounding spaces go, as from every other text field of a record (str_strip_whitespace)."""
    shown = json.dumps(value, ensure_ascii=False, default=str)[:60]
    if isinstance(value, str):
        value = value.strip()
        named = _named_month_day(value) if value[:1].isalnum() and not ISO_DATE.match(value) else None
        if named is not None:
            return datetime(named.year, named.month, named.day, tzinfo=UTC)
        if NUMERIC_DAY.match(value):
            raise ValueError(
                f"{shown} is not a valid date-time: a day in numbers only reads as day-month or "
                f"month-day; write it year first or with its month named (expected {DATE_FORMAT})"
            )
    if value is not None and not (isinstance(value, str) and ISO_DATE.match(value)):
        raise ValueError(f"{shown} is not a valid date-time: expected {DATE_FORMAT}")
    if isinstance(value, str) and DATE_ONLY.match(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{shown} is not a valid date-time: expected {DATE_FORMAT}") from None
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    return value


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, str_strip_whitespace=True)

    id: str = Field(pattern=ID_PATTERN)
    x_extra: dict[str, Any] = Field(default_factory=dict, alias="x-extra")


class _Vertex(Record):
    timestamp: StoredDateTime
    tags: list[str] = Field(default_factory=list)
    domain: str = Field(pattern=DOMAIN_PATTERN, max_length=MAX_INDEXED_CHARS)
    importance: float = Field(ge=0.0, le=1.0)
    sensitivity: Sensitivity
    namespaces: list[str] = Field(min_length=1)
    roles_allowed: list[str] = Field(min_length=1)

    _timestamp_is_text = field_validator("timestamp", mode="before")(_iso_text)


class DecisionRecord(_Vertex):
    option: str = Field(min_length=1)
    rationale: str = ""
    decision_maker: str = Field(min_length=1)
    supported_by: list[str] = Field(default_factory=list)
    based_on: list[str] = Field(default_factory=list)
    led_to: list[str] = Field(default_factory=list)
    transitions: list[Any] = Field(default_factory=list)


class EventRecord(_Vertex):
    summary: str = Field(min_length=1)
    description: str = ""
    snippet: str = ""
    led_to: list[str] = Field(default_factory=list)

    @property
    def alias_of_decision(self) -> str | None:
        value = self.x_extra.get("alias_of_decision")
        return str(value) if value is not None else None

    @field_validator("x_extra")
    @classmethod
    def _alias_is_text(cls, value: dict[str, Any]) -> dict[str, Any]:
        alias = value.get("alias_of_decision")
        if alias is not None and not isinstance(alias, str):
            raise ValueError("x-extra.alias_of_decision must be a decision id string")
        return value


class TransitionRecord(Record):
    from_id: str = Field(alias="from", min_length=1)
    to_id: str = Field(alias="to", min_length=1)
    relation: str = Field(default="causal", min_length=1)
    reason: str = ""
    timestamp: StoredDateTime | None = None
    domain: str = Field(pattern=DOMAIN_PATTERN, max_length=MAX_INDEXED_CHARS)

    _timestamp_is_text = field_validator("timestamp", mode="before")(_iso_text)

    @field_validator("relation")
    @classmethod
    def _relation_in_catalog(cls, value: str) -> str:
        name = relation_name(value)
        if name not in CAUSAL_RELATIONS:
            known = ", ".join(CAUSAL_RELATIONS)
            passive = ", ".join(STATED_ON_CAUSE)
            raise ValueError(
                f"unknown relation {value!r}: the relation catalog knows {known} "
                f"(stated on the earlier record: {passive})"
            )
        return name


class AliasRecord(Record):
    type: Literal["alias_event"] = "alias_event"
    decision_id: str = Field(min_length=1)
    event_id: str = Field(min_length=1)
    scope: str = "projection"
    domain_from: str = Field(pattern=DOMAIN_PATTERN, max_length=MAX_INDEXED_CHARS)
    domain_to: str = Field(pattern=DOMAIN_PATTERN, max_length=MAX_INDEXED_CHARS)


def iso_utc(value: datetime | None) -> str | None:
    """ISO-8601 text that Cypher's datetime() parses, with the UTC offset written as Z."""
    return value.isoformat().replace("+00:00", "Z") if value is not None else None
