"""Answer quality on the demo org: every visible cause named, nothing else named as a cause.

``fixtures/acme-expected-causes.yaml`` lists, for each anchor and role, the direct causes the
role may see and the relation each edge carries. Each anchor is asked as each role against the
real Neo4j with the default budget; cause recall (share of the expected causes the answer names,
with their relation, title and key in the text) and precision (share of the named causes that
are expected) must both be 1.0 for every role, and no withheld cause may surface.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app
from cairn.memory.ask import AskResult, AskService
from cairn.memory.templater import relation_words
from cairn.policy.passport import headers_for, verify
from cairn.policy.preselector import AnchorNotVisible
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.llm import LLMClient
from cairn.runtime.settings import Settings
from cairn.schema import unique_yaml
from tests.e2e.conftest import load_acme
from tests.llm_server import running_llm_server

EXPECTED = Path(__file__).resolve().parents[2] / "fixtures" / "acme-expected-causes.yaml"
ROLES = ("staff", "manager", "director", "exec")
ANCHORS: dict[str, dict[str, dict[str, str] | None]] = unique_yaml.load_file(EXPECTED)["anchors"]


@pytest.fixture(scope="module")
def answers(
    driver: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, str], AskResult | None]]:
    """Every anchor asked as every role once (None when the role may not see the anchor)."""
    load_acme(driver)  # the demo org as a fresh load writes it; shared when unchanged
    registry = PolicyRegistry.load(settings.policy_file)
    traces = tmp_path_factory.mktemp("traces")

    service = AskService(driver, LLMClient(settings), traces)
    found: dict[tuple[str, str], AskResult | None] = {}
    for role in ROLES:
        for anchor in ANCHORS:
            caller = verify(headers_for(registry, role), registry, None)
            try:
                found[(anchor, role)] = service.ask(caller, anchor)
            except AnchorNotVisible:
                found[(anchor, role)] = None
    yield found


def test_the_fixture_has_the_general_shape() -> None:
    """At least 20 anchors, several relation kinds, anchors with several causes, partial visibility."""
    assert len(ANCHORS) >= 20
    relations = {r for per in ANCHORS.values() for causes in per.values() if causes for r in causes.values()}
    assert {"replaces", "requires", "based_on", "supported_by", "led_to", "causal"} <= relations
    many = [a for a, per in ANCHORS.items() if len(per["exec"] or {}) >= 3]
    assert len(many) >= 5
    partial = [a for a, per in ANCHORS.items() if per["staff"] is not None and per["staff"] != per["exec"]]
    assert len(partial) >= 3


def _named(result: AskResult) -> dict[str, str]:
    """The causes an answer names: listed in the envelope and spelled out in its text."""
    text = result.envelope["text"]
    return {
        c["id"]: c["relation"]
        for c in result.envelope["causes"]
        if f"[{c['id']}]" in text and c["title"] in text and relation_words(c["relations"]) in text
    }


@pytest.mark.parametrize("role", ROLES)
def test_cause_recall_and_precision_are_one_for_every_role(
    answers: dict[tuple[str, str], AskResult | None], role: str
) -> None:
    expected_total = named_right = named_total = 0
    misses: list[str] = []
    for anchor, per in ANCHORS.items():
        result = answers[(anchor, role)]
        expected = per[role]
        if expected is None:
            assert result is None, f"{anchor} should not be visible to {role}"
            continue
        assert result is not None, f"{anchor} should be visible to {role}"
        named = _named(result)
        expected_total += len(expected)
        named_total += len(named)
        named_right += sum(1 for i, rel in named.items() if expected.get(i) == rel)
        if named != expected:
            misses.append(f"{anchor}: named {sorted(named.items())}, expected {sorted(expected.items())}")
        assert result.envelope["more_causes"] == 0
        assert result.meta["validator"]["error_count"] == 0, result.meta["validator"]["warnings"]
    recall = named_right / expected_total if expected_total else 1.0
    precision = named_right / named_total if named_total else 1.0
    print(f"\n{role}: cause recall {recall:.3f}, precision {precision:.3f} over {expected_total} causes")
    assert (recall, precision) == (1.0, 1.0), "\n".join(misses)


@pytest.mark.parametrize("role", ROLES)
def test_no_hidden_cause_surfaces_and_the_anchor_is_never_its_own_cause(
    answers: dict[tuple[str, str], AskResult | None], role: str
) -> None:
    everything = {i for per in ANCHORS.values() for causes in per.values() if causes for i in causes}
    for anchor, per in ANCHORS.items():
        result = answers[(anchor, role)]
        if result is None:
            continue
        hidden = {i for causes in per.values() if causes for i in causes} - set(per[role] or {})
        hidden |= {i for i in everything if answers.get((i, role), "absent") is None}
        text = result.envelope["text"]
        assert not [i for i in hidden if i in text], f"{anchor} as {role} names a hidden record"
        assert anchor not in {c["id"] for c in result.envelope["causes"]}
        assert text.count(f"[{anchor}]") == 1


# --- `cairn ask` from the shell -----------------------------------------------------------------

OIDC = "acme-prod-oidc-replaces-saml-2024"


def test_cli_ask_prints_only_the_unwrapped_answer_on_stdout(
    answers: dict[tuple[str, str], AskResult | None],
) -> None:
    result = CliRunner().invoke(app, ["ask", OIDC, "--role", "manager"])
    assert result.exit_code == 0, result.output
    expected = answers[(OIDC, "manager")]
    assert expected is not None
    assert result.stdout.rstrip("\n") == expected.envelope["text"]  # no log line, no hard wrap
    assert max(len(line) for line in result.stdout.splitlines()) > 80
    assert "request req-" in result.stderr and '"event"' not in result.stderr  # quiet by default
    verbose = CliRunner().invoke(app, ["ask", OIDC, "--role", "manager", "--verbose"])
    assert verbose.stdout == result.stdout
    assert '"event": "templater"' in verbose.stderr and '"event"' not in verbose.stdout


def test_cli_ask_json_is_for_scripts(answers: dict[tuple[str, str], AskResult | None]) -> None:
    result = CliRunner().invoke(app, ["ask", OIDC, "--role", "staff", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {c["id"]: c["relation"] for c in data["causes"]} == ANCHORS[OIDC]["staff"]
    assert data["request_id"].startswith("req-") and data["role"] == "staff"
    assert data["permissions_note"] and data["text"].endswith(data["permissions_note"])
    missing = CliRunner().invoke(
        app, ["ask", "acme-corp-zero-trust-mandate-2023", "--role", "staff", "--json"]
    )
    assert missing.exit_code == 4 and missing.stdout == "" and "not visible" not in missing.stdout
    assert "no node" in missing.stderr


# --- the optional LLM path ----------------------------------------------------------------------


def test_the_llm_gets_the_same_structured_evidence_and_the_same_checks(
    answers: dict[tuple[str, str], AskResult | None], driver: Driver, settings: Settings, tmp_path: Path
) -> None:
    registry = PolicyRegistry.load(settings.policy_file)
    caller = verify(headers_for(registry, "director"), registry, None)
    card = answers[(OIDC, "director")]
    assert card is not None

    with running_llm_server() as url:
        llm = LLMClient(settings.model_copy(update={"llm_base_url": url}))
        result = AskService(driver, llm, tmp_path).ask(caller, OIDC, mode="query")
    assert result.response["mode"] == "llm"
    # The stub echoes the first prompt line: the decision with its key, as the card opens.
    completion = result.response["llm_completion"]["text"]
    evidence_lines = len(result.meta["evidence_sets"]["prompt_included_ids"]) - 1
    assert completion.startswith(f"Answer based on {evidence_lines} evidence lines: decision ")
    assert f"[{OIDC}]" in completion
    # The card shown beside the LLM answer names the same causes.
    assert result.envelope["causes"] == card.envelope["causes"]
    # The stub names no cause: the same check that holds the card to its causes says so.
    warnings = result.meta["validator"]["warnings"]
    assert sorted(warnings) == sorted(
        f"llm completion leaves out cause {c['id']}" for c in card.envelope["causes"]
    )
    assert result.meta["validator"]["error_count"] == 0
