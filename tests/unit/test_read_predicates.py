"""Every read query carries the policy module's predicates (issue 12: one enforcement point).

A fast scan, no Neo4j: every Cypher constant in ``cairn.graph``, ``cairn.memory`` and
``cairn.resolvers`` (module strings, and strings in module-level dicts, tuples and lists) that
matches a Cairn node label must carry the vertex ACL built by ``cairn.policy.acl``
(``acl_visible`` / ``acl_reason``), and one that walks a relationship type must carry its edge
rule (``edge_allowed``), unless it is on the small allowlist below, each entry with the reason
it needs none. And no module outside ``cairn/policy`` writes the predicates itself: the
fragments are recognisable, so a copy is too.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from types import ModuleType

import pytest

import cairn.graph
import cairn.memory
import cairn.resolvers
from cairn.policy.acl import acl_reason, acl_visible, edge_allowed
from cairn.runtime.settings import REPO_ROOT
from cairn.schema.catalog import RELATION_TYPES

LABELS = "Entity|Decision|Event|Section|Dossier|Fact|Block|Turn|Factor|Option|JournalEntry|Session"
NODE_PATTERN = re.compile(rf"\(\s*\w*\s*:\s*(?:{LABELS})\b")
MATCH = re.compile(r"\bMATCH\b")
REL_PATTERN = re.compile(r"\[\s*\w*\s*:\s*(" + "|".join(RELATION_TYPES) + r")\b")

# The fragments as the policy module writes them: each is in every query built with it.
NODE_MARK = "=~ $domain_re"
EDGE_MARK = "=~ rule.from_re"

# Write and system queries: they run as the system (ingest, migrations, locks), never with a
# caller's scope, or re-read a node the same request has just checked through the predicates.
_WRITE = "a write; the mutation checks the caller's scope on what it touches before it runs"
_SYSTEM = "runs as the system (gardener, ingest bookkeeping), never on a caller's behalf"
_STORED = "the stored summary/centroid over all facts; readers see it only via VISIBLE_FACTS's check"
# Fact search's lists: each admits a fact only as one of the (dossier, fact) pairs that FACT_VIEW,
# in the same statement, collected under the policy's predicates (``candidates``), so the rules run
# once per visible fact, not once per list (docs/design.md §Fact search scores). A list reads
# ``candidates``, bound by the view alone: it cannot run outside FACT_SEARCH / FACT_SEARCH_EXACT,
# which carry the predicates (checked here) and hold every fragment (tests/e2e/test_explain.py).
_IN_VIEW = "a fact search list: admits only the view's (dossier, fact) pairs, checked by the policy there"
ALLOWLIST: dict[tuple[str, str], str] = {
    **{
        ("cairn.graph.dossiers", n): _WRITE
        for n in (
            "MARK_ARCHIVED",
            "MARK_MERGED",
            "MOVE_FACTS",
            "LOAD_DOSSIER_ACCESS",  # access fields for the writer's scope check (Python)
            "WRITE_ROUTES",
            "_RESTATED_PROVENANCE",  # the surviving fact of a packet's own duplicate
            "PACKETS_APPLIED",  # the packet's idempotency key, checked under the lock
            "VOTE_FOR_DOSSIERS",  # dossiers with exactly the packet's (checked) access
            "VOTE_TALLY",  # the same vote without the dossiers' state
            "CLAIM_PACKETS",  # the lock, the keys (hidden ids through the ACL) and the vote above
            "WRITE_JOURNAL_ENTRIES",
            "TAKE_ROUTING_LOCK",
            "SAVE_BLOCK_TAGS",
            "FINISH_BLOCK",
        )
    },
    ("cairn.graph.factors", "WRITE_ENTRY"): _WRITE,
    ("cairn.graph.factors", "CLAIM_SESSION"): (
        "a write; the journal checks the session it claims (hidden, less visible) in the same transaction"
    ),
    **{
        ("cairn.graph.factors", n): _SYSTEM
        for n in (
            "STORED_NODES",
            "STORED_DEPENDS_ON",
            "STORED_LATEST_ENTRIES",
            "STORED_ENTRY_OWNERS",
            "UPSERT_FACTORS",
            "UPSERT_DEPENDS_ON",
            "UPSERT_ENTRIES",
            "REFRESH_FACTOR_STATE",
        )
    },
    **{("cairn.graph.org", n): _WRITE for n in ("UPSERT_CAUSAL", "UPSERT_ALIASES")},
    **{("cairn.graph.correspondence", n): _WRITE for n in ("LINK_RESPONSES", "WRITE_EMBEDDINGS")},
    **{
        ("cairn.graph.correspondence", n): _SYSTEM
        for n in ("FIND_EXISTING", "READ_COLLISIONS", "READ_MAX", "READ_STALE")
    },
    # A cache key (count and last section of the whole store): compared in the service, never
    # returned to a caller who does not see every section (docs/design.md, "Search at index speed").
    ("cairn.graph.correspondence", "STORE_STAMP"): _SYSTEM,
    **{("cairn.graph.org", n): _SYSTEM for n in ("STORED_EMBEDDINGS", "STORED_CAUSAL")},
    # What an update keeps of a node or edge its writer may read (ids from the ACL-checked
    # stored_ids; the upsert re-checks the ACL): the stored x_extra keys and text fields the writer
    # may not read, written back or embedded, never returned (cairn.policy.writes.merged_extra).
    **{
        ("cairn.graph.org", n): "reads what an update keeps untouched; never returned to the caller"
        for n in ("LOCKED_NODE_EXTRA", "LOCKED_CAUSAL_EXTRA", "LOCKED_ALIAS_EXTRA", "STORED_TEXTS")
    },
    **{
        ("cairn.graph.dossiers", n): _SYSTEM
        for n in (
            "PROCESSED_BLOCKS",
            "DOSSIER_COUNT",
            "EMBEDDING_COVERAGE",
            "FACT_DISTRIBUTION",
            "LOAD_BLOCK",
            "PROVENANCE_COUNTS",
            "UNPROCESSED_BLOCKS",
            "SPLIT_CANDIDATES",  # `cairn garden --all` splits incoherent dossiers
            "LOAD_DOSSIER_FACTS",
            "SPLIT_SUMMARIES",
            "WRITE_SPLIT",
        )
    },
    **{
        ("cairn.graph.dossiers", n): _IN_VIEW
        for n in (
            "FACT_DENSE_FROM_INDEX",
            "FACT_DENSE_EXACT",
            "FACT_FULLTEXT",
            "FACT_FEEDBACK",
            "FACT_BLOCK_NEIGHBOURS",
            "FACT_DOSSIER_MATES",
        )
    },
    **{
        ("cairn.graph.dossiers", n): _STORED
        for n in ("CENTRAL_FACT_TEXTS", "CENTROID_SUM_FROM_FACTS", "SUMMARY_POOL_RANKED")
    },
}


def modules(*packages: ModuleType) -> Iterator[ModuleType]:
    for package in packages or (cairn.graph, cairn.memory, cairn.resolvers):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            yield importlib.import_module(info.name)
    if not packages:
        yield importlib.import_module("cairn.policy.walk")  # the policy's own read: the Pre-Selector's walk


def module_strings(*packages: ModuleType) -> Iterator[tuple[str, str, str]]:
    """(module, name, text) of every module-level string, and every string in a module-level
    dict, tuple or list (the built query families), of the modules under ``packages``."""
    for module in modules(*packages):
        for name, value in vars(module).items():
            if name.startswith("__"):
                continue
            texts: list[str] = []
            if isinstance(value, str):
                texts = [value]
            elif isinstance(value, dict):
                texts = [v for v in value.values() if isinstance(v, str)]
            elif isinstance(value, (tuple, list)):
                texts = [v for v in value if isinstance(v, str)]
            for text in texts:
                yield module.__name__, name, text


def constants() -> Iterator[tuple[str, str, str]]:
    """(module, name, text) of every module-level string that reads like Cypher over Cairn nodes."""
    for module, name, text in module_strings():
        if MATCH.search(text) and NODE_PATTERN.search(text):
            yield module, name, text


READS = sorted({(m, n): t for m, n, t in constants()}.items())


def test_the_scan_finds_the_read_queries() -> None:
    names = {n for (_, n), _ in READS}
    # One from each family, so a change to the scan that finds nothing cannot pass silently.
    assert {"SEARCH_QUERY", "TAIL_QUERY", "DOWNSTREAM_QUERIES", "VISIBLE_FACTS"} <= names
    assert len(READS) >= 30


def test_every_allowlisted_query_exists() -> None:
    """An exemption outlives its query only as a blank cheque for the next one of that name."""
    assert set(ALLOWLIST) <= {where for where, _ in READS}


@pytest.mark.parametrize(("where", "text"), READS, ids=[f"{m}.{n}" for (m, n), _ in READS])
def test_every_read_query_carries_the_scope_predicates(where: tuple[str, str], text: str) -> None:
    if ALLOWLIST.get(where) == _IN_VIEW:
        # every match of the list is admitted through the view's pairs, each time it meets a fact
        # (a walk from a dossier already bound, ``MATCH (d)-[:HAS_FACT]->(f``, meets facts too)
        walks = re.findall(r"MATCH \([^)]*\)-\[:HAS_FACT\]->\([^)]*\)", text)
        pair = r"MATCH \(d(:Dossier)?\)-\[:HAS_FACT\]->\(f(:Fact)?( \{[^}]*\})?\)"
        assert all(re.fullmatch(pair, w) for w in walks)
        assert text.count("IN candidates") == len(walks) >= 1
        return
    if where in ALLOWLIST:
        return
    assert NODE_MARK in text, f"{where[0]}.{where[1]} matches nodes without the policy's vertex ACL"
    if REL_PATTERN.search(text):
        assert EDGE_MARK in text, f"{where[0]}.{where[1]} walks an edge without the policy's edge rule"


def test_the_marks_are_what_the_policy_module_writes() -> None:
    assert NODE_MARK in acl_visible("n") and NODE_MARK in acl_reason("n")
    assert EDGE_MARK in edge_allowed("DEPENDS_ON", "a", "b", "out")


def test_no_module_outside_the_policy_writes_the_predicates_itself() -> None:
    inline = re.compile(r"rule\.(?:from_re|to_re|out|in)\b|\$domain_re|roles_allowed, \[\]\)|\$rules\b")
    offenders = []
    for path in sorted((REPO_ROOT / "cairn").rglob("*.py")):
        if path.parent.name == "policy":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if inline.search(line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert offenders == []


# A caller's read that orders, windows or takes the latest of a maskable time must read it through
# ``acl.shown_or`` / ``acl.field_shown`` (docs/design.md §Policy module, "Ordering by a maskable
# field"): the raw property in an ORDER BY, a max() or a comparison is a time the caller may not see.
RAW_TIME = re.compile(
    r"ORDER BY [^\n]*?\b\w+\.(?P<o>timestamp|added_at|last_updated)\b"
    r"|max\(\w+\.(?P<m>timestamp|added_at|last_updated)\)"
    r"|\b\w+\.(?P<w>timestamp)\s*[<>]=?\s*\$"
)

CLAUSE_END = re.compile(r"\n\s*(?:WITH|RETURN|CALL|MATCH|OPTIONAL)\b")


@pytest.mark.parametrize(("where", "text"), READS, ids=[f"{m}.{n}" for (m, n), _ in READS])
def test_no_read_orders_or_windows_by_a_time_it_does_not_check(where: tuple[str, str], text: str) -> None:
    if where in ALLOWLIST:
        return
    for match in RAW_TIME.finditer(text):
        name = match["o"] or match["m"] or match["w"]
        checked = text[max(0, match.start() - 1500) : match.start()]
        if match["w"]:  # a window's guard may follow it in the same WHERE
            clause_end = CLAUSE_END.search(text, match.end())
            checked += text[match.end() : clause_end.start() if clause_end else len(text)]
        assert f"'{name}' IN r.fields" in checked, (
            f"{where[0]}.{where[1]} orders or windows by a raw {name}: {match.group(0)}"
        )


def test_fields_shown_takes_only_fields_decided_by_their_own_rule() -> None:
    """``fields_shown`` finds a node's field rule once for several fields; a field whose
    ``field_shown`` also reads other rules (derived, mirrored) or defaults to shown (``id``)
    would get a different verdict from it, so it is refused rather than answered wrongly."""
    from cairn.policy.acl import field_shown, fields_shown

    both = fields_shown("f", ("source_block_id", "turn_index"))
    assert both.count("=~ r.re") == 1  # one rule lookup for both fields
    assert "'source_block_id' IN r.fields" in both and "'turn_index' IN r.fields" in both
    for refused in ("created_at", "observed_at", "id"):  # Fact fields derived from others; the id
        with pytest.raises(ValueError, match=refused):
            fields_shown("f", ("turn_index", refused))
    assert field_shown("f", "created_at").count("=~ r.re") > 1
