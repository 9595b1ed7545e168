"""Differential reads over masked fields (red-team pass 19).

``test_differential_reads.py`` deletes the nodes a view may not see and asks every read again.
This is its twin for the fields a view's rules hide on the nodes it *does* see: on the whole
demo, every stored field that ``preselector.mask`` withholds from the view on a node it may read
is changed (text reversed and prefixed, numbers moved, lists reversed and extended, times moved
by 37 days), and the full vector of a node whose vector is made from a hidden field is replaced
by another node's; then the same battery is asked again. A masked field must not move anything
the view reads: data, errors, prose, numbering, totals, scores, ordering, every ask's bundle.

Views: staff (no decision rationale), manager (corporate decisions and events as headers
only), external (a section's id, number, author, date, title, body and status only). Run by hand
against `cairn serve --demo` (966 requests per view, every stored id) it found no difference.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import neo4j.time
import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.acl import acl_visible
from cairn.policy.preselector import POSITIONAL_FIELDS, mask
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.settings import Settings
from cairn.schema.nodes import SEARCH_TEXT_FIELDS
from tests.e2e.adversarial import test_differential_reads as reads
from tests.e2e.conftest import whole_demo

VIEWS = {"staff": ("staff", {}), "manager": ("manager", {}), "external": ("external", {})}
# Nodes each view sees with fields its rules hide: staff 14 decisions (rationale), manager 3
# corporate items, external every section.
LEAST_CHANGED = {"staff": 10, "manager": 3, "external": 30}
# What says which node the view may see and where it sits, not what it holds: left alone.
KEPT = frozenset({"id", "domain", "sensitivity", "namespaces", "roles_allowed", "x_extra", "status"})
VISIBLE = f"""
MATCH (n:Entity) WHERE {acl_visible("n")}
RETURN elementId(n) AS eid, [l IN labels(n) WHERE l <> 'Entity'][0] AS label, properties(n) AS props
"""


def changed(value: Any) -> Any:
    """Another value of the same kind, or None for a kind left alone (flags, enum-like words)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and 0.0 <= value <= 1.0:
        return 1.0 - value if value != 0.5 else 0.25
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        # a short single word is an enum or an id the code may parse (op, filed_id): left alone
        return None if " " not in value and len(value) < 25 else "zq changed " + value[::-1]
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return [*reversed(value), "zq-changed"]
    if isinstance(value, neo4j.time.DateTime):
        return value + datetime.timedelta(days=37)
    return None


def masked_changes(driver: Driver, scope: Scope) -> list[tuple[str, dict[str, Any]]]:
    """Per node the view sees, the new values of the stored fields its rules hide there."""
    records, _, _ = driver.execute_query(VISIBLE, scope.cypher_params())
    vectors = [r["props"]["embedding"] for r in records if r["props"].get("embedding")]
    out = []
    for n, r in enumerate(records):
        props, label = r["props"], r["label"]
        _, hidden = mask(label, props, scope)
        sets: dict[str, Any] = {}
        for name in hidden:
            if name in KEPT or name in POSITIONAL_FIELDS.get(label, ()) or name not in props:
                continue
            if "embedding" in name or name.endswith("_sha"):
                continue
            new = changed(props[name])
            if new is not None:
                sets[name] = new
        full = SEARCH_TEXT_FIELDS.get(label, ((), None))[0]
        if props.get("embedding") and set(full) & set(hidden) and len(vectors) > 1:
            other = vectors[(n + 1) % len(vectors)]
            sets["embedding"] = other if other != props["embedding"] else vectors[(n + 2) % len(vectors)]
        if sets:
            out.append((r["eid"], sets))
    return out


def visible_ids(driver: Driver, scope: Scope) -> set[str]:
    records, _, _ = driver.execute_query(VISIBLE, scope.cypher_params())
    return {r["props"]["id"] for r in records}


@pytest.fixture(scope="module")
def client(driver: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture(scope="module")
def runs(
    driver: Driver, client: TestClient, registry: PolicyRegistry, monkeypatch_module: pytest.MonkeyPatch
) -> dict[str, tuple[int, dict[str, Any], dict[str, Any]]]:
    """Per view: how many nodes changed, the battery before and after (a fresh demo each)."""
    monkeypatch_module.setattr(reads, "VIEWS", VIEWS)
    out = {}
    for view, (role, headers) in VIEWS.items():
        whole_demo(driver)
        scope = reads.scope_of(registry, role, headers)
        # the ids the view sees (a hidden or never-stored id answers as missing either way)
        shown = visible_ids(driver, scope)
        seen = {
            label: [i for i in ids if i in shown] for label, ids in reads.sampled_ids(driver, scope).items()
        }
        jobs = [j for j in reads.battery(seen) if not any(j[0].endswith(" " + n) for n in reads.NEVER)]
        before = reads.answers(client, registry, view, jobs)
        changes = masked_changes(driver, scope)
        driver.execute_query(
            "UNWIND $changes AS c MATCH (n) WHERE elementId(n) = c[0] SET n += c[1]",
            {"changes": [[eid, sets] for eid, sets in changes]},
        )
        out[view] = (len(changes), before, reads.answers(client, registry, view, jobs))
    whole_demo(driver)  # the next user of the snapshot gets the demo as loaded
    return out


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_every_read_answers_alike_whatever_the_masked_fields_hold(
    view: str, runs: dict[str, tuple[int, dict[str, Any], dict[str, Any]]]
) -> None:
    count, before, after = runs[view]
    assert count >= LEAST_CHANGED[view]  # the view's rules hide fields on what it sees
    found = [f"{name}{d}" for name in before for d in reads.differences(before[name], after[name])]
    assert found == [], "\n".join(found[:40])
