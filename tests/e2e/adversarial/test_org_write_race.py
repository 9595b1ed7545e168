"""A writer racing another writer to create one id (red-team pass on writes, 2026-11-26).

``ingestOrgMemory`` refuses an id a node hidden from the writer holds (``TAKEN_ID``), looked up
before the records are validated and embedded, and its upsert skipped a stored node the writer
cannot read; but that skip read the store before the ``MERGE``. A node created by someone else
between the writer's look and its ``MERGE`` (the operator's confidential decision under an id
the writer expects, say the next in a series) was matched by the ``MERGE`` once that other
transaction committed, and overwritten: its text, and its access fields, replaced by the
writer's, so the writer relabelled a node it could never read. Now the upsert claims the id
first (``MERGE`` on the unique ``Entity.id`` serialises the two) and writes only a node it
created or one the writer may read (``cairn.graph.org.upsert_vertex``).
"""

from __future__ import annotations

import threading
import time

from neo4j import Driver

from cairn.errors import CairnError
from cairn.ingest.org_memory import ingest_payload
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from tests.e2e.adversarial.scoped_write_support import decision
from tests.e2e.conftest import wipe

SECRET = "the operator's confidential decision"
HIDDEN = decision("zz-race", option=SECRET, sensitivity="high", namespaces=["confidential"])
CREATE = "CREATE (n:Entity:Decision) SET n = $props"
BLOCKED = "SHOW TRANSACTIONS YIELD status WHERE status STARTS WITH 'Blocked' RETURN count(*) AS n"


def test_a_writer_never_overwrites_a_node_created_under_it_by_another(
    driver: Driver, registry: PolicyRegistry
) -> None:
    """The other transaction is held open across the writer's write, so the race is not left to
    chance: the writer's look finds nothing, its write waits for the other's lock on the id."""
    wipe(driver)
    narrow = Scope.from_profile(registry.roles["writer"], ceiling="low", namespaces=("internal",))
    mine = decision("zz-race", option="the writer's decision")
    outcome: list[object] = []

    def write() -> None:
        try:
            outcome.append(ingest_payload(driver, {"decisions": [mine]}, writer=narrow))
        except CairnError as exc:  # a refusal is a fine outcome: what is stored is checked below
            outcome.append(exc)

    with driver.session() as session, session.begin_transaction() as other:
        other.run(CREATE, props={k: v for k, v in HIDDEN.items() if k != "tags"}).consume()
        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 120
        while driver.execute_query(BLOCKED).records[0]["n"] == 0 and writer.is_alive():
            assert time.monotonic() < deadline, "the writer never waited for the other transaction"
            time.sleep(0.05)
        other.commit()
    writer.join()
    rows = driver.execute_query(
        "MATCH (d:Entity {id: 'zz-race'}) RETURN d.option AS option, d.sensitivity AS sensitivity"
    ).records
    assert [r.data() for r in rows] == [{"option": SECRET, "sensitivity": "high"}], (rows, outcome)
    wipe(driver)
