"""One error contract for deliberate refusals: ``CairnError(code, message, where)``.

A refusal is an ordinary answer, not a bug: bad input, a write outside the caller's scope, a
node that does not exist (or that the caller may not know exists), a conflict to retry. Domain
code raises a ``CairnError`` subclass and nothing translates it on the way up: it is mapped
once to a GraphQL error (``CodedErrors`` in ``cairn/resolvers/schema.py``: ``public_message``
and ``extensions()``) and once to a CLI exit (``refusal`` in ``cairn/commands/common.py``:
``error: CODE: message``, the problems, ``exit_code``).

- ``code`` is stable for clients (``INVALID_INPUT``, ``NOT_FOUND``, ...);
- ``message`` says what is wrong, naming only what the caller sent or may see;
- ``where`` names the place at fault (a header, a field) under the extension key ``where_key``,
  for the subclasses that have one;
- ``problems``, for validation, lists every problem found (all are reported at once; nothing
  was written).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

# CLI exit codes: 1 a refusal or failure, 2 bad input or a conflict (nothing was written),
# 3 Neo4j unavailable, 4 the anchor is not visible to the role (`cairn ask`).
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NEO4J_UNAVAILABLE = 3
EXIT_NOT_VISIBLE = 4


class CairnError(Exception):
    """A deliberate refusal with a stable code (see the module docstring)."""

    exit_code: ClassVar[int] = EXIT_BAD_INPUT
    where_key: ClassVar[str | None] = None

    def __init__(
        self,
        code: str,
        message: str,
        where: str | None = None,
        *,
        problems: Sequence[object] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.where = where
        self.problem_texts = None if problems is None else [str(p) for p in problems]

    @property
    def public_message(self) -> str:
        """What a GraphQL caller is told; the operator at the shell reads ``message``."""
        return self.message

    def extensions(self) -> dict[str, Any]:
        """The GraphQL ``extensions`` of this refusal."""
        ext: dict[str, Any] = {"code": self.code}
        if self.where_key is not None:
            ext[self.where_key] = self.where
        if self.problem_texts is not None:
            ext["problems"] = self.problem_texts
        return ext


class ArgumentRefused(CairnError):
    """A count or bound argument outside its range, refused before any query (the CLI's options
    refuse the same values); ``where`` names the argument (extension ``argument``)."""

    where_key = "argument"


def in_range(argument: str, value: int, low: int, high: int | None = None) -> int:
    """``value`` if it lies in ``low..high`` (no upper bound when ``high`` is None), else a
    refusal naming ``argument``: a silent clamp would answer ``limit: -1`` with nothing."""
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ArgumentRefused("INVALID_ARGUMENT", f"{argument} must be {bounds}", argument)
    return value


_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


def a_name(argument: str, value: str) -> str:
    """``value`` if it is a short lower-case name (``why_decision``), else a refusal naming
    ``argument``: a free text of up to 4,000 characters was echoed in the meta and stored in
    every trace of the request."""
    if _NAME.fullmatch(value) is None:
        why = f"{argument} must be a lower-case name of at most 64 letters, digits or _"
        raise ArgumentRefused("INVALID_ARGUMENT", why, argument)
    return value
