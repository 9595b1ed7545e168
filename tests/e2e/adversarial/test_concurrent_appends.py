"""Two writers appending to one correspondence source at once (security review, stop 28).

A sync compared the file with the stored sections, embedded the new ones, and only then wrote
them, placing each at an ordinal (its position in the source) decided before the write. Two
writers that each appended one section both drew the next ordinal; the second's transaction
found a section there and skipped its own as "already stored": no section, no conflict, no
error (``created: []``). The same held for the operator's sync against a caller's.

Now every correspondence write first takes one lock (a ``CairnLock``), and, under it, checks the
source against what the file was compared with: a section the writer may read that appeared in
the meantime refuses the rest of the sync with ``CONFLICT_RETRY`` (the writer syncs again and
compares its file with it); a section it may not read only moves the new sections' ordinals past
it, unseen, so a narrowed writer's answer is the one it would get had the hidden section never
been filed (docs/design.md §Numbering collisions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.correspondence import sync as sync_module
from cairn.ingest.correspondence.sync import SyncRaceError, sync_bytes
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from tests.e2e.adversarial.conftest import NARROW
from tests.e2e.adversarial.turns import Turns
from tests.e2e.conftest import gql, passport, wipe

SOURCE = "rt-race"
SYNC = """mutation($m: String!) { syncCorrespondence(source: "rt-race", markdown: $m) {
  created { id sectionNumber filedId collision } conflicts { kind } } }"""
TAIL = "{ correspondenceTail(n: 500) { id sectionNumber filedId collision title } }"
HEAD = """# Race letters

*Access: domain=acme/correspondence; sensitivity=low; namespaces=internal; roles=staff,writer*

---

## 1 — First letter

*Ana · 2026-03-01*

The first letter.

---

## 2 — Second letter

*Ben · 2026-03-02*

The second letter.

---
"""
STORED = """
MATCH (s:Section {source: $source})
RETURN s.title AS title, s.ordinal AS ordinal, s.section_number AS number ORDER BY s.ordinal
"""


def appended(marker: str, *, hidden: bool = False) -> str:
    """The two letters and a third of the writer's own; ``hidden``: one the narrowed writer may not read."""
    access = "\n*Access: sensitivity=medium; roles=writer*\n" if hidden else ""
    return f"{HEAD}\n## 3 — {marker} letter\n\n*Cy · 2026-03-03*\n{access}\n{marker} appends this.\n\n---\n"


@pytest.fixture
def source(driver: Driver, embedder: Embedder, tmp_path: Path) -> Iterator[Driver]:
    wipe(driver)
    sync_bytes(driver, HEAD.encode(), SOURCE, collision_log=tmp_path / "c.jsonl", embedder=embedder)
    yield driver
    wipe(driver)


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], Turns]:
    """Turns for writers named by the marker in their new letter: each waits at the embedding of
    its new sections (after the sync compared the file, before it writes)."""

    def make(order: list[str]) -> Turns:
        t = Turns(order)
        original = sync_module.embedded_windows

        def gated(embedder: Embedder, texts: Any, window: int) -> Any:
            t.gate(next(name for name in order if any(name in text for text in texts)))
            return original(embedder, texts, window)

        monkeypatch.setattr(sync_module, "embedded_windows", gated)
        return t

    return make


def stored_titles(driver: Driver) -> list[str]:
    return [r["title"] for r in driver.execute_query(STORED, source=SOURCE).records]


def graphql_sync(client: TestClient, headers: dict[str, str], markdown: str) -> Callable[[], Any]:
    return lambda: gql(client, SYNC, headers, m=markdown)


def landed_or_refused(outcome: Any, titles: list[str], marker: str) -> str:
    """'landed' when the writer's letter is stored and reported, 'refused' when it was told
    CONFLICT_RETRY and nothing of its letter is stored; anything else fails."""
    title = f"{marker} letter"
    if isinstance(outcome, SyncRaceError) or (isinstance(outcome, dict) and outcome.get("errors")):
        errors = outcome["errors"] if isinstance(outcome, dict) else [{"extensions": {"code": outcome.code}}]
        assert [e["extensions"]["code"] for e in errors] == ["CONFLICT_RETRY"], outcome
        assert title not in titles
        return "refused"
    assert not isinstance(outcome, Exception), outcome
    reported = outcome["data"]["syncCorrespondence"] if isinstance(outcome, dict) else vars(outcome)
    created = reported["created"]
    assert title in titles and len(created) == 1, f"{marker}: {created} reported, stored: {titles}"
    return "landed"


@pytest.mark.parametrize("first", ["Alpha", "Bravo"])
@pytest.mark.parametrize("alpha_is", ["writer", "operator"])
def test_two_appends_to_one_source_never_drop_one_silently(
    source: Driver,
    client: TestClient,
    registry: PolicyRegistry,
    embedder: Embedder,
    tmp_path: Path,
    turns: Callable[[list[str]], Turns],
    first: str,
    alpha_is: str,
) -> None:
    order = [first, "Alpha" if first == "Bravo" else "Bravo"]
    writer = passport(registry, "writer")
    alpha = (
        graphql_sync(client, writer, appended("Alpha"))
        if alpha_is == "writer"
        else lambda: sync_bytes(
            source, appended("Alpha").encode(), SOURCE, collision_log=tmp_path / "c.jsonl", embedder=embedder
        )
    )
    outcomes = turns(order).run({"Alpha": alpha, "Bravo": graphql_sync(client, writer, appended("Bravo"))})
    titles = stored_titles(source)
    verdicts = {m: landed_or_refused(outcomes[m], titles, m) for m in order}
    # Both read the same two letters: the second to write finds a third it may read that its file
    # does not hold, and is told so instead of having its letter dropped.
    assert verdicts == {order[0]: "landed", order[1]: "refused"}
    assert titles == ["First letter", "Second letter", f"{order[0]} letter"]


@pytest.mark.parametrize("first", ["Hidden", "Narrow"])
def test_a_hidden_append_racing_a_narrowed_one_is_never_told_to_it(
    source: Driver,
    client: TestClient,
    registry: PolicyRegistry,
    turns: Callable[[list[str]], Turns],
    first: str,
) -> None:
    narrow = passport(registry, "writer", **NARROW)
    order = [first, "Narrow" if first == "Hidden" else "Hidden"]
    outcomes = turns(order).run(
        {
            "Hidden": graphql_sync(client, passport(registry, "writer"), appended("Hidden", hidden=True)),
            "Narrow": graphql_sync(client, narrow, appended("Narrow")),
        }
    )
    titles = stored_titles(source)
    # The narrowed writer cannot tell a hidden letter raced it: its letter lands whatever the order.
    assert landed_or_refused(outcomes["Narrow"], titles, "Narrow") == "landed"
    hidden = landed_or_refused(outcomes["Hidden"], titles, "Hidden")
    assert hidden == ("landed" if first == "Hidden" else "refused")
    # Its answer is the one a store without the hidden letter gives: its letter is its third,
    # filed as 3, no collision; its tail agrees.
    created = outcomes["Narrow"]["data"]["syncCorrespondence"]["created"]
    assert [(c["sectionNumber"], c["filedId"], c["collision"]) for c in created] == [(3, "3", False)]
    tail = gql(client, TAIL, narrow)["data"]["correspondenceTail"]
    assert [(s["sectionNumber"], s["title"], s["collision"]) for s in tail] == [
        (1, "First letter", False),
        (2, "Second letter", False),
        (3, "Narrow letter", False),
    ]
    assert tail[2]["id"] == created[0]["id"]
    # Syncing the same file again: unchanged, nothing created, no conflict about the hidden letter.
    again = gql(client, SYNC, narrow, m=appended("Narrow"))["data"]["syncCorrespondence"]
    assert again == {"created": [], "conflicts": []}
