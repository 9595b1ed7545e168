"""Answer quality on the demo org: every visible cause named, nothing else named as a cause.

``fixtures/acme-expected-causes.yaml`` lists, for each anchor and role, the direct causes the
role may see and the relation each edge carries; the checks (tests/e2e/answer_quality.py) are
the ones every decision record is held to (tests/e2e/test_answer_quality_peps.py: a real one).
"""

from __future__ import annotations

import json
from pathlib import Path

from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app
from cairn.memory.ask import AskService
from cairn.policy.passport import headers_for, verify
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.llm import LLMClient
from cairn.runtime.settings import Settings
from tests.e2e.answer_quality import AnswerQuality, Answers, Expected
from tests.e2e.conftest import load_acme
from tests.llm_server import running_llm_server

OIDC = "acme-prod-oidc-replaces-saml-2024"


class TestAcme(AnswerQuality):
    """The demo org: several relation kinds, two decisions sharing a title, causes hidden by
    domain, sensitivity, namespace, role list and edge allowlist; then `cairn ask` and the LLM."""

    record = "acme"
    relations = frozenset({"replaces", "requires", "based_on", "supported_by", "led_to", "causal"})
    load = staticmethod(load_acme)

    # --- `cairn ask` from the shell ---------------------------------------------------------

    def test_cli_ask_prints_only_the_unwrapped_answer_on_stdout(self, answers: Answers) -> None:
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

    def test_cli_ask_json_is_for_scripts(self, answers: Answers, anchors: Expected) -> None:
        result = CliRunner().invoke(app, ["ask", OIDC, "--role", "staff", "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert {c["id"]: c["relation"] for c in data["causes"]} == anchors[OIDC]["staff"]
        assert data["request_id"].startswith("req-") and data["role"] == "staff"
        assert data["permissions_note"] and data["text"].endswith(data["permissions_note"])
        missing = CliRunner().invoke(
            app, ["ask", "acme-corp-zero-trust-mandate-2023", "--role", "staff", "--json"]
        )
        assert missing.exit_code == 4 and missing.stdout == "" and "not visible" not in missing.stdout
        assert "no node" in missing.stderr

    # --- the optional LLM path ------------------------------------------------------------

    def test_the_llm_gets_the_same_structured_evidence_and_the_same_checks(
        self, answers: Answers, driver: Driver, settings: Settings, tmp_path: Path
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
