"""bench.common.replans: the plans the embedded server has dropped, read from its debug.log (the
LoCoMo bench reports the count over its ingests, to show their statements are planned once)."""

from __future__ import annotations

from pathlib import Path

from bench.common import replans
from cairn.runtime.settings import Settings

# Lines as Neo4j 5.26 writes them (one dropped plan from a bench run, one unrelated line).
DROPPED = (
    "2026-11-27 20:21:42.640+0000 INFO  [o.n.c.i.c.CypherQueryCaches] [neo4j/950c6b68] Discarded stale "
    "query from the query cache after 10 seconds. Reason: IndexPropertyExistsSelectivity(...) changed "
    "from 0.0 to 1.0, which is a divergence of 1.0 which is greater than threshold 0.75. Query id: 4."
)
OTHER = "2026-11-27 20:21:40.001+0000 INFO  [o.n.k.i.t.l.c.CheckPointerImpl] [neo4j/950c6b68] Checkpoint"


def test_dropped_plans_are_counted_from_the_debug_log(tmp_path: Path) -> None:
    settings = Settings(CAIRN_DATA_DIR=str(tmp_path))
    assert replans(settings) is None  # no log yet: unknown, not zero
    log = settings.neo4j_home / "logs" / "debug.log"
    log.parent.mkdir(parents=True)
    log.write_text(f"{OTHER}\n{DROPPED}\n")
    assert replans(settings) == 1
    with log.open("a") as f:
        f.write(f"{DROPPED}\n{OTHER}\n{DROPPED}\n")
    assert replans(settings) == 3


def test_an_external_server_has_no_count(tmp_path: Path) -> None:
    assert replans(Settings(CAIRN_DATA_DIR=str(tmp_path), NEO4J_URI="bolt://127.0.0.1:1")) is None
