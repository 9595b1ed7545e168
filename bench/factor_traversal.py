"""Why-blocked and what-if latency on generated dependency graphs, against the same work in Python dicts.

For 1k, 10k and 100k factors (seven levels, so chains up to six DEPENDS_ON hops deep; every
factor above the base needs two factors of lower levels, and one option per ten factors needs
three factors of the upper levels, 5% of the nodes hidden from the roles measured), the service
calls a user makes — ``why_blocked`` on an option and ``what_if`` on a low-level factor — are
timed for the staff role (the policy's one hop of DEPENDS_ON) and the exec role (three hops).

The baseline is the same question answered from an in-memory copy of the graph: the same walk
(same hop limit, same visibility filter, the same anonymous edge for whatever lies past either),
then the same evaluation and answer code the service runs on the subgraph it fetches
(``explain_blocked`` / ``evaluate_what_if``). Both sides must give identical answers (checked).
The service side is one round trip per question; the floor of any round trip (``RETURN 1``
through the same read path) is measured in the same run for context. Reported: p50/p95 per size
and role, the ratio of p50s, growth from one size to the next, and the mean subgraph touched.

Run: ``.venv/bin/python -m bench.factor_traversal [SIZES...]`` (default 1000 10000 100000; own
Neo4j: CAIRN_TEST_* or the defaults below).
"""

from __future__ import annotations

import random
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from bench.common import running_neo4j, summary, use_bench_neo4j, wipe_graph, write_results

use_bench_neo4j("factors", 17702, 17502)

from neo4j import Driver  # settings above must be in place first

from cairn.memory.factors.dependencies import DepEdge, DepGraph, DepNode
from cairn.memory.factors.models import Scale
from cairn.memory.factors.questions import evaluate_what_if, explain_blocked, what_if, why_blocked
from cairn.memory.factors.traversal import read
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import get_settings
from cairn.schema.migrate import migrate

NAME = "factor_traversal"
SIZES = (1_000, 10_000, 100_000)
LEVELS = 7
SAMPLES = 25
WARMUP = 3
SETTLE_S = 10
HIDDEN_SHARE = 0.05
BATCH = 5_000
SEED = 20241030
ROLES = ["staff", "manager", "director", "exec", "writer"]
MEASURED = ("staff", "exec")  # one hop and three hops of DEPENDS_ON
SCALE = Scale.parse("0-100")

WRITE_FACTORS = """
UNWIND $rows AS row
CREATE (n:Entity:Factor {id: row.id})
SET n += row.props, n.created_at = datetime()
"""
WRITE_OPTIONS = """
UNWIND $rows AS row
CREATE (n:Entity:Option {id: row.id})
SET n += row.props, n.created_at = datetime()
"""
WRITE_EDGES = """
UNWIND $rows AS row
MATCH (a:Entity {id: row.source})
MATCH (b:Factor {id: row.target})
CREATE (a)-[:DEPENDS_ON {min_value: row.min_value}]->(b)
"""


class Model:
    """The generated graph, kept in plain dicts: the in-memory copy the baseline walks."""

    def __init__(self, n: int, rng: random.Random) -> None:
        per_level = n // LEVELS
        self.levels = [[f"f{lvl}-{i}" for i in range(per_level)] for lvl in range(LEVELS)]
        self.options = [f"o-{i}" for i in range(n // 10)]
        self.value = {f: float(rng.randint(0, 100)) for lvl in self.levels for f in lvl}
        self.hidden = {x for x in [*self.value, *self.options] if rng.random() < HIDDEN_SHARE}
        self.out: dict[str, list[tuple[str, float]]] = {x: [] for x in [*self.value, *self.options]}
        self.incoming: dict[str, list[tuple[str, float]]] = {x: [] for x in self.value}
        for lvl in range(1, LEVELS):
            lower = [f for low in self.levels[:lvl] for f in low]
            for f in self.levels[lvl]:
                for target in rng.sample(self.levels[lvl - 1], 1) + rng.sample(lower, 1):
                    self.edge(f, target, float(rng.randint(10, 60)))
        upper = [f for lvl in self.levels[LEVELS - 3 :] for f in lvl]
        for o in self.options:
            for target in rng.sample(upper, 3):
                self.edge(o, target, float(rng.randint(10, 60)))

    def edge(self, source: str, target: str, min_value: float) -> None:
        if all(t != target for t, _ in self.out[source]):
            self.out[source].append((target, min_value))
            self.incoming[target].append((source, min_value))

    def access(self, node: str) -> dict[str, Any]:
        hidden = node in self.hidden
        return {
            "domain": "acme/assessment",
            "sensitivity": "medium" if hidden else "low",
            "namespaces": ["internal"],
            "roles_allowed": ["manager", "writer"] if hidden else ROLES,
        }

    # -- the baseline: the same walk and evaluation, in memory ----------------------------------

    def walk(self, starts: list[str], hops: int, step: dict[str, list[tuple[str, float]]]) -> dict[str, int]:
        """Breadth-first from ``starts`` through visible nodes, at most ``hops`` steps: node -> depth."""
        depth = {s: 0 for s in starts}
        queue = deque(starts)
        while queue:
            node = queue.popleft()
            if depth[node] >= hops:
                continue
            for other, _ in step.get(node, ()):
                if other not in self.hidden and other not in depth:
                    depth[other] = depth[node] + 1
                    queue.append(other)
        return depth

    def closure(self, starts: list[str], hops: int) -> DepGraph:
        """What the service's walk returns: reached nodes, the edges the walk could take from them,
        and one anonymous edge for a node that needs anything else (hidden or past the limit)."""
        depth = self.walk(starts, hops, self.out)
        nodes = [
            DepNode(
                x,
                "Option" if x.startswith("o") else "Factor",
                x,
                category=None if x.startswith("o") else f"level{x[1]}",
                value=self.value.get(x),
                confidence=None if x.startswith("o") else 0.7,
                scale=None if x.startswith("o") else SCALE,
            )
            for x in depth
        ]
        edges = []
        for x, d in depth.items():
            for t, m in self.out[x]:
                edges.append(DepEdge(x, t, m) if d < hops and t not in self.hidden else DepEdge(x, None, 0.0))
        return DepGraph(nodes, edges)

    def why_blocked(self, option: str, hops: int) -> Any:
        return explain_blocked(self.closure([option], hops), option, [])

    def what_if(self, factor: str, value: float, hops: int) -> Any:
        ups = self.walk([factor], hops, self.incoming)
        return evaluate_what_if(self.closure(list(ups), hops), factor, value)


def load(driver: Driver, model: Model) -> float:
    started = time.perf_counter()
    wipe_graph(driver)
    factors = [
        {
            "id": f,
            "props": {
                **model.access(f),
                "name": f,
                "category": f"level{f[1]}",
                "scale": "0-100",
                "current_value": model.value[f],
                "current_confidence": 0.7,
            },
        }
        for f in model.value
    ]
    options = [{"id": o, "props": {**model.access(o), "name": o}} for o in model.options]
    edges = [{"source": s, "target": t, "min_value": m} for s, out in model.out.items() for t, m in out]
    with driver.session() as session:
        for query, rows in ((WRITE_FACTORS, factors), (WRITE_OPTIONS, options), (WRITE_EDGES, edges)):
            for i in range(0, len(rows), BATCH):
                batch = rows[i : i + BATCH]
                session.execute_write(lambda tx, b=batch, q=query: tx.run(q, rows=b).consume())
    return time.perf_counter() - started


def timed(call: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def same(a: Any, b: Any) -> bool:
    return bool(a.evidence() == b.evidence() and a.answer == b.answer)


def measure(driver: Driver, scope: Scope, model: Model, rng: random.Random) -> dict[str, Any]:
    hops = scope.max_hops
    options = [o for o in model.options if o not in model.hidden]
    low = [f for f in model.levels[1] + model.levels[2] if f not in model.hidden]
    picks_o = rng.sample(options, min(SAMPLES, len(options)))
    picks_f = rng.sample(low, min(SAMPLES, len(low)))
    # Warm-up: every sampled call once on both sides (plans cached, the nodes they touch paged
    # in: the baseline has all of its graph in memory too).
    for o in picks_o:
        why_blocked(driver, scope, o)
        model.why_blocked(o, hops)
    for f in picks_f:
        what_if(driver, scope, f, 100.0)
        model.what_if(f, 100.0, hops)
    wb_db = [timed(lambda o=o: why_blocked(driver, scope, o), 1)[0] for o in picks_o]
    wi_db = [timed(lambda f=f: what_if(driver, scope, f, 100.0), 1)[0] for f in picks_f]
    wb_py = [timed(lambda o=o: model.why_blocked(o, hops), 1)[0] for o in picks_o]
    wi_py = [timed(lambda f=f: model.what_if(f, 100.0, hops), 1)[0] for f in picks_f]
    # The two sides must give the same answers (a check, not a timing).
    for o in picks_o:
        assert same(why_blocked(driver, scope, o), model.why_blocked(o, hops)), o
    for f in picks_f:
        assert same(what_if(driver, scope, f, 100.0), model.what_if(f, 100.0, hops)), f
    touched_wb = sum(len(model.closure([o], hops).nodes) for o in picks_o) / len(picks_o)
    touched_wi = sum(
        len(model.closure(list(model.walk([f], hops, model.incoming)), hops).nodes) for f in picks_f
    ) / len(picks_f)
    return {
        "why_blocked": {"neo4j": summary(wb_db), "python": summary(wb_py), "mean_subgraph_nodes": touched_wb},
        "what_if": {"neo4j": summary(wi_db), "python": summary(wi_py), "mean_subgraph_nodes": touched_wi},
    }


def floor(driver: Driver) -> dict[str, float]:
    """The cheapest round trip on the same read path, for context."""
    for _ in range(WARMUP):
        read(driver, "RETURN 1 AS one", {})
    return summary(timed(lambda: read(driver, "RETURN 1 AS one", {}), SAMPLES * 2))


def main() -> None:
    sizes = tuple(int(a) for a in sys.argv[1:]) or SIZES
    rng = random.Random(SEED)
    results: dict[str, Any] = {
        "command": "python -m bench.factor_traversal " + " ".join(str(n) for n in sizes),
        "sizes": {},
        "levels": LEVELS,
        "samples": SAMPLES,
        "hidden_share": HIDDEN_SHARE,
    }
    with running_neo4j() as settings:
        driver = sync_driver(settings)
        migrate(driver)
        profiles = PolicyRegistry.load(get_settings().policy_file).roles
        scopes = {role: Scope.from_profile(profiles[role]) for role in MEASURED}
        for n in sizes:
            model = Model(n, rng)
            load_s = load(driver, model)
            print(f"{n} factors loaded in {load_s:.1f}s", flush=True)
            time.sleep(SETTLE_S)  # let the server finish flushing the load before anything is timed
            result: dict[str, Any] = {
                "load_s": round(load_s, 1),
                "edges": sum(len(v) for v in model.out.values()),
            }
            result["roles"] = {role: measure(driver, scope, model, rng) for role, scope in scopes.items()}
            result["round_trip_floor"] = floor(driver)
            results["sizes"][str(n)] = result
        wipe_graph(driver)
        driver.close()
    table = [
        f"`{results['command']}` (HF_HUB_OFFLINE=1; own Neo4j 5.26 embedded). Neo4j = the service call, one "
        "round trip; Python = the same walk (same hop limit, same visibility filter) over dicts and the "
        "same evaluation and answer code, same run; ratio = Neo4j p50 / Python p50. Floor = `RETURN 1` "
        "through the same read path; floor ratio = floor p50 / Python p50, the least any round trip "
        "could reach.",
        "",
        "| factors | edges | role (hops) | question | subgraph nodes | Neo4j p50 ms | Neo4j p95 ms | "
        "Python p50 ms | ratio (p50) | floor p50 ms | floor ratio | Neo4j growth | Python growth |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    previous: dict[tuple[str, str], tuple[float, float]] = {}
    for n, r in results["sizes"].items():
        for role, by_question in r["roles"].items():
            for question in ("why_blocked", "what_if"):
                q = by_question[question]
                db, py = q["neo4j"]["p50_ms"], q["python"]["p50_ms"]
                ratio = db / py if py else float("inf")
                q["ratio_p50"] = round(ratio, 1)
                growth = ("", "")
                key = (role, question)
                if key in previous:
                    pdb, ppy = previous[key]
                    growth = (f"x{db / pdb:.2f}", f"x{py / ppy:.2f}")
                    q["growth_vs_previous"] = {"neo4j": round(db / pdb, 2), "python": round(py / ppy, 2)}
                previous[key] = (db, py)
                table.append(
                    f"| {n} | {r['edges']} | {role} ({scopes[role].max_hops}) | {question} | "
                    f"{q['mean_subgraph_nodes']:.0f} | {db:.2f} | {q['neo4j']['p95_ms']:.2f} | {py:.3f} | "
                    f"{ratio:.1f}x | {r['round_trip_floor']['p50_ms']:.2f} | "
                    f"{r['round_trip_floor']['p50_ms'] / py:.1f}x | {growth[0]} | {growth[1]} |"
                )
    write_results(NAME, results, table)


if __name__ == "__main__":
    main()
