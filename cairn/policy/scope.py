"""The effective view of one request: a role profile narrowed by the caller's headers.

Narrowing is an intersection, never a union: a header can lower the ceiling, drop domains,
edge types or hops, and nothing in a header can add to what the profile grants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from cairn.policy.profiles import (
    SENSITIVITY_RANK,
    EdgeRule,
    FieldRule,
    RoleProfile,
    glob_regex,
    literal_globs,
    matches,
)
from cairn.schema.catalog import RELATION_TYPES
from cairn.schema.nodes import SEARCH_TEXT_FIELDS

ALL_FIELDS = "*"
# Fields written from another field, shown only where their source field shows in the same
# domain (docs/design.md §Policy module, "Derived fields"): a dossier's title is the gardener's
# label built from its facts' text, its summary is made of their sentences (extractive), and a
# dossier journal entry's new and previous values quote such titles and summaries, its details
# the titles of the dossiers a packet voted for, its excerpt a skipped fact's text and its
# rationale the vote's cosines and coherences (read off the facts' text vectors) or an operator's
# words, on every dossier entry alike; a block not yet gardened holds its facts' texts
# in ``pending_facts``. A dossier's summary lists its central facts' sentences in the order they
# were added (cairn/graph/dossiers.py SUMMARY_POOL_RANKED), and its ``last_updated`` and
# ``created_at`` are the moments its newest and first facts were added: derived from the facts'
# ``added_at`` too (and so the journal values quoting the summary). A ``created_at`` is the
# write's moment, which another field of the node holds too: a fact's ``added_at`` (both set by
# the packet that adds it), a journal entry's ``timestamp``; a session the journal opens starts at
# its first entry's time (cairn/graph/factors.py CLAIM_SESSION), and is titled by the op that
# opened it ("ad-hoc update", "recalculation"). A dossier journal entry's ``timestamp`` is its
# unit of work's moment: a packet's, the ``added_at`` of the facts it adds.
DERIVED_FIELDS: dict[str, tuple[tuple[tuple[str, ...], str, str], ...]] = {
    # A block's tags and section rules are the gardener's reading of its facts' text (a rule
    # keeps the fact itself as ``source_fact``), as a tag fact's ``tag`` is of its own. A gardened
    # fact's ``observed_at`` is its block's, copied (the gardener times its packets so): one datum
    # under two labels' rules, hidden by either (a rule decides, not whether a fact has a block).
    "Block": (
        (("pending_facts", "global_tags", "section_rules"), "Fact", "text"),
        (("observed_at",), "Fact", "observed_at"),
    ),
    "Dossier": (
        (("title", "summary"), "Fact", "text"),
        (("summary", "last_updated", "created_at"), "Fact", "added_at"),
    ),
    "Fact": (
        (("created_at",), "Fact", "added_at"),
        (("tag",), "Fact", "text"),
        (("observed_at",), "Block", "observed_at"),
    ),
    "JournalEntry": (
        (("new_value", "previous_value", "details", "excerpt", "rationale"), "Fact", "text"),
        (("new_value", "previous_value", "timestamp", "created_at"), "Fact", "added_at"),
        (("created_at",), "JournalEntry", "timestamp"),
        # A fact's entry copies its confidence, and its details name the fact's block and turn.
        (("confidence",), "Fact", "confidence"),
        (("details",), "Fact", "source_block_id"),
        (("details",), "Fact", "source_turn_id"),
        # A dossier's archive or merge journals its new status and the dossiers it joins: the op,
        # the values, the details and the default rationale ("merged by an operator", "n fact(s)
        # merged in") say what ``status`` and ``merged_into`` hold (docs/design.md §Policy module).
        (("op", "previous_value", "new_value", "details", "rationale"), "Dossier", "status"),
        (("previous_value", "new_value", "details", "rationale"), "Dossier", "merged_into"),
        # ... and the op chooses what an entry holds (a link's details name its two dossiers, a
        # merge's values are ids, a skipped duplicate's excerpt is a fact): shown only with it.
        (("previous_value", "new_value", "details", "rationale", "excerpt"), "JournalEntry", "op"),
    ),
    "Session": (
        (("started_at", "created_at"), "JournalEntry", "timestamp"),
        (("title",), "JournalEntry", "op"),
    ),
}

# A factor's journal entry (the one kind that stores ``new_number``) writes its new and previous
# values from its own numbers, not from any fact: each is shown exactly where its number shows.
# Its ``rationale`` and ``details`` are written from them too where the journal writes them itself
# (cairn/memory/factors/journal.py: "User corrected from 25 to 20", "User confirmed 20"; a
# recalculation's count of weighed entries and contradictions, and details holding every weighed
# entry's value, confidence, time and excerpt), and its ``created_at`` is the moment its
# ``timestamp`` defaults to: each is shown only where all its sources show. A rule decides, not
# the stored ``op``: masked on some entries only, a rationale would tell which ones the journal
# wrote (docs/design.md §Policy module, "Derived fields").
FACTOR_ENTRY_MARK = "new_number"
_NUMBERS = ("new_number", "previous_number")
# What the journal writes is also chosen by the op: "User confirmed …", "Recalculated from …", a
# recalculation's details, a confirmation's or correction's default excerpt ("User confirmed the
# inferred value"), so each shows only where ``op`` shows too.
FACTOR_ENTRY_DERIVED: dict[str, tuple[str, ...]] = {
    "new_value": ("new_number",),
    "previous_value": ("previous_number",),
    "rationale": (*_NUMBERS, "op"),
    "details": (*_NUMBERS, "confidence", "previous_confidence", "timestamp", "excerpt", "op"),
    "excerpt": ("op",),
    "created_at": ("timestamp",),
}
# A factor's value, confidence, status and time are copies of its newest entry's (a journal write
# sets them from the entry's ``new_number``, ``confidence``, ``inference_status`` and ``timestamp``,
# and the next entry stores the value and confidence again as its ``previous_number`` and
# ``previous_confidence``): one datum under two labels' rules. A factor
# field shows only where the entry rule shows its source in the same domain (an entry takes its
# factor's access and domain), and the entry fields holding it only where the factor rule shows
# the factor field: hidden by either rule, a copy is hidden everywhere.
FACTOR_MIRRORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "current_value": ("new_number", ("new_number", "previous_number", "new_value", "previous_value")),
    "current_confidence": ("confidence", ("confidence", "previous_confidence")),
    "inference_status": ("inference_status", ("inference_status",)),
    "last_updated": ("timestamp", ("timestamp",)),
}


def derivation_sources(label: str, source_label: str, source_field: str) -> tuple[tuple[str, str], ...]:
    """The (label, field) pairs a ``DERIVED_FIELDS`` derivation of a ``label`` field shows only
    where all show: its source, and for a session's time, the factor field mirroring its first
    entry's (``FACTOR_MIRRORS``), which the factor's rule may hide too. Read by
    ``Scope.derived_hidden`` and by the Cypher of ``cairn.policy.acl.field_shown`` alike."""
    sources = [(source_label, source_field)]
    if label == "Session":
        sources += [("Factor", f) for f, (_, copies) in FACTOR_MIRRORS.items() if source_field in copies]
    return tuple(sources)


# What a dossier and its journal quote of the facts it holds, read over HAS_FACT (a dossier's facts
# share its access): its summary (their sentences), and its entries' values, excerpt, rationale,
# details and confidence (a ``fact_added`` entry's new value is its fact's text and its details
# name the fact, a ``summary_updated`` one's values are summaries, a skipped duplicate's excerpt a
# fact). Hidden wherever the scope may not walk HAS_FACT from a dossier of that domain
# (``Scope.derived_hidden``), which then lists none of its facts either (red-team pass 18; review
# 36: its journal, read over ABOUT, still quoted every fact). A dossier's title, a few of its
# facts' words, names it and is kept.
HELD_FACT_FIELDS: dict[str, tuple[str, ...]] = {
    "Dossier": ("summary",),
    "JournalEntry": ("new_value", "previous_value", "excerpt", "rationale", "details", "confidence"),
}

# Labels some of whose fields another field rule may hide (``Scope.derived_hidden``).
MASKED_BY_OTHER_FIELDS = frozenset({*DERIVED_FIELDS, "Factor"})


@dataclass(frozen=True)
class Scope:
    role: str
    domains: tuple[str, ...]
    ceiling: int  # SENSITIVITY_RANK value
    namespaces: tuple[str, ...]
    max_hops: int
    edges: tuple[EdgeRule, ...]
    fields: dict[str, tuple[FieldRule, ...]] = field(default_factory=dict)
    x_extra: tuple[str, ...] = ()
    policy_key: str = ""
    unrestricted: bool = False
    # derived_hidden's answers, per (label, domain, factor_entry): decided by the rules alone, and
    # asked once per masked node (a fact's mask asks it on every hit).
    _derived_hidden: dict[tuple[str, str, bool], tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def from_profile(
        cls,
        profile: RoleProfile,
        *,
        namespaces: tuple[str, ...] | None = None,
        domains: tuple[str, ...] | None = None,
        edge_types: tuple[str, ...] | None = None,
        max_hops: int | None = None,
        ceiling: str | None = None,
    ) -> Scope:
        """The profile, narrowed by whatever optional header values were given."""
        scope_domains = profile.domains
        if domains is not None:
            scope_domains = intersect_domains(domains, profile.domains)
        rank = SENSITIVITY_RANK[profile.sensitivity_ceiling]
        if ceiling is not None:
            rank = min(rank, SENSITIVITY_RANK[ceiling])
        edges = profile.edges
        if edge_types is not None:
            edges = tuple(r for r in edges if r.type in edge_types)
        hops = profile.max_hops if max_hops is None else max(0, min(max_hops, profile.max_hops))
        ns = (
            profile.namespaces
            if namespaces is None
            else tuple(n for n in namespaces if n in profile.namespaces)
        )
        return cls(
            role=profile.name,
            domains=scope_domains,
            ceiling=rank,
            namespaces=ns,
            max_hops=hops,
            edges=edges,
            fields=dict(profile.fields),
            x_extra=profile.x_extra,
            policy_key=profile.policy_key,
        )

    @classmethod
    def system(cls) -> Scope:
        """Everything, unmasked: for ingest checks and operator tools, never for a caller's read."""
        return cls(
            role="system",
            domains=("*",),
            ceiling=max(SENSITIVITY_RANK.values()),
            namespaces=(),
            max_hops=6,
            edges=tuple(
                EdgeRule(type=t, direction="both", from_domains=("*",), to_domains=("*",))
                for t in RELATION_TYPES
            ),
            unrestricted=True,
        )

    def cypher_params(self) -> dict[str, object]:
        """The scope as Cypher parameters for the predicates of ``cairn.policy.acl``: a new dict
        each call (callers add their own keys), its values built once per scope (a search reuses
        its scope's, a request's scope is built once per request)."""
        return dict(self._cypher_params)

    @cached_property
    def _cypher_params(self) -> dict[str, object]:
        rules = [
            {
                "type": r.type,
                "out": r.direction in ("out", "both"),
                "in": r.direction in ("in", "both"),
                "from_re": glob_regex(r.from_domains),
                "to_re": glob_regex(r.to_domains),
                # The rule's globs without a wildcard: a domain equal to one matches the regex too
                # (acl.edge_allowed_between_visible tests these first).
                "from_exact": literal_globs(r.from_domains),
                "to_exact": literal_globs(r.to_domains),
                # The rule's globs cover every domain the scope sees (acl.edge_allowed_from).
                "from_all": _covers_scope(self.domains, r.from_domains),
                "to_all": _covers_scope(self.domains, r.to_domains),
            }
            for r in self.edges
        ]
        by_type: dict[str, list[dict[str, object]]] = {}
        for rule in rules:
            by_type.setdefault(str(rule["type"]), []).append(rule)
        return {
            "unrestricted": self.unrestricted,
            "role": self.role,
            "namespaces": list(self.namespaces),
            "ceiling": self.ceiling,
            # The levels at or under the ceiling: a stored level is checked by list membership, no
            # rank map built and looked up per node; an unknown or missing level is in no list.
            "sensitivities": [level for level, rank in SENSITIVITY_RANK.items() if rank <= self.ceiling],
            "domain_re": glob_regex(self.domains),
            # The scope's domain globs without a wildcard, each matched by ``domain_re`` too: a
            # node whose domain is one of them is in scope without the regex (acl.acl_visible).
            "domain_exact": literal_globs(self.domains),
            "rules": rules,
            "edge_rules": by_type,  # the same rules keyed by edge type (acl.edge_allowed_from)
            "edge_types": sorted({r.type for r in self.edges}),
            "max_hops": self.max_hops,
            # which nodes a search may rank, and by which vector (acl.search_vector, acl.search_fields_shown)
            **self.search_vector_params(),
            # which fields each label shows, per domain glob (acl.field_shown)
            "field_rules": self.field_rule_params(),
        }

    def field_rule_params(self) -> list[dict[str, object]]:
        """``$field_rules`` for ``cairn.policy.acl.field_shown``: every label's field rules in
        order (the first whose domain glob matches wins, as in ``visible_fields``)."""
        return [
            {
                "label": label,
                "re": glob_regex(rule.domains),
                "all": ALL_FIELDS in rule.fields,
                "fields": list(rule.fields),
            }
            for label, rules in self.fields.items()
            for rule in rules
        ]

    def search_vector_params(self) -> dict[str, object]:
        """``$vector_rules`` for ``cairn.policy.acl.search_vector``: per searchable label, the
        field rules in order (the first whose domain glob matches wins, as in
        ``visible_fields``), each saying which vector the caller may be ranked by there:
        ``full`` when it sees every field the vector was made from, ``header`` when it sees
        the header fields, else ``none`` (a label without rules shows its id only: ``none``)."""
        rules = []
        for label, (full, header) in SEARCH_TEXT_FIELDS.items():
            for rule in self.fields.get(label, ()):
                shown = set(rule.fields)
                use = "none"
                if ALL_FIELDS in shown or shown >= set(full):
                    use = "full"
                elif header is not None and shown >= set(header):
                    use = "header"
                rules.append({"label": label, "re": glob_regex(rule.domains), "use": use})
        return {"vector_rules": rules, "searchable_everywhere": self.searchable_everywhere()}

    def searchable_everywhere(self) -> list[str]:
        """The searchable labels whose every search field the scope shows on every node it may
        see, whatever its domain: ``acl.search_fields_shown`` needs no per-node rule there."""
        out = []
        for label, (full, _) in SEARCH_TEXT_FIELDS.items():
            shown = self.fields_shown_everywhere(label)
            if shown is None or set(shown) >= set(full):
                out.append(label)
        return out

    def fields_shown_everywhere(self, label: str) -> tuple[str, ...] | None:
        """Fields the scope shows on every ``label`` node it may see, whatever its domain; None
        means all of them. Decided from the scope alone (no data): a field hidden in any domain
        the scope reaches is left out, and so is every field but ``id`` when some of its domains
        fall past the label's rules. A filter may read only these (docs/design.md
        §Correspondence, "Filters read only what the caller sees")."""
        if self.unrestricted:
            return None
        shown: set[str] | None = None  # None: every field, so far
        covering: list[str] = []
        for rule in self.fields.get(label, ()):
            if not any(_may_overlap(d, g) for d in self.domains for g in rule.domains):
                continue  # applies to no domain the scope reaches
            if ALL_FIELDS not in rule.fields:
                shown = set(rule.fields) if shown is None else shown & set(rule.fields)
            covering.extend(rule.domains)
            if all(_covered(d, tuple(covering)) for d in self.domains):
                break  # later rules are shadowed for every domain the scope reaches
        else:
            if self.domains:  # some domain may fall past the rules: its id only
                shown = {"id"} if shown is None else shown & {"id"}
        return None if shown is None else tuple(sorted(shown))

    def derived_hidden(self, label: str, domain: str, *, factor_entry: bool = False) -> tuple[str, ...]:
        """Fields of a ``label`` node in ``domain`` hidden because the field they are derived
        from (``DERIVED_FIELDS``) is hidden there, whatever the label's own rule shows. A
        factor's journal entry (``factor_entry``) derives its values, rationale, details and
        ``created_at`` from its own numbers and time (``FACTOR_ENTRY_DERIVED``), not from fact
        text; it and its factor hide the copies of a
        value either rule hides (``FACTOR_MIRRORS``)."""
        if self.unrestricted:
            return ()
        key = (label, domain, factor_entry)
        known = self._derived_hidden.get(key)
        if known is None:
            known = self._derived_hidden[key] = self._decide_derived_hidden(label, domain, factor_entry)
        return known

    def _decide_derived_hidden(self, label: str, domain: str, factor_entry: bool) -> tuple[str, ...]:
        if label == "Factor":
            entry = self.visible_fields("JournalEntry", domain)
            if entry is None:
                return ()
            return tuple(name for name, (source, _) in FACTOR_MIRRORS.items() if source not in entry)
        derived = DERIVED_FIELDS.get(label)
        if derived is None:
            return ()
        if factor_entry and label == "JournalEntry":
            own = self.visible_fields(label, domain)
            factor = self.visible_fields("Factor", domain)
            hidden = (
                []
                if factor is None
                else [c for name, (_, copies) in FACTOR_MIRRORS.items() if name not in factor for c in copies]
            )
            hidden += [
                name
                for name, sources in FACTOR_ENTRY_DERIVED.items()
                if any(s in hidden or (own is not None and s not in own) for s in sources)
            ]
            return tuple(dict.fromkeys(hidden))
        hidden = []
        for names, source_label, source_field in derived:
            for name, source in derivation_sources(label, source_label, source_field):
                shown = self.visible_fields(name, domain)
                if shown is not None and source not in shown:
                    hidden += names
        if label in HELD_FACT_FIELDS and not self.walks_out("HAS_FACT", domain, domain):
            # A scope that may not walk HAS_FACT reads no fact as the dossier's, in ``dossier`` as
            # in ``node``, a walk, an ask or the dossier's journal (``HELD_FACT_FIELDS``).
            hidden += HELD_FACT_FIELDS[label]
        return tuple(dict.fromkeys(hidden))

    def walks_out(self, rel: str, from_domain: str, to_domain: str) -> bool:
        """Whether the scope may walk an edge of type ``rel`` stored from a node in
        ``from_domain`` to one in ``to_domain``, from its start (``acl.edge_allowed``, in Python)."""
        return self.unrestricted or any(
            rule.type == rel
            and rule.direction in ("out", "both")
            and matches(from_domain, rule.from_domains)
            and matches(to_domain, rule.to_domains)
            for rule in self.edges
        )

    def visible_fields(self, label: str, domain: str) -> tuple[str, ...] | None:
        """Fields of a ``label`` node in ``domain`` the scope shows; None means all of them."""
        if self.unrestricted:
            return None
        for rule in self.fields.get(label, ()):
            if matches(domain, rule.domains):
                return None if ALL_FIELDS in rule.fields else rule.fields
        return ("id",)  # a label the profile does not describe shows its id only


def intersect_domains(requested: tuple[str, ...], granted: tuple[str, ...]) -> tuple[str, ...]:
    """Domains both sides allow: a broad request (``acme/*``) keeps the granted globs it
    covers; a narrow request keeps itself when a granted glob covers it. Never wider."""
    kept = [r for r in requested if _covered(r, granted)]
    kept += [g for g in granted if _covered(g, requested) and g not in kept]
    return tuple(kept)


# Characters Java's regex `.` does not match (Python's `.` refuses only the first): a glob holding
# one is left to the regex, so a cover decided in Python never differs from Cypher's `=~`.
_LINE_BREAKS = frozenset("\n\r\x85\u2028\u2029")


def _covers_scope(domains: tuple[str, ...], globs: tuple[str, ...]) -> bool:
    """Whether every domain the scope sees is inside ``globs`` (a rule's from or to domains)."""
    return all(not _LINE_BREAKS & set(d) and _covered(d, globs) for d in domains)


def _covered(requested: str, granted: tuple[str, ...]) -> bool:
    """Whether every domain the requested glob can match is inside a granted glob."""
    if "*" not in requested and "?" not in requested:
        return matches(requested, granted)
    return any(requested == g or (g.endswith("*") and requested.startswith(g[:-1])) for g in granted)


def _may_overlap(a: str, b: str) -> bool:
    """Whether two domain globs may match a common domain (true when unsure: callers refuse)."""
    wild_a, wild_b = "*" in a or "?" in a, "*" in b or "?" in b
    if not wild_a:
        return matches(a, (b,))
    if not wild_b:
        return matches(b, (a,))
    pa, pb = (
        a[: min(a.find(c) if c in a else len(a) for c in "*?")],
        b[: min(b.find(c) if c in b else len(b) for c in "*?")],
    )
    return pa.startswith(pb) or pb.startswith(pa)
