"""`cairn serve` (GraphQL, bundles and the UI) and `cairn passport` (headers to call it with)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
import uvicorn
from neo4j.exceptions import AuthError, ServiceUnavailable

from cairn.app import create_app, is_loopback
from cairn.commands.common import console, fail, old_schema
from cairn.commands.database import neo4j_start
from cairn.ingest.demo import FIXTURES, load_demo
from cairn.policy.passport import DEFAULT_LIFETIME_S, MAX_LIFETIME_S, headers_for, secret_problem
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime import neo4j_server
from cairn.runtime.database import connection, sync_driver
from cairn.runtime.http import DeadlineH11Protocol
from cairn.runtime.malloc import cap_malloc_arenas
from cairn.runtime.settings import Settings, get_settings
from cairn.schema.migrate import SCHEMA_VERSION, schema_version, sections_to_reembed


def check_database(settings: Settings, demo: bool) -> None:
    """Fail early and plainly: unreachable server, wrong password, or an old schema."""
    try:
        with sync_driver(settings) as driver:
            driver.verify_connectivity()
            if demo:
                with console.status("loading the demo data (first run embeds every text)…"):
                    load_demo(driver)
                console.print(f"demo data loaded from {FIXTURES}")
            version = schema_version(driver)
            unembedded = sections_to_reembed(driver) if version == SCHEMA_VERSION else 0
    except AuthError:
        raise fail("Neo4j refused the credentials (check NEO4J_USER / NEO4J_PASSWORD)") from None
    except ServiceUnavailable as exc:
        raise fail(f"Neo4j is not reachable at {connection(settings)[0]}: {exc}") from None
    if version != SCHEMA_VERSION:
        raise fail(old_schema(version))
    if unembedded:
        raise fail(f"{unembedded} correspondence section(s) wait to be re-embedded: run `cairn db migrate`")


def serve(
    demo: Annotated[bool, typer.Option(help="migrate and load the demo data first")] = False,
    host: Annotated[str | None, typer.Option(help="bind address (default CAIRN_HOST)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default CAIRN_PORT)")] = None,
) -> None:
    """Serve GraphQL (and the UI) — starting the embedded Neo4j when needed."""
    settings = get_settings().model_copy(
        update={k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    )
    cap_malloc_arenas(settings.malloc_arenas)  # first, before any thread allocates
    if problem := secret_problem(settings.passport_secret):
        raise fail(problem)
    if settings.passport_secret is None and not is_loopback(settings.host):
        raise fail("refusing to listen on a non-loopback address without CAIRN_PASSPORT_SECRET")
    if settings.embedded and not neo4j_server.status(settings).running:
        neo4j_start()
    check_database(settings, demo)
    console.print(f"Cairn on http://{settings.host}:{settings.port}/  (GraphiQL at /graphql, UI at /ui/)")
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=30,
        log_level="info",
        server_header=False,  # no software banner (docs/design.md §HTTP hardening)
        http=DeadlineH11Protocol,  # a request head or body sent too slowly closes the connection
    )


def passport(
    role: Annotated[str, typer.Option(help="role profile name")] = "staff",
    user: Annotated[str | None, typer.Option(help="X-User-Id (default u-demo-ROLE)")] = None,
    curl: Annotated[bool, typer.Option(help="print as curl -H flags")] = False,
    lifetime: Annotated[
        int, typer.Option(help="seconds a signed passport stays valid", min=1, max=MAX_LIFETIME_S)
    ] = DEFAULT_LIFETIME_S,
) -> None:
    """Print a fresh passport header set for ROLE (signed, issued now and expiring after
    --lifetime seconds, when a secret is configured)."""
    settings = get_settings()
    headers = headers_for(
        PolicyRegistry.load(settings.policy_file), role, settings.passport_secret, user, lifetime_s=lifetime
    )
    if curl:
        print(" ".join(f"-H '{k}: {v}'" for k, v in headers.items()))
    else:
        print(json.dumps(headers, indent=2))
