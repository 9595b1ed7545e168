"""A loaded demo kept once per session and written back, instead of loading it again.

Loading the whole demo (parse, embed, garden blocks into dossiers, route packets, sync letters)
or the demo dossiers takes seconds, most of it gardening and, for a loader that embeds with the
bare model, embedding; several modules load the same demo into an empty store. The first load
of a kind is read back whole (every Cairn node with its labels and properties, every
relationship between them) and, with what it appended to the collision log, kept in memory; a
later load of the same kind wipes the store and writes that graph back in a few batched
statements (and appends the same log lines), or, when nothing was committed since the store
was last left as that graph (tests/e2e/commits.py), only appends the log lines.

A write-back is checked, not trusted: the store must then give the same graph_checksum (every
node, relationship and property, load times included, over the whole graph, not only Cairn's
nodes) as right after the real load; if it does not (state outside the snapshot changed the
result), the store is wiped and the demo loaded for real. Load times are the first load's: a
write-back is the graph a load wrote a few minutes earlier.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo4j import Driver

from cairn.ingest.correspondence.collisions import default_log_path
from cairn.runtime.settings import get_settings
from cairn.schema.checksum import graph_checksum
from tests.e2e.commits import last_commit

BATCH = 1000

NODES = "MATCH (n:Entity) RETURN elementId(n) AS e, labels(n) AS labels, properties(n) AS props"
RELATIONSHIPS = (
    "MATCH (a:Entity)-[r]->(b:Entity) RETURN elementId(a) AS a, elementId(b) AS b, type(r) AS type,"
    " properties(r) AS props"
)


@dataclass(frozen=True)
class Snapshot:
    """A loaded graph: its nodes by label set, its relationships by type (endpoints as indexes
    into ``keys``), the checksum it had, and the bytes the load appended to the collision log."""

    nodes: dict[tuple[str, ...], list[dict[str, Any]]]  # rows {k: node index, p: properties}
    relationships: dict[str, list[dict[str, Any]]]  # rows {a, b: node indexes, p: properties}
    checksum: str
    log: bytes


def _name(label: str) -> str:
    return "`" + label.replace("`", "``") + "`"


def _batches(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    it = iter(rows)
    while batch := list(itertools.islice(it, BATCH)):
        yield batch


def take(driver: Driver, log: bytes = b"") -> Snapshot:
    nodes, _, _ = driver.execute_query(NODES)
    index = {r["e"]: k for k, r in enumerate(nodes)}
    by_labels: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for k, r in enumerate(nodes):
        by_labels.setdefault(tuple(sorted(r["labels"])), []).append({"k": k, "p": r["props"]})
    rels, _, _ = driver.execute_query(RELATIONSHIPS)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in rels:
        by_type.setdefault(r["type"], []).append({"a": index[r["a"]], "b": index[r["b"]], "p": r["props"]})
    return Snapshot(by_labels, by_type, graph_checksum(driver), log)


def write_back(driver: Driver, snap: Snapshot) -> None:
    """Write the snapshot's nodes and relationships into a store without Cairn nodes."""
    element: dict[int, str] = {}
    with driver.session() as session:
        for labels, rows in snap.nodes.items():
            create = (
                f"UNWIND $rows AS row CREATE (n:{':'.join(map(_name, labels))}) SET n = row.p "
                "RETURN row.k AS k, elementId(n) AS e"
            )
            for batch in _batches(rows):
                result = session.run(create, rows=batch)
                element.update((r["k"], r["e"]) for r in result)
        for type_, rows in snap.relationships.items():
            create = (
                "UNWIND $rows AS row MATCH (a) WHERE elementId(a) = row.a "
                "MATCH (b) WHERE elementId(b) = row.b "
                f"CREATE (a)-[r:{_name(type_)}]->(b) SET r = row.p"
            )
            for batch in _batches(rows):
                session.run(
                    create, rows=[{"a": element[r["a"]], "b": element[r["b"]], "p": r["p"]} for r in batch]
                ).consume()


_TAKEN: dict[str, Snapshot] = {}
# The last commit after the last load or write-back, and its kind: while it has not moved, the
# store is still that graph and needs no write-back.
_LEFT: dict[str, str] = {}


def loaded(
    driver: Driver, kind: str, load: Callable[[Driver], object], wipe: Callable[[Driver], None]
) -> Driver:
    """The store as ``load`` leaves an empty one (``wipe``): loaded for real the first time this
    session (or whenever a write-back does not check out), written back from memory after."""
    log = default_log_path(get_settings())
    snap = _TAKEN.get(kind)
    if snap is not None:
        if _LEFT.get(kind) == last_commit(driver):  # nothing written since it was left as loaded
            _append(log, snap.log)
            return driver
        wipe(driver)
        write_back(driver, snap)
        if graph_checksum(driver) == snap.checksum:
            _append(log, snap.log)
            _left(driver, kind)
            return driver
        del _TAKEN[kind]
    wipe(driver)
    size = log.stat().st_size if log.exists() else 0
    load(driver)
    appended = log.read_bytes()[size:] if log.exists() else b""
    _TAKEN[kind] = take(driver, appended)
    _left(driver, kind)
    return driver


def _left(driver: Driver, kind: str) -> None:
    _LEFT.clear()
    _LEFT[kind] = last_commit(driver)


def _append(path: Path, data: bytes) -> None:
    if data:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as f:
            f.write(data)
