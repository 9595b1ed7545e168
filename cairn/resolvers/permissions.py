"""Permission classes: every root field declares which of these it needs (``READ``, ``WRITE``,
``SEARCH``), and ``Ctx``, the ``info`` every resolver is given."""

from __future__ import annotations

from typing import Any

from graphql import GraphQLError
from strawberry.permission import BasePermission
from strawberry.types import Info

from cairn.policy.passport import Caller, PassportError
from cairn.resolvers.context import RequestContext

Ctx = Info[RequestContext, Any]


def caller_of(info: Ctx) -> Caller:
    """The verified caller; raises the passport refusal (fail closed) when there is none."""
    ctx = info.context
    if ctx.caller is None:
        refusal = ctx.refusal or PassportError("PASSPORT_MISSING_HEADER", "passport required")
        raise GraphQLError(refusal.public_message, extensions=refusal.extensions())
    return ctx.caller


class PassportRequired(BasePermission):
    message = "passport required"

    def has_permission(self, source: Any, info: Ctx, **kwargs: Any) -> bool:
        caller_of(info)
        return True


class CanWrite(BasePermission):
    message = "this role may not write"
    error_extensions = {"code": "FORBIDDEN_WRITE"}  # noqa: RUF012  (strawberry's own attribute)

    def has_permission(self, source: Any, info: Ctx, **kwargs: Any) -> bool:
        return caller_of(info).profile.can_write


class CanSearch(BasePermission):
    message = "this role may not search"
    error_extensions = {"code": "FORBIDDEN_SEARCH"}  # noqa: RUF012  (strawberry's own attribute)

    def has_permission(self, source: Any, info: Ctx, **kwargs: Any) -> bool:
        return caller_of(info).profile.can_search


READ: list[type[BasePermission]] = [PassportRequired]
WRITE: list[type[BasePermission]] = [PassportRequired, CanWrite]
SEARCH: list[type[BasePermission]] = [PassportRequired, CanSearch]
