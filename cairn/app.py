"""The ASGI application: GraphQL at /graphql, bundle downloads, health, the web UI.

Everything a caller reads goes through GraphQL resolvers or the bundle route, and both
verify the passport first. The dev passport endpoint exists only on a loopback server
running without a passport secret, where it is a convenience for the UI's role switcher.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from strawberry.asgi import GraphQL

from cairn.memory import trace as bundles
from cairn.memory.ask import AskService
from cairn.policy.passport import Caller, PassportError, headers_for, verify
from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.context import RequestContext, Services
from cairn.resolvers.schema import schema
from cairn.runtime.database import async_driver, sync_driver
from cairn.runtime.embedder import get_embedder
from cairn.runtime.llm import LLMClient
from cairn.runtime.logging import configure_logging
from cairn.runtime.settings import REPO_ROOT, Settings, get_settings
from cairn.runtime.tokens import count_tokens
from cairn.schema.migrate import READ_VERSION, SCHEMA_VERSION

WEB_DIR = REPO_ROOT / "web"
READY_TIMEOUT_S = 3.0


class StartupError(RuntimeError):
    """Neo4j unreachable, wrong password or a schema older than the code: said plainly."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CairnGraphQL(GraphQL[RequestContext, None]):
    """No queries over GET, no multipart: POSTed JSON only (OWASP GraphQL guidance)."""

    def __init__(self) -> None:
        super().__init__(schema, allow_queries_via_get=False, multipart_uploads_enabled=False)
        self.services: Services | None = None  # set by the lifespan once Neo4j is connected

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


async def _stored_schema_version(services: Services) -> int | None:
    """One auto-commit read, never retried: a probe must answer now, not after the driver's
    managed-transaction retries (up to 30 s) against a server that is down."""
    async with services.driver.session() as session:
        result = await session.run(READ_VERSION)
        record = await result.single()
    return int(record["version"]) if record else None


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or get_settings()
    configure_logging()
    registry = PolicyRegistry.load(settings.policy_file)
    state: dict[str, Any] = {}
    graphql = CairnGraphQL()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        driver = async_driver(settings)
        blocking_driver = sync_driver(settings)
        trace_root = settings.traces
        trace_root.mkdir(parents=True, exist_ok=True)
        services = Services(
            settings=settings,
            driver=driver,
            sync_driver=blocking_driver,
            registry=registry,
            asker=AskService(driver, LLMClient(settings), trace_root),
            trace_root=trace_root,
        )
        # Load the embedding model and tokenizer, and embed one query, before serving: otherwise
        # the first search waits ~11 s for them. Startup completes (and /ready answers) after this.
        await get_embedder().aembed(["warm-up query"])
        count_tokens("warm-up query")
        state["services"] = services
        graphql.services = services
        try:
            yield
        finally:
            await driver.close()
            blocking_driver.close()

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def ready(request: Request) -> Response:
        services: Services | None = state.get("services")
        if services is None:
            return JSONResponse({"ready": False, "reason": "starting"}, status_code=503)
        try:
            version = await asyncio.wait_for(_stored_schema_version(services), READY_TIMEOUT_S)
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
            return JSONResponse({"error": str(exc), "code": exc.code, "header": exc.header}, status_code=401)
        name = request.path_params["name"]
        request_id = request.path_params["request_id"]
        try:
            data = bundles.bundle_zip(
                services.trace_root, caller.user_id, request_id, name, caller.profile.can_download_full
            )
        except bundles.BundleRefused as exc:
            return JSONResponse({"error": "bundle refused", "reason": exc.reason}, status_code=403)
        except FileNotFoundError:
            return JSONResponse({"error": "no such trace"}, status_code=404)
        return Response(
            data,
            media_type="application/zip",
            headers={"Content-Disposition": f'attachment; filename="{request_id}-{name}.zip"'},
        )

    async def dev_passport(request: Request) -> Response:
        if settings.passport_secret is not None or not is_loopback(settings.host):
            return JSONResponse({"error": "not available"}, status_code=404)
        role = request.query_params.get("role", "staff")
        try:
            return JSONResponse(headers_for(registry, role))
        except PassportError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)

    async def index(request: Request) -> Response:
        return RedirectResponse("/ui/")

    routes: list[BaseRoute] = [
        Route("/", index),
        Route("/health", health),
        Route("/ready", ready),
        Route("/bundles/{request_id}/{name}", bundle),
        Route("/dev/passport", dev_passport),
        Route("/graphql", graphql, methods=["POST", "GET"]),
    ]
    if WEB_DIR.is_dir():
        routes.append(Mount("/ui", StaticFiles(directory=WEB_DIR, html=True)))
    return Starlette(routes=routes, lifespan=lifespan)
