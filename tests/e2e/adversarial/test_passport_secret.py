"""A blank or guessable passport secret (red-team pass on identity, 2026-11-25).

Found by reading the guard in ``cairn serve`` and confirmed with ``Settings()``:
``CAIRN_PASSPORT_SECRET=`` (set, but empty, as a template or a missing CI variable leaves it)
gives ``passport_secret == ""``, which is not None, so ``cairn serve --host 0.0.0.0`` started on
every interface and accepted passports signed with HMAC-SHA256 under the empty key — which
anyone can compute: any user, any role, from anywhere. Fixed: ``cairn serve`` refuses a blank
secret or one shorter than ``MIN_SECRET_CHARS``, and ``create_app`` refuses a blank one.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.app import create_app
from cairn.cli import app as cli
from cairn.policy.passport import MIN_SECRET_CHARS, headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings, get_settings


@pytest.mark.parametrize("secret", ["", "   ", "x" * (MIN_SECRET_CHARS - 1)])
def test_serve_refuses_a_blank_or_short_secret_on_any_address(
    secret: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_PASSPORT_SECRET", secret)
    monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:9")  # never start or reach a real Neo4j
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 1, result.output
    assert "CAIRN_PASSPORT_SECRET" in result.output


def test_no_app_accepts_passports_signed_with_an_empty_key(
    settings: Settings, registry: PolicyRegistry
) -> None:
    blank = settings.model_copy(update={"passport_secret": "", "host": "0.0.0.0"})
    with pytest.raises(ValueError, match="blank"):
        create_app(blank)
    # What the attacker would have sent: a director's passport signed with the empty key.
    forged = headers_for(registry, "director", secret="")
    assert forged["X-Passport-Signature"]
    ok = settings.model_copy(update={"passport_secret": "a-long-enough-test-secret"})
    with TestClient(create_app(ok)) as c:
        body = c.post("/graphql", json={"query": '{ node(id: "x") { id } }'}, headers=forged).json()
    assert body["errors"][0]["extensions"]["code"] == "PASSPORT_BAD_SIGNATURE"
