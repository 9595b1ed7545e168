"""What every command shares (cairn/commands/common.py): the role a ``--role`` names, refused
plainly when unknown or lacking the right the command needs, and input errors turned into exit
code 2. No Neo4j needed."""

from __future__ import annotations

import pytest
import typer

from cairn.commands.common import EXIT_BAD_INPUT, EXIT_FAILED, refusing, scope_for
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
