"""A gardener's split names neither its op nor ids a reader could compute (red-team pass 15).

A split keyed its unit of work with an unkeyed sha256 of the source dossier's id and its parts'
fact ids, prefixed ``split-``: the new dossier was ``dos-split-<hash>-1`` and the entries
``je-split-<hash>-<seq>``. A reader whose rules hide a journal entry's ``op`` read "split" in
the ids of the entries (and of the dossier) they created, and could compute the hash from the
ids it sees. Now the key is an HMAC with the database's secret (``lock.keyed_lock``), and the
part is named like any dossier a packet creates (``dos-<key>``).
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from neo4j import Driver

from cairn.memory.dossiers.gardener import split_incoherent_dossiers
from cairn.memory.dossiers.governor import dossier_id_for, process_fact_packet
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_guessable_entry_ids import HISTORY
from tests.e2e.adversarial.test_unreadable_dossier_fields import served
from tests.e2e.conftest import gql
from tests.e2e.test_dossiers_routing import CLOUD, COOKING, packet


def test_a_split_is_not_told_by_its_ids(
    empty_db: Driver, embedder: Embedder, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    mixed = process_fact_packet(empty_db, packet("Notes", [*COOKING, *CLOUD], "b1"), embedder=embedder)
    (split,) = split_incoherent_dossiers(empty_db)
    (part,) = [did for did, _ in split.parts if did != mixed.dossier_id]
    unkeyed = hashlib.sha256(
        json.dumps([split.source, [list(facts) for _, facts in split.parts]]).encode()
    ).hexdigest()[:20]
    # Named like a dossier a packet creates: "dos-" and 20 hex digits.
    assert re.fullmatch(r"dos-[0-9a-f]{20}", part), part
    assert re.fullmatch(r"dos-[0-9a-f]{20}", dossier_id_for("0" * 20))
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["JournalEntry"] - {"op"})}]
    client, headers = served(settings, demo_roles_with(tmp_path_factory, "writer", {"JournalEntry": rule}))
    with client:
        histories = [gql(client, HISTORY, headers, id=d) for d in (mixed.dossier_id, part)]
    entries = [e for h in histories for e in h["data"]["dossier"]["history"]]
    assert entries and all(e["op"] is None for e in entries), histories
    assert "split" not in str(histories).lower(), histories
    assert unkeyed not in str(histories) and unkeyed not in part, histories
