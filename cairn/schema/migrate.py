"""Create what the schema needs (constraints, indexes, vector indexes) and record its version.

neomodel installs labels from the node classes; it treats "already exists" as success,
so running this twice is a no-op. The version node lets the service refuse to start on a
database whose schema is older than the code.
"""

from __future__ import annotations

import io

from neo4j import Driver
from neomodel import db as neomodel_db

from cairn.schema.nodes import MACHINERY_CLASSES, NODE_CLASSES

SCHEMA_VERSION = 3  # 2: uniqueness constraints on the lock and version nodes; 3: Fact.text full-text

SHOW_CONSTRAINTS = "SHOW CONSTRAINTS YIELD name RETURN name"
SHOW_INDEXES = "SHOW INDEXES YIELD name RETURN name"
RECORD_VERSION = "MERGE (m:CairnSchema {id: 'schema'}) SET m.version = $version"
READ_VERSION = "MATCH (m:CairnSchema {id: 'schema'}) RETURN m.version AS version"
AWAIT_INDEXES = "CALL db.awaitIndexes(300)"


def _schema_names(driver: Driver) -> set[str]:
    names: set[str] = set()
    for query in (SHOW_CONSTRAINTS, SHOW_INDEXES):
        records, _, _ = driver.execute_query(query)
        names.update(str(r["name"]) for r in records)
    return names


def migrate(driver: Driver) -> list[str]:
    """Install every missing constraint and index; return the names that were created."""
    before = _schema_names(driver)
    neomodel_db.set_connection(driver=driver)
    sink = io.StringIO()
    for cls in (*NODE_CLASSES, *MACHINERY_CLASSES):
        neomodel_db.install_labels(cls, quiet=True, stdout=sink)
    driver.execute_query(RECORD_VERSION, version=SCHEMA_VERSION)
    driver.execute_query(AWAIT_INDEXES)
    return sorted(_schema_names(driver) - before)


def schema_version(driver: Driver) -> int | None:
    records, _, _ = driver.execute_query(READ_VERSION)
    return int(records[0]["version"]) if records else None
