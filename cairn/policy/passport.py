"""The policy passport: the headers that say who is asking and under which policy.

Fail closed: a missing, empty or malformed required header refuses the request before
anything is read, and the error names the header. Optional headers narrow the role's
profile (see Scope.from_profile) and can never widen it. With a passport secret
configured, the headers must also carry an HMAC signature made with that secret, over an
issue time and an expiry (X-Passport-Issued-At / X-Passport-Expires, Unix seconds): a
captured passport stops working when it expires, and one dated in the future is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from cairn.errors import EXIT_FAILED, CairnError
from cairn.policy.profiles import SENSITIVITY_RANK, PolicyRegistry, RoleProfile
from cairn.policy.scope import Scope
from cairn.schema.catalog import RELATION_TYPES

REQUIRED = (
    "X-User-Id",
    "X-User-Roles",
    "X-User-Namespaces",
    "X-Policy-Version",
    "X-Policy-Key",
    "X-Request-Id",
    "X-Trace-Id",
)
OPTIONAL = ("X-Domain-Scopes", "X-Edge-Allow", "X-Max-Hops", "X-Sensitivity-Ceiling")
SIGNATURE = "X-Passport-Signature"
ISSUED_AT = "X-Passport-Issued-At"
EXPIRES = "X-Passport-Expires"
VALIDITY = (ISSUED_AT, EXPIRES)  # required, and signed, when the server has a secret
DEFAULT_LIFETIME_S = 900
MAX_LIFETIME_S = 24 * 3600  # a longer-lived passport is refused: a leak must not last forever
CLOCK_SKEW_S = 30
# The shortest passport secret `cairn serve` accepts: an HMAC key anyone can guess (or an empty
# one, which CAIRN_PASSPORT_SECRET= sets) lets anyone sign any role (docs/design.md §Passport).
MIN_SECRET_CHARS = 16

_TOKEN = re.compile(r"^[A-Za-z0-9._@:/-]{1,128}$")
# Request ids name trace folders: no separators, no leading dot, ASCII only.
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_UNIX_SECONDS = re.compile(r"[0-9]{1,12}")
_NAME = re.compile(r"^[a-z0-9_-]{1,64}$")
_DOMAIN_GLOB = re.compile(r"^[a-z0-9_*?-]+(/[a-z0-9_*?-]+)*$")
_EDGE_TYPE = re.compile(r"^[A-Z_]{1,40}$")
# ASCII digits only: str.isdigit() also accepts '²' or '٣', which int() then refuses.
_HOPS = re.compile(r"^[0-9]{1,2}$")
MAX_HOPS = 6
# A header value longer than this is refused before any pattern or list is built from it.
MAX_HEADER_CHARS = 4096


class PassportError(CairnError):
    """Refusal of a passport; ``code`` is stable for clients, ``header`` names the culprit."""

    exit_code = EXIT_FAILED
    where_key = "header"

    @property
    def header(self) -> str | None:
        return self.where


@dataclass(frozen=True)
class Caller:
    user_id: str
    profile: RoleProfile
    scope: Scope
    namespaces: tuple[str, ...]
    policy_version: str
    request_id: str
    trace_id: str

    @property
    def role(self) -> str:
        return self.profile.name


def _list(value: str, header: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(","))
    if not items or any(not pattern.fullmatch(v) for v in items):
        raise _malformed(header, "is malformed")
    return items


def _get(headers: Mapping[str, str], name: str) -> str | None:
    """The header's value, or None when absent.

    Starlette's Headers yield every occurrence from items(): a header sent twice is refused
    (which copy would the policy take?), and so is one too long to be a passport value."""
    found: str | None = None
    for key, value in headers.items():
        if key.lower() == name.lower():
            if found is not None:
                raise _malformed(name, "is sent more than once")
            if len(value) > MAX_HEADER_CHARS:
                raise _malformed(name, f"is longer than {MAX_HEADER_CHARS} characters")
            found = value.strip()
    return found


def is_request_id(value: str) -> bool:
    """The X-Request-Id pattern; trace and bundle ids must match it (whole string) to be looked up."""
    return _REQUEST_ID.fullmatch(value) is not None


def canonical(headers: Mapping[str, str]) -> bytes:
    """What the signature covers: every passport header present, sorted, lower-cased names."""
    lines = []
    for name in sorted((*REQUIRED, *OPTIONAL, *VALIDITY), key=str.lower):
        value = _get(headers, name)
        if value is not None:
            lines.append(f"{name.lower()}:{value}")
    return "\n".join(lines).encode()


def secret_problem(secret: str | None, min_chars: int = MIN_SECRET_CHARS) -> str | None:
    """Why ``secret`` cannot sign passports (None: it can, or there is none)."""
    if secret is None:
        return None
    if not secret.strip():
        return "CAIRN_PASSPORT_SECRET is set but blank: every passport signed with it could be forged"
    if len(secret) < min_chars:
        return f"CAIRN_PASSPORT_SECRET must be at least {min_chars} characters long"
    return None


def sign(headers: Mapping[str, str], secret: str) -> str:
    return hmac.new(secret.encode(), canonical(headers), hashlib.sha256).hexdigest()


def verify(
    headers: Mapping[str, str], registry: PolicyRegistry, secret: str | None, now: float | None = None
) -> Caller:
    """Resolve the caller or raise PassportError; reads nothing from the graph."""
    values: dict[str, str] = {}
    for name in REQUIRED:
        value = _get(headers, name)
        if not value:
            raise PassportError("PASSPORT_MISSING_HEADER", f"required header {name} is missing", name)
        values[name] = value
    for name in ("X-User-Id", "X-Policy-Version"):
        if not _TOKEN.fullmatch(values[name]):
            raise _malformed(name, "is malformed")
    for name in ("X-Request-Id", "X-Trace-Id"):
        if not is_request_id(values[name]):
            raise _malformed(name, "is malformed")
    if secret is not None:
        _check_signed(headers, secret, time.time() if now is None else now)

    roles = _list(values["X-User-Roles"], "X-User-Roles", _NAME)
    if len(roles) != 1:
        raise _malformed("X-User-Roles", "must name one role")
    profile = registry.get(roles[0])
    if profile is None:
        raise PassportError("POLICY_UNKNOWN_ROLE", "X-User-Roles names no known role", "X-User-Roles")
    if values["X-Policy-Version"] != registry.version:
        raise PassportError("POLICY_STALE", "X-Policy-Version is not the server's", "X-Policy-Version")
    if not _same(values["X-Policy-Key"], profile.policy_key):
        raise PassportError("POLICY_STALE", "X-Policy-Key does not match the role profile", "X-Policy-Key")
    namespaces = _list(values["X-User-Namespaces"], "X-User-Namespaces", _NAME)

    scope = Scope.from_profile(
        profile,
        namespaces=namespaces,
        domains=_optional_list(headers, "X-Domain-Scopes", _DOMAIN_GLOB),
        edge_types=_edge_allow(headers),
        max_hops=_max_hops(headers),
        ceiling=_ceiling(headers),
    )
    return Caller(
        user_id=values["X-User-Id"],
        profile=profile,
        scope=scope,
        # What the caller holds, not what it claimed: a namespace the profile does not grant is
        # dropped here as in the scope, so the audit meta never shows one the read did not use.
        namespaces=scope.namespaces,
        policy_version=values["X-Policy-Version"],
        request_id=values["X-Request-Id"],
        trace_id=values["X-Trace-Id"],
    )


def _check_signed(headers: Mapping[str, str], secret: str, now: float) -> None:
    """Signature (it covers the times), then the validity window, with a small skew."""
    bad_signature = PassportError(
        "PASSPORT_BAD_SIGNATURE", "passport signature is missing or wrong", SIGNATURE
    )
    given = _get(headers, SIGNATURE) or ""
    if not given:
        raise bad_signature
    times = {}
    for name in VALIDITY:
        value = _get(headers, name)
        if not value:
            raise PassportError("PASSPORT_MISSING_HEADER", f"required header {name} is missing", name)
        if _UNIX_SECONDS.fullmatch(value) is None:
            raise _malformed(name, "must be Unix seconds (ASCII digits)")
        times[name] = int(value)
    if not _same(given, sign(headers, secret)):
        raise bad_signature
    issued, expires = times[ISSUED_AT], times[EXPIRES]
    if not 0 < expires - issued <= MAX_LIFETIME_S:
        raise _malformed(EXPIRES, f"must be after {ISSUED_AT} by at most {MAX_LIFETIME_S} s")
    if issued > now + CLOCK_SKEW_S:
        raise PassportError("PASSPORT_NOT_YET_VALID", f"{ISSUED_AT} lies in the future", ISSUED_AT)
    if expires < now - CLOCK_SKEW_S:
        raise PassportError("PASSPORT_EXPIRED", f"the passport expired ({EXPIRES} has passed)", EXPIRES)


def _same(given: str, expected: str) -> bool:
    """Constant-time comparison that accepts any text a client may send."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


def _malformed(header: str, why: str) -> PassportError:
    return PassportError("PASSPORT_MALFORMED_HEADER", f"{header} {why}", header)


def _optional_list(headers: Mapping[str, str], name: str, pattern: re.Pattern[str]) -> tuple[str, ...] | None:
    value = _get(headers, name)
    return None if value is None else _list(value, name, pattern)


def _edge_allow(headers: Mapping[str, str]) -> tuple[str, ...] | None:
    types = _optional_list(headers, "X-Edge-Allow", _EDGE_TYPE)
    if types is not None and any(t not in RELATION_TYPES for t in types):
        raise PassportError(
            "PASSPORT_MALFORMED_HEADER", "X-Edge-Allow names an unknown edge type", "X-Edge-Allow"
        )
    return types


def _max_hops(headers: Mapping[str, str]) -> int | None:
    value = _get(headers, "X-Max-Hops")
    if value is None:
        return None
    if not _HOPS.fullmatch(value) or int(value) > MAX_HOPS:
        raise _malformed("X-Max-Hops", f"must be an integer 0..{MAX_HOPS}")
    return int(value)


def _ceiling(headers: Mapping[str, str]) -> str | None:
    value = _get(headers, "X-Sensitivity-Ceiling")
    if value is not None and value not in SENSITIVITY_RANK:
        raise PassportError(
            "PASSPORT_MALFORMED_HEADER",
            "X-Sensitivity-Ceiling must be low|medium|high",
            "X-Sensitivity-Ceiling",
        )
    return value


def headers_for(
    registry: PolicyRegistry,
    role: str,
    secret: str | None = None,
    user_id: str | None = None,
    lifetime_s: int = DEFAULT_LIFETIME_S,
    issued_at: int | None = None,
) -> dict[str, str]:
    """A valid header set for ``role`` (for `cairn passport`, the dev endpoint and tests).

    Without ``user_id`` the user is ``u-demo-<role>``: one development user per role, so
    roles never share traces. With a secret the set is signed and valid for ``lifetime_s``
    from ``issued_at`` (default: now)."""
    profile = registry.get(role)
    if profile is None:
        raise PassportError("POLICY_UNKNOWN_ROLE", f"no role '{role}' in the policy", "X-User-Roles")
    headers = {
        "X-User-Id": user_id or f"u-demo-{role}",
        "X-User-Roles": role,
        "X-User-Namespaces": ",".join(profile.namespaces),
        "X-Policy-Version": registry.version,
        "X-Policy-Key": profile.policy_key,
        "X-Request-Id": f"req-{uuid.uuid4().hex[:16]}",
        "X-Trace-Id": f"trace-{uuid.uuid4().hex[:16]}",
    }
    if secret is not None:
        issued = int(time.time()) if issued_at is None else issued_at
        headers[ISSUED_AT] = str(issued)
        headers[EXPIRES] = str(issued + lifetime_s)
        headers[SIGNATURE] = sign(headers, secret)
    return headers
