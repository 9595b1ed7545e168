"""Node classes of the graph model (SPEC §4), declared once with neomodel.

Every node also carries the ``Entity`` label, so any node is found by ``id`` through one
uniqueness constraint, and the access fields the policy layer filters on. Hot paths write
with batched Cypher; these classes are the schema (labels, constraints, vector indexes)
and the field lists that ingest and masking share.
"""

from __future__ import annotations

from neomodel import (
    ArrayProperty,
    BooleanProperty,
    DateTimeProperty,
    FloatProperty,
    FulltextIndex,
    IntegerProperty,
    StringProperty,
    StructuredNode,
    VectorIndex,
)

# The longest text a write may store in a string property Neo4j keeps in a range index (a node's
# ``domain``, a fact's ``source_block_id``, a section's ``author``). Neo4j refuses an index key over
# about 8 KB, and a write that carried one failed as an internal error, the server refusing the
# statement (red-team pass 21: a domain, block id or author of 9,000 characters); 200 characters
# stay under the limit in any script (at most 4 bytes each).
MAX_INDEXED_CHARS = 200

EMBEDDING_DIMENSIONS = 384
SENSITIVITIES = ("low", "medium", "high")
# Stored for the machine, never shown: vectors and their bookkeeping, write locks, and the hashes and texts a
# vector was made from (shown beside a masked body or rationale, a hash would confirm a guess of it).
INTERNAL_FIELDS = frozenset(
    {
        "embedding",
        "centroid_sum",
        "summary_pool",
        "embedding_text_sha",
        "header_embedding",
        "header_text_sha",
        "content_hash",
        "embedding_source",
        "journal_lock",  # a factor's journal write lock (cairn/graph/factors.py LOCK_FACTOR)
    }
)
# What the searchable labels' vectors are made from: ``embedding`` from all the fields, the
# ``header_embedding`` from the header fields alone (cairn/ingest/org_memory.py; None: the label
# keeps no header vector). A fact's full-text index reads its ``text`` too, and a section's vector
# is its title and body without governance lines (cairn/schema/section_text.py). A caller's
# search may rank a node only by a vector (or text) whose fields it may all see (cairn.policy.acl).
SEARCH_TEXT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "Decision": (("option", "rationale"), ("option",)),
    "Event": (("summary", "description"), ("summary",)),
    "Fact": (("text",), None),
    "Section": (("title", "body"), None),
    # entity linking (cairn/memory/factors/router.py): names and aliases are matched, vectors
    # made from "name. description. Also called: aliases" and "factor: rationale. excerpt"
    "Factor": (("name", "description", "aliases"), None),
    "Option": (("name", "description", "aliases"), None),
    "JournalEntry": (("rationale", "excerpt"), None),
}


def _embedding() -> ArrayProperty:
    return ArrayProperty(FloatProperty(), vector_index=VectorIndex(dimensions=EMBEDDING_DIMENSIONS))


class Entity(StructuredNode):
    """Shared label and access fields of every Cairn node."""

    # neomodel reserves the attribute name `id`; the stored property is still `id`.
    uid = StringProperty(db_property="id", unique_index=True, required=True)
    created_at = DateTimeProperty()
    domain = StringProperty(index=True, required=True)
    sensitivity = StringProperty(choices={s: s for s in SENSITIVITIES}, required=True)
    namespaces = ArrayProperty(StringProperty())
    roles_allowed = ArrayProperty(StringProperty())
    x_extra = StringProperty()  # JSON text; only whitelisted sub-paths are ever returned


class Dossier(Entity):
    title = StringProperty()
    summary = StringProperty()
    status = StringProperty(choices={"active": "active", "archived": "archived", "merged": "merged"})
    last_updated = DateTimeProperty()
    merged_into = StringProperty()  # set when merged into another dossier


class Fact(Entity):
    # Full-text (Lucene BM25, english analyzer: stemming and stop words) for fact search's
    # lexical half (cairn/memory/dossiers/facts.py); consistent, so a fact is found at once.
    text = StringProperty(required=True, fulltext_index=FulltextIndex(analyzer="english"))
    fact_type = StringProperty()
    confidence = FloatProperty()
    added_at = DateTimeProperty()
    source_block_id = StringProperty(index=True)
    source_turn_id = StringProperty()
    source_turn_ids = ArrayProperty(StringProperty())
    source_block_ids = ArrayProperty(StringProperty())
    turn_index = IntegerProperty()
    observed_at = DateTimeProperty()
    packet_key = StringProperty()
    tag = StringProperty()
    embedding = _embedding()
    embedding_model = StringProperty()


class Block(Entity):
    block_id = StringProperty(unique_index=True)
    global_tags = ArrayProperty(StringProperty())
    section_rules = StringProperty()  # JSON list of {tag, start_turn, end_turn}
    processed_at = DateTimeProperty()
    observed_at = DateTimeProperty()
    last_turn = IntegerProperty()
    pending_facts = StringProperty()  # JSON list of the facts not yet gardened


class Turn(Entity):
    turn_index = IntegerProperty()
    user_text = StringProperty()
    assistant_text = StringProperty()


class Factor(Entity):
    name = StringProperty(required=True)
    description = StringProperty()
    category = StringProperty(index=True)
    scale = StringProperty()
    current_value = FloatProperty()
    current_confidence = FloatProperty()
    inference_status = StringProperty(choices={s: s for s in ("unconfirmed", "confirmed", "user_provided")})
    last_updated = DateTimeProperty()
    # The sequence of the factor's newest journal entry: stored only once it has one, so it is
    # declared (named as masked wherever hidden, not only where stored: that told which factors
    # were assessed to a caller who may not see their values).
    journal_seq = IntegerProperty()
    aliases = ArrayProperty(StringProperty())
    embedding = _embedding()
    embedding_model = StringProperty()


class Option(Entity):
    name = StringProperty(required=True)
    description = StringProperty()
    aliases = ArrayProperty(StringProperty())
    embedding = _embedding()
    embedding_model = StringProperty()


class JournalEntry(Entity):
    op = StringProperty(required=True)
    timestamp = DateTimeProperty(index=True)
    previous_value = StringProperty()
    new_value = StringProperty()
    rationale = StringProperty()
    excerpt = StringProperty()
    confidence = FloatProperty()
    session_id = StringProperty()
    details = StringProperty()  # JSON
    seq = IntegerProperty()
    work_key = StringProperty()
    # a factor's entry (scope.FACTOR_ENTRY_MARK): the numbers its values are written from
    new_number = FloatProperty()
    previous_number = FloatProperty()
    previous_confidence = FloatProperty()
    inference_status = StringProperty()
    embedding = _embedding()
    embedding_model = StringProperty()


class Session(Entity):
    started_at = DateTimeProperty()
    title = StringProperty()


class Decision(Entity):
    option = StringProperty(required=True)
    rationale = StringProperty()
    timestamp = DateTimeProperty(index=True)
    decision_maker = StringProperty()
    tags = ArrayProperty(StringProperty())
    importance = FloatProperty()
    embedding = _embedding()
    embedding_model = StringProperty()


class Event(Entity):
    summary = StringProperty(required=True)
    description = StringProperty()
    snippet = StringProperty()
    timestamp = DateTimeProperty(index=True)
    tags = ArrayProperty(StringProperty())
    importance = FloatProperty()
    alias_of_decision = StringProperty(index=True)
    embedding = _embedding()
    embedding_model = StringProperty()


class Section(Entity):
    section_number = IntegerProperty(unique_index=True)
    filed_id = StringProperty()
    collision = BooleanProperty()
    author = StringProperty(index=True)
    is_external_caller = BooleanProperty()
    date = StringProperty()
    title = StringProperty()
    body = StringProperty()
    exec_tags = ArrayProperty(StringProperty())
    exec_decisions = ArrayProperty(StringProperty())
    status_tags = ArrayProperty(StringProperty())
    source = StringProperty(index=True)
    ordinal = IntegerProperty()
    source_line = IntegerProperty()
    filed_number = IntegerProperty()
    responds_to_filed = ArrayProperty(StringProperty())
    knowledge_refs = ArrayProperty(StringProperty())
    embedding = _embedding()
    embedding_model = StringProperty()


NODE_CLASSES: tuple[type[Entity], ...] = (
    Entity,
    Dossier,
    Fact,
    Block,
    Turn,
    Factor,
    Option,
    JournalEntry,
    Session,
    Decision,
    Event,
    Section,
)


class CairnLock(StructuredNode):
    """The routing lock (cairn/memory/dossiers/lock.py): machinery, not data, so no ``Entity``
    label and never returned. Its uniqueness constraint makes concurrent first ``MERGE``s
    create one node."""

    lock_id = StringProperty(db_property="id", unique_index=True, required=True)
    secret = StringProperty()  # keys curation's journal ids (cairn/memory/dossiers/lock.py keyed_lock)


class CairnSchema(StructuredNode):
    """The one node that records the schema version (cairn/schema/migrate.py)."""

    schema_id = StringProperty(db_property="id", unique_index=True, required=True)
    version = IntegerProperty()


MACHINERY_CLASSES: tuple[type[StructuredNode], ...] = (CairnLock, CairnSchema)

VECTOR_INDEXED_LABELS: tuple[str, ...] = (
    "Fact",
    "JournalEntry",
    "Section",
    "Factor",
    "Option",
    "Decision",
    "Event",
)


def vector_index_name(label: str) -> str:
    """The name neomodel gives the vector index on ``label.embedding``."""
    return f"vector_index_{label}_embedding"


def fulltext_index_name(label: str, prop: str) -> str:
    """The name neomodel gives the full-text index on ``label.prop``."""
    return f"fulltext_index_{label}_{prop}"


def _stored_names(cls: type[StructuredNode]) -> frozenset[str]:
    props = cls.defined_properties(aliases=False, rels=False)
    return frozenset((prop.db_property or name) for name, prop in props.items()) - INTERNAL_FIELDS


# Fields a read computes on every node of the label, beside what is stored: a section's links
# as section numbers (cairn.graph.correspondence.PROJECTION).
READ_FIELDS: dict[str, frozenset[str]] = {"Section": frozenset({"responds_to", "responded_by"})}

# Each readable label's declared fields by their stored names, and the fields its reads compute:
# a field a rule hides is named as masked whether or not the node holds a value there, and a
# stored field not declared here is withheld unnamed (cairn.policy.preselector._mask): every
# field a write stores is declared.
DECLARED_FIELDS: dict[str, frozenset[str]] = {
    cls.__name__: _stored_names(cls) | READ_FIELDS.get(cls.__name__, frozenset())
    for cls in (Dossier, Fact, Block, Turn, Factor, Option, JournalEntry, Session, Decision, Event, Section)
}
