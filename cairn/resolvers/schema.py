"""Query and Mutation: thin resolvers over the domain services, every field behind the passport."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import anyio
import strawberry
import structlog
from graphql import GraphQLError, NoSchemaIntrospectionCustomRule
from neo4j.exceptions import ServiceUnavailable, SessionExpired
from strawberry.extensions import (
    MaskErrors,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.permission import BasePermission
from strawberry.scalars import JSON
from strawberry.schema.config import StrawberryConfig
from strawberry.tools import merge_types
from strawberry.types import ExecutionContext, Info
from strawberry.utils.logging import StrawberryLogger

from cairn.ingest.fixtures import FixtureError
from cairn.ingest.org_memory import ingest_payload
from cairn.memory import trace as bundles
from cairn.memory.budget import Budget
from cairn.memory.org_search import SEARCHABLE_LABELS, search_org
from cairn.policy.preselector import AnchorNotVisible, preselect
from cairn.resolvers.context import RequestContext
from cairn.resolvers.correspondence import CorrespondenceMutation, CorrespondenceQuery
from cairn.resolvers.dossiers import DossierMutation, DossierQuery
from cairn.resolvers.factors import FactorMutation, FactorQuery
from cairn.resolvers.permissions import CanSearch, CanWrite, PassportRequired, caller_of
from cairn.resolvers.types import (
    AskMode,
    AskPayload,
    Edge,
    IngestSummary,
    Neighbourhood,
    Node,
    SearchHitView,
    SearchPayload,
    envelope_of,
)
from cairn.runtime.embedder import get_embedder

Ctx = Info[RequestContext, Any]
READ: list[type[BasePermission]] = [PassportRequired]
WRITE: list[type[BasePermission]] = [PassportRequired, CanWrite]
SEARCH: list[type[BasePermission]] = [PassportRequired, CanSearch]


def _not_found() -> GraphQLError:
    # One answer for "absent" and "hidden": the difference would itself leak.
    return GraphQLError("no such node", extensions={"code": "NOT_FOUND"})


@strawberry.type
class OrgQuery:
    @strawberry.field(
        permission_classes=READ, description="Why: the answer envelope, response and audit meta."
    )
    async def ask(
        self,
        info: Ctx,
        anchor_id: strawberry.ID,
        intent: str = "why_decision",
        mode: AskMode = AskMode.ASK,
        token_budget: int | None = None,
    ) -> AskPayload:
        caller = caller_of(info)
        budget = Budget() if token_budget is None else Budget(context_window=max(token_budget, 0) + 448)
        try:
            result = await info.context.services.asker.ask(caller, str(anchor_id), intent, mode.value, budget)
        except AnchorNotVisible:
            raise _not_found() from None
        return AskPayload(
            envelope=envelope_of(result.envelope),
            response=cast(JSON, result.response),
            meta=cast(JSON, result.meta),
            evidence=[Node.of(n) for n in result.evidence],
        )

    @strawberry.field(
        permission_classes=READ, description="One node, masked for the caller; null if not visible."
    )
    async def node(self, info: Ctx, id: strawberry.ID) -> Node | None:
        caller = caller_of(info)
        try:
            cs, _ = await preselect(info.context.services.driver, caller.scope, str(id), hops=0)
        except AnchorNotVisible:
            return None
        return Node.of(cs.anchor)

    @strawberry.field(permission_classes=READ, description="The k-hop neighbourhood the caller may walk.")
    async def neighbourhood(self, info: Ctx, id: strawberry.ID, hops: int = 1) -> Neighbourhood:
        caller = caller_of(info)
        try:
            cs, _ = await preselect(info.context.services.driver, caller.scope, str(id), hops=max(0, hops))
        except AnchorNotVisible:
            raise _not_found() from None
        return Neighbourhood(
            anchor=Node.of(cs.anchor),
            nodes=[Node.of(n) for n in cs.nodes],
            edges=[Edge.of(e) for e in cs.edges],
        )

    @strawberry.field(
        permission_classes=SEARCH,
        description="Decisions and events nearest a text, among those the caller may see.",
    )
    async def search(
        self, info: Ctx, query: str, k: int = 10, labels: list[str] | None = None, threshold: float = 0.3
    ) -> SearchPayload:
        caller = caller_of(info)
        if not query.strip() or not 1 <= k <= 100:
            raise GraphQLError(
                "query must be non-empty and k in 1..100", extensions={"code": "INVALID_INPUT"}
            )
        vector = (await get_embedder().aembed([query]))[0]
        result = await search_org(
            info.context.services.driver,
            caller.scope,
            [float(x) for x in vector],
            k=k,
            threshold=threshold,
            labels=tuple(labels) if labels else SEARCHABLE_LABELS,
        )
        return SearchPayload(
            total=result.total, hits=[SearchHitView(node=Node.of(h.node), score=h.score) for h in result.hits]
        )

    @strawberry.field(
        permission_classes=READ,
        description="The caller's own meta of an earlier ask (same user, role and policy); null otherwise.",
    )
    def trace(self, info: Ctx, request_id: strawberry.ID) -> JSON | None:
        caller = caller_of(info)
        try:
            meta: JSON = bundles.read_trace_file(
                info.context.services.trace_root, caller, str(request_id), "_meta.json"
            )
        except OSError:  # a malformed, foreign or missing id: all answer alike
            return None
        return meta


@strawberry.type
class OrgMutation:
    @strawberry.mutation(
        permission_classes=WRITE,
        description="Upsert decisions, events, transitions and alias overlays (same validation as fixtures).",
    )
    async def ingest_org_memory(self, info: Ctx, payload: JSON) -> IngestSummary:

        driver = info.context.services.sync_driver

        def work() -> Any:
            return ingest_payload(driver, payload)

        try:
            report = await anyio.to_thread.run_sync(work)
        except FixtureError as exc:
            raise GraphQLError(
                str(exc), extensions={"code": "INVALID_INPUT", "problems": [str(p) for p in exc.problems]}
            ) from None
        return IngestSummary(
            decisions=report.decisions,
            events=report.events,
            causal_edges=report.causal_edges,
            aliases=report.aliases,
        )


class RoleGatedIntrospection(SchemaExtension):
    """Introspection only for roles whose profile allows it (and never without a passport)."""

    def on_operation(self) -> Iterator[None]:
        ctx = self.execution_context.context
        caller = getattr(ctx, "caller", None)
        if caller is None or not caller.profile.can_introspect:
            self.execution_context.validation_rules = (
                *self.execution_context.validation_rules,
                NoSchemaIntrospectionCustomRule,
            )
        yield


def _should_mask(error: GraphQLError) -> bool:
    """Hide internal exception text; errors we raise on purpose carry a stable code."""
    return not (error.extensions and "code" in error.extensions) and error.original_error is not None


class MaskErrorsReportOutage(MaskErrors):
    """Masked errors, except that a lost Neo4j connection says so: a caller (or its retry
    logic) can tell "try again shortly" from a bug. The text is constant; nothing about the
    query, the server or its address reaches the caller."""

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        if not isinstance(error.original_error, ServiceUnavailable | SessionExpired):
            return super().anonymise_error(error)
        return GraphQLError(
            message="the knowledge graph is unavailable right now; retry shortly",
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            extensions={"code": "GRAPH_UNAVAILABLE"},
        )


# Each capability contributes its own Query / Mutation part (one module per capability).
QUERY_PARTS: tuple[type, ...] = (OrgQuery, CorrespondenceQuery, DossierQuery, FactorQuery)
MUTATION_PARTS: tuple[type, ...] = (OrgMutation, CorrespondenceMutation, DossierMutation, FactorMutation)
Query = merge_types("Query", QUERY_PARTS)
Mutation = merge_types("Mutation", MUTATION_PARTS)


class CairnSchema(strawberry.Schema):
    """A refusal raised on purpose (it carries a code: NOT_FOUND, a passport refusal, ...) is
    an ordinary answer and is logged as one structured line; only errors without a code
    (bugs, outages) keep strawberry's log with the traceback."""

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        for error in errors:
            code = (error.extensions or {}).get("code")
            if code is None:
                StrawberryLogger.error(error, execution_context)
                continue
            # Looked up per call, so the logging configuration in force applies.
            structlog.get_logger("cairn.graphql").info(
                "refused", code=code, path=[str(p) for p in error.path or ()], message=error.message
            )


schema = CairnSchema(
    query=Query,
    mutation=Mutation,
    config=StrawberryConfig(disable_field_suggestions=True),
    extensions=[
        lambda: QueryDepthLimiter(max_depth=10),
        lambda: MaxAliasesLimiter(max_alias_count=15),
        lambda: MaxTokensLimiter(max_token_count=2000),
        RoleGatedIntrospection,
        lambda: MaskErrorsReportOutage(should_mask_error=_should_mask),
    ],
)
