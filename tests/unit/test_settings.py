"""Settings read from the environment (cairn/runtime/settings.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from cairn.runtime.settings import Settings


def test_write_batches_and_window_default_and_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CAIRN_CORRESPONDENCE_WRITE_BATCH", raising=False)
    monkeypatch.delenv("CAIRN_CORRESPONDENCE_EMBED_WINDOW", raising=False)
    monkeypatch.delenv("CAIRN_FIXTURE_WRITE_BATCH", raising=False)
    defaults = Settings()
    assert (defaults.correspondence_write_batch, defaults.correspondence_embed_window) == (256, 512)
    assert defaults.fixture_write_batch == 500
    monkeypatch.setenv("CAIRN_CORRESPONDENCE_WRITE_BATCH", "32")
    monkeypatch.setenv("CAIRN_CORRESPONDENCE_EMBED_WINDOW", "64")
    monkeypatch.setenv("CAIRN_FIXTURE_WRITE_BATCH", "200")
    read = Settings()
    assert (read.correspondence_write_batch, read.correspondence_embed_window) == (32, 64)
    assert read.fixture_write_batch == 200


@pytest.mark.parametrize(
    "name",
    ["CAIRN_CORRESPONDENCE_WRITE_BATCH", "CAIRN_CORRESPONDENCE_EMBED_WINDOW", "CAIRN_FIXTURE_WRITE_BATCH"],
)
@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_write_batches_and_window_must_be_positive(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        Settings()


def readme_problems(section: str) -> tuple[list[str], list[str]]:
    """(settings the text does not name, settings whose default it states otherwise than the code).

    A name counts in backticks only (``CAIRN_PORT`` is not named by ``CAIRN_BOLT_PORT``), and a
    stated default may sit on the next line, where the README wraps."""
    missing, wrong = [], []
    for field in Settings.model_fields.values():
        assert field.alias is not None
        if f"`{field.alias}`" not in section:
            missing.append(field.alias)
        stated = re.search(rf"`{field.alias}`\s+\((\d[^:),]*)[:),]", section)
        default = field.default
        spellings = {str(default)} | ({f"{default:g}"} if isinstance(default, int | float) else set())
        if stated and stated.group(1).strip() not in spellings:
            wrong.append(f"{field.alias}: README {stated.group(1)!r}, code {field.default!r}")
    return missing, wrong


def test_the_readme_names_every_setting_with_its_default() -> None:
    """The README's Configuration section is where an operator looks for a setting: every
    variable ``Settings`` reads is named there, and a default it states in parentheses (a value
    first: ``(15: how long ...)``) is the one the code has."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    assert readme_problems(section) == ([], [])
    # A default wrapped onto the next line is still read; a name inside a longer one is no mention.
    planted = section.replace("`CAIRN_BOLT_PORT` (7687)", "`CAIRN_BOLT_PORT`\n(7688)")
    planted = planted.replace("`CAIRN_PORT` (8000)", "CAIRN_PORT_X (8000)")
    assert readme_problems(planted) == (["CAIRN_PORT"], ["CAIRN_BOLT_PORT: README '7688', code 7687"])
