"""GraphiQL at /graphql, from the vendored copy, in Debian's headless Chromium with no network.

Every request the page makes to a host other than the service is aborted and recorded, so
the test fails if GraphiQL (or anything it loads) still reaches for a CDN. The header editor
must arrive prefilled with a development passport and a query must run with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from neo4j import Driver
from playwright.sync_api import Route, expect, sync_playwright

from cairn.runtime.settings import Settings
from tests.e2e.conftest import load_acme
from tests.e2e.test_web_ui import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, LiveService

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def service(driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    load_acme(driver)  # the demo org as a fresh load writes it; shared when unchanged
    local = settings.model_copy(
        update={"host": "127.0.0.1", "passport_secret": None, "trace_dir": tmp_path_factory.mktemp("traces")}
    )
    with LiveService(local) as live:
        yield live.url


def test_graphiql_renders_offline_with_a_dev_passport_and_runs_a_query(service: str) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    own_host = urlsplit(service).netloc
    outside: list[str] = []
    errors: list[str] = []

    def only_the_service(route: Route) -> None:
        if urlsplit(route.request.url).netloc == own_host:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.set_default_timeout(30_000)
            page.route("**/*", only_the_service)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{service}/graphql?role=exec")

            headers = page.locator(".graphiql-editor-tool .graphiql-editor").last
            expect(headers).to_contain_text("X-User-Roles")
            expect(headers).to_contain_text("exec")
            page.locator(".graphiql-execute-button").click()
            result = page.locator(".result-window")
            expect(result).to_contain_text('"hits"')
            expect(result).not_to_contain_text('"errors"')
            page.screenshot(path=str(ARTIFACTS / "graphiql.png"))
        finally:
            browser.close()
    assert not outside, f"GraphiQL reached outside the service: {outside}"
    assert not errors, f"errors in the page: {errors}"
