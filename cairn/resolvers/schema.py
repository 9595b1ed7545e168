"""Query and Mutation: thin resolvers over the domain services, every field behind the passport."""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import is_dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

import strawberry
import structlog
from graphql import (
    DirectiveNode,
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLField,
    GraphQLResolveInfo,
    GraphQLSyntaxError,
    ListTypeNode,
    NamedTypeNode,
    NonNullTypeNode,
    NoSchemaIntrospectionCustomRule,
    OperationDefinitionNode,
    ValidationContext,
    ValidationRule,
    VariableDefinitionNode,
    get_named_type,
    get_operation_ast,
    parse,
    print_ast,
    validate,
)
from graphql import ExecutionResult as GraphQLExecutionResult
from neo4j.exceptions import ServiceUnavailable, SessionExpired
from strawberry.extensions import (
    AddValidationRules,
    MaskErrors,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)
from strawberry.scalars import JSON
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema_converter import GraphQLCoreConverter
from strawberry.schema.validation_rules.maybe_null import MaybeNullValidationRule
from strawberry.schema.validation_rules.one_of import OneOfInputValidationRule
from strawberry.tools import merge_types
from strawberry.types import ExecutionContext, Info

from cairn.errors import CairnError, a_name, in_range
from cairn.ingest.org_memory import ingest_payload
from cairn.memory import trace as bundles
from cairn.memory.budget import Budget
from cairn.memory.org_search import SEARCHABLE_LABELS, search_org
from cairn.policy.preselector import AnchorNotVisible, preselect
from cairn.resolvers.context import RequestContext, run_domain
from cairn.resolvers.correspondence import CorrespondenceMutation, CorrespondenceQuery
from cairn.resolvers.dossiers import DossierMutation, DossierQuery
from cairn.resolvers.factors import FactorMutation, FactorQuery
from cairn.resolvers.permissions import READ, SEARCH, WRITE, Ctx, caller_of
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
from cairn.schema.timestamps import storable_problem


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
        budget = (
            Budget()
            if token_budget is None
            else Budget(context_window=in_range("tokenBudget", token_budget, 0) + 448)
        )
        # An anchor that is absent or hidden raises AnchorNotVisible: one NOT_FOUND for both.
        asker = info.context.services.asker
        name = a_name("intent", intent)
        result = await run_domain(lambda: asker.ask(caller, str(anchor_id), name, mode.value, budget))
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
        driver, scope = info.context.services.driver, caller_of(info).scope
        try:
            cs, _ = await run_domain(lambda: preselect(driver, scope, str(id), hops=0))
        except AnchorNotVisible:
            return None
        return Node.of(cs.anchor)

    @strawberry.field(permission_classes=READ, description="The k-hop neighbourhood the caller may walk.")
    async def neighbourhood(self, info: Ctx, id: strawberry.ID, hops: int = 1) -> Neighbourhood:
        driver, scope = info.context.services.driver, caller_of(info).scope
        depth = in_range("hops", hops, 0)
        cs, _ = await run_domain(lambda: preselect(driver, scope, str(id), hops=depth))
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
        in_range("k", k, 1, 100)
        if not query.strip():
            raise GraphQLError("query must be non-empty", extensions={"code": "INVALID_INPUT"})
        driver = info.context.services.driver
        vector = [float(x) for x in (await get_embedder().aembed([query]))[0]]
        chosen = tuple(labels) if labels else SEARCHABLE_LABELS
        result = await run_domain(
            lambda: search_org(driver, caller.scope, vector, k=k, threshold=threshold, labels=chosen)
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
            services = info.context.services
            meta: JSON = bundles.read_trace_file(
                services.trace_root, caller, str(request_id), "_meta.json", services.driver
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
        # Written under the caller's own scope: it creates only what it could read, and a node
        # it cannot read answers exactly like a missing one (cairn.policy.writes).
        driver, writer = info.context.services.driver, caller_of(info).scope
        report = await run_domain(lambda: ingest_payload(driver, payload, writer))
        return IngestSummary(
            decisions=report.decisions,
            events=report.events,
            causal_edges=report.causal_edges,
            aliases=report.aliases,
            nodes_created=report.nodes.created,
            nodes_updated=report.nodes.updated,
            nodes_unchanged=report.nodes_unchanged,
            edges_created=report.edges.created,
            edges_updated=report.edges.updated,
            edges_unchanged=report.edges_unchanged,
            warnings=[str(w) for w in report.warnings],
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


# Every String or ID argument (also inside lists and input objects) is at most this long, so a
# megabyte of text is refused before it is tokenized or embedded. JSON payloads are checked by
# their ingest validators and, like `markdown` (a whole correspondence file), are bounded by the
# request body limit (cairn.app.MAX_BODY_BYTES).
MAX_TEXT_CHARS = 4_000
LONG_TEXT_ARGUMENTS = frozenset({"markdown"})
MAX_DIRECTIVES = 20
MAX_ERRORS = 5


def _bad_input(message: str, **extensions: Any) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "BAD_USER_INPUT", **extensions})


def _too_long(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > MAX_TEXT_CHARS
    if isinstance(value, list | tuple):
        return any(_too_long(v) for v in value)
    if isinstance(value, dict):
        return any(_too_long(v) for v in value.values())
    if is_dataclass(value) and not isinstance(value, type):  # a strawberry input object
        return _too_long(vars(value))
    return False


def _unstorable_moment(value: Any) -> str | None:
    """Why a DateTime argument (or one inside a list or an input object) is no moment the graph
    can take (``cairn.schema.timestamps.storable_problem``: ``0001-01-01T00:00:00+14:00`` leaves
    Python's years, an offset of ``-23:59`` Neo4j's), or None: the Neo4j driver or server failed on
    it with an internal error (and the server closed the connection)."""
    if isinstance(value, datetime):
        return storable_problem(value)
    if isinstance(value, list | tuple):
        return next((why for v in value if (why := _unstorable_moment(v))), None)
    if is_dataclass(value) and not isinstance(value, type):
        return _unstorable_moment(list(vars(value).values()))
    return None


# What Neo4j stores as an integer (a signed 64-bit value). JSON text may spell any integer, and one
# beyond this range inside a JSON argument failed deep in a write (the driver cannot send it, and
# float() of a huge one overflows) as an internal error.
INT64 = range(-(2**63), 2**63)


# How deep a JSON argument may nest (a payload's own shape needs 4 or 5 levels). Deeper ones are
# refused before anything walks them: the request parser reads about 990 levels, more than a
# recursive walk of the value (this check, pydantic, the stored x-extra's encoder) survives.
MAX_JSON_DEPTH = 64


def _unstorable_number(value: Any) -> str | None:
    """Why a JSON argument's value holds a number no answer could carry back, or None; or why it
    nests deeper than ``MAX_JSON_DEPTH``. Walked with a stack, not recursion.

    Python's JSON parser also reads NaN, Infinity and -Infinity, which JSON (RFC 8259) does not
    have: stored inside an x-extra value, every later answer showing it was invalid JSON, which
    a browser's JSON.parse refuses."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                return f"is nested deeper than {MAX_JSON_DEPTH} levels"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in reversed(list(children)))
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int) and item not in INT64:
            return "holds an integer outside the signed 64-bit range"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"holds {json.dumps(item)}, which is not a JSON number"
    return None


def _refused(field: GraphQLField | None, root: Any, info: GraphQLResolveInfo[Any]) -> bool:
    """Whether the field's own permission classes refuse the caller (strawberry checks them only
    inside the resolver, after this extension): a role that may not write is told so, whatever
    its payload holds, and its payload is not walked on the event loop."""
    definition = (field.extensions or {}).get(GraphQLCoreConverter.DEFINITION_BACKREF) if field else None
    permissions = getattr(definition, "permission_classes", None) or ()
    return any(permission().has_permission(root, cast(Any, info)) is False for permission in permissions)


class TextLimit(SchemaExtension):
    """Refuses an over-long text argument before its resolver runs (so before any embedding);
    the token limit counts a string literal or a variable as one token, whatever its size. A JSON
    argument is not capped in length, but may hold no number an answer could not carry back, nor
    nest deeper than ``MAX_JSON_DEPTH``."""

    def resolve(self, _next: Any, root: Any, info: GraphQLResolveInfo[Any], *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            field = info.parent_type.fields.get(info.field_name)  # None for __type and the like
            definitions = field.args if field else {}
            for name, value in kwargs.items():
                definition = definitions.get(name)
                if definition is not None and get_named_type(definition.type).name == "JSON":
                    caller_of(cast(Info[RequestContext, Any], info))  # walked for a passport only
                    if _refused(field, root, info):  # its permissions answer, the payload unwalked
                        break
                    if why := _unstorable_number(value):
                        raise _bad_input(f"argument '{name}' of {info.field_name} {why}", argument=name)
                    continue
                if name in LONG_TEXT_ARGUMENTS:
                    continue
                if _too_long(value):
                    why = f"is longer than {MAX_TEXT_CHARS:,} characters"
                    raise _bad_input(f"argument '{name}' of {info.field_name} {why}", argument=name)
                if why := _unstorable_moment(value):
                    raise _bad_input(f"argument '{name}' of {info.field_name} {why}", argument=name)
        return _next(root, info, *args, **kwargs)


# The most values one variable may hold in lists and input objects, at any depth (JSON variables
# aside): graphql-core coerces every one on the event loop before any resolver runs, so 2 million
# ids in a 4 MiB body held it for 13 s, anonymous. The schema's lists (ids, labels, authors,
# beings) and input objects are short.
MAX_VARIABLE_VALUES = 1_000


def _values_over(value: Any, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` list items and object members in all, nested
    ones counted in; looks at no more than ``limit`` of them."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        if isinstance(item, list | dict):
            seen += len(item)
            if seen > limit:
                return True
            stack.extend(item.values() if isinstance(item, dict) else item)
    return False


class VariableLimit(SchemaExtension):
    """Refuses a variable holding more than ``MAX_VARIABLE_VALUES`` list items and input object
    members before graphql-core coerces it (``BAD_USER_INPUT`` naming the variable). A ``JSON``
    variable is a payload: bounded by the body limit, and walked (``TextLimit``) only once the
    caller's passport is verified."""

    def on_execute(self) -> Iterator[None]:
        ctx = self.execution_context
        document, variables = ctx.graphql_document, ctx.variables
        operation = get_operation_ast(document, ctx.operation_name) if document and variables else None
        for definition in (operation.variable_definitions or ()) if operation else ():
            name, named = definition.variable.name.value, definition.type
            while not isinstance(named, NamedTypeNode):  # [T!]! -> T
                named = cast(ListTypeNode | NonNullTypeNode, named).type
            value = cast(dict[str, Any], variables).get(name)
            if named.name.value != "JSON" and _values_over(value, MAX_VARIABLE_VALUES):
                why = f"Variable '${name}' holds more than {MAX_VARIABLE_VALUES:,} items and members"
                ctx.result = GraphQLExecutionResult(data=None, errors=[_bad_input(why, variable=name)])
                break
        yield


class MaxDirectivesRule(ValidationRule):
    """One error for a pile of directives, instead of one per (unknown or repeated) directive."""

    def __init__(self, context: ValidationContext) -> None:
        super().__init__(context)
        self.count = 0

    def enter_directive(self, node: DirectiveNode, *_: Any) -> None:
        self.count += 1
        if self.count == MAX_DIRECTIVES + 1:
            self.report_error(
                GraphQLError(
                    f"the document has more than {MAX_DIRECTIVES} directives",
                    node,
                    extensions={"code": "GRAPHQL_VALIDATION_FAILED"},
                )
            )


def _has_code(error: GraphQLError) -> bool:
    return bool(error.extensions and "code" in error.extensions)


def _root_cause(error: GraphQLError) -> BaseException:
    cause: BaseException = error
    while isinstance(cause, GraphQLError) and cause.original_error is not None:
        cause = cause.original_error
    return cause


def _variable(error: GraphQLError) -> VariableDefinitionNode | None:
    return next((n for n in error.nodes or () if isinstance(n, VariableDefinitionNode)), None)


class CodedErrors(MaskErrors):
    """Every error leaves with ``extensions.code`` and no internal text, and there are at most
    MAX_ERRORS of them.

    Errors raised on purpose carry a code: a ``CairnError`` (cairn/errors.py) is mapped here, and
    only here, to its public message and extensions. graphql-core's own refusals (syntax,
    validation, variable and argument coercion) keep their wording — it quotes only the
    document and the caller's own values — and get a code. A wrong-typed variable is
    BAD_USER_INPUT naming the variable; when a scalar's parser raised (a bad DateTime) its
    exception text is replaced, as it may say anything. A lost Neo4j connection says so, so a
    caller can tell "retry shortly" from a bug. Anything else is "Unexpected error."."""

    def __init__(self) -> None:
        super().__init__(should_mask_error=lambda error: not _has_code(error))

    def _process_errors(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        processed = super()._process_errors(errors)
        if len(processed) <= MAX_ERRORS:
            return processed
        more = GraphQLError(
            f"{len(processed) - MAX_ERRORS + 1} more errors not shown",
            extensions={"code": "TOO_MANY_ERRORS"},
        )
        return [*processed[: MAX_ERRORS - 1], more]

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        cause = _root_cause(error)
        variable = _variable(error)
        extensions: dict[str, Any] = {}
        if isinstance(cause, CairnError):
            code, message, extensions = cause.code, cause.public_message, cause.extensions()
        elif isinstance(cause, ServiceUnavailable | SessionExpired):
            code, message = "GRAPH_UNAVAILABLE", "the knowledge graph is unavailable right now; retry shortly"
        elif variable is not None or error.message.startswith("Variable values"):
            code, message = "BAD_USER_INPUT", error.message
            if not isinstance(cause, GraphQLError) and variable is not None:
                message = (
                    f"Variable '${variable.variable.name.value}' has an invalid value "
                    f"for type '{print_ast(variable.type)}'"
                )
        elif isinstance(cause, GraphQLSyntaxError):
            code, message = "GRAPHQL_PARSE_FAILED", error.message
        elif isinstance(cause, GraphQLError):
            code = "GRAPHQL_VALIDATION_FAILED" if error.path is None else "BAD_USER_INPUT"
            message = error.message
        else:
            code, message = "INTERNAL_SERVER_ERROR", self.error_message
        return GraphQLError(
            message,
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            extensions={"code": code, **extensions},
        )


# Each capability contributes its own Query / Mutation part (one module per capability).
QUERY_PARTS: tuple[type, ...] = (OrgQuery, CorrespondenceQuery, DossierQuery, FactorQuery)
MUTATION_PARTS: tuple[type, ...] = (OrgMutation, CorrespondenceMutation, DossierMutation, FactorMutation)
Query = merge_types("Query", QUERY_PARTS)
Mutation = merge_types("Mutation", MUTATION_PARTS)


class CairnSchema(strawberry.Schema):
    """A refusal is an ordinary answer, logged as one structured line without a traceback:
    raised on purpose (it carries a code: NOT_FOUND, a passport refusal, ...) or graphql-core's
    own refusal of the request (no exception behind it). Anything else is a bug or an outage
    and keeps strawberry's traceback log. Variable coercion suggests nothing either (an enum
    value or input field a variable misspelt), as in validation (_validate_document)."""

    def _get_custom_context_kwargs(
        self, operation_extensions: dict[str, Any] | None = None, *, sync: bool = False
    ) -> dict[str, Any]:
        kwargs = super()._get_custom_context_kwargs(operation_extensions, sync=sync)
        return {**kwargs, "hide_suggestions": True}

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        unexpected = []
        for error in errors:
            cause = _root_cause(error)
            if _has_code(error) or isinstance(cause, GraphQLError | CairnError):
                fallback = cause.code if isinstance(cause, CairnError) else "GRAPHQL_REFUSED"
                code = (error.extensions or {}).get("code", fallback)
                # Looked up per call, so the logging configuration in force applies.
                structlog.get_logger("cairn.graphql").info(
                    "refused", code=code, path=[str(p) for p in error.path or ()], message=error.message
                )
            else:
                unexpected.append(error)
        super().process_errors(unexpected, execution_context)


# The document limits' rule classes, made once: strawberry's QueryDepthLimiter and
# MaxAliasesLimiter make a new class per instance, and the extensions are instantiated per
# request, so no two requests would validate with the same rules and nothing could be cached.
# Depth and aliases are counted by strawberry's rules over the document as executed, every fragment
# spread replaced by its fragment, walked recursively and without memory (see _expansion).
FRAGMENT_WALKING_RULES = (
    *QueryDepthLimiter(max_depth=10).validation_rules,
    *MaxAliasesLimiter(max_alias_count=15).validation_rules,
)
LIMIT_RULES = (*FRAGMENT_WALKING_RULES, MaxDirectivesRule)
# A document spelled out (every spread replaced by its fragment) holds at most this many selections,
# and no chain of fragments spreading fragments is longer than MAX_FRAGMENT_CHAIN.
MAX_EXPANDED_SELECTIONS = 10_000
MAX_FRAGMENT_CHAIN = 32
# Fields one selection set may select under one response name, its fragments' included: graphql-core
# compares every pair of them (OverlappingFieldsCanBeMergedRule), so 250 `node(id: "a") { id }`
# (4 KB, under the token limit, no passport needed) took 0.45 s of CPU on the event loop.
MAX_SAME_NAME = 16
# Distinct documents (not variables) remembered; a client sends the same few documents with
# new variables, so this bounds memory without missing (docs/design.md §Embedding under load).
DOCUMENT_CACHE = 256
# Only a document text this short is remembered. A comment or a string literal costs no token, so
# a document may be as large as the body (4 MiB); with every text remembered, anyone, without a
# passport, pinned about 8.5 MB of server memory per distinct document (256 of them: over 2 GB).
# A client's documents are short, its data travels in variables.
MAX_CACHED_DOCUMENT_CHARS = 32_768
# The longest document text served at all: a comment, whitespace or a string literal costs no
# token, and graphql-core's lexer reads them a character at a time on the event loop (a 4 MiB
# comment took 0.5-0.6 s of CPU to parse, anonymous). Long values belong in variables.
MAX_DOCUMENT_CHARS = 100_000


def _cacheable(query: str | None) -> bool:
    return query is not None and len(query) <= MAX_CACHED_DOCUMENT_CHARS


@lru_cache(maxsize=DOCUMENT_CACHE)
def _parse(query: str, max_tokens: int | None) -> DocumentNode:
    return parse(query, max_tokens=max_tokens)


# strawberry's own rules, which its validate_document adds to every rule set.
STRAWBERRY_RULES = (MaybeNullValidationRule, OneOfInputValidationRule)


def _selections(node: Any) -> tuple[int, list[str]]:
    """The selections a definition holds itself (fields, inline fragments and spreads, nested ones
    too: the limits' walkers visit each) and the names of the fragments it spreads, once per
    spread; walked with a stack, not recursion."""
    count, spreads, stack = 0, [], [node.selection_set]
    while stack:
        selection_set = stack.pop()
        for selection in selection_set.selections if selection_set is not None else ():
            count += 1
            if isinstance(selection, FragmentSpreadNode):
                spreads.append(selection.name.value)
            else:
                stack.append(selection.selection_set)
    return count, spreads


def _expansion(document: DocumentNode) -> tuple[int, int] | None:
    """How many selections the document holds once every fragment spread is replaced by its fragment,
    and its longest chain of fragments spreading fragments; None when a spread names no fragment
    or fragments spread each other in a cycle (graphql-core's own rules refuse those by name).

    strawberry's depth and alias rules walk that expansion recursively, in their constructors,
    with no memory of a fragment already walked: two fragments that each spread the next two, 19
    levels deep (1.5 KB, no passport needed), held the event loop, so the whole server, for 15 s
    (30 levels: hours); a chain of 240 fragments exceeded Python's recursion limit, and a spread of
    an unknown fragment raised KeyError, each answered as an uncoded error. Here each fragment is
    walked once, with a stack, and the sizes are summed (linear in the document)."""
    definitions = document.definitions
    own = {d.name.value: _selections(d) for d in definitions if isinstance(d, FragmentDefinitionNode)}
    sizes: dict[str, tuple[int, int]] = {}  # fragment -> (expanded selections, chain length)
    fields = chain = 0
    for operation in (d for d in definitions if isinstance(d, OperationDefinitionNode)):
        op_fields, op_spreads = _selections(operation)
        stack: list[tuple[str, bool]] = [(name, False) for name in op_spreads]
        walking: set[str] = set()
        while stack:
            name, finished = stack.pop()
            if finished:
                inner, spreads = own[name]
                sub = [sizes[s] for s in spreads]
                sizes[name] = (inner + sum(f for f, _ in sub), 1 + max((c for _, c in sub), default=0))
                walking.discard(name)
            elif name not in sizes:
                if name not in own or name in walking:
                    return None
                walking.add(name)
                stack.append((name, True))
                stack.extend((s, False) for s in own[name][1] if s not in sizes)
        fields += op_fields + sum(sizes[s][0] for s in op_spreads)
        chain = max(chain, *(sizes[s][1] for s in op_spreads), 0)
    return fields, chain


def _most_repeated_name(document: DocumentNode) -> tuple[str, int]:
    """The response name (alias, else field name) selected most often in one selection set, and how
    often, counted as graphql-core's overlap rule merges a set: its fields and inline fragments'
    fields, plus those of every distinct fragment its spreads reach (each fragment once, however
    many paths lead to it). Called only on documents whose fragments are known and acyclic
    (``_expansion``)."""
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}

    def own(selection_set: Any) -> tuple[Counter[str], set[str]]:
        names: Counter[str] = Counter()
        spreads: set[str] = set()
        stack = [selection_set]
        while stack:
            for selection in stack.pop().selections:
                if isinstance(selection, FieldNode):
                    names[(selection.alias or selection.name).value] += 1
                elif isinstance(selection, FragmentSpreadNode):
                    spreads.add(selection.name.value)
                else:  # an inline fragment merges into the set that holds it
                    stack.append(selection.selection_set)
        return names, spreads

    held = {name: own(f.selection_set) for name, f in fragments.items()}

    def merged(selection_set: Any) -> Counter[str]:
        names, spreads = own(selection_set)
        reached, todo = set(), list(spreads)
        while todo:
            name = todo.pop()
            if name not in reached and name in held:  # an unknown one is graphql-core's to name
                reached.add(name)
                todo.extend(held[name][1])
        for name in reached:
            names.update(held[name][0])
        return names

    worst = ("", 0)
    stack = [d.selection_set for d in document.definitions if hasattr(d, "selection_set")]
    while stack:
        selection_set = stack.pop()
        for name, count in merged(selection_set).items():
            worst = max(worst, (name, count), key=lambda w: w[1])
        inner = (f for f in selection_set.selections if not isinstance(f, FragmentSpreadNode))
        stack.extend(f.selection_set for f in inner if f.selection_set is not None)
    return worst


def _validate_document(schema: Any, document: Any, rules: tuple[type[Any], ...]) -> tuple[GraphQLError, ...]:
    expansion = _expansion(document)
    if expansion is None:  # an unknown fragment or a cycle, named by graphql-core's rules
        rules = tuple(r for r in rules if r not in FRAGMENT_WALKING_RULES)
    elif expansion[0] > MAX_EXPANDED_SELECTIONS:
        limit = f"{MAX_EXPANDED_SELECTIONS:,}"
        why = f"the document holds more than {limit} selections once its fragments are spread"
        return (GraphQLError(why, extensions={"code": "GRAPHQL_VALIDATION_FAILED"}),)
    elif expansion[1] > MAX_FRAGMENT_CHAIN:
        why = f"the document chains more than {MAX_FRAGMENT_CHAIN} fragments, each spreading the next"
        return (GraphQLError(why, extensions={"code": "GRAPHQL_VALIDATION_FAILED"}),)
    else:
        name, count = _most_repeated_name(document)
        if count > MAX_SAME_NAME:
            why = (
                f"one selection set selects '{name}' {count} times; at most {MAX_SAME_NAME} may share a name"
            )
            return (GraphQLError(why, extensions={"code": "GRAPHQL_VALIDATION_FAILED"}),)
    # No "Did you mean ...?" in any refusal (unknown argument, type, input field or enum value):
    # suggestions would spell the schema out to a caller refused introspection (docs/design.md
    # §HTTP hardening). strawberry's disable_field_suggestions covers unknown fields only.
    return tuple(validate(schema, document, (*rules, *STRAWBERRY_RULES), hide_suggestions=True))


@lru_cache(maxsize=DOCUMENT_CACHE)
def _validate_text(
    schema: Any, query: str, max_tokens: int | None, rules: tuple[type[Any], ...]
) -> tuple[GraphQLError, ...]:
    """``_validate_document`` of the text's (cached) document, remembered by the text itself: two
    texts whose documents compare equal (graphql-core's nodes compare kinds, names and character
    offsets, not what lies between tokens: a newline or a space) share no entry, so one caller's
    line breaks never give another caller's errors their ``locations``."""
    return _validate_document(schema, _parse(query, max_tokens), rules)


class CachedParse(SchemaExtension):
    """A document text is parsed once (with the token limit in the key). A text that does not
    parse, or is too long to remember, is left to strawberry's own parse, so its refusal is
    answered exactly as before."""

    def on_parse(self) -> Iterator[None]:
        ctx = self.execution_context
        if ctx.query and ctx.graphql_document is None and _cacheable(ctx.query):
            with contextlib.suppress(Exception):  # strawberry's own parse answers it
                ctx.graphql_document = _parse(ctx.query, ctx.parse_options.get("max_tokens"))
        yield


class CachedValidation(SchemaExtension):
    """A document is validated once per rule set: the key holds the whole rule tuple, so a role
    refused introspection (RoleGatedIntrospection adds a rule) never shares an entry with one
    allowed it. Each request gets its own list of the (immutable) errors."""

    def on_validate(self) -> Iterator[None]:
        ctx = self.execution_context
        if ctx.graphql_document is not None:
            rules = tuple(ctx.validation_rules)
            if ctx.query is not None and _cacheable(ctx.query):  # the document is _parse's: CachedParse
                max_tokens = ctx.parse_options.get("max_tokens")
                errors = _validate_text(ctx.schema._schema, ctx.query, max_tokens, rules)
            else:
                errors = _validate_document(ctx.schema._schema, ctx.graphql_document, rules)
            ctx.pre_execution_errors = list(errors)
            operations = sum(isinstance(d, OperationDefinitionNode) for d in ctx.graphql_document.definitions)
            if not ctx.pre_execution_errors and ctx._provided_operation_name is None and operations > 1:
                # GraphQL spec, GetOperation: several operations and no name is a request error
                # (strawberry would run the first one).
                ctx.pre_execution_errors = [
                    GraphQLError(
                        "operationName is required when the document holds several operations",
                        extensions={"code": "GRAPHQL_VALIDATION_FAILED"},
                    )
                ]
        yield


schema = CairnSchema(
    query=Query,
    mutation=Mutation,
    config=StrawberryConfig(disable_field_suggestions=True),
    extensions=[
        lambda: MaxTokensLimiter(max_token_count=2000),
        CachedParse,
        lambda: AddValidationRules(list(LIMIT_RULES)),
        RoleGatedIntrospection,
        CachedValidation,
        VariableLimit,
        TextLimit,
        CodedErrors,
    ],
)
