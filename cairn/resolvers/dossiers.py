"""Dossier reads and writes over GraphQL: thin resolvers over cairn.memory.dossiers.

Reads run as the caller (their Scope filters before anything is ranked or counted); the
ingest, gardening and curation mutations need a role that may write, and may only create or
touch data inside that role's own profile. Domain calls are
synchronous (embedding is CPU-bound), so each runs in a worker thread.
"""

from __future__ import annotations

from typing import Any, cast

import strawberry
from strawberry.scalars import JSON

from cairn.errors import in_range
from cairn.memory.dossiers import blocks, curation, facts, gardener, governor, retriever
from cairn.memory.dossiers.facts import FactHit
from cairn.memory.dossiers.retriever import DossierView
from cairn.memory.dossiers.voting import VOTE_THRESHOLD
from cairn.resolvers.context import run_domain
from cairn.resolvers.permissions import READ, SEARCH, WRITE, Ctx, caller_of

MAX_TOP_K = 50


@strawberry.type(description="A fact of a dossier, as the caller's role may see it.")
class DossierFact:
    id: strawberry.ID
    text: str | None
    fact_type: str | None
    confidence: float | None
    added_at: str | None
    source_block_id: str | None
    turn_index: int | None

    @classmethod
    def of(cls, f: dict[str, Any]) -> DossierFact:
        return cls(
            id=strawberry.ID(str(f["id"])),
            text=f.get("text"),
            fact_type=f.get("fact_type"),
            confidence=f.get("confidence"),
            added_at=f.get("added_at"),
            source_block_id=f.get("source_block_id"),
            turn_index=f.get("turn_index"),
        )


@strawberry.type(description="One journalled change of a dossier (its provenance).")
class DossierJournalEntry:
    id: strawberry.ID
    op: str | None
    timestamp: str | None
    previous_value: str | None
    new_value: str | None
    excerpt: str | None
    rationale: str | None
    details: JSON | None

    @classmethod
    def of(cls, e: dict[str, Any]) -> DossierJournalEntry:
        return cls(
            id=strawberry.ID(str(e["id"])),
            op=e.get("op"),
            timestamp=e.get("timestamp"),
            previous_value=e.get("previous_value"),
            new_value=e.get("new_value"),
            excerpt=e.get("excerpt"),
            rationale=e.get("rationale"),
            details=cast(JSON, e.get("details")),
        )


@strawberry.type(description="A dossier: title, extractive summary, visible facts and history.")
class Dossier:
    id: strawberry.ID
    title: str | None
    summary: str | None
    status: str | None
    last_updated: str | None
    merged_into: str | None
    score: float | None
    facts: list[DossierFact] = strawberry.field(
        description="its visible facts, oldest first; in a search result only the newest 10"
    )
    fact_count: int = strawberry.field(description="how many of its facts the caller may see")
    history: list[DossierJournalEntry]
    masked: list[str]

    @classmethod
    def of(cls, v: DossierView) -> Dossier:
        return cls(
            id=strawberry.ID(v.id),
            title=v.fields.get("title"),
            summary=v.fields.get("summary"),
            status=v.fields.get("status"),
            last_updated=v.fields.get("last_updated"),
            merged_into=v.fields.get("merged_into"),
            score=None if v.score is None else round(v.score, 4),
            facts=[DossierFact.of(f) for f in v.facts],
            fact_count=v.fact_count,
            history=[DossierJournalEntry.of(e) for e in v.history],
            masked=list(v.masked),
        )


@strawberry.type(description="Dossiers matching a query among those the caller may see.")
class DossierSearch:
    count: int = strawberry.field(description="visible dossiers above the threshold, before the top-k cut")
    dossiers: list[Dossier]
    context: str = strawberry.field(description="the dossiers formatted for an LLM context window")


@strawberry.type(description="A fact that answers a memory search, with its dossier as context.")
class MemoryHit:
    fact_id: strawberry.ID
    text: str | None
    observed_at: str | None = strawberry.field(description="when it was observed (its packet's timestamp)")
    added_at: str | None = strawberry.field(description="when it was ingested")
    source_block_id: str | None
    source_turn_ids: list[str] = strawberry.field(description="every turn it came from, its own first")
    dossier_id: strawberry.ID
    dossier_title: str | None
    dossier_summary: str | None
    score: float = strawberry.field(description="fused rank score; comparable within one search only")
    matched: list[str] = strawberry.field(
        description="which rankings found it: dense, name, text, feedback, block"
    )

    @classmethod
    def of(cls, h: FactHit) -> MemoryHit:
        f = h.fact
        return cls(
            fact_id=strawberry.ID(str(f["id"])),
            text=f.get("text"),
            observed_at=f.get("observed_at"),
            added_at=f.get("added_at"),
            source_block_id=f.get("source_block_id"),
            source_turn_ids=[str(t) for t in f.get("source_turn_ids") or []],
            dossier_id=strawberry.ID(h.dossier.id),
            dossier_title=h.dossier.fields.get("title"),
            dossier_summary=h.dossier.fields.get("summary"),
            score=round(h.score, 6),
            matched=list(h.matched),
        )


@strawberry.type(description="The visible facts that best answer a question, best first.")
class MemorySearch:
    count: int = strawberry.field(
        description="visible facts among the fused candidates, before the top-k cut"
    )
    hits: list[MemoryHit]
    context: str = strawberry.field(
        description="the hits grouped by dossier, dated, for an LLM context window"
    )


@strawberry.type(description="A conversation block's sticky tags and what is left of it.")
class ConversationBlock:
    block_id: str
    global_tags: list[str]
    section_rules: JSON
    processed_at: str | None
    turns: int
    facts: int


@strawberry.type
class FactPacketOutcome:
    dossier_id: strawberry.ID
    action: str
    packet_key: str
    added_fact_ids: list[strawberry.ID]
    skipped: JSON
    decision: JSON | None
    candidates: JSON

    @classmethod
    def of(cls, r: governor.RoutingResult) -> FactPacketOutcome:
        data = r.as_json()
        return cls(
            dossier_id=strawberry.ID(r.dossier_id),
            action=r.action,
            packet_key=r.packet_key,
            added_fact_ids=[strawberry.ID(i) for i in r.added],
            skipped=cast(JSON, data["skipped"]),
            decision=cast(JSON, data["decision"]),
            candidates=cast(JSON, data["candidates"]),
        )


@strawberry.type
class BlockIngestOutcome:
    block_id: str
    turns: int
    facts: int


@strawberry.type
class GardenOutcome:
    block_id: str
    already_processed: bool
    facts_processed: int
    global_tags: list[str]
    section_rules: JSON
    dossiers: JSON
    turns_deleted: int


@strawberry.type
class CurationOutcome:
    op: str
    dossier_ids: list[strawberry.ID]
    moved_fact_ids: list[strawberry.ID]
    already_done: bool

    @classmethod
    def of(cls, r: curation.CurationResult) -> CurationOutcome:
        return cls(
            op=r.op,
            dossier_ids=[strawberry.ID(i) for i in r.dossier_ids],
            moved_fact_ids=[strawberry.ID(i) for i in r.moved_facts],
            already_done=r.already_done,
        )


@strawberry.type
class DossierQuery:
    @strawberry.field(
        permission_classes=SEARCH, description="Top dossiers for a query (cosine over visible facts)."
    )
    async def dossier_search(
        self,
        info: Ctx,
        query: str,
        top_k: int = 3,
        threshold: float = VOTE_THRESHOLD,
        include_archived: bool = False,
    ) -> DossierSearch:
        caller = caller_of(info)
        driver = info.context.services.driver
        k = in_range("topK", top_k, 1, MAX_TOP_K)
        result = await run_domain(
            lambda: retriever.retrieve_relevant_dossiers(
                driver, caller.scope, query, k, threshold, include_archived=include_archived
            ),
        )
        return DossierSearch(
            count=result.total,
            dossiers=[Dossier.of(v) for v in result.dossiers],
            context=retriever.format_for_context(result.dossiers),
        )

    @strawberry.field(
        permission_classes=SEARCH,
        description="Facts that answer a question (hybrid vector + full-text ranking, block expansion).",
    )
    async def memory_search(
        self, info: Ctx, query: str, k: int = 10, max_tokens: int | None = None
    ) -> MemorySearch:
        caller = caller_of(info)
        driver = info.context.services.driver
        top_k = in_range("k", k, 1, MAX_TOP_K)
        if max_tokens is not None:
            in_range("maxTokens", max_tokens, 1)
        result = await run_domain(lambda: facts.FactRetriever(driver).search(caller.scope, query, top_k))
        return MemorySearch(
            count=result.total,
            hits=[MemoryHit.of(h) for h in result.hits],
            context=facts.format_for_context(result.hits, max_tokens=max_tokens),
        )

    @strawberry.field(
        permission_classes=READ, description="One dossier with facts and history; null if not visible."
    )
    async def dossier(self, info: Ctx, id: strawberry.ID) -> Dossier | None:
        caller = caller_of(info)
        driver = info.context.services.driver
        view = await run_domain(lambda: retriever.get_dossier(driver, caller.scope, str(id)))
        return None if view is None else Dossier.of(view)

    @strawberry.field(permission_classes=READ, description="Linked and similar dossiers the caller may see.")
    async def related_dossiers(self, info: Ctx, id: strawberry.ID, top_k: int = 5) -> JSON:
        caller = caller_of(info)
        driver = info.context.services.driver
        k = in_range("topK", top_k, 1, MAX_TOP_K)
        related = await run_domain(lambda: curation.related_dossiers(driver, caller.scope, str(id), k))
        return cast(JSON, related)

    @strawberry.field(
        permission_classes=READ, description="A conversation block's tags; null if not visible."
    )
    async def block(self, info: Ctx, block_id: str) -> ConversationBlock | None:
        caller = caller_of(info)
        driver = info.context.services.driver
        meta = await run_domain(lambda: blocks.get_block_metadata(driver, caller.scope, block_id))
        if meta is None:
            return None
        return ConversationBlock(
            block_id=meta.block_id,
            global_tags=meta.global_tags,
            section_rules=cast(JSON, meta.section_rules),
            processed_at=meta.processed_at,
            turns=meta.turns,
            facts=meta.facts,
        )


@strawberry.type
class DossierMutation:
    @strawberry.mutation(permission_classes=WRITE, description="Route one fact packet into a dossier.")
    async def ingest_fact_packet(self, info: Ctx, packet: JSON) -> FactPacketOutcome:
        driver, writer = info.context.services.driver, caller_of(info).scope
        raw = cast(Any, packet)
        result = await run_domain(lambda: governor.process_fact_packet(driver, raw, writer=writer))
        return FactPacketOutcome.of(result)

    @strawberry.mutation(
        permission_classes=WRITE, description="Store a block with its turns and extracted facts."
    )
    async def ingest_block(self, info: Ctx, block: JSON) -> BlockIngestOutcome:
        driver, writer = info.context.services.driver, caller_of(info).scope
        raw = cast(Any, block)
        report = await run_domain(lambda: blocks.ingest_block(driver, raw, writer))
        return BlockIngestOutcome(block_id=report.block_id, turns=report.turns, facts=report.facts)

    @strawberry.mutation(
        permission_classes=WRITE, description="Tag, group and route a block's facts; drop its turns."
    )
    async def garden_block(self, info: Ctx, block_id: str) -> GardenOutcome:
        driver, writer = info.context.services.driver, caller_of(info).scope
        report = await run_domain(lambda: gardener.garden_block(driver, block_id, writer=writer))
        data = report.as_json()
        return GardenOutcome(
            block_id=report.block_id,
            already_processed=report.already_processed,
            facts_processed=report.facts_processed,
            global_tags=report.global_tags,
            section_rules=cast(JSON, report.section_rules),
            dossiers=cast(JSON, data["dossiers"]),
            turns_deleted=report.turns_deleted,
        )

    @strawberry.mutation(
        permission_classes=WRITE, description="Merge one dossier into another (facts and history kept)."
    )
    async def merge_dossiers(
        self, info: Ctx, source_id: strawberry.ID, target_id: strawberry.ID, rationale: str | None = None
    ) -> CurationOutcome:
        driver, writer = info.context.services.driver, caller_of(info).scope
        result = await run_domain(
            lambda: curation.merge_dossiers(driver, str(source_id), str(target_id), rationale, writer)
        )
        return CurationOutcome.of(result)

    @strawberry.mutation(
        permission_classes=WRITE, description="Archive a dossier (kept, but out of routing and search)."
    )
    async def archive_dossier(
        self, info: Ctx, id: strawberry.ID, rationale: str | None = None
    ) -> CurationOutcome:
        driver, writer = info.context.services.driver, caller_of(info).scope
        result = await run_domain(lambda: curation.archive_dossier(driver, str(id), rationale, writer))
        return CurationOutcome.of(result)

    @strawberry.mutation(permission_classes=WRITE, description="Record that two dossiers are related.")
    async def link_dossiers(
        self, info: Ctx, a: strawberry.ID, b: strawberry.ID, rationale: str | None = None
    ) -> CurationOutcome:
        driver, writer = info.context.services.driver, caller_of(info).scope
        result = await run_domain(lambda: curation.link_dossiers(driver, str(a), str(b), rationale, writer))
        return CurationOutcome.of(result)
