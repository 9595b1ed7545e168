"""Role profiles (fixtures/policy/roles.yaml) and the policy key that pins a caller to one.

A profile is the most a role may ever see. The policy key is the sha256 of the profile's
canonical JSON, so a client holding a key for an older profile is refused as stale
rather than served under rules it did not sign up for.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cairn.schema import unique_yaml
from cairn.schema.catalog import RELATION_TYPES

SENSITIVITY_RANK = {"low": 0, "medium": 1, "high": 2}
Sensitivity = Literal["low", "medium", "high"]
Direction = Literal["out", "in", "both"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EdgeRule(_Strict):
    type: str
    direction: Direction
    from_domains: tuple[str, ...]
    to_domains: tuple[str, ...]


class FieldRule(_Strict):
    domains: tuple[str, ...]
    fields: tuple[str, ...]


class RoleProfile(_Strict):
    name: str = ""
    description: str = ""
    domains: tuple[str, ...]
    sensitivity_ceiling: Sensitivity
    namespaces: tuple[str, ...]
    max_hops: int = Field(ge=1, le=6)
    edges: tuple[EdgeRule, ...]
    fields: dict[str, tuple[FieldRule, ...]]
    x_extra: tuple[str, ...] = ()
    can_use_llm: bool = False
    can_download_full: bool = False
    can_write: bool = False
    can_introspect: bool = False
    can_search: bool = True
    # May an answer say how many items were withheld and why (counts by reason, never ids)?
    can_see_withheld_counts: bool = False

    @cached_property
    def policy_key(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


class PolicyFile(_Strict):
    policy_version: str
    roles: dict[str, RoleProfile]


class PolicyRegistry:
    """The loaded policy: one profile per role, under one version string."""

    def __init__(self, version: str, roles: dict[str, RoleProfile]) -> None:
        self.version = version
        self.roles = roles

    @classmethod
    def load(cls, path: Path) -> PolicyRegistry:
        data = unique_yaml.load_file(path)
        parsed = PolicyFile.model_validate(data)
        roles = {name: p.model_copy(update={"name": name}) for name, p in parsed.roles.items()}
        for profile in roles.values():
            for rule in profile.edges:
                if rule.type not in RELATION_TYPES:
                    raise ValueError(f"{path}: role '{profile.name}': unknown edge type '{rule.type}'")
        return cls(parsed.policy_version, roles)

    def get(self, role: str) -> RoleProfile | None:
        return self.roles.get(role)


def literal_globs(globs: tuple[str, ...] | list[str]) -> list[str]:
    """The globs that hold no wildcard: each matches only itself, so a value equal to one of them
    matches ``glob_regex(globs)``. Cypher tests a value's membership in a list parameter by a hash
    lookup, where ``=~`` with a parameter compiles the pattern again for every row; a predicate
    tries the list first and the regex only for what it does not hold (same verdict, less CPU)."""
    return [g for g in globs if "*" not in g and "?" not in g]


def glob_regex(globs: tuple[str, ...] | list[str]) -> str:
    """One anchored regex matching any of the fnmatch globs (for Cypher's =~)."""
    return _glob_regex(tuple(globs))


# A scope's parameters and field checks build the same few regexes on every read: built once.
@lru_cache(maxsize=4096)
def _glob_regex(globs: tuple[str, ...]) -> str:
    if not globs:
        return "(?!)"  # matches nothing
    return "(?:" + "|".join(_glob_to_regex(g) for g in globs) + ")"


def _glob_to_regex(glob: str) -> str:
    """``*`` and ``?`` as in fnmatch; everything else literal (no character classes)."""
    return "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in glob)


@lru_cache(maxsize=4096)
def _glob_pattern(globs: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(_glob_regex(globs))


def matches(value: str, globs: tuple[str, ...] | list[str]) -> bool:
    return _glob_pattern(tuple(globs)).fullmatch(value) is not None
