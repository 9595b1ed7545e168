"""Finding 2, replay: a signed passport carries its issue time and expiry inside the signature.

Before the fix a signed passport had neither, so a captured one replayed forever. Tried here
with director and exec passports captured by an attacker (replayed after expiry, extended by
editing the times), and with staff, manager and external passports dated into the future or
with their times edited; every refusal carries a code naming the header, and the loot (the
corporate decision's rationale) never comes back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping

import pytest
from neo4j import Driver
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.cli import app as cli
from cairn.policy.passport import (
    CLOCK_SKEW_S,
    EXPIRES,
    ISSUED_AT,
    MAX_LIFETIME_S,
    SIGNATURE,
    PassportError,
    headers_for,
    sign,
    verify,
)
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings, get_settings
from tests.e2e.adversarial.traces_common import (
    ATTACKERS,
    HIDDEN_DECISION,
    VICTIMS,
    assert_no_secret,
    secrets,
    serve,
)
from tests.e2e.conftest import gql

SECRET = "replay-test-secret"
NODE = "query($id: ID!) { node(id: $id) { id fields } }"


@pytest.fixture(scope="module")
def client(
    acme: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    with serve(settings, tmp_path_factory.mktemp("replay"), passport_secret=SECRET) as c:
        yield c


def minted(registry: PolicyRegistry, role: str, issued: int, expires: int) -> dict[str, str]:
    """A correctly signed passport with the given times (as a holder of the secret makes one)."""
    headers = {**headers_for(registry, role), ISSUED_AT: str(issued), EXPIRES: str(expires)}
    return {**headers, SIGNATURE: sign(headers, SECRET)}


def refused(
    client: TestClient, acme: Driver, headers: Mapping[str, str | bytes], code: str, header: str
) -> None:
    """Refused on /graphql and /bundles with ``code`` naming ``header``; nothing is read.
    (Values go on the wire as UTF-8 bytes: an attacker is not limited to ASCII.)"""
    wire = {k: v.encode("utf-8") if isinstance(v, str) else v for k, v in headers.items()}
    resp = client.post("/graphql", json={"query": NODE, "variables": {"id": HIDDEN_DECISION}}, headers=wire)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["data"] is None or body["data"]["node"] is None
    assert body["errors"][0]["extensions"] == {"code": code, "header": header}, body
    bundle = client.get(f"/bundles/{wire['X-Request-Id'].decode()}/bundle_view", headers=wire)
    assert bundle.status_code == 401 and bundle.json()["errors"][0]["extensions"] == {
        "code": code,
        "header": header,
    }
    assert_no_secret(secrets(acme), resp.text, bundle.text)


def sees_the_loot(client: TestClient, headers: dict[str, str]) -> bool:
    node = gql(client, NODE, headers, id=HIDDEN_DECISION)["data"]["node"]
    return node is not None and "rationale" in node["fields"]


def test_a_captured_passport_stops_working_when_it_expires(
    client: TestClient, registry: PolicyRegistry, acme: Driver
) -> None:
    now = int(time.time())
    captured = minted(registry, "director", now - 600, now - CLOCK_SKEW_S + 2)  # 2 s left
    assert sees_the_loot(client, captured)
    time.sleep(3)
    refused(client, acme, captured, "PASSPORT_EXPIRED", EXPIRES)


@pytest.mark.parametrize("victim", VICTIMS)
def test_an_expired_passport_replayed_is_refused(
    client: TestClient, registry: PolicyRegistry, acme: Driver, victim: str
) -> None:
    now = int(time.time())
    refused(client, acme, minted(registry, victim, now - 7200, now - 6300), "PASSPORT_EXPIRED", EXPIRES)


@pytest.mark.parametrize("victim", VICTIMS)
@pytest.mark.parametrize("edit", [ISSUED_AT, EXPIRES])
def test_editing_the_times_of_a_captured_passport_breaks_its_signature(
    client: TestClient, registry: PolicyRegistry, acme: Driver, victim: str, edit: str
) -> None:
    now = int(time.time())
    captured = minted(registry, victim, now - 7200, now - 6300)
    extended = {**captured, ISSUED_AT: str(now - 60), EXPIRES: str(now + 600)}
    refused(client, acme, {**captured, edit: extended[edit]}, "PASSPORT_BAD_SIGNATURE", SIGNATURE)
    refused(client, acme, extended, "PASSPORT_BAD_SIGNATURE", SIGNATURE)


@pytest.mark.parametrize("role", [*ATTACKERS, *VICTIMS])
def test_a_future_dated_passport_is_refused(
    client: TestClient, registry: PolicyRegistry, acme: Driver, role: str
) -> None:
    now = int(time.time())
    early = minted(registry, role, now + 3600, now + 3600 + 900)
    refused(client, acme, early, "PASSPORT_NOT_YET_VALID", ISSUED_AT)
    within_skew = minted(registry, role, now + CLOCK_SKEW_S // 2, now + 900)
    assert gql(client, NODE, within_skew, id=HIDDEN_DECISION).get("errors") is None


@pytest.mark.parametrize("attacker", ATTACKERS)
def test_an_attacker_cannot_edit_its_own_times_or_role(
    client: TestClient, registry: PolicyRegistry, acme: Driver, attacker: str
) -> None:
    own = headers_for(registry, attacker, secret=SECRET)
    assert not sees_the_loot(client, own)
    later = {**own, EXPIRES: str(int(own[EXPIRES]) + MAX_LIFETIME_S)}
    refused(client, acme, later, "PASSPORT_BAD_SIGNATURE", SIGNATURE)
    director = headers_for(registry, "director")
    promoted = {**own, **{k: director[k] for k in ("X-User-Roles", "X-User-Namespaces", "X-Policy-Key")}}
    refused(client, acme, promoted, "PASSPORT_BAD_SIGNATURE", SIGNATURE)


@pytest.mark.parametrize("missing", [ISSUED_AT, EXPIRES])
def test_a_signed_passport_without_its_times_is_refused(
    client: TestClient, registry: PolicyRegistry, acme: Driver, missing: str
) -> None:
    """A passport signed the old way (no times covered) names the header it lacks."""
    headers = headers_for(registry, "director", secret=SECRET)
    del headers[missing]
    headers[SIGNATURE] = sign(headers, SECRET)
    refused(client, acme, headers, "PASSPORT_MISSING_HEADER", missing)


@pytest.mark.parametrize(
    ("issued", "expires", "header"),
    [
        (
            "\u0661\u0667\u0660\u0660\u0660\u0660\u0660\u0660\u0660\u0660",
            "now+900",
            ISSUED_AT,
        ),  # Arabic-Indic
        ("now", "\u00b2", EXPIRES),
        ("now", "-1", EXPIRES),
        ("now", "1e9", EXPIRES),
        ("now", "now-1", EXPIRES),  # expires before issued
        ("now", "now+86401", EXPIRES),  # longer than the longest lifetime
    ],
)
def test_malformed_times_are_refused_with_the_header_named(
    client: TestClient, registry: PolicyRegistry, acme: Driver, issued: str, expires: str, header: str
) -> None:
    now = int(time.time())

    def value(text: str) -> str:
        if text.startswith("now"):
            return str(now + int(text[3:] or 0))
        return text

    headers = {**headers_for(registry, "exec"), ISSUED_AT: value(issued), EXPIRES: value(expires)}
    headers[SIGNATURE] = sign(headers, SECRET)
    refused(client, acme, headers, "PASSPORT_MALFORMED_HEADER", header)


def test_cairn_passport_prints_a_fresh_signed_passport(
    registry: PolicyRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_PASSPORT_SECRET", SECRET)
    get_settings.cache_clear()
    try:
        default = CliRunner().invoke(cli, ["passport", "--role", "exec"])
        short = CliRunner().invoke(cli, ["passport", "--role", "exec", "--lifetime", "60"])
        too_long = CliRunner().invoke(
            cli, ["passport", "--role", "exec", "--lifetime", str(MAX_LIFETIME_S + 1)]
        )
    finally:
        get_settings.cache_clear()
    assert default.exit_code == 0 and short.exit_code == 0, default.output + short.output
    assert too_long.exit_code != 0
    now = time.time()
    for result, lifetime in ((default, 900), (short, 60)):
        headers = json.loads(result.output)
        assert abs(int(headers[ISSUED_AT]) - now) <= 5
        assert int(headers[EXPIRES]) - int(headers[ISSUED_AT]) == lifetime
        assert headers["X-User-Id"] == "u-demo-exec"
        assert verify(headers, registry, SECRET).role == "exec"
    expired = json.loads(short.output)
    with pytest.raises(PassportError, match="expired") as info:
        verify(expired, registry, SECRET, now=now + 60 + CLOCK_SKEW_S + 1)
    assert (info.value.code, info.value.header) == ("PASSPORT_EXPIRED", EXPIRES)
