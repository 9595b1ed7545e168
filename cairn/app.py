"""The ASGI application: GraphQL at /graphql, bundle downloads, health, the web UI.

Everything a caller reads goes through GraphQL resolvers or the bundle route, and both
verify the passport first. The dev passport endpoint exists only on a loopback server
running without a passport secret, and only for requests whose Host (and Origin, if any) is
loopback, where it is a convenience for the UI's role switcher; anywhere else it answers as
a route that does not exist. Without a passport secret every route answers only such
requests (``LoopbackOnly``): the headers are then the whole passport, which any page could
forge.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.message import Message as MimeHeader
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import anyio
from cross_web import AsyncHTTPRequestAdapter, StarletteRequestAdapter
from cross_web import HTTPException as UnreadableRequest
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.http.parse_content_type import parse_content_type

from cairn.errors import CairnError
from cairn.memory import trace as bundles
from cairn.memory.ask import AskService
from cairn.memory.factors.intents import intent_classifier
from cairn.policy.passport import Caller, PassportError, headers_for, secret_problem, verify
from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.context import RequestContext, Services
from cairn.resolvers.schema import MAX_DOCUMENT_CHARS, schema
from cairn.runtime.collector import tuned_collector
from cairn.runtime.database import sync_driver
from cairn.runtime.embedder import get_embedder
from cairn.runtime.http import response_headers
from cairn.runtime.llm import LLMClient
from cairn.runtime.logging import configure_logging
from cairn.runtime.settings import REPO_ROOT, Settings, get_settings
from cairn.runtime.tokens import count_tokens
from cairn.schema.migrate import SCHEMA_VERSION, probe_schema_version
from cairn.schema.unique_json import DuplicateKey, unique_keys

WEB_DIR = REPO_ROOT / "web"
GRAPHIQL_PAGE = WEB_DIR / "graphiql.html"  # GraphiQL from web/vendor: no CDN, so it works offline
READY_TIMEOUT_S = 3.0
# A GraphQL request body larger than this is answered 413 before it is read whole or parsed.
# Generous for the largest legitimate request (a correspondence file synced as `markdown`).
MAX_BODY_BYTES = 4 * 1024 * 1024


class WholeFiles(StaticFiles):
    """The UI's files, always whole: Starlette answers a bad or unsatisfiable ``Range`` itself, in
    plain text (400, 416), outside the one error shape; the files are small, so no range is read.

    Its redirect of the UI's folder named without a slash (``/ui/.``) names the path alone:
    Starlette's is an absolute URL made from the request's ``Host``, which a caller writes (an
    open redirect a shared cache could keep, since these files may be stored)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(name, value) for name, value in scope["headers"] if name not in (b"range", b"if-range")]

        async def send_relative(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [_relative(h) for h in message.get("headers", [])]}
            await send(message)

        await super().__call__({**scope, "headers": headers}, receive, send_relative)


def _relative(header: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """A ``Location`` header as its path and query only."""
    name, value = header
    if name.lower() != b"location":
        return header
    url = urlsplit(value.decode("latin-1"))
    return name, urlunsplit(("", "", url.path, url.query, "")).encode("latin-1")


class SecurityHeaders:
    """Adds SECURITY_HEADERS and a Content-Security-Policy to every HTTP response, and
    ``Cache-Control: no-store`` to every one but the UI's static files."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        added = response_headers(scope["path"])
        replaced = {name for name, _ in added}

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() not in replaced]
                message = {**message, "headers": [*headers, *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class _BodyTooLarge(Exception):
    """Raised inside ``BodyLimit``'s receive once the bytes read pass the limit."""


def error_response(
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
    extensions: dict[str, Any] | None = None,
) -> JSONResponse:
    """The one shape of an HTTP refusal outside a GraphQL result (docs/design.md §Errors): a
    GraphQL error list, ``{"errors": [{"message", "extensions": {"code", ...}}]}``, so a client
    reads a refused bundle, an unknown route or an oversized body as it reads a GraphQL refusal."""
    error = {"message": message, "extensions": {"code": code, **(extensions or {})}}
    return JSONResponse({"errors": [error]}, status_code=status, headers=headers)


def is_json_utf8(content_type: str) -> bool:
    """``application/json`` with no charset or one ``charset=utf-8`` (any case, quoted or not).
    A second ``charset`` (one parser reads the first, another the last) or an RFC 2231
    ``charset*=`` (read as a tuple, not a name) is not UTF-8 JSON."""
    email = MimeHeader()
    email["content-type"] = content_type
    params = email.get_params() or [("", "")]
    charsets = [value for name, value in params[1:] if name.lower().rstrip("*") == "charset"]
    return (
        params[0][0].lower() == "application/json"
        and len(charsets) <= 1
        and all(isinstance(value, str) and value.lower() == "utf-8" for value in charsets)
    )


def refusal_response(status: int, exc: CairnError) -> JSONResponse:
    """A ``CairnError`` on a plain HTTP route: its public message and extensions, as GraphQL
    (``CodedErrors``) shows them."""
    extensions = exc.extensions()
    return error_response(status, extensions.pop("code"), exc.public_message, extensions=extensions)


# Starlette's own refusals (an unknown route, a method a route does not take, a missing static
# file) answer in plain text; here in the error shape, with the code of their status.
HTTP_CODES = {401: "UNAUTHORIZED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "PAYLOAD_TOO_LARGE"}


def http_refusal(status: int, headers: dict[str, str] | None = None) -> JSONResponse:
    code = HTTP_CODES.get(status, "BAD_REQUEST")
    return error_response(status, code, HTTPStatus(status).phrase, headers)


async def on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return http_refusal(exc.status_code, dict(exc.headers or {}))


async def on_exception(request: Request, exc: Exception) -> Response:
    """A bug: logged with its traceback by Starlette's ServerErrorMiddleware, answered without it.
    That middleware sits outside ``SecurityHeaders``, so the answer carries their headers here."""
    headers = {name.decode(): value.decode() for name, value in response_headers(request.url.path)}
    return error_response(500, "INTERNAL_SERVER_ERROR", "Unexpected error.", headers)


class BodyLimit:
    """A request body over ``max_bytes`` is answered 413 with a coded GraphQL error, like every
    other refusal (docs/design.md §HTTP hardening), and is never read whole: a Content-Length
    over the limit is refused before a byte of the body is read, and a body without one (chunked)
    as soon as the bytes read pass the limit. Starlette's own limit answers in plain text."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        lengths = [v for k, v in scope["headers"] if k == b"content-length"]
        if any(not v.strip().isdigit() or int(v) > self.max_bytes for v in lengths):
            return await self._refuse(scope, receive, send)
        read = 0
        started = False

        async def limited() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.max_bytes:
                    raise _BodyTooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, watched)
        except _BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
        # Connection: close, so the server does not read the rest of the body to reuse the connection.
        message = f"the request body is larger than {MAX_BODY_BYTES} bytes"
        response = error_response(413, "PAYLOAD_TOO_LARGE", message, headers={"connection": "close"})
        await response(scope, receive, send)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class AnyTextConvertor(Convertor[str]):
    """A path parameter matching any decoded text, "/" and newlines too (Starlette's ``path``
    stops at a newline), so that every bundle id reaches the handler and gets its answer."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anytext", AnyTextConvertor())

# An authority as a browser sends it in Host, or inside an Origin: a name or an IPv4 address,
# or a bracketed IPv6 address, with an optional port. Nothing else (no user info, no path).
_AUTHORITY = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9.-]+))(?::[0-9]{1,5})?")
_ORIGIN = re.compile(r"https?://(?P<authority>[^/?#]+)")
# Every method, so that no method tells /dev/passport apart from a missing route.
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def is_loopback_authority(value: str, also: frozenset[str] = frozenset()) -> bool:
    """A loopback address (or a name in ``also``, lower-case), with an optional port."""
    match = _AUTHORITY.fullmatch(value)
    if match is None:
        return False
    name = (match["ipv6"] or match["host"]).lower()
    return is_loopback(name) or (match["host"] is not None and name in also)


def is_loopback_request(request: HTTPConnection, also: frozenset[str] = frozenset()) -> bool:
    """Host, and Origin when sent, name a loopback address: a page that rebinds its own DNS
    name to 127.0.0.1 still sends its own name, so it is told the route does not exist.
    ``also``: host names accepted besides loopback addresses (Settings.allowed_hosts)."""
    host = request.headers.getlist("host")
    if len(host) != 1 or not is_loopback_authority(host[0], also):
        return False
    origins = request.headers.getlist("origin")
    if not origins:
        return True
    match = _ORIGIN.fullmatch(origins[0].lower()) if len(origins) == 1 else None
    return match is not None and is_loopback_authority(match["authority"], also)


class LoopbackOnly:
    """Without a passport secret the server trusts every passport header (README, threat model):
    ``cairn serve`` then binds loopback only, which keeps other machines out, but not a page in
    this machine's browser whose DNS name rebinds to 127.0.0.1. Such a page needs no dev
    passport: it can write the headers of any role itself (the policy key is a hash of the
    public policy file) and read, or write, everything through /graphql. So every route answers
    a request whose Host, or Origin, is not loopback exactly as a route that does not exist
    (docs/design.md §HTTP hardening)."""

    def __init__(self, app: ASGIApp, also: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.also = also

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_loopback_request(HTTPConnection(scope), self.also):
            return await http_refusal(404)(scope, receive, send)
        if scope["type"] == "websocket" and not is_loopback_request(HTTPConnection(scope), self.also):
            return await send({"type": "websocket.close", "code": 1008})
        await self.app(scope, receive, send)


GRAPHQL_RESPONSE = "application/graphql-response+json"


def _quality(accept: str, media_type: str) -> float:
    """The q value ``accept`` gives ``media_type`` (0 when it is not listed; no wildcards)."""
    for part in accept.split(","):
        name, *params = (p.strip() for p in part.split(";"))
        if name.lower() != media_type:
            continue
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    return float(value)
                except ValueError:
                    return 0.0
        return 1.0
    return 0.0


SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(body: object) -> bool:
    if isinstance(body, dict):
        body = {k: body.get(k) for k in ("query", "variables", "operationName", "extensions")}
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class MediaTypeAdapter(StarletteRequestAdapter):
    """The request as strawberry reads it, with its media type in lower case and without
    parameters (``CairnGraphQL.parse_http_body`` checks them on the headers as sent)."""

    @property
    def content_type(self) -> str | None:
        sent = super().content_type
        return None if sent is None else parse_content_type(sent)[0].lower()


class CairnGraphQL(GraphQL[RequestContext, None]):
    """No queries over GET, no multipart: POSTed JSON only (OWASP GraphQL guidance).

    GraphQL over HTTP: a client that prefers ``application/graphql-response+json`` gets it,
    and with it a 400 for a request that was refused before execution (syntax, validation,
    variables), without a ``data`` entry. Others get ``application/json``, always 200.
    """

    request_adapter_class = MediaTypeAdapter

    def __init__(self) -> None:
        super().__init__(schema, allow_queries_via_get=False, multipart_uploads_enabled=False)
        self.services: Services | None = None  # set by the lifespan once Neo4j is connected

    def decode_json(self, data: str | bytes) -> object:
        """strawberry turns only a JSONDecodeError into a 400: bytes that are not UTF-8 (or a
        gzip body, never decoded here) and nesting too deep for the parser's recursion also get
        one, with a code, instead of a bare 500 (docs/design.md §Errors). An object that repeats
        a key, at any depth, is refused too (``cairn.schema.unique_json``; not placed by line, which
        would parse the body a second time, in pure Python), and so is a body that is neither an
        object nor a list.

        The bytes are read as UTF-8 and nothing else (RFC 8259 §8.1): ``json.loads`` of bytes also
        guesses UTF-16 and UTF-32 and skips a byte-order mark, so a body a gateway or WAF reading
        UTF-8 cannot parse (and may let through unchecked) ran here."""
        try:
            body = json.loads(
                data.decode("utf-8") if isinstance(data, bytes) else data, object_pairs_hook=unique_keys
            )
        except DuplicateKey as exc:
            raise UnreadableRequest(
                400, f"the request body repeats the key {exc.shown_key()} in one object"
            ) from exc
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise UnreadableRequest(400, "Unable to parse request body as JSON") from exc
        # JSON may escape a lone UTF-16 surrogate ("\ud800"): not Unicode text, so as a variable it
        # could not be sent to Neo4j and failed as an internal error. Only a body with such an
        # escape is checked, and only the members a request uses (others are ignored, as before).
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        if SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(body):
            raise UnreadableRequest(400, "the request body is not Unicode text (a lone surrogate)")
        # strawberry reads the members of an object (or refuses a list as a batch): any other JSON
        # value (a string, a number, true, null) crashed it as an internal error.
        if not isinstance(body, dict | list):
            raise UnreadableRequest(400, "the request body is not a JSON object")
        return body

    async def parse_http_body(
        self, request: AsyncHTTPRequestAdapter
    ) -> GraphQLRequestData | list[GraphQLRequestData]:
        """strawberry reads a body as JSON when its media type merely *contains* application/json
        (``application/jsonx``, ``text/plain, application/json``), whatever charset it names: a
        gateway that checks only application/json bodies would pass those unchecked. Here a POST
        names one media type, application/json itself, with no charset but UTF-8 (the body is read
        as UTF-8). Media types and charset names are case-insensitive (RFC 9110 §8.3.1):
        ``Application/JSON; Charset=UTF-8`` is JSON too (``MediaTypeAdapter`` hands strawberry,
        which compares case-sensitively, the type in lower case). A document longer than
        ``MAX_DOCUMENT_CHARS`` is refused before it is parsed (its lexer runs on the event loop)."""
        if request.method == "POST":
            sent = cast(Headers, request.headers).getlist("content-type")
            if len(sent) != 1 or not is_json_utf8(sent[0]):
                raise UnreadableRequest(400, "Unsupported content type")
        data = await super().parse_http_body(request)  # one request: a batch is refused there
        query = data.query if isinstance(data, GraphQLRequestData) else None
        if query is not None and len(query) > MAX_DOCUMENT_CHARS:
            raise UnreadableRequest(
                400,
                f"the GraphQL document (query) is longer than {MAX_DOCUMENT_CHARS:,} characters: "
                "send long values as variables",
            )
        return data

    async def render_graphql_ide(self, request: Request) -> Response:
        """strawberry's own page loads GraphiQL from a CDN; ours serves the vendored copy."""
        return HTMLResponse(GRAPHIQL_PAGE.read_text(encoding="utf-8"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Strawberry answers a request it cannot read (not JSON, a form, a GET) in plain text;
        here it is a GraphQL error with a code, like every other refusal."""
        if scope["type"] != "http":
            return await super().__call__(scope, receive, send)
        try:
            response = await self.run(Request(scope, receive))
        except ClientDisconnect:
            return  # gone before its body arrived (or cut off as too slow): nobody to answer
        except UnreadableRequest as exc:
            refused_method = exc.status_code == 405  # PUT, DELETE, OPTIONS, ...: the route takes all
            code = "METHOD_NOT_ALLOWED" if refused_method else "BAD_REQUEST"
            headers = {"allow": "GET, POST"} if refused_method else None
            response = error_response(exc.status_code, code, exc.reason, headers)
        await response(scope, receive, send)

    async def get_context(self, request: Any, response: Any) -> RequestContext:
        services = self.services
        if services is None:
            raise RuntimeError("service not started")
        try:
            caller: Caller | None = verify(
                request.headers, services.registry, services.settings.passport_secret
            )
            refusal = None
        except PassportError as exc:
            caller, refusal = None, exc
        return RequestContext(services=services, caller=caller, refusal=refusal)

    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        sub_response = await super().get_sub_response(request)
        accept = request.headers.get("accept", "")
        wanted = _quality(accept, GRAPHQL_RESPONSE)
        if wanted > 0 and wanted >= _quality(accept, "application/json"):
            sub_response.media_type = GRAPHQL_RESPONSE
        return sub_response

    def create_response(
        self, response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse], sub_response: Response
    ) -> Response:
        if sub_response.media_type != GRAPHQL_RESPONSE or not isinstance(response_data, dict):
            return super().create_response(response_data, sub_response)
        # Refused before execution: no data, and no error belongs to a field (has a path).
        errors = response_data.get("errors") or []
        refused = response_data.get("data") is None and all(
            isinstance(e, dict) and "path" not in e for e in errors
        )
        if refused and errors:
            response_data = cast(GraphQLHTTPResponse, {k: v for k, v in response_data.items() if k != "data"})
        response = super().create_response(response_data, sub_response)
        response.headers["content-type"] = GRAPHQL_RESPONSE
        if refused:
            response.status_code = 400
        return response


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or get_settings()
    if problem := secret_problem(settings.passport_secret, min_chars=1):  # `cairn serve` wants more
        raise ValueError(problem)
    configure_logging()
    registry = PolicyRegistry.load(settings.policy_file)
    state: dict[str, Any] = {}
    graphql = CairnGraphQL()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        driver = sync_driver(settings)
        trace_root = settings.traces
        trace_root.mkdir(parents=True, exist_ok=True)
        services = Services(
            settings=settings,
            driver=driver,
            registry=registry,
            asker=AskService(driver, LLMClient(settings), trace_root),
            trace_root=trace_root,
        )
        # Load the embedding model and tokenizer, embed one query and train the factor question
        # router before serving: otherwise the first search waits ~11 s for the model and the first
        # factor question seconds more for the router. Startup completes (and /ready answers) after.
        embedder = get_embedder()
        await embedder.aembed(["warm-up query"])
        count_tokens("warm-up query")
        await anyio.to_thread.run_sync(intent_classifier, embedder)
        state["services"] = services
        graphql.services = services
        with tuned_collector(settings.gc_young):  # warm: what startup loaded is frozen (runtime/collector.py)
            try:
                yield
            finally:
                await anyio.to_thread.run_sync(bundles.flush)  # every queued trace is written before stop
                driver.close()

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def ready(request: Request) -> Response:
        services: Services | None = state.get("services")
        if services is None:
            return JSONResponse({"ready": False, "reason": "starting"}, status_code=503)
        try:
            # Abandoned, not awaited, past the timeout: a blocked socket cannot be cancelled.
            probe = anyio.to_thread.run_sync(probe_schema_version, services.driver, abandon_on_cancel=True)
            version = await asyncio.wait_for(probe, READY_TIMEOUT_S)
        except TimeoutError:
            return JSONResponse(
                {"ready": False, "reason": f"neo4j: no answer within {READY_TIMEOUT_S:g} s"}, status_code=503
            )
        except Exception as exc:  # any driver failure means not ready; the type is the reason
            return JSONResponse({"ready": False, "reason": f"neo4j: {type(exc).__name__}"}, status_code=503)
        if version != SCHEMA_VERSION:
            return JSONResponse(
                {"ready": False, "reason": f"schema v{version}, code needs v{SCHEMA_VERSION}"},
                status_code=503,
            )
        return JSONResponse({"ready": True, "schema_version": version})

    async def bundle(request: Request) -> Response:
        services: Services = state["services"]
        try:
            caller = verify(request.headers, services.registry, services.settings.passport_secret)
        except PassportError as exc:
            return refusal_response(401, exc)
        name = request.path_params["name"]
        request_id = request.path_params["request_id"]  # decoded, may hold "/": validated in trace
        try:
            data = await anyio.to_thread.run_sync(
                lambda: bundles.bundle_zip(services.trace_root, caller, request_id, name, services.driver)
            )
        except bundles.BundleRefused as exc:
            return refusal_response(403, exc)
        except FileNotFoundError:
            return error_response(404, "NOT_FOUND", "no such trace")
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{request_id}-{name}.zip"'},
        )

    async def dev_passport(request: Request) -> Response:
        if (
            request.method != "GET"
            or settings.passport_secret is not None
            or not is_loopback(settings.host)
            or not is_loopback_request(request)
        ):
            raise HTTPException(status_code=404)  # rendered exactly as a route that does not exist
        role = request.query_params.get("role", "staff")
        try:
            return JSONResponse(headers_for(registry, role))
        except PassportError as exc:
            return refusal_response(400, exc)

    async def index(request: Request) -> Response:
        return RedirectResponse("/ui/")

    routes: list[BaseRoute] = [
        Route("/", index),
        Route("/ui", index),
        Route("/health", health),
        Route("/ready", ready),
        Route("/bundles/{request_id:anytext}/{name}", bundle),
        Route("/dev/passport", dev_passport, methods=HTTP_METHODS),
        # Every method reaches strawberry, which refuses all but GET and POST with a coded 405
        # (Starlette's own 405 is plain text, outside the error contract).
        Route("/graphql", BodyLimit(graphql, MAX_BODY_BYTES), methods=HTTP_METHODS),
    ]
    if WEB_DIR.is_dir():
        routes.append(Mount("/ui", WholeFiles(directory=WEB_DIR, html=True)))
    middleware = [Middleware(SecurityHeaders)]
    if settings.passport_secret is None:  # unsigned passports: this machine's own clients only
        also = frozenset(h.strip().lower() for h in settings.allowed_hosts.split(",") if h.strip())
        middleware.append(Middleware(LoopbackOnly, also=also))
    handlers = {HTTPException: on_http_exception, Exception: on_exception}
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware, exception_handlers=handlers)
    # Starlette redirects "/x/" to a route "/x" (307): "/dev/passport/" then told the route apart
    # from one that does not exist, whose "/x/" is a 404. No route answers a path it does not name.
    app.router.redirect_slashes = False
    return app
