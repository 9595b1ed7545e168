"""How a factor value is written in prose and refusals (``cairn.memory.factors.models.fmt``).

Red-team pass 21: ``updateFactor``/``confirmFactor`` with ``value: 1e308`` was refused quoting the
value as its 309 digits (a 376-character message), since a whole float was printed through ``int``.
"""

from __future__ import annotations

import math

import pytest

from cairn.memory.factors.models import fmt


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "not assessed"),
        (20.0, "20"),
        (0.75, "0.75"),
        (-3.0, "-3"),
        (123456789012345.0, "123456789012345"),
    ],
)
def test_values_read_as_people_write_them(value: float | None, text: str) -> None:
    assert fmt(value) == text


@pytest.mark.parametrize("value", [1e308, -1e308, 1e16, 2.0**60, math.inf])
def test_a_huge_value_keeps_its_exponent(value: float) -> None:
    assert len(fmt(value)) <= 12, fmt(value)
