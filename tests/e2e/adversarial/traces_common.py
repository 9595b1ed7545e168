"""Shared by the trace attacks (traversal, ownership, replay, rebinding): a live server on the
demo org, a director's or exec's trace to steal, and the answers a missing trace gets.

The attackers are staff, manager and external; the loot is what only director and exec may
see: their traces of an ask about a corporate decision (its withheld neighbours, scores and
rationale). "Refused" here always means "answered exactly like a trace that does not exist".
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.runtime.settings import Settings
from tests.e2e.conftest import gql

ATTACKERS = ("staff", "manager", "external")
VICTIMS = ("director", "exec")
HIDDEN_DECISION = "acme-corp-unify-cloud-platform-2022"  # director and exec only (manager: headers)
ASK = "query($id: ID!) { ask(anchorId: $id) { meta } }"
TRACE = "query($r: ID!) { trace(requestId: $r) }"
MISSING_ID = "req-0000000000000000"


@contextmanager
def serve(settings: Settings, trace_dir: Path, **update: Any) -> Iterator[TestClient]:
    """The app with its own trace root, spoken to on loopback as a local browser would."""
    app = create_app(settings.model_copy(update={"trace_dir": trace_dir, **update}))
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as client:
        yield client


def secrets(driver: Driver) -> list[str]:
    """Texts of the hidden decision that no attacker role may read: its rationale and KPI names."""
    rec = driver.execute_query(
        "MATCH (d:Decision {id: $id}) RETURN d.rationale AS r, d.x_extra AS x", id=HIDDEN_DECISION
    )[0][0]
    kpis = [k["name"] for k in json.loads(rec["x"]).get("kpis", [])]
    return [rec["r"], *kpis]


def victim_asks(client: TestClient, headers: dict[str, str]) -> str:
    """The victim asks about the hidden decision; returns the request id of its trace."""
    meta = gql(client, ASK, headers, id=HIDDEN_DECISION)["data"]["ask"]["meta"]
    rid: str = meta["request"]["request_id"]
    assert rid == headers["X-Request-Id"]
    return rid


def trace_answer(client: TestClient, headers: dict[str, str], request_id: str) -> dict[str, Any]:
    return gql(client, TRACE, headers, r=request_id)


def bundle_answer(client: TestClient, headers: dict[str, str], raw_path_id: str) -> httpx.Response:
    """GET /bundles/<raw_path_id>/bundle_view with the path sent as written (no re-encoding)."""
    return client.get(f"/bundles/{raw_path_id}/bundle_view", headers=headers)


def assert_like_missing(client: TestClient, headers: dict[str, str], resp: httpx.Response) -> None:
    missing = bundle_answer(client, headers, MISSING_ID)
    assert missing.status_code == 404
    assert (resp.status_code, resp.content, resp.headers.get("content-type")) == (
        missing.status_code,
        missing.content,
        missing.headers.get("content-type"),
    )


def readable(resp: httpx.Response) -> str:
    """Everything a response carries, with a zip's members unpacked."""
    if resp.headers.get("content-type") == "application/zip":
        with zipfile.ZipFile(io.BytesIO(resp.content)) as zf:
            return "".join(zf.read(n).decode("utf-8", "replace") for n in zf.namelist())
    return resp.text


def assert_no_secret(texts: list[str], *payloads: str) -> None:
    for payload in payloads:
        for text in texts:
            assert text not in payload, text
