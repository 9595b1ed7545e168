"""A filter on a field the caller may not see, and a date filter naming no day (red-team pass).

``correspondenceSearch`` refused a filter on a field the role's field rules hide only when the
rule for the correspondence's default domain (``acme/correspondence``) hid it. A role whose
rules show ``exec_tags`` there but hide them in another domain it reaches (here ``acme/board``)
could filter on ``execTags`` and read, off which board sections matched, the exec tags it is
not shown. Now the scope decides, before any query: a filter reading a field hidden in any
domain the scope reaches is refused with FILTER_NOT_ALLOWED naming the filter, the same error
whether or not a hidden section holds the value; narrowed by ``X-Domain-Scopes`` to the
domains where the field shows, the filter is allowed (cairn/policy/scope.py
``fields_shown_everywhere``, docs/design.md §Correspondence).

``dateFrom: "2024-99-99"`` matched the ``YYYY-MM-DD`` pattern and was compared as text; an
impossible day is now refused like a malformed one, naming the filter and the format.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.correspondence.sync import sync_bytes
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.conftest import gql, passport

ROLE = "director"  # its letters are readable by role name; only its field rules change
BOARD_FIELDS = ["id", "section_number", "author", "date", "title", "body", "status_tags", "domain"]
BOARD = f"""# Board letters

*Access: domain=acme/board; sensitivity=low; namespaces=public; roles={ROLE}*

---

## 1 — Board minutes on the Falcon deal

*Mallory Board · 2026-03-02*

[EXEC:FALCON] Decision: the Falcon acquisition closes in March.
"""
SEARCH = """query($f: CorrespondenceFilter) {
  correspondenceSearch(query: "Falcon acquisition board minutes", k: 50, filters: $f) {
    total hits { author domain execTags masked } } }"""
Probe = tuple[TestClient, PolicyRegistry]
SECTIONS = "{ correspondenceTail(n: 500) { id } }"


@pytest.fixture(scope="module")
def board(letters: Driver, tmp_path_factory: pytest.TempPathFactory) -> Driver:
    """The demo letters plus one board section carrying an exec tag."""
    log = tmp_path_factory.mktemp("board") / "collisions.log"
    sync_bytes(letters, BOARD.encode("utf-8"), "rt-board", collision_log=log)
    return letters


@pytest.fixture(scope="module")
def board_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo roles, but the director sees exec tags on letters and not on board sections."""
    section = [{"domains": ["acme/board"], "fields": BOARD_FIELDS}, {"domains": ["*"], "fields": ["*"]}]
    return demo_roles_with(tmp_path_factory, ROLE, {"Section": section})


@pytest.fixture(scope="module")
def probe(board: Driver, settings: Settings, board_registry: Path) -> Iterator[Probe]:
    custom = settings.model_copy(update={"policy_file": board_registry})
    with TestClient(create_app(custom)) as client:
        yield client, PolicyRegistry.load(board_registry)


def search(probe: Probe, filters: dict[str, Any], **extra: str) -> dict[str, Any]:
    client, registry = probe
    return gql(client, SEARCH, passport(registry, ROLE, **extra), f=filters)


def test_the_probe_sees_the_board_section_without_its_tags(probe: Probe) -> None:
    body = search(probe, {})
    hits = body["data"]["correspondenceSearch"]["hits"]
    board = [h for h in hits if h["domain"] == "acme/board"]
    assert len(board) == 1 and board[0]["execTags"] is None and "exec_tags" in board[0]["masked"], body
    assert any(h["execTags"] for h in hits if h["domain"] == "acme/correspondence")  # shown there


def test_a_filter_on_a_field_hidden_in_a_reached_domain_is_refused_alike(
    probe: Probe,
) -> None:
    held = search(probe, {"execTags": ["FALCON"]})  # the hidden board section holds it
    absent = search(probe, {"execTags": ["NO-SUCH-TAG"]})  # no section holds it
    shown = search(probe, {"execTags": ["GOV"]})  # letters where the role sees the tag hold it
    for body in (held, absent, shown):
        assert body.get("data") is None, body
        [error] = body["errors"]
        assert error["extensions"] == {"code": "FILTER_NOT_ALLOWED", "filter": "exec_tags"}, error
        assert "exec_tags" in error["message"]
    assert held["errors"] == absent["errors"] == shown["errors"]


def test_filters_on_fields_shown_everywhere_still_filter(probe: Probe) -> None:
    body = search(probe, {"authors": ["Mallory Board"], "dateFrom": "2026-03-01"})
    result = body["data"]["correspondenceSearch"]
    assert result["total"] == 1 and [h["domain"] for h in result["hits"]] == ["acme/board"], body


def test_narrowed_to_where_the_field_shows_the_filter_is_allowed(
    probe: Probe,
) -> None:
    body = search(probe, {"execTags": ["GOV"]}, **{"X-Domain-Scopes": "acme/correspondence"})
    hits = body["data"]["correspondenceSearch"]["hits"]
    assert hits and all("EXEC:GOV" in h["execTags"] for h in hits), body
    narrowed = search(probe, {"execTags": ["FALCON"]}, **{"X-Domain-Scopes": "acme/correspondence"})
    assert narrowed["data"]["correspondenceSearch"] == {"total": 0, "hits": []}


@pytest.mark.parametrize("name", ["dateFrom", "dateTo"])
@pytest.mark.parametrize("value", ["2024-99-99", "2024-02-30", "2023-02-29", "2024-13-01", "2024-00-10"])
def test_an_impossible_date_is_refused_naming_the_filter(probe: Probe, name: str, value: str) -> None:
    client, registry = probe
    before = gql(client, SECTIONS, passport(registry, "director"))["data"]["correspondenceTail"]
    body = search(probe, {name: value})
    assert body.get("data") is None, body
    [error] = body["errors"]
    snake = {"dateFrom": "date_from", "dateTo": "date_to"}[name]
    assert error["extensions"] == {"code": "INVALID_ARGUMENT", "filter": snake}, error
    assert snake in error["message"] and "ISO date (YYYY-MM-DD)" in error["message"], error
    assert gql(client, SECTIONS, passport(registry, "director"))["data"]["correspondenceTail"] == before


def test_a_real_leap_day_is_a_date(probe: Probe) -> None:
    body = search(probe, {"dateFrom": "2024-02-29"})
    assert "errors" not in body and body["data"]["correspondenceSearch"]["total"] > 0, body
