"""The web UI and the Neo4j Browser files, end to end, in Debian's headless Chromium.

Playwright drives the system Chromium (no browser download). The service runs under
uvicorn in a thread on a free loopback port with the test settings, against the test
Neo4j loaded with the Acme org memory, the demo dossiers and the demo factors. Expected
values come from the GraphQL API with the same role's passport, so the UI is checked
against what the server says the role may see, not against numbers copied into the test.
Screenshots land in tests/artifacts/ for a person to look at.

Browser tests skip (with the reason) when /usr/bin/chromium is absent; the checks of
neo4j/browser/ files that need no browser always run.
"""

from __future__ import annotations

import contextlib
import io
import re
import socket
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from neo4j import Driver
from playwright.sync_api import Browser, ConsoleMessage, Page, Response, ViewportSize, expect, sync_playwright

from cairn.app import create_app
from cairn.ingest.factors import DEMO_DIR as FACTORS_DEMO
from cairn.ingest.factors import ingest_factor_dir
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.memory.dossiers.demo import load_demo_dossiers
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.database import connection
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import REPO_ROOT, Settings
from cairn.schema import nodes
from cairn.schema.catalog import Rel
from tests.e2e.conftest import ACME, wipe

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).parents[1] / "artifacts"
BROWSER_FILES = REPO_ROOT / "neo4j" / "browser"
WIDE: ViewportSize = {"width": 1280, "height": 800}
NARROW: ViewportSize = {"width": 390, "height": 844}

PRODUCT_DECISION = "acme-prod-sunset-onprem-connectors-2024"
PRODUCT_TITLE = "Sunset the on-prem connectors"
CORPORATE_DECISION = "acme-corp-unify-cloud-platform-2022"  # director/exec only
PERMISSIONS_NOTE = "Note: Some evidence was withheld due to your permissions."

HOOD = """query($id: ID!, $hops: Int!) {
  neighbourhood(id: $id, hops: $hops) { anchor { id } nodes { id } edges { source target type } }
}"""
ASK_META = "query($id: ID!) { ask(anchorId: $id) { meta } }"
DOSSIER_SEARCH = "query($q: String!) { dossierSearch(query: $q, topK: 10) { dossiers { id title } } }"
DOSSIER = "query($id: ID!) { dossier(id: $id) { facts { id } history { id } } }"
MEMORY_SEARCH = "query($q: String!) { memorySearch(query: $q, k: 10) { hits { factId text dossierId } } }"
FACTOR = """query($id: ID!, $asOf: DateTime) {
  factor(id: $id, asOf: $asOf) { value }
  journal(factorId: $id, limit: 100) { id newValue }
}"""
WHY_BLOCKED = "query($id: ID!) { whyBlocked(id: $id) { status blockers { factor { id } } } }"
WHAT_IF = "query($id: ID!, $v: Float!) { whatIf(factorId: $id, value: $v) { unblocked { id } } }"


class LiveService:
    """The Cairn app under uvicorn in a daemon thread, on a socket bound here to a free port."""

    def __init__(self, settings: Settings) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        config = uvicorn.Config(
            create_app(settings), log_level="warning", access_log=False, timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="cairn-ui-test", daemon=True
        )

    def __enter__(self) -> LiveService:
        self._thread.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not self._thread.is_alive():
                raise RuntimeError("the service exited during startup")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/ready", timeout=2).status_code == 200:
                    return self
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"the service did not become ready at {self.url}")

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


@pytest.fixture(scope="module")
def demo_graph(driver: Driver, embedder: Embedder) -> Driver:
    wipe(driver)
    ingest_fixture_dir(driver, ACME)
    load_demo_dossiers(driver, embedder)  # also warms the embedder the server's search uses
    ingest_factor_dir(driver, FACTORS_DEMO, embedder=embedder)  # what load_demo_factors loads
    return driver


@pytest.fixture(scope="module")
def service(
    demo_graph: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    local = settings.model_copy(
        update={"host": "127.0.0.1", "passport_secret": None, "trace_dir": tmp_path_factory.mktemp("traces")}
    )
    with LiveService(local) as live:
        yield live.url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's Chromium is not installed at /usr/bin/chromium (apt-get install chromium)")
    ARTIFACTS.mkdir(exist_ok=True)
    # Assertions wait up to 20 s (Playwright's default is 5 s): on a loaded 2-core machine the
    # Neo4j Browser took longer than 5 s to show its prompt after connecting.
    expect.set_options(timeout=20_000)
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


OpenPage = Callable[..., Page]


@pytest.fixture
def open_page(browser: Browser, service: str) -> Iterator[OpenPage]:
    """open_page(viewport=WIDE) -> a fresh page (own storage) on the UI.

    Fails the test on any uncaught script error, console error, or UI asset that did not
    load. Refusals from the API (403, 404) are the behaviour under test, not errors.
    """
    contexts = []
    errors: list[str] = []

    def console(msg: ConsoleMessage) -> None:
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            errors.append(msg.text)

    def asset(response: Response) -> None:
        if "/ui/" in response.url and response.status >= 400:
            errors.append(f"{response.status} {response.url}")

    def opener(viewport: ViewportSize = WIDE, base: str = service) -> Page:
        context = browser.new_context(viewport=viewport, accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", console)
        page.on("response", asset)
        page.goto(f"{base}/ui/")
        return page

    yield opener
    for context in contexts:
        context.close()
    assert not errors, f"errors in the page: {errors}"


def api(service: str, registry: PolicyRegistry, role: str, query: str, **variables: Any) -> dict[str, Any]:
    resp = httpx.post(
        f"{service}/graphql",
        json={"query": query, "variables": variables},
        headers=headers_for(registry, role),
        timeout=30,
    )
    body: dict[str, Any] = resp.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def use_role(page: Page, role: str) -> None:
    expect(page.locator("#passport-status[data-role]")).not_to_have_attribute("data-role", "")
    page.get_by_label("Role").select_option(role)
    expect(page.locator("#passport-status")).to_have_attribute("data-role", role)


def show(page: Page, route: str) -> None:
    """Go to a UI route (e.g. "#/graph?id=…") in the already loaded app."""
    page.goto(page.url.split("#")[0] + route)


def shoot(page: Page, name: str) -> Path:
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def hidden_neighbours(service: str, registry: PolicyRegistry, role: str, anchor: str) -> set[str]:
    """Ids next to the anchor that an exec may walk to and `role` may not: they must never show."""

    def ids(r: str) -> set[str]:
        hood = api(service, registry, r, HOOD, id=anchor, hops=1)["neighbourhood"]
        return {n["id"] for n in hood["nodes"]}

    return ids("exec") - ids(role)


# --- Ask --------------------------------------------------------------------------------


def test_staff_sees_permissions_note_and_refused_full_bundle(
    open_page: OpenPage, service: str, registry: PolicyRegistry
) -> None:
    page = open_page()
    expect(page.locator("#passport-status")).to_have_attribute("data-role", "staff")
    expect(page.get_by_label("Role")).to_have_value("staff")
    page.get_by_label("Search decisions").fill("sunset on-prem connectors")
    page.get_by_role("button", name="Search").click()
    page.locator(f'button.hit[data-id="{PRODUCT_DECISION}"]').click()

    card = page.locator(".answer-card")
    expect(card.locator("h2")).to_contain_text(PRODUCT_TITLE)
    expect(card.locator(".permissions-note")).to_have_text(PERMISSIONS_NOTE)
    full = page.locator('li.download[data-bundle="bundle_full"]')
    expect(full.get_by_role("button")).to_be_disabled()
    expect(full.locator(".refusal")).to_contain_text("policy:bundle_full_not_permitted")
    expect(page.locator('li.download[data-bundle="bundle_view"]').get_by_role("button")).to_be_enabled()

    page.get_by_role("button", name="Audit").click()
    drawer = page.locator("#audit-drawer")
    expect(drawer).to_be_visible()
    expected = api(service, registry, "staff", ASK_META, id=PRODUCT_DECISION)["ask"]["meta"]
    hidden = expected["policy_trace"]["counts"]["hidden_vertices"]
    assert hidden > 0
    expect(drawer.locator('[data-count="hidden-vertices"] strong')).to_have_text(str(hidden))
    for reason in set(expected["policy_trace"]["reasons_by_id"].values()):
        expect(drawer.locator(".withheld-reasons")).to_contain_text(reason)
    payload_excluded = expected["evidence_sets"]["payload_excluded_ids"]
    expect(drawer.locator(".payload-exclusions tbody tr")).to_have_count(len(payload_excluded))
    for edge_type in expected["policy_trace"]["edge_types_used"]:
        expect(drawer.locator(".chip", has_text=edge_type).first).to_be_visible()
    expect(drawer.locator(".scores li")).to_have_count(len(expected["selection_metrics"]["scores"]))
    expect(drawer.locator(".bars li", has_text="preselector")).to_be_visible()

    withheld = hidden_neighbours(service, registry, "staff", PRODUCT_DECISION)
    assert withheld, "the anchor needs a neighbour staff may not see"
    html = page.content()
    assert not [i for i in withheld if i in html], "a withheld id reached the page"
    shoot(page, "ask-staff-1280x800")


def test_staff_downloads_bundle_view_without_audit_files(open_page: OpenPage) -> None:
    page = open_page()
    show(page, f"#/ask?anchor={PRODUCT_DECISION}")
    view = page.locator('li.download[data-bundle="bundle_view"]')
    with page.expect_download() as info:
        view.get_by_role("button").click()
    names = zipfile.ZipFile(io.BytesIO(Path(info.value.path()).read_bytes())).namelist()
    assert "_meta.json" in names and "envelope.json" in names
    assert "_meta_audit.json" not in names and "evidence_pre.json" not in names
    expect(view.locator(".download-status")).to_contain_text("bundle_view.zip")


def test_director_sees_no_note_and_downloads_full_bundle(open_page: OpenPage) -> None:
    page = open_page()
    use_role(page, "director")
    show(page, f"#/ask?anchor={PRODUCT_DECISION}")
    card = page.locator(".answer-card")
    expect(card.locator("h2")).to_contain_text(PRODUCT_TITLE)
    expect(card.locator(".chip-role")).to_contain_text("director")
    expect(card.locator(".no-withheld")).to_be_visible()
    expect(card.locator(".permissions-note")).to_have_count(0)

    full = page.locator('li.download[data-bundle="bundle_full"]')
    button = full.get_by_role("button")
    expect(button).to_be_enabled()
    with page.expect_download() as info:
        button.click()
    download = info.value
    request_id = card.get_attribute("data-request-id")
    assert request_id and download.suggested_filename == f"{request_id}-bundle_full.zip"
    names = zipfile.ZipFile(io.BytesIO(Path(download.path()).read_bytes())).namelist()
    assert {"_meta.json", "_meta_audit.json", "evidence_pre.json", "evidence_post.json"} <= set(names)
    expect(full.locator(".download-status")).to_contain_text("bundle_full.zip")
    page.get_by_role("button", name="Audit").click()
    expect(page.locator('#audit-drawer [data-count="hidden-vertices"] strong')).to_have_text("0")
    shoot(page, "ask-director-1280x800")


ASK_CAUSES = "query($id: ID!) { ask(anchorId: $id) { envelope { text causes moreCauses } } }"
OIDC_DECISION = "acme-prod-oidc-replaces-saml-2024"


@pytest.mark.parametrize("role", ["staff", "director"])
def test_answer_card_lists_causes_with_relations_and_links_that_re_anchor(
    open_page: OpenPage, service: str, registry: PolicyRegistry, role: str
) -> None:
    envelope = api(service, registry, role, ASK_CAUSES, id=OIDC_DECISION)["ask"]["envelope"]
    causes = envelope["causes"]
    assert len(causes) >= 4 and envelope["moreCauses"] == 0
    page = open_page()
    use_role(page, role)
    show(page, f"#/ask?anchor={OIDC_DECISION}")
    items = page.locator(".answer-card .cause-list li.cause")
    expect(items).to_have_count(len(causes))
    for i, cause in enumerate(causes):
        item = items.nth(i)
        expect(item).to_have_attribute("data-id", cause["id"])
        expect(item.locator(".chip-relation")).to_have_text(cause["words"])
        expect(item.locator("a.cause-link")).to_have_text(cause["title"])
    withheld = hidden_neighbours(service, registry, role, OIDC_DECISION)
    assert (role == "staff") == bool(withheld)
    html = page.content()
    assert not [i for i in withheld if i in html], "a withheld id reached the page"
    shoot(page, f"ask-causes-{role}-1280x800")

    first = causes[0]
    items.first.locator("a.cause-link").click()
    expect(page).to_have_url(re.compile(rf"#/ask\?anchor={re.escape(first['id'])}"))
    expect(page.locator(".answer-card h2")).to_contain_text(first["title"])


# --- Graph ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["staff", "director"])
def test_graph_renders_the_neighbourhood_the_role_may_see(
    open_page: OpenPage, service: str, registry: PolicyRegistry, role: str
) -> None:
    hood = api(service, registry, role, HOOD, id=PRODUCT_DECISION, hops=2)["neighbourhood"]
    nodes_expected, edges_expected = 1 + len(hood["nodes"]), len(hood["edges"])
    page = open_page()
    use_role(page, role)
    show(page, f"#/graph?id={PRODUCT_DECISION}&hops=2")
    canvas = page.locator("#graph-canvas[data-node-count]")
    expect(canvas).to_have_attribute("data-node-count", str(nodes_expected))
    expect(canvas).to_have_attribute("data-edge-count", str(edges_expected))
    expect(canvas.locator("canvas").first).to_be_attached()  # Cytoscape drew
    expect(page.locator(".node-table tbody tr")).to_have_count(nodes_expected)
    for hidden in hidden_neighbours(service, registry, role, PRODUCT_DECISION):
        expect(page.locator(f'.node-table tr[data-id="{hidden}"]')).to_have_count(0)
    shoot(page, f"graph-{role}-1280x800")


def test_graph_counts_differ_by_role(service: str, registry: PolicyRegistry) -> None:
    """Guards the test above: the two roles must see different neighbourhoods for it to mean much."""
    counts = {
        role: len(api(service, registry, role, HOOD, id=PRODUCT_DECISION, hops=2)["neighbourhood"]["nodes"])
        for role in ("staff", "director")
    }
    assert counts["staff"] < counts["director"], counts


def test_clicking_a_graph_node_re_anchors(
    open_page: OpenPage, service: str, registry: PolicyRegistry
) -> None:
    page = open_page()
    show(page, f"#/graph?id={PRODUCT_DECISION}&hops=1")
    expect(page.locator("#graph-canvas[data-node-count]")).to_be_visible()
    hood = api(service, registry, "staff", HOOD, id=PRODUCT_DECISION, hops=1)["neighbourhood"]
    target = hood["nodes"][0]["id"]
    # Where Cytoscape drew the node, in page coordinates (its instance hangs off the container).
    point = page.evaluate(
        """(id) => {
          const el = document.getElementById('graph-canvas');
          const pos = el._cyreg.cy.getElementById(id).renderedPosition();
          const box = el.getBoundingClientRect();
          return {x: box.left + pos.x, y: box.top + pos.y};
        }""",
        target,
    )
    page.mouse.click(point["x"], point["y"])
    expect(page).to_have_url(f"{service}/ui/#/graph?id={target}&hops=1")
    expect(page.locator(f'.node-table tr.is-anchor[data-id="{target}"]')).to_have_count(1)


def test_keyboard_skip_link_and_re_anchor_without_a_mouse(open_page: OpenPage) -> None:
    page = open_page()
    show(page, f"#/graph?id={PRODUCT_DECISION}&hops=1")
    expect(page.locator("#graph-canvas[data-node-count]")).to_be_visible()
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    assert page.url.endswith(f"#/graph?id={PRODUCT_DECISION}&hops=1")  # the route survived
    row = page.locator(".node-table tbody tr:not(.is-anchor)").first
    target = row.get_attribute("data-id")
    row.get_by_role("button").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f'.node-table tr.is-anchor[data-id="{target}"]')).to_have_count(1)


# --- Dossiers and factors ---------------------------------------------------------------


def test_dossier_search_and_page(open_page: OpenPage, service: str, registry: PolicyRegistry) -> None:
    found = api(service, registry, "staff", DOSSIER_SEARCH, q="vegetarian diet")["dossierSearch"]["dossiers"]
    assert found, "the demo dossiers should include a diet dossier"
    first = found[0]
    expected = api(service, registry, "staff", DOSSIER, id=first["id"])["dossier"]
    page = open_page()
    page.get_by_role("link", name="Dossiers").click()
    page.get_by_label("Search dossiers").fill("vegetarian diet")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".dossier-card")).to_have_count(len(found))
    page.locator(f'.dossier-card[data-id="{first["id"]}"] a').click()
    expect(page.locator("#dossier-h")).to_have_text(first["title"])
    expect(page.locator(".facts-table tbody tr")).to_have_count(len(expected["facts"]))
    expect(page.locator(".timeline > li")).to_have_count(len(expected["history"]))
    shoot(page, "dossier-staff-1280x800")


def test_dossier_question_lists_facts_under_their_dossiers(
    open_page: OpenPage, service: str, registry: PolicyRegistry
) -> None:
    question = "What does the user eat?"
    hits = api(service, registry, "staff", MEMORY_SEARCH, q=question)["memorySearch"]["hits"]
    assert hits, "the demo dossiers should hold facts about the user's diet"
    page = open_page()
    page.get_by_role("link", name="Dossiers").click()
    page.get_by_label("Question").fill(question)
    page.get_by_role("button", name="Ask").click()
    groups = page.locator(".memory-group")
    expect(groups).to_have_count(len({h["dossierId"] for h in hits}))
    expect(page.locator(".memory-facts > li")).to_have_count(len(hits))
    first = page.locator(f'.memory-group[data-id="{hits[0]["dossierId"]}"]')
    expect(first.locator(".memory-facts > li").first).to_contain_text(hits[0]["text"])
    expect(page.locator(".memory-answer")).not_to_contain_text("Initech")
    shoot(page, "dossier-ask-staff-1280x800")


def test_factor_page_value_history_as_of_and_what_if(
    open_page: OpenPage, service: str, registry: PolicyRegistry
) -> None:
    now = api(service, registry, "staff", FACTOR, id="data_quality")
    then = api(service, registry, "staff", FACTOR, id="data_quality", asOf="2024-10-16T23:59:59Z")
    assert now["factor"]["value"] != then["factor"]["value"], "the as-of date must fall between two entries"
    page = open_page()
    page.get_by_role("link", name="Factors").click()
    expect(page.locator(".categories tbody tr").first).to_be_visible()
    page.get_by_label("Question").fill("why can't we do predictive maintenance?")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator(".question-result")).to_contain_text("Predictive maintenance")
    page.get_by_label("Open a factor or option by id").fill("data_quality")
    page.get_by_role("button", name="Open").click()

    expect(page.locator("#factor-h")).to_have_text("Data quality")
    expect(page.locator(".big-value")).to_have_text(f"{now['factor']['value']:g}")
    valued = [e for e in now["journal"] if e["newValue"] is not None]
    expect(page.locator(".history-chart circle.dot")).to_have_count(len(valued))
    expect(page.locator(".timeline > li")).to_have_count(len(now["journal"]))
    shoot(page, "factor-staff-1280x800")

    page.get_by_label("Value as of").fill("2024-10-16")
    page.get_by_role("button", name="Show").click()
    expect(page.locator(".big-value")).to_have_text(f"{then['factor']['value']:g}")
    expect(page.locator(".history-chart line.marker")).to_have_count(1)

    what_if = api(service, registry, "staff", WHAT_IF, id="data_infrastructure", v=60)["whatIf"]
    assert what_if["unblocked"]
    show(page, "#/factor?id=data_infrastructure")
    page.get_by_label("If Data infrastructure were").fill("60")
    page.get_by_role("button", name="Try").click()
    links = page.locator(".what-if-result .unblocked a")
    expect(links).to_have_count(len(what_if["unblocked"]))


def test_option_page_lists_its_blockers(open_page: OpenPage, service: str, registry: PolicyRegistry) -> None:
    expected = api(service, registry, "staff", WHY_BLOCKED, id="predictive_maintenance")["whyBlocked"]
    assert expected["status"] == "blocked" and expected["blockers"]
    page = open_page()
    show(page, "#/factor?id=predictive_maintenance")
    expect(page.locator(".blocked-panel .chip", has_text="blocked")).to_be_visible()
    expect(page.locator(".blockers tbody tr")).to_have_count(len(expected["blockers"]))


# --- Narrow screens, empty and error states ---------------------------------------------


def test_narrow_screens_have_no_horizontal_scroll(open_page: OpenPage) -> None:
    page = open_page(NARROW)
    show(page, f"#/ask?anchor={PRODUCT_DECISION}")
    expect(page.locator(".permissions-note")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    shoot(page, "ask-staff-390x844")
    page.get_by_role("button", name="Audit").click()
    expect(page.locator("#audit-drawer")).to_be_visible()
    shoot(page, "audit-staff-390x844")
    page.get_by_role("button", name="Close").click()
    expect(page.locator("#audit-drawer")).to_be_hidden()
    for route, name in (
        (f"#/graph?id={PRODUCT_DECISION}&hops=1", "graph-staff-390x844"),
        ("#/factor?id=data_quality", "factor-staff-390x844"),
    ):
        show(page, route)
        expect(page.locator("#graph-canvas[data-node-count], .history-chart").first).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), route
        shoot(page, name)


def test_absent_and_hidden_anchors_look_the_same(open_page: OpenPage) -> None:
    page = open_page()
    expect(page.locator(".answer .state-empty")).to_contain_text("No anchor yet")
    texts = []
    for anchor in ("acme-no-such-decision", CORPORATE_DECISION):
        show(page, f"#/ask?anchor={anchor}")
        error = page.locator(".answer .state-error")
        expect(error).to_contain_text("Not found")
        texts.append(error.inner_text())
    assert texts[0] == texts[1]
    show(page, f"#/graph?id={CORPORATE_DECISION}")
    expect(page.locator(".graph-stage .state-error")).to_contain_text("Not found")
    show(page, "#/factor?id=no_such_factor")
    expect(page.locator(".factor-page .state-error")).to_contain_text("Not found")


def test_role_without_search_is_told_so(open_page: OpenPage) -> None:
    page = open_page()
    use_role(page, "external")
    page.get_by_label("Search decisions").fill("connectors")
    page.get_by_role("button", name="Search").click()
    expect(page.locator(".hits-region .state-error")).to_contain_text("Search not allowed")


def test_signed_passport_server_explains_there_is_no_dev_passport(
    open_page: OpenPage, demo_graph: Driver, settings: Settings, tmp_path: Path
) -> None:
    signed = settings.model_copy(update={"passport_secret": "s3cret", "trace_dir": tmp_path})
    with LiveService(signed) as live:
        page = open_page(base=live.url)
        expect(page.locator("#banner")).to_contain_text("No passport")
        expect(page.locator("#main .state-error")).to_contain_text("no development passports")


# --- Neo4j Browser: style file and saved queries ----------------------------------------

GRASS_RULE = re.compile(r"([\w.]+)\s*\{([^}]*)\}")


def grass_rules() -> dict[str, dict[str, str]]:
    """selector -> {property: value} (quoted captions blanked, as they may hold braces)."""
    text = re.sub(r"'[^']*'", "''", (BROWSER_FILES / "cairn.grass").read_text())
    return {
        selector: {k.strip(): v.strip() for k, v in (p.split(":", 1) for p in body.split(";") if ":" in p)}
        for selector, body in GRASS_RULE.findall(text)
    }


def saved_queries() -> tuple[dict[str, str], list[str]]:
    """(the :param defaults, the Cypher statements) of cairn-queries.cypher, as Browser splits them."""
    params: dict[str, str] = {}
    statements = []
    for chunk in re.split(r";\s*\n", (BROWSER_FILES / "cairn-queries.cypher").read_text()):
        lines = [ln for ln in chunk.splitlines() if ln.strip() and not ln.lstrip().startswith("//")]
        if not lines:
            continue
        param = re.fullmatch(r":param (\w+) => '([^']*)'", lines[0].strip())
        if param:
            params[param[1]] = param[2]
        else:
            statements.append("\n".join(lines))
    return params, statements


def test_grass_styles_every_label_and_relationship() -> None:
    text = (BROWSER_FILES / "cairn.grass").read_text()
    # Browser's GraSS parser knows no comments: an apostrophe in one would swallow the file.
    assert "/*" not in text and "//" not in text
    selectors = set(re.findall(r"^([\w.]+)\s*\{", text, re.M))
    labels = {
        name
        for name, cls in vars(nodes).items()
        if isinstance(cls, type) and issubclass(cls, nodes.Entity) and cls is not nodes.Entity
    }
    assert {f"node.{label}" for label in labels} <= selectors
    assert {f"relationship.{rel.value}" for rel in Rel} <= selectors
    assert "node.Entity" not in selectors  # it would compete with the telling label
    rules = grass_rules()
    assert set(rules) == selectors
    causal, alias = rules["relationship.CAUSAL_PRECEDES"], rules["relationship.ALIAS_OF"]
    assert causal["color"] != alias["color"] and causal["shaft-width"] != alias["shaft-width"]
    assert all("caption" in rules[f"node.{label}"] for label in labels)


def test_saved_queries_run_and_find_the_demo_data(demo_graph: Driver) -> None:
    params, statements = saved_queries()
    assert {"decision", "corporate", "factor", "dossier"} <= set(params)
    assert len(statements) >= 4
    for statement in statements:
        records, _, _ = demo_graph.execute_query(statement, params)
        assert records, f"no rows for:\n{statement}"
        assert any(v not in (None, [], {}) for v in records[0].values()), statement


def test_neo4j_browser_applies_the_style_and_runs_a_saved_query(
    browser: Browser, demo_graph: Driver, settings: Settings
) -> None:
    """Drops cairn.grass on the real Neo4j Browser and draws the alias query with its colours."""
    if not settings.embedded:
        pytest.skip("Neo4j Browser is checked on the embedded server (NEO4J_URI points elsewhere)")
    base = f"http://127.0.0.1:{settings.http_port}/browser/"
    uri, (user, password) = connection(settings)
    params, statements = saved_queries()
    alias_query = next(s for s in statements if "$corporate" in s and "projection" in s)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(f"{base}?dbms={uri}&preselectAuthMethod=USER_PASS")
        page.locator("[data-testid=boltaddress]").wait_for()
        auth = page.locator("select").nth(1)
        auth.select_option(label="No authentication")
        auth.select_option(label="Username / Password")
        page.locator("[data-testid=username]").fill(user)
        page.locator("[data-testid=password]").fill(password)
        page.get_by_role("button", name="Connect", exact=True).click()
        expect(page.get_by_text("neo4j$").first).to_be_visible()
        page.evaluate(
            """(text) => {
              const data = new DataTransfer();
              data.items.add(new File([text], 'cairn.grass', {type: 'text/plain'}));
              const target = document.getElementById('MAIN_WRAPPER_DOM_ID') || document.body;
              for (const type of ['dragenter', 'dragover', 'drop']) {
                const init = {bubbles: true, cancelable: true, dataTransfer: data};
                target.dispatchEvent(new DragEvent(type, init));
              }
            }""",
            (BROWSER_FILES / "cairn.grass").read_text(),
        )
        expect(page.get_by_text("node.Decision").first).to_be_visible()
        one_line = " ".join(line.strip() for line in alias_query.splitlines())
        literal = one_line.replace("$corporate", f"'{params['corporate']}'")
        page.locator(".monaco-editor").first.click()
        page.keyboard.insert_text(literal)
        page.keyboard.press("Enter")
        rules = grass_rules()
        decision_fill = rules["node.Decision"]["color"].lower()
        alias_colour = rules["relationship.ALIAS_OF"]["color"].lower()
        expect(page.locator(f'svg circle[fill="{decision_fill}" i]').first).to_be_attached()
        alias_edge = f'svg path[fill="{alias_colour}" i], svg path[stroke="{alias_colour}" i]'
        expect(page.locator(alias_edge).first).to_be_attached()
        page.screenshot(path=str(ARTIFACTS / "neo4j-browser-alias-projections.png"))
    finally:
        page.close()
