"""Answer quality on a real decision record: Python's PEPs (fixtures/peps, sources in its README).

The same checks as the demo org (tests/e2e/answer_quality.py) against
``fixtures/peps-expected-causes.yaml``; besides, the shapes a real record has and the demo org
has not: days without times, links stated on the earlier record ("Superseded-By") or on both,
one header naming several records ("Requires: 440, 508, 518"), a link written inline in the
decision, causes dated after their effect, long author lists; loaded and asked from the shell.
"""

from __future__ import annotations

from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app
from cairn.schema.checksum import graph_checksum
from tests.e2e.answer_quality import AnswerQuality, Answers
from tests.e2e.conftest import PEPS, load_peps


class TestPeps(AnswerQuality):
    record = "peps"
    relations = frozenset({"replaces", "supersedes", "requires", "extends", "amends", "deprecates"})
    relations |= {"implements", "based_on", "supported_by", "led_to", "causal", "alias"}
    load = staticmethod(load_peps)

    def test_an_answer_reads_as_the_record_says(self, answers: Answers) -> None:
        """Days stay the days the headers give; a link both records state is one cause in both words."""
        wsgi = answers[("pep-3333", "staff")]
        assert wsgi is not None
        assert wsgi.envelope["text"] == (
            "Phillip J. Eby (author) on 2010-09-26: PEP 3333: Python Web Server Gateway Interface v1.0.1 "
            "[pep-3333].\n"
            "Because:\n"
            "- replaces and supersedes: PEP 333: Python Web Server Gateway Interface v1.0 [pep-0333] "
            "(2003-12-07)."
        )

    def test_the_record_loads_from_the_shell_and_again_changes_nothing(
        self, answers: Answers, driver: Driver
    ) -> None:
        """`cairn ingest fixtures fixtures/peps` as a user runs it: the causes the record dates after
        their effects are warned about and written (refused only with --strict), and a second load
        is a no-op; `cairn ask` prints the answer the service gives."""
        before = graph_checksum(driver)
        result = CliRunner().invoke(app, ["ingest", "fixtures", str(PEPS)])
        assert result.exit_code == 0, result.output
        assert result.stderr.count("is dated after its effect") == 7
        assert "cause 'pep-0518' (2016-05-10T00:00:00Z) is dated after its effect 'pep-0426'" in result.stderr
        assert "28 unchanged" in result.stdout and "33 unchanged" in result.stdout
        assert graph_checksum(driver) == before
        strict = CliRunner().invoke(app, ["ingest", "fixtures", str(PEPS), "--strict"])
        assert strict.exit_code != 0 and "7 problem(s)" in strict.output
        assert graph_checksum(driver) == before

        asked = CliRunner().invoke(app, ["ask", "pep-0621", "--role", "staff"])
        assert asked.exit_code == 0, asked.output
        expected = answers[("pep-0621", "staff")]
        assert expected is not None and asked.stdout.rstrip("\n") == expected.envelope["text"]
