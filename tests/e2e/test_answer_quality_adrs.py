"""Answer quality on a real Architecture Decision Record log: GOV.UK's AWS migration
(fixtures/adrs, sources in its README).

The same checks as the demo org and the PEPs (tests/e2e/answer_quality.py) against
``fixtures/adrs-expected-causes.yaml``; besides, the shapes an ADR log has and the others have
not: status links written on either record in the log's words ("Superseded by", "Amended by" on
the earlier record, "Amends" on the later, inline in the decision), a partial supersession, titles
that begin with a number (one of them not the record's own: ADR 33 is headed "3. Networking
Outline"), and days without times; loaded and asked from the shell.
"""

from __future__ import annotations

from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app
from cairn.schema.checksum import graph_checksum
from tests.e2e.answer_quality import AnswerQuality, Answers
from tests.e2e.conftest import ADRS, load_adrs


class TestAdrs(AnswerQuality):
    record = "adrs"
    relations = frozenset({"supersedes", "partly_supersedes", "amends", "extends", "implements"})
    relations |= {"based_on", "supported_by"}
    load = staticmethod(load_adrs)

    def test_an_answer_reads_as_the_record_says(self, answers: Answers) -> None:
        """A numbered title stays the record's title, a partial supersession says so, a link both
        records state is one cause, and a superseded or amended record names what followed it
        in the link's words."""
        ranges = answers[("adr-0033", "manager")]
        assert ranges is not None
        lines = ranges.envelope["text"].splitlines()
        assert lines[0] == "GOV.UK AWS migration team on 2018-09-26: 3. Networking Outline [adr-0033]."
        assert lines[3].startswith("- partly supersedes: 3. Networking Outline [adr-0003] (2017-06-30) — ")
        data = answers[("adr-0017", "staff")]
        assert data is not None
        assert (
            "Because:\n- amends: 10. Terraform directory structure [adr-0010] (2017-07-04).\n"
            in (data.envelope["text"])
        )
        superseded = answers[("adr-0004", "staff")]
        assert superseded is not None
        assert superseded.envelope["text"].splitlines()[-1] == (
            "Led to: 15. DNS infrastructure [adr-0015] (2018-03-06), which supersedes it."
        )
        amended = answers[("adr-0010", "manager")]
        assert amended is not None
        assert (
            "; 17. Terraform Data Structure [adr-0017] (2017-07-14), which amends it."
            in (amended.envelope["text"])
        )

    def test_the_record_loads_from_the_shell_and_again_changes_nothing(
        self, answers: Answers, driver: Driver
    ) -> None:
        """`cairn ingest fixtures fixtures/adrs` as a user runs it: no warnings (every cause is
        dated on or before its effect), a second load is a no-op, and `cairn ask` prints the
        answer the service gives."""
        before = graph_checksum(driver)
        result = CliRunner().invoke(app, ["ingest", "fixtures", str(ADRS)])
        assert result.exit_code == 0, result.output
        assert "is dated after its effect" not in result.stderr
        assert graph_checksum(driver) == before

        asked = CliRunner().invoke(app, ["ask", "adr-0015", "--role", "staff"])
        assert asked.exit_code == 0, asked.output
        expected = answers[("adr-0015", "staff")]
        assert expected is not None and asked.stdout.rstrip("\n") == expected.envelope["text"]
