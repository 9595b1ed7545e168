"""What every command shares (cairn/commands/common.py): the role a ``--role`` names, refused
plainly when unknown or lacking the right the command needs; plain input errors and every
CairnError turned into one message and an exit code. No Neo4j needed."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cairn.cli import app
from cairn.commands.common import refusal, refusing, scope_for
from cairn.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_NOT_VISIBLE
from cairn.memory.dossiers.curation import CurationError
from cairn.memory.dossiers.gardener import BlockNotFound
from cairn.memory.dossiers.models import InputError
from cairn.policy.preselector import AnchorNotVisible
from cairn.policy.scope import Scope


def test_no_role_is_the_operator() -> None:
    assert scope_for(None, search=True, write=True) == Scope.system()


def test_a_role_reads_with_its_own_scope() -> None:
    staff = scope_for("staff", search=True)
    assert (staff.role, staff.unrestricted) == ("staff", False)
    assert scope_for("staff") == staff


@pytest.mark.parametrize(
    ("role", "needs", "message"),
    [
        ("nobody", {}, "no role 'nobody' in the policy file"),
        ("external", {"search": True}, "role 'external' may not search"),
        ("staff", {"write": True}, "role 'staff' may not write"),
    ],
)
def test_a_role_without_the_right_is_refused_plainly(
    role: str, needs: dict[str, bool], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(typer.Exit) as refused:
        scope_for(role, **needs)
    assert refused.value.exit_code == EXIT_FAILED
    assert message in capsys.readouterr().err


def test_a_writer_may_write_and_external_may_read_the_tail() -> None:
    assert scope_for("writer", write=True) == scope_for("writer")
    assert scope_for("external").role == "external"


def test_listed_input_errors_exit_with_code_2_and_others_pass_through(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(typer.Exit) as refused, refusing(ValueError):
        raise ValueError("source name must be a slug")
    assert refused.value.exit_code == EXIT_BAD_INPUT
    assert "source name must be a slug" in capsys.readouterr().err
    with pytest.raises(KeyError), refusing(ValueError):
        raise KeyError("not an input error")


# --- the one CLI rendering of a CairnError (cairn/errors.py) -----------------------------------


def test_a_refusal_exits_with_its_code_and_names_every_problem_once(tmp_path: Path) -> None:
    packets = tmp_path / "packets.json"
    packets.write_text('[{"cluster_label": "x"}, {"cluster_label": 3, "facts": []}]', encoding="utf-8")
    result = CliRunner().invoke(app, ["ingest", "packets", str(packets)])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    out = " ".join(result.output.split())
    assert out.startswith("error: INVALID_INPUT: invalid file: ")
    for problem in (
        "packets.json[0]: facts: Field required",
        "packets.json[1]: facts: must hold at least one fact",
    ):
        assert out.count(problem) == 1, out
    assert out.endswith("nothing was written")


def test_problems_the_message_leaves_out_are_listed_below_it(capsys: pytest.CaptureFixture[str]) -> None:
    problems = [f"record {n}: bad" for n in range(12)]
    exit_ = refusal(InputError("packet", problems))
    assert exit_.exit_code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert all(err.count(p) == 1 for p in problems), err
    assert "(+4 more)" in err


def test_each_refusal_keeps_its_exit_code() -> None:
    assert BlockNotFound("no block 'b'").exit_code == EXIT_FAILED
    hidden = AnchorNotVisible("acme-hidden")
    assert (hidden.exit_code, hidden.public_message, hidden.extensions()) == (
        EXIT_NOT_VISIBLE,
        "no such node",
        {"code": "NOT_FOUND"},
    )
    assert CurationError("cannot merge a dossier into itself").exit_code == EXIT_BAD_INPUT
