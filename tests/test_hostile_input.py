"""Hostile input: random fixture records and random passport headers never crash the parsers,
never write partially, and always produce an error that names the problem."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.ingest.fixtures import FixtureError
from cairn.ingest.org_memory import ingest_fixture_dir, ingest_payload
from cairn.policy.passport import OPTIONAL, REQUIRED, PassportError, headers_for, verify
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from tests.conftest import ACME, wipe

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30)
)
json_value = st.recursive(
    json_leaf,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)
FIELDS = (
    "id",
    "option",
    "rationale",
    "timestamp",
    "decision_maker",
    "tags",
    "supported_by",
    "based_on",
    "domain",
    "importance",
    "sensitivity",
    "namespaces",
    "roles_allowed",
    "x-extra",
    "summary",
    "from",
    "to",
    "decision_id",
    "event_id",
    "domain_from",
    "domain_to",
    "led_to",
)
VALID_DECISION = {
    "id": "fuzz-d1",
    "option": "A decision",
    "rationale": "why",
    "timestamp": "2024-01-01T00:00:00Z",
    "decision_maker": "CTO",
    "tags": [],
    "supported_by": [],
    "based_on": [],
    "domain": "acme/product",
    "importance": 0.5,
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff"],
    "x-extra": {},
}
records = st.one_of(
    json_value,
    st.dictionaries(st.sampled_from(FIELDS), json_value, max_size=8),
    # A valid record with one field replaced by garbage: the near misses that matter most.
    st.tuples(st.sampled_from(FIELDS), json_value).map(lambda kv: {**VALID_DECISION, kv[0]: kv[1]}),
)
FOLDERS = ("decisions", "events", "transitions", "edges/aliases")


@pytest.fixture(scope="module")
def acme(driver: Driver) -> Driver:
    wipe(driver)
    ingest_fixture_dir(driver, ACME)
    return driver


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(folder=st.sampled_from(FOLDERS), record=records, raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_random_fixture_files_are_refused_cleanly(
    acme: Driver, tmp_path_factory: pytest.TempPathFactory, folder: str, record: Any, raw: bytes | None
) -> None:
    root = tmp_path_factory.mktemp("fuzz")
    (root / folder).mkdir(parents=True)
    target = root / folder / "x.json"
    if raw is not None:
        target.write_bytes(raw)
    else:
        target.write_text(json.dumps(record, allow_nan=True))
    before = graph_checksum(acme)
    try:
        ingest_fixture_dir(acme, root)
    except FixtureError as exc:
        assert exc.problems and all(p.file and p.message for p in exc.problems)
        assert graph_checksum(acme) == before
        return
    # Accepted input must have been a complete valid record; nothing else may pass silently.
    assert raw is None and isinstance(record, dict) and record.get("id")
    acme.execute_query("MATCH (n:Entity {id: $id}) DETACH DELETE n", id=record["id"])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=json_value)
def test_random_graphql_payloads_are_refused_cleanly(acme: Driver, payload: Any) -> None:
    before = graph_checksum(acme)
    with pytest.raises(FixtureError) as err:
        ingest_payload(acme, payload)
    assert all(p.message for p in err.value.problems)
    assert graph_checksum(acme) == before


@settings(max_examples=400, deadline=None)
@given(
    data=st.data(),
    overrides=st.dictionaries(st.sampled_from(REQUIRED + OPTIONAL), st.text(max_size=40), max_size=5),
    dropped=st.lists(st.sampled_from(REQUIRED), max_size=2, unique=True),
)
def test_random_passports_fail_closed_with_a_named_header(
    settings: Settings, data: st.DataObject, overrides: dict[str, str], dropped: list[str]
) -> None:
    registry = PolicyRegistry.load(settings.policy_file)
    role = data.draw(st.sampled_from(sorted(registry.roles)))
    headers = {**headers_for(registry, role), **overrides}
    for name in dropped:
        headers.pop(name, None)
    try:
        caller = verify(headers, registry, None)
    except PassportError as exc:
        assert exc.code and exc.header in (*REQUIRED, *OPTIONAL, "X-Passport-Signature")
        return
    # Whatever got through can only be the role's own profile, narrowed.
    profile = registry.get(caller.role)
    assert profile is not None and caller.scope.max_hops <= profile.max_hops
    assert set(caller.scope.edges) <= set(profile.edges)
