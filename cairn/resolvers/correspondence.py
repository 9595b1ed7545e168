"""GraphQL for the correspondence: search, linear tail, divergence, and sync for writers.

Thin: every field checks the passport, hands the caller's Reader to the domain service in
a worker thread, and maps refusals to stable error codes (FORBIDDEN_SEARCH for a role that reads in order
only, FORBIDDEN_WRITE, FILTER_NOT_ALLOWED, INVALID_ARGUMENT, INVALID_INPUT).
"""

from __future__ import annotations

from typing import Annotated

import strawberry
from graphql import GraphQLError

from cairn.ingest.correspondence.collisions import default_log_path
from cairn.ingest.correspondence.sync import SyncReport, check_source, sync_bytes
from cairn.memory import correspondence as corr
from cairn.resolvers.context import run_domain
from cairn.resolvers.permissions import READ, SEARCH, WRITE, Ctx, caller_of


@strawberry.type(description="A correspondence section as the caller may see it; masked fields are null.")
class CorrespondenceSection:
    id: strawberry.ID
    section_number: int | None = strawberry.field(
        description="The caller's own number: 1..n over the sections it may see, so gaps reveal nothing."
    )
    filed_id: str | None
    collision: bool | None
    author: str | None
    is_external_caller: bool | None
    date: str | None
    title: str | None
    body: str | None
    exec_tags: list[str] | None
    exec_decisions: list[str] | None
    status_tags: list[str] | None
    knowledge_refs: list[str] | None
    responds_to: list[int] | None = strawberry.field(
        description="Numbers (the caller's numbering) of visible sections this one answers."
    )
    responded_by: list[int] | None = strawberry.field(
        description="Numbers (the caller's numbering) of visible sections that answer this one."
    )
    embedding_model: str | None
    domain: str | None
    sensitivity: str | None
    score: float | None = strawberry.field(description="(1 + cosine) / 2 for search hits; null in the tail.")
    masked: list[str]

    @classmethod
    def of(cls, view: corr.SectionView) -> CorrespondenceSection:
        f = view.fields
        return cls(
            id=strawberry.ID(view.id),
            section_number=f.get("section_number"),
            filed_id=f.get("filed_id"),
            collision=f.get("collision"),
            author=f.get("author"),
            is_external_caller=f.get("is_external_caller"),
            date=f.get("date"),
            title=f.get("title"),
            body=f.get("body"),
            exec_tags=f.get("exec_tags"),
            exec_decisions=f.get("exec_decisions"),
            status_tags=f.get("status_tags"),
            knowledge_refs=f.get("knowledge_refs"),
            responds_to=f.get("responds_to"),
            responded_by=f.get("responded_by"),
            embedding_model=f.get("embedding_model"),
            domain=f.get("domain"),
            sensitivity=f.get("sensitivity"),
            score=view.score,
            masked=list(view.masked),
        )


@strawberry.type
class CorrespondenceSearchResult:
    total: int = strawberry.field(description="Visible sections that passed the filters.")
    hits: list[CorrespondenceSection]


@strawberry.type
class BeingSections:
    author: str
    sections: list[CorrespondenceSection]


@strawberry.input(
    description="Applied before ranking; a tag filter matches sections with any given tag; dates are "
    "YYYY-MM-DD. A filter on a field the caller may not see in some domain it reaches is FILTER_NOT_ALLOWED."
)
class CorrespondenceFilter:
    authors: list[str] | None = None
    exec_tags: list[str] | None = None
    status_tags: list[str] | None = None
    date_from: str | None = None
    date_to: str | None = None

    def to_filters(self) -> corr.Filters:
        return corr.Filters(
            authors=tuple(self.authors or ()),
            exec_tags=tuple(self.exec_tags or ()),
            status_tags=tuple(self.status_tags or ()),
            date_from=self.date_from,
            date_to=self.date_to,
        )


@strawberry.type
class SyncConflict:
    ordinal: int
    line: int | None
    filed_id: str
    kind: str
    detail: str


@strawberry.type
class CreatedSectionInfo:
    id: strawberry.ID
    section_number: int
    filed_id: str
    collision: bool


@strawberry.type
class CorrespondenceSyncSummary:
    source: str
    file_sha256: str
    sections_in_file: int
    unchanged: int
    created: list[CreatedSectionInfo]
    conflicts: list[SyncConflict]
    warnings: list[str]
    collisions_logged: int
    embedding_model: str
    stale_embeddings: int

    @classmethod
    def of(cls, r: SyncReport) -> CorrespondenceSyncSummary:
        return cls(
            source=r.source,
            file_sha256=r.file_sha256,
            sections_in_file=r.sections_in_file,
            unchanged=r.unchanged,
            created=[
                CreatedSectionInfo(
                    id=strawberry.ID(c.id),
                    section_number=c.section_number,
                    filed_id=c.filed_id,
                    collision=c.collision,
                )
                for c in r.created
            ],
            conflicts=[SyncConflict(**vars(c)) for c in r.conflicts],
            warnings=[str(w) for w in r.warnings],
            collisions_logged=r.collisions_logged,
            embedding_model=r.embedding_model,
            stale_embeddings=r.stale_embeddings,
        )


@strawberry.type
class CorrespondenceQuery:
    @strawberry.field(
        permission_classes=SEARCH,
        description="Sections nearest the query, filtered (author, tags, dates) before ranking.",
    )
    async def correspondence_search(
        self, info: Ctx, query: str, k: int = 10, filters: CorrespondenceFilter | None = None
    ) -> CorrespondenceSearchResult:
        reader = corr.Reader.of(caller_of(info))
        driver = info.context.services.driver
        chosen = filters.to_filters() if filters else corr.Filters()
        result = await run_domain(lambda: corr.semantic_search(driver, reader, query, k, chosen))
        return CorrespondenceSearchResult(
            total=result.total, hits=[CorrespondenceSection.of(h) for h in result.hits]
        )

    @strawberry.field(
        permission_classes=READ,
        description="The last n sections (or n from one of the caller's section numbers on), oldest first.",
    )
    async def correspondence_tail(
        self, info: Ctx, n: int = 30, from_section: int | None = None
    ) -> list[CorrespondenceSection]:
        reader = corr.Reader.of(caller_of(info))
        driver = info.context.services.driver
        views = await run_domain(lambda: corr.linear_tail(driver, reader, n, from_section))
        return [CorrespondenceSection.of(v) for v in views]

    @strawberry.field(
        permission_classes=SEARCH, description="Per named author, their sections nearest the question."
    )
    async def being_divergence(
        self, info: Ctx, question: str, beings: list[str], k: int = 3
    ) -> list[BeingSections]:
        reader = corr.Reader.of(caller_of(info))
        driver = info.context.services.driver
        grouped = await run_domain(lambda: corr.being_divergence(driver, reader, question, beings, k))
        return [
            BeingSections(author=name, sections=[CorrespondenceSection.of(v) for v in views])
            for name, views in grouped.items()
        ]


@strawberry.type
class CorrespondenceMutation:
    @strawberry.mutation(
        permission_classes=WRITE,
        description="Sync a correspondence file's full text under a source name (append-only, idempotent).",
    )
    async def sync_correspondence(
        self,
        info: Ctx,
        # named `source` in GraphQL; a Python parameter `source` would clash with strawberry's resolver chain
        source_name: Annotated[str, strawberry.argument(name="source", description="the source's slug")],
        markdown: str,
    ) -> CorrespondenceSyncSummary:
        services = info.context.services
        try:
            check_source(source_name)
        except ValueError as exc:
            raise GraphQLError(str(exc), extensions={"code": "INVALID_ARGUMENT"}) from None
        log = default_log_path(services.settings)
        writer = caller_of(info).scope  # sections only inside the caller's own scope

        def work() -> SyncReport:
            return sync_bytes(
                services.driver, markdown.encode("utf-8"), source_name, collision_log=log, writer=writer
            )

        report = await run_domain(work)
        return CorrespondenceSyncSummary.of(report)
