"""Finding 1, trace path traversal, tried as staff, manager and external against the traces of
director and exec asks about a corporate decision.

Before the fix, ``trace(requestId: "../<other folder>/<request id>")`` returned the other
user's meta, and ``/bundles/%2e%2e/bundle_view`` answered 200 with an empty zip. Now an id
that is not a well-formed request id (the X-Request-Id pattern, checked after URL decoding)
answers exactly as a request id nobody used, and a well-formed one resolves inside the
caller's own folder of the trace root only.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from neo4j import Driver
from starlette.testclient import TestClient
from structlog.testing import capture_logs

from cairn.memory.trace import TRACE_FILE
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.logging import configure_logging
from cairn.runtime.settings import Settings
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

EXAMPLES = max(200, settings.default.max_examples)
CANARY = "canary-outside-the-trace-root"
LIKE_MISSING = {"data": {"trace": None}}


@pytest.fixture(scope="module")
def trace_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace root with canary metas planted beside it and inside it, outside any owner's folder."""
    base = tmp_path_factory.mktemp("traversal")
    root = base / "traces"
    for folder in (base / "canary", root / "canary", base):
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("_meta.json", "envelope.json"):
            (folder / name).write_text(json.dumps({"canary": CANARY}), encoding="utf-8")
        # The one-file trace form, as an ask writes it now (a traversal that reached it would read
        # it) and as an earlier version did.
        canary_trace = json.dumps({"_meta.json": {"canary": CANARY}, "envelope.json": {"canary": CANARY}})
        (folder / TRACE_FILE).write_bytes(gzip.compress(canary_trace.encode()))
        (folder / "trace.json").write_text(canary_trace, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def client(acme: Driver, settings: Settings, trace_root: Path) -> Iterator[TestClient]:
    with serve(settings, trace_root) as c:
        yield c


@pytest.fixture(scope="module")
def loot(client: TestClient, registry: PolicyRegistry, trace_root: Path) -> dict[str, tuple[str, str]]:
    """Per victim role: (the folder its trace landed in, its request id)."""
    found = {}
    for role in VICTIMS:
        headers = headers_for(registry, role, user_id=f"u-{role}-victim")
        rid = victim_asks(client, headers)
        assert trace_answer(client, headers, rid)["data"]["trace"]["request"]["anchor_id"] == HIDDEN_DECISION
        folder = next(trace_root.glob(f"*/{rid}")).parent.name
        found[role] = (folder, rid)
    return found


def traversals(root: Path, folder: str, rid: str) -> list[str]:
    """Ways to name another owner's trace folder (or anything else) from one's own."""
    return [
        f"../{folder}/{rid}",
        f"./../{folder}/{rid}",
        f"{rid}/../../{folder}/{rid}",
        f"..\\{folder}\\{rid}",
        f"..%2f{folder}%2f{rid}",
        f"%2e%2e/{folder}/{rid}",
        f"\uff0e\uff0e/{folder}/{rid}",  # fullwidth full stops
        f"..\uff0f{folder}\uff0f{rid}",  # fullwidth solidus
        f"..\u2215{folder}\u2215{rid}",  # division slash
        str(root / folder / rid),
        str((root / folder / rid).resolve()),
        f"/{folder}/{rid}",
        f"../{folder}/{rid}\x00",
        f"{rid}\x00",
        f"{rid}\n",
        f"{rid}/",
        f"{rid}/.",
        "..",
        ".",
        "",
        "../canary",
        "../../canary",
        "../..",
        "../../../../../../etc",
    ]


@pytest.mark.parametrize("attacker", ATTACKERS)
@pytest.mark.parametrize("victim", VICTIMS)
def test_trace_ids_that_walk_out_answer_like_a_missing_trace(
    client: TestClient,
    registry: PolicyRegistry,
    acme: Driver,
    trace_root: Path,
    loot: dict[str, tuple[str, str]],
    attacker: str,
    victim: str,
) -> None:
    folder, rid = loot[victim]
    texts = secrets(acme)
    for headers in (
        headers_for(registry, attacker),
        headers_for(registry, victim, user_id=f"u-{victim}-victim"),
    ):
        for bad in traversals(trace_root, folder, rid):
            body = trace_answer(client, headers, bad)
            assert body == LIKE_MISSING, (bad, body)
            assert_no_secret([*texts, CANARY], json.dumps(body))


def as_path(raw: str, safe: str = "") -> str:
    """Percent-encode for a path segment, dots too: a client would fold "." and ".." segments
    away before sending, and the server must be tried with them."""
    return quote(raw, safe=safe).replace(".", "%2E")


def encoded(root: Path, folder: str, rid: str) -> list[str]:
    """Bundle path segments as an attacker would send them (decoded by the server)."""
    return [
        "%2e%2e",
        "%2E%2E",
        "%2e",
        ".%2e",
        f"%2e%2e%2f{folder}%2f{rid}",
        f"..%2f{folder}%2f{rid}",
        f"..%5c{folder}%5c{rid}",
        f"%2e%2e%5c{folder}%5c{rid}",
        f"%252e%252e%252f{folder}%252f{rid}",  # double encoded
        as_path(f"\uff0e\uff0e/{folder}/{rid}"),
        as_path(f"..\uff0f{folder}\uff0f{rid}"),
        as_path(str(root / folder / rid)),
        f"%2e%2e%2f{folder}%2f{rid}%00",
        f"{rid}%00",
        f"{rid}%0a",
        "%2e%2e%2fcanary",
        "%2e%2e%2f%2e%2e%2fcanary",
        "%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc",
    ]


@pytest.mark.parametrize("attacker", ATTACKERS)
@pytest.mark.parametrize("victim", VICTIMS)
def test_bundle_paths_that_walk_out_answer_like_a_missing_trace(
    client: TestClient,
    registry: PolicyRegistry,
    acme: Driver,
    trace_root: Path,
    loot: dict[str, tuple[str, str]],
    attacker: str,
    victim: str,
) -> None:
    folder, rid = loot[victim]
    texts = secrets(acme)
    headers = headers_for(registry, attacker)
    for bad in encoded(trace_root, folder, rid):
        resp = bundle_answer(client, headers, bad)
        assert_like_missing(client, headers, resp)
        assert_no_secret([*texts, CANARY], readable(resp))


def test_the_victim_still_reads_its_own_trace_and_bundle(
    client: TestClient, registry: PolicyRegistry, loot: dict[str, tuple[str, str]]
) -> None:
    """The control: the ids above are refused for what they are, not because nothing is there."""
    for role, (_, rid) in loot.items():
        headers = headers_for(registry, role, user_id=f"u-{role}-victim")
        assert trace_answer(client, headers, rid)["data"]["trace"]["request"]["request_id"] == rid
        resp = bundle_answer(client, headers, rid)
        assert resp.status_code == 200 and HIDDEN_DECISION in readable(resp)


fragments = st.sampled_from(
    [
        "..",
        ".",
        "/",
        "\\",
        "%2e",
        "%2f",
        "%5c",
        "%00",
        "\x00",
        "\uff0e",
        "\uff0f",
        "canary",
        "req-",
        "a",
        "\n",
    ]
)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(
    attacker=st.sampled_from(ATTACKERS),
    raw=st.one_of(
        st.text(max_size=64),
        st.lists(fragments, max_size=12).map("".join),
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", fullmatch=True),
    ),
)
@example(attacker="staff", raw="..")
@example(attacker="staff", raw="../canary")
@example(attacker="manager", raw="../../canary")
@example(attacker="external", raw=".")
def test_any_request_id_string_is_answered_safely(
    client: TestClient,
    registry: PolicyRegistry,
    acme: Driver,
    loot: dict[str, tuple[str, str]],
    attacker: str,
    raw: str,
) -> None:
    """Never a 5xx, never another owner's data, never a file outside the caller's folder."""
    headers = headers_for(registry, attacker)
    forbidden = [CANARY, *(rid for _, rid in loot.values()), HIDDEN_DECISION]
    body = trace_answer(client, headers, raw)
    assert body == LIKE_MISSING, (raw, body)  # the attackers own no traces here
    for path_id in (as_path(raw), as_path(raw, safe="%")):
        resp = bundle_answer(client, headers, path_id)
        assert resp.status_code < 500
        assert_like_missing(client, headers, resp)
        assert_no_secret(forbidden, readable(resp))


def test_a_not_found_denial_logs_one_line_without_a_traceback(
    client: TestClient, registry: PolicyRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 8 (part): a hidden anchor is an ordinary refusal, not a server fault."""
    caplog.set_level(logging.DEBUG)
    # The server's own logging set-up (create_app's): an in-process CLI test that ran earlier
    # may have left structlog filtering below WARNING, where the refusal line is INFO.
    configure_logging("INFO")
    with capture_logs() as logs:
        for role in ATTACKERS:
            body = gql(client, ASK, headers_for(registry, role), id=HIDDEN_DECISION)
            assert body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    refusals = [e for e in logs if e.get("code") == "NOT_FOUND"]
    assert len(refusals) == len(ATTACKERS), logs
    assert all(e["event"] == "refused" and e["path"] == ["ask"] for e in refusals)
    assert not [r for r in caplog.records if r.exc_info or r.exc_text or r.levelno >= logging.ERROR]
