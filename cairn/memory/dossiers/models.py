"""Input models for fact packets and conversation blocks, validated before anything is written.

A packet or block that fails validation is refused whole with every problem listed by
where it is (``facts[2]``, ``turns[0].user_text``), so a bad line in a file of packets can be
fixed without guessing. Facts must be strings (or objects carrying a ``text`` string);
numbers, nulls and blank strings are refused rather than coerced.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from cairn.errors import CairnError
from cairn.policy.scope import Scope
from cairn.policy.writes import create_problems, edges_problems, unreadable_set_problems
from cairn.schema.nodes import MAX_INDEXED_CHARS
from cairn.schema.timestamps import StoredNaiveOrAware

DEFAULT_DOMAIN = "acme/assistant"
DEFAULT_NAMESPACES = ("internal",)
DEFAULT_ROLES = ("staff", "manager", "director", "exec", "writer")
MAX_FACT_CHARS = 2000
# A packet's cluster label becomes a new dossier's title, shown in every reader's answers.
MAX_LABEL_CHARS = 200
MAX_FACTS_PER_PACKET = 200
_DOMAIN = re.compile(r"^[a-z0-9_-]+(/[a-z0-9_-]+)*$")
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_TRAILING_INT = re.compile(r"(\d+)$")
# A turn's position in its block. Bounded so that it is always an integer Neo4j can store: a
# larger one (sent as turn_index, or as the trailing digits of a turn_id) used to pass
# validation and then fail the write, or poison a stored block for every later gardening pass.
MAX_TURN_INDEX = 2**31 - 1
TurnIndex = Annotated[int, Field(strict=True, ge=0, le=MAX_TURN_INDEX)]


@dataclass(frozen=True)
class Problem:
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class InputError(CairnError, ValueError):
    """A packet or block that cannot be written; ``problems`` names each offending field."""

    CODE = "INVALID_INPUT"

    def __init__(self, what: str, problems: list[Problem]) -> None:
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:8])
        more = f" (+{len(problems) - 8} more)" if len(problems) > 8 else ""
        super().__init__(self.CODE, f"invalid {what}: {shown}{more}", problems=problems)


class AccessRefused(InputError):
    """Input a writer may not create: its access fields reach beyond the writer's own profile."""

    CODE = "FORBIDDEN_WRITE"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, validate_default=True)


class Access(_Strict):
    """The access fields every stored node carries; the defaults make demo data visible to all roles."""

    domain: StrictStr = DEFAULT_DOMAIN
    sensitivity: Literal["low", "medium", "high"] = "low"
    namespaces: tuple[StrictStr, ...] = DEFAULT_NAMESPACES
    roles_allowed: tuple[StrictStr, ...] = DEFAULT_ROLES

    @field_validator("domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        if not _DOMAIN.fullmatch(value):
            raise ValueError("must look like 'acme/assistant' (lower-case path segments)")
        if len(value) > MAX_INDEXED_CHARS:
            raise ValueError(f"longer than {MAX_INDEXED_CHARS} characters")
        return value

    @field_validator("namespaces", "roles_allowed")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("must name at least one entry")
        bad = [v for v in value if not _NAME.fullmatch(v)]
        if bad:
            raise ValueError(f"invalid name {bad[0]!r}")
        return tuple(sorted(set(value)))  # sorted: equal access compares equal in Cypher

    def check_writer(
        self,
        writer: Scope | None,
        what: str,
        where: str = "access",
        edges: Sequence[str] = (),
        routes: bool = False,
    ) -> None:
        """Raise ``AccessRefused`` when ``writer`` may not create data with these access fields,
        or store ``edges`` (edge types) between such nodes that it could not walk back, or, for
        a write that ``routes`` facts, when it may not read the stored facts' ``text`` there
        that the vote ranks by and compares with, nor the ``status`` of the dossiers it votes
        among (the active ones): where its facts went would tell what they hold."""
        if writer is None:
            return
        problems = self.problems_for(writer, where) + [
            Problem(f"{where}.edges", p.message) for p in edges_problems(writer, edges, self.domain)
        ]
        if routes:
            problems += [
                Problem(f"{where}.domain", p.message)
                for label, field in (("Fact", "text"), ("Dossier", "status"))
                for p in unreadable_set_problems(writer, label, self.domain, (field,), "route by")
            ]
        if problems:
            raise AccessRefused(what, problems)

    def problems_for(self, scope: Scope, where: str = "access") -> list[Problem]:
        """Why a caller with ``scope`` may not create data with these access fields (empty: it may).

        A writer may only create what it could itself read, so ingest can never place data
        outside the writer's own profile.
        """
        return [
            Problem(f"{where}.{p.field}", p.message)
            for p in create_problems(
                scope,
                domain=self.domain,
                sensitivity=self.sensitivity,
                namespaces=self.namespaces,
                roles_allowed=self.roles_allowed,
            )
        ]

    def props(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "sensitivity": self.sensitivity,
            "namespaces": list(self.namespaces),
            "roles_allowed": list(self.roles_allowed),
        }


def _check_text(value: str) -> str:
    value = " ".join(value.split())  # one line, single spaces: facts become summary sentences
    if not value:
        raise ValueError("must not be blank")
    if len(value) > MAX_FACT_CHARS:
        raise ValueError(f"longer than {MAX_FACT_CHARS} characters")
    return value


class FactItem(_Strict):
    """One fact with optional provenance inside its block."""

    text: StrictStr = Field(validation_alias=AliasChoices("text", "value"))
    fact_type: StrictStr | None = None
    confidence: StrictFloat | StrictInt = 1.0
    turn_id: StrictStr | None = None
    turn_index: TurnIndex | None = None

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return _check_text(value)

    @field_validator("confidence")
    @classmethod
    def _confidence(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:  # compared before float(): an int too large for a float is refused too
            raise ValueError("must be between 0 and 1")
        return float(value)

    @property
    def resolved_turn_index(self) -> int | None:
        """The turn number, read from ``turn_index`` or the trailing digits of ``turn_id``."""
        if self.turn_index is not None:
            return self.turn_index
        match = _TRAILING_INT.search(self.turn_id or "")
        if match is None:
            return None
        digits = match.group(1).lstrip("0") or "0"  # no int() of a thousand digits
        if len(digits) > len(str(MAX_TURN_INDEX)) or int(digits) > MAX_TURN_INDEX:
            return None
        return int(digits)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list"}.get(type(value), "invalid")


def _fact_objects(value: Any) -> Any:
    """Strings become ``{"text": ...}``; anything that is neither a string nor an object is refused."""
    if not isinstance(value, list | tuple):
        raise ValueError("must be a list of facts")
    bad = [
        f"item {i} is {_json_type(v)}"
        for i, v in enumerate(value)
        if not isinstance(v, str | dict | FactItem)
    ]
    if bad:
        raise ValueError("each fact must be a string or an object with 'text': " + ", ".join(bad))
    return [{"text": v} if isinstance(v, str) else v for v in value]


# A packet's label becomes a dossier title; its block id is kept in a range index (MAX_INDEXED_CHARS).
_MAX_CHARS = {"cluster_label": MAX_LABEL_CHARS, "source_block_id": MAX_INDEXED_CHARS}


class FactPacket(_Strict):
    """``{cluster_label, facts[], source_block_id, timestamp}`` as the gardener emits it
    (docs/design.md §Fact packets)."""

    cluster_label: StrictStr
    facts: tuple[FactItem, ...]
    source_block_id: StrictStr
    timestamp: StoredNaiveOrAware | None = None
    access: Access = Access()
    packet_id: StrictStr | None = None

    @field_validator("cluster_label", "source_block_id")
    @classmethod
    def _required(cls, value: str, info: ValidationInfo) -> str:
        """Not blank, and no longer than the field's limit (``_MAX_CHARS``)."""
        if not value:
            raise ValueError("must not be blank")
        limit = _MAX_CHARS[str(info.field_name)]
        if len(value) > limit:
            raise ValueError(f"longer than {limit} characters")
        return value

    @field_validator("facts", mode="before")
    @classmethod
    def _facts_shape(cls, value: Any) -> Any:
        return _fact_objects(value)

    @field_validator("facts")
    @classmethod
    def _facts(cls, value: tuple[FactItem, ...]) -> tuple[FactItem, ...]:
        if not value:
            raise ValueError("must hold at least one fact")
        if len(value) > MAX_FACTS_PER_PACKET:
            raise ValueError(f"more than {MAX_FACTS_PER_PACKET} facts; split the packet")
        return value

    @field_validator("packet_id")
    @classmethod
    def _packet_id(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError("letters, digits, '-' and '_' only (at most 64)")
        return value

    @property
    def observed_at(self) -> str | None:
        """When the facts were observed (the packet's timestamp, UTC if it names no zone), ISO text."""
        if self.timestamp is None:
            return None
        ts = self.timestamp if self.timestamp.tzinfo else self.timestamp.replace(tzinfo=UTC)
        return ts.isoformat()

    @property
    def key(self) -> str:
        """Idempotency key: the caller's ``packet_id`` or a hash of the packet's content.

        A packet applied once is recognised by this key and never applied twice, which makes
        re-running an ingest file or a half-finished gardening pass safe.
        """
        if self.packet_id:
            return self.packet_id
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:20]


class TurnInput(_Strict):
    turn_index: TurnIndex | None = None
    turn_id: StrictStr | None = None
    user_text: StrictStr = Field(default="", validation_alias=AliasChoices("user_text", "user"))
    assistant_text: StrictStr = Field(
        default="", validation_alias=AliasChoices("assistant_text", "assistant")
    )


class BlockInput(_Strict):
    """A conversation block: its turns and the facts already extracted from them."""

    block_id: StrictStr
    turns: tuple[TurnInput, ...] = ()
    facts: tuple[FactItem, ...] = ()
    timestamp: StoredNaiveOrAware | None = None
    access: Access = Access()

    @field_validator("block_id")
    @classmethod
    def _block_id(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError("letters, digits, '-' and '_' only (at most 64)")
        return value

    @field_validator("facts", mode="before")
    @classmethod
    def _facts_shape(cls, value: Any) -> Any:
        return _fact_objects(value)

    @model_validator(mode="after")
    def _turns_resolve(self) -> BlockInput:
        indexes = [t.turn_index for t in self.numbered_turns]
        if len(set(indexes)) != len(indexes):
            raise ValueError("turn_index values must be unique within the block")
        known_ids = {t.turn_id for t in self.numbered_turns}
        for i, fact in enumerate(self.items):
            if fact.turn_id is not None and self.turns and fact.turn_id not in known_ids:
                raise ValueError(f"facts[{i}].turn_id {fact.turn_id!r} names no turn of this block")
        return self

    @property
    def numbered_turns(self) -> tuple[TurnInput, ...]:
        """Turns with ``turn_index`` (1-based position by default) and ``turn_id`` filled in."""
        out = []
        for pos, t in enumerate(self.turns, start=1):
            index = t.turn_index if t.turn_index is not None else pos
            out.append(
                t.model_copy(update={"turn_index": index, "turn_id": t.turn_id or f"turn_{index:03d}"})
            )
        return tuple(out)

    @property
    def items(self) -> tuple[FactItem, ...]:
        """Facts with their turn resolved against this block's turns."""
        by_id = {t.turn_id: t.turn_index for t in self.numbered_turns}
        out = []
        for item in self.facts:
            if item.turn_index is None and item.turn_id in by_id:
                item = item.model_copy(update={"turn_index": by_id[item.turn_id]})
            out.append(item)
        return tuple(out)


def _problems(exc: ValidationError, prefix: str) -> list[Problem]:
    out = []
    for err in exc.errors():
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        out.append(Problem(prefix + path, err["msg"].removeprefix("Value error, ")))
    return out


def parse_packet(raw: Any, where: str = "") -> FactPacket:
    """Validate one packet; raise ``InputError`` naming every problem."""
    if isinstance(raw, Mapping):
        raw = dict(raw)
    if not isinstance(raw, dict):
        raise InputError("fact packet", [Problem(where, "a packet must be a JSON object")])
    try:
        return FactPacket.model_validate(raw)
    except ValidationError as exc:
        raise InputError("fact packet", _problems(exc, where)) from None


def parse_block(raw: Any, where: str = "") -> BlockInput:
    """Validate one block; raise ``InputError`` naming every problem."""
    if isinstance(raw, Mapping):
        raw = dict(raw)
    if not isinstance(raw, dict):
        raise InputError("block", [Problem(where, "a block must be a JSON object")])
    try:
        return BlockInput.model_validate(raw)
    except ValidationError as exc:
        raise InputError("block", _problems(exc, where)) from None
