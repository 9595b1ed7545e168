"""``acl.fields_shown``: for every field it accepts, the verdict of ``acl.field_shown``.

Fact search decides a block neighbour's ``source_block_id`` and ``turn_index`` with one rule
lookup for both (``fields_shown``). Evaluated by Neo4j for every role of the fixture policy and its
narrowed scopes (as in test_edge_between_visible), plus rule shapes the fixture lacks (no rules, a
wildcard, an empty field list, first-match-wins over overlapping globs, another label's rule only,
unrestricted), on nodes of every label a rule names and one no rule names, in every domain a rule
or role names, one nobody names and none: the map's entry for each field equals ``field_shown``,
whether the field is asked alone or with all the others.
"""

from __future__ import annotations

import dataclasses

import pytest
from neo4j import Driver

from cairn.policy.acl import field_shown, fields_shown
from cairn.policy.profiles import FieldRule
from cairn.policy.scope import Scope
from tests.e2e.test_edge_between_visible import REGISTRY, SCOPES, domains


def _rule(domains: tuple[str, ...], fields: tuple[str, ...]) -> FieldRule:
    return FieldRule(domains=domains, fields=fields)


def _shapes(base: Scope) -> list[tuple[str, Scope]]:
    """Field-rule shapes the fixture policy may not hold, on one of its scopes."""
    overlapping = (
        _rule(("acme/corporate",), ("id", "text", "turn_index")),
        _rule(("acme/*",), ("*",)),
        _rule(("*",), ("source_block_id",)),
    )
    shapes: dict[str, dict[str, tuple[FieldRule, ...]]] = {
        "none": {},
        "wildcard": {"Fact": (_rule(("*",), ("*",)),)},
        "empty": {"Fact": (_rule(("*",), ()),)},
        "overlapping": {"Fact": overlapping, "Dossier": overlapping},
        "other-label": {"Dossier": (_rule(("*",), ("*",)),)},
        "one-field": {"Fact": (_rule(("*",), ("turn_index",)),)},
    }
    out = [(f"shape:{k}", dataclasses.replace(base, fields=v)) for k, v in shapes.items()]
    out.append(("unrestricted", dataclasses.replace(base, unrestricted=True)))
    return out


ALL_SCOPES = [*SCOPES, *_shapes(SCOPES[0][1])]


def _accepted(names: set[str]) -> list[str]:
    ok = []
    for name in sorted(names):
        try:
            fields_shown("n", (name,))
        except ValueError:
            continue
        ok.append(name)
    return ok


def _labels_and_fields() -> tuple[list[str], list[str]]:
    labels: set[str] = {"Fact", "Dossier", "Nowhere"}
    names: set[str] = {"source_block_id", "turn_index", "source_turn_ids", "text", "added_at"}
    for _, scope in ALL_SCOPES:
        for label, rules in scope.fields.items():
            labels.add(label)
            for rule in rules:
                names.update(f for f in rule.fields if f != "*")
    return sorted(labels), _accepted(names)


LABELS, FIELDS = _labels_and_fields()


def test_fields_shown_gives_field_shown_verdict_for_every_scope_label_domain_field(driver: Driver) -> None:
    assert len(FIELDS) >= 5 and "turn_index" in FIELDS and "source_block_id" in FIELDS
    nodes = [{"label": label, "domain": d} for label in LABELS for d in domains()]
    separate = ", ".join(f"`{n}`: {field_shown('n', n)}" for n in FIELDS)
    query = f"""
    MATCH (n:FieldsShownProbe)
    RETURN labels(n) AS labels, n.domain AS domain, {{{separate}}} AS separate,
           {fields_shown("n", tuple(FIELDS))} AS together,
           {{{", ".join(f"`{n}`: {fields_shown('n', (n,))}[{n!r}]" for n in FIELDS)}}} AS alone
    """
    disagreements = []
    verdicts: set[bool] = set()
    compared = 0
    with driver.session() as session:
        tx = session.begin_transaction()
        try:
            for node in nodes:
                tx.run(
                    f"CREATE (:FieldsShownProbe:`{node['label']}` {{domain: $domain}})", domain=node["domain"]
                ).consume()
            for label, scope in ALL_SCOPES:
                for r in tx.run(query, scope.cypher_params()):
                    for name in FIELDS:
                        compared += 1
                        verdicts.add(r["separate"][name])
                        if not r["separate"][name] == r["together"][name] == r["alone"][name]:
                            verdict = (r["separate"][name], r["together"][name], r["alone"][name])
                            disagreements.append((label, r["labels"], r["domain"], name, verdict))
        finally:
            tx.rollback()
    assert disagreements == []
    assert verdicts == {True, False}  # the grid tells shown from hidden, so the comparison is not vacuous
    assert compared == len(ALL_SCOPES) * len(nodes) * len(FIELDS)
    assert len(REGISTRY.roles) > 1


def test_fields_shown_refuses_every_field_a_mirror_or_derivation_decides() -> None:
    from cairn.policy.scope import DERIVED_FIELDS, FACTOR_ENTRY_DERIVED, FACTOR_MIRRORS

    tied = set(FACTOR_ENTRY_DERIVED) | set(FACTOR_MIRRORS) | {"id"}
    tied |= {c for _, copies in FACTOR_MIRRORS.values() for c in copies}
    tied |= {n for derivations in DERIVED_FIELDS.values() for names, _, _ in derivations for n in names}
    for name in sorted(tied):
        with pytest.raises(ValueError, match=name):
            fields_shown("n", (name,))
