"""Read the time window out of a "what changed" question, relative to a given ``now``.

Deterministic and dependency-free: the phrases people use in an assessment conversation
("since last month", "in the last two weeks", "since October 15", "since 2024-10-01",
"this week", "yesterday", "recently"). "Last month" means one calendar month before ``now``.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

DEFAULT_WINDOW = timedelta(days=30)
RECENT = timedelta(days=14)
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "few": 3,
}
MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9

_COUNT = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|couple of|few)"
_UNIT = r"(day|week|month|year)s?"
_ISO = re.compile(r"\b(\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?)?)\b", re.I)
_LAST_N = re.compile(rf"\b(?:in|over|during|within)?\s*(?:the\s+)?(?:last|past)\s+{_COUNT}\s+{_UNIT}\b", re.I)
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)
_SINCE_LAST = re.compile(rf"\b(?:since|from)\s+(?:the\s+)?last\s+{_UNIT}\b", re.I)
_LAST_UNIT = re.compile(rf"\b(?:the\s+)?(?:last|past)\s+{_UNIT}\b", re.I)
_THIS = re.compile(r"\bthis\s+(week|month|year)\b", re.I)
_MONTH_DAY = re.compile(
    r"\b(?:since|from|after)\s+(?:the\s+)?([a-z]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b", re.I
)
# Day first (the assessment's users write 01/10/2024 for the first of October).
_SLASHED = re.compile(r"\b(\d{1,2}/\d{1,2}/\d{4})\b")
_DAY_MONTH = re.compile(
    r"\b(?:since|from|after)\s+(?:the\s+)?(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?([a-z]+)\b", re.I
)
_SINCE_MONTH = re.compile(r"\b(?:since|from|after)\s+([a-z]+)\b", re.I)


def months_before(moment: datetime, months: int) -> datetime:
    year, month = moment.year, moment.month - months
    while month < 1:
        month += 12
        year -= 1
    return moment.replace(year=year, month=month, day=min(moment.day, calendar.monthrange(year, month)[1]))


def _span(count: int, unit: str, now: datetime) -> datetime:
    unit = unit.lower()
    if unit == "day":
        return now - timedelta(days=count)
    if unit == "week":
        return now - timedelta(weeks=count)
    if unit == "month":
        return months_before(now, count)
    return months_before(now, 12 * count)


def _count(text: str) -> int:
    return int(text) if text.isdigit() else NUMBERS[text.lower()]


def _month_date(month: int, day: int, now: datetime) -> datetime | None:
    try:
        when = datetime(now.year, month, day, tzinfo=now.tzinfo or UTC)
    except ValueError:
        return None
    return when if when <= now else when.replace(year=now.year - 1)


def parse_since(text: str, now: datetime) -> datetime | None:
    """The start of the window the question names, or None when it names none. A window that
    reaches back past the year 1 ("in the last 5000 years") starts at the year 1."""
    try:
        return _parse_since(text, now)
    except (ValueError, OverflowError):
        return datetime.min.replace(tzinfo=now.tzinfo or UTC)


def _parse_since(text: str, now: datetime) -> datetime | None:
    if m := _ISO.search(text):
        try:
            stamp = datetime.fromisoformat(m.group(1).upper().replace(" ", "T"))
        except ValueError:  # 2024-13-45 names no moment
            stamp = None
        if stamp is not None:
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=now.tzinfo or UTC)
    if m := _SLASHED.search(text):
        try:
            return datetime.strptime(m.group(1), "%d/%m/%Y").replace(tzinfo=now.tzinfo or UTC)
        except ValueError:
            pass
    for pattern in (_LAST_N, _AGO):
        if m := pattern.search(text):
            return _span(_count(m.group(1)), m.group(2), now)
    for pattern in (_SINCE_LAST, _LAST_UNIT):
        if m := pattern.search(text):
            return _span(1, m.group(1), now)
    if m := _THIS.search(text):
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        unit = m.group(1).lower()
        if unit == "week":
            return start - timedelta(days=start.weekday())
        if unit == "month":
            return start.replace(day=1)
        return start.replace(month=1, day=1)
    if re.search(r"\byesterday\b", text, re.I):
        return (now - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    if re.search(r"\btoday\b", text, re.I):
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    for pattern, month_at, day_at in ((_MONTH_DAY, 1, 2), (_DAY_MONTH, 2, 1)):
        m = pattern.search(text)
        month = MONTHS.get(m.group(month_at).lower()) if m else None
        if m and month and (when := _month_date(month, int(m.group(day_at)), now)):
            return when
    if (m := _SINCE_MONTH.search(text)) and (month := MONTHS.get(m.group(1).lower())):
        return _month_date(month, 1, now)
    if re.search(r"\b(recent|recently|lately|latest)\b", text, re.I):
        return now - RECENT
    return None
