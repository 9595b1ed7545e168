"""Finding 2, ownership: traces and bundles belong to (user id, role, policy key).

Before the fix every development passport carried the same X-User-Id and the trace folder
hashed the user id alone, so in the UI every role read (and overwrote) every other role's
traces and bundle_view. Tried here as staff, manager and external against the traces of
director and exec asks about a corporate decision: with the passports the UI is given, with
the same user id under another role, and by writing to the victim's request id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.memory import trace
from cairn.policy.passport import headers_for, verify
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema import unique_yaml
from tests.e2e.adversarial.traces_common import (
    ASK,
    ATTACKERS,
    HIDDEN_DECISION,
    VICTIMS,
    assert_like_missing,
    assert_no_secret,
    bundle_answer,
    readable,
    secrets,
    serve,
    trace_answer,
    victim_asks,
)
from tests.e2e.conftest import gql

VISIBLE_TO_STAFF_AND_MANAGER = "acme-prod-sunset-onprem-connectors-2024"
LIKE_MISSING = {"data": {"trace": None}}


@pytest.fixture(scope="module")
def client(
    acme: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    with serve(settings, tmp_path_factory.mktemp("ownership")) as c:
        yield c


def dev_passport(client: TestClient, role: str) -> dict[str, str]:
    """The passport the UI's role switcher gets."""
    resp = client.get(f"/dev/passport?role={role}")
    assert resp.status_code == 200, resp.text
    headers: dict[str, str] = resp.json()
    return headers


def assert_cannot_reach(client: TestClient, attacker: dict[str, str], rid: str, texts: list[str]) -> None:
    body = trace_answer(client, attacker, rid)
    assert body == LIKE_MISSING, body
    view = bundle_answer(client, attacker, rid)
    assert_like_missing(client, attacker, view)
    assert_no_secret([*texts, HIDDEN_DECISION], readable(view))


def test_development_passports_get_one_user_per_role(client: TestClient, registry: PolicyRegistry) -> None:
    users = {role: headers_for(registry, role)["X-User-Id"] for role in registry.roles}
    assert len(set(users.values())) == len(users), users
    assert {role: dev_passport(client, role)["X-User-Id"] for role in registry.roles} == users


@pytest.mark.parametrize("attacker", ATTACKERS)
@pytest.mark.parametrize("victim", VICTIMS)
def test_the_ui_passport_of_another_role_reaches_nothing(
    client: TestClient, acme: Driver, attacker: str, victim: str
) -> None:
    mine = dev_passport(client, victim)
    rid = victim_asks(client, mine)
    theirs = {**dev_passport(client, attacker), "X-Request-Id": rid}  # even sent as its own request id
    assert_cannot_reach(client, theirs, rid, secrets(acme))
    # the control: the owner reads it, later too, as the UI does (a fresh request id per request)
    later = {**mine, "X-Request-Id": "req-later-0001", "X-Trace-Id": "trace-later-0001"}
    assert trace_answer(client, later, rid)["data"]["trace"]["request"]["anchor_id"] == HIDDEN_DECISION
    assert HIDDEN_DECISION in readable(bundle_answer(client, later, rid))


@pytest.mark.parametrize("attacker", ATTACKERS)
@pytest.mark.parametrize("victim", VICTIMS)
def test_the_same_user_id_under_another_role_is_another_owner(
    client: TestClient, registry: PolicyRegistry, acme: Driver, attacker: str, victim: str
) -> None:
    mine = headers_for(registry, victim, user_id="u-shared")
    rid = victim_asks(client, mine)
    theirs = headers_for(registry, attacker, user_id="u-shared")
    assert_cannot_reach(client, theirs, rid, secrets(acme))
    full = client.get(f"/bundles/{rid}/bundle_full", headers=theirs)
    assert (
        full.status_code == 403 and full.json()["errors"][0]["message"] == "policy:bundle_full_not_permitted"
    )
    assert client.get(f"/bundles/{rid}/bundle_full", headers=mine).status_code == 200


@pytest.mark.parametrize("attacker", ATTACKERS)
@pytest.mark.parametrize("victim", VICTIMS)
def test_another_role_cannot_overwrite_a_victims_trace(
    client: TestClient, registry: PolicyRegistry, attacker: str, victim: str
) -> None:
    mine = headers_for(registry, victim, user_id="u-shared")
    rid = victim_asks(client, mine)
    theirs = headers_for(registry, attacker, user_id="u-shared")
    theirs["X-Request-Id"] = rid
    answer = gql(client, ASK, theirs, id=VISIBLE_TO_STAFF_AND_MANAGER)
    if attacker != "external":  # external sees no product decision: its ask writes nothing at all
        assert answer["data"]["ask"]["meta"]["request"]["request_id"] == rid
        assert trace_answer(client, theirs, rid)["data"]["trace"]["actor"]["role"] == attacker
    kept = trace_answer(client, mine, rid)["data"]["trace"]
    assert kept["request"]["anchor_id"] == HIDDEN_DECISION and kept["actor"]["role"] == victim


@pytest.mark.parametrize("role", [*ATTACKERS, *VICTIMS])
def test_a_trace_is_not_read_under_another_policy(
    settings: Settings, registry: PolicyRegistry, tmp_path: Path, role: str
) -> None:
    """A policy change makes a new owner: traces written under the old profile are gone."""
    caller = verify(headers_for(registry, role, user_id="u-policy"), registry, None)
    trace.write_trace(tmp_path, caller, {"_meta.json": {"role": role}})
    assert trace.read_trace_file(tmp_path, caller, caller.request_id, "_meta.json") == {"role": role}

    policy = unique_yaml.load_file(settings.policy_file)
    policy["roles"][role]["description"] += " (edited)"
    changed_file = tmp_path / "roles.yaml"
    changed_file.write_text(yaml.safe_dump(policy), encoding="utf-8")
    changed = PolicyRegistry.load(changed_file)
    later = verify(
        {**headers_for(changed, role, user_id="u-policy"), "X-Request-Id": caller.request_id}, changed, None
    )
    assert later.profile.policy_key != caller.profile.policy_key
    with pytest.raises(FileNotFoundError):
        trace.read_trace_file(tmp_path, later, caller.request_id, "_meta.json")
