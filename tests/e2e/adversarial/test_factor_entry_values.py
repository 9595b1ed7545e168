"""A factor journal entry's values are masked exactly where the numbers they are written from are.

A dossier journal entry's ``new_value``/``previous_value`` quote dossier titles, built from fact
text, so they are derived fields of fact ``text``. A factor's journal entry stores the same two
names, but writes them from its own ``new_number``/``previous_number``: the rule by label masked
them wherever a policy masked fact text (a number hidden for no reason) and showed them wherever
the entry's own numbers were masked (the number shown as a string). Now a factor entry's values
follow its numbers (``scope.FACTOR_ENTRY_DERIVED``; docs/design.md §Policy module, "Derived
fields"). The probe scopes are the demo staff's with field rules replaced; the entries are the
demo's (acme/assessment).
"""

from __future__ import annotations

from dataclasses import replace

from neo4j import Driver

from cairn.policy.preselector import CandidateNode, preselect
from cairn.policy.profiles import FieldRule, PolicyRegistry
from cairn.policy.scope import Scope
from tests.e2e.conftest import ROLES

ENTRY = "je-dq-2"  # an update: it has a previous value and a new one
ALL = (FieldRule(domains=("*",), fields=("*",)),)
NUMBERS = ("new_number", "previous_number")
ENTRY_FIELDS = ("id", "op", "timestamp", "new_value", "previous_value", "rationale", "confidence", "domain")


def _staff(fields: dict[str, tuple[FieldRule, ...]]) -> Scope:
    profile = PolicyRegistry.load(ROLES).get("staff")
    assert profile is not None
    scope = Scope.from_profile(profile)
    return replace(scope, fields={**scope.fields, **fields})


def _entry(driver: Driver, scope: Scope) -> CandidateNode:
    candidates, _ = preselect(driver, scope, ENTRY, hops=0)
    return candidates.anchor


def test_masked_fact_text_does_not_mask_a_factor_entrys_values(demo_factors: Driver) -> None:
    no_text = (FieldRule(domains=("*",), fields=("id", "fact_type")),)
    shown = _entry(demo_factors, _staff({"Fact": no_text, "JournalEntry": ALL}))
    assert shown.fields.get("new_value") and shown.fields.get("previous_value"), shown
    assert not {"new_value", "previous_value"} & set(shown.masked), shown.masked


def test_masked_numbers_mask_a_factor_entrys_values(demo_factors: Driver) -> None:
    rule = (FieldRule(domains=("*",), fields=ENTRY_FIELDS),)
    hidden = _entry(demo_factors, _staff({"Fact": ALL, "JournalEntry": rule}))
    assert "new_value" not in hidden.fields and "previous_value" not in hidden.fields, hidden.fields
    assert {"new_value", "previous_value", *NUMBERS} <= set(hidden.masked), hidden.masked
    # Only the value whose number is masked: previous_number shown, new_number not.
    half = (FieldRule(domains=("*",), fields=(*ENTRY_FIELDS, "previous_number")),)
    one = _entry(demo_factors, _staff({"Fact": ALL, "JournalEntry": half}))
    assert "previous_value" in one.fields and "new_value" not in one.fields, one.fields
