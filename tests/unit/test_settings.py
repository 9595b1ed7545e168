"""Settings read from the environment (cairn/runtime/settings.py)."""

from __future__ import annotations

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
