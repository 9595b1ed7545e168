"""The walk's neighbour cap must not choose by a field the caller may not see (latent leak).

Beyond the first hop the Pre-Selector keeps at most ``cap`` neighbours per frontier node and
edge type, the most important first. For a role whose policy masks ``importance``, that choice
was made by the hidden value: which neighbours an ask showed told which were rated important.
Now importance orders a neighbour only where the scope shows it (``acl.field_shown``); no demo
role masks it today, so the probe scope below does (docs/design.md §Pre-Selector).
"""

from __future__ import annotations

from neo4j import Driver

from cairn.policy.preselector import preselect
from cairn.policy.profiles import SENSITIVITY_RANK, EdgeRule, FieldRule
from cairn.policy.scope import Scope
from tests.e2e.conftest import wipe

HUB_FANOUT = 12
CAP = 4
DOMAIN = "acme/product"


def _scope(decision_fields: tuple[str, ...]) -> Scope:
    return Scope(
        role="probe",
        domains=(DOMAIN,),
        ceiling=SENSITIVITY_RANK["low"],
        namespaces=("public",),
        max_hops=2,
        edges=tuple(
            EdgeRule(type=t, direction="both", from_domains=("*",), to_domains=("*",))
            for t in ("INFLUENCED_BY", "CAUSAL_PRECEDES")
        ),
        fields={"Decision": (FieldRule(domains=("*",), fields=decision_fields),)},
    )


MASKED = _scope(("id", "option", "domain"))
SHOWN = _scope(("id", "option", "domain", "importance"))


def _store(driver: Driver, important: set[int]) -> None:
    """anchor -> hub (its own edge type, so the hub's leaves are one group over the cap) ->
    HUB_FANOUT leaves; the leaves in ``important`` rated 0.9, the rest 0.1."""
    wipe(driver)
    leaves = [
        {"id": f"leaf-{i:02d}", "importance": 0.9 if i in important else 0.1} for i in range(HUB_FANOUT)
    ]
    driver.execute_query(
        """
        UNWIND [{id: 'anchor', importance: 0.5}, {id: 'hub', importance: 0.5}] + $leaves AS d
        CREATE (:Entity:Decision {id: d.id, importance: d.importance, option: d.id, domain: $domain,
                roles_allowed: ['probe'], namespaces: ['public'], sensitivity: 'low'})
        WITH count(*) AS made
        MATCH (a:Decision {id: 'anchor'}), (h:Decision {id: 'hub'})
        CREATE (a)-[:INFLUENCED_BY]->(h)
        WITH h
        MATCH (l:Decision) WHERE l.id STARTS WITH 'leaf-'
        CREATE (h)-[:CAUSAL_PRECEDES]->(l)
        """,
        {"leaves": leaves, "domain": DOMAIN},
    )


def _kept(driver: Driver, scope: Scope) -> set[str]:
    candidates, _ = preselect(driver, scope, "anchor", cap=CAP)
    return {n.id for n in candidates.nodes if n.id.startswith("leaf-")}


def test_a_masked_importance_does_not_choose_the_kept_neighbours(driver: Driver) -> None:
    walks = []
    for important in ({8, 9, 10, 11}, {0, 1, 2, 3}, set()):
        _store(driver, important)
        walks.append(_kept(driver, MASKED))
    assert all(len(kept) == CAP for kept in walks), walks
    assert walks[0] == walks[1] == walks[2], walks
    wipe(driver)


def test_a_shown_importance_still_orders_the_kept_neighbours(driver: Driver) -> None:
    _store(driver, {8, 9, 10, 11})
    assert _kept(driver, SHOWN) == {"leaf-08", "leaf-09", "leaf-10", "leaf-11"}
    wipe(driver)
