"""Why-blocked and what-if latency on generated dependency graphs, against Python over an in-memory copy.

For 1k, 10k and 100k factors (seven levels, so chains up to six DEPENDS_ON hops deep; every
factor above the base needs two factors of lower levels, and one option per ten factors needs
three factors of the upper levels), the service calls that a user makes — ``why_blocked`` on an
option and ``what_if`` on a low-level factor, as the staff role with 5% of the nodes hidden —
are timed against the same traversal and readiness evaluation run in Python on dicts loaded
from the same graph (the baseline, measured in the same run). Reported: p50/p95 per size, the
Neo4j/Python ratio, growth from one size to the next, and the mean subgraph each call touches.

Run: ``.venv/bin/python -m bench.factor_traversal`` (own Neo4j: CAIRN_TEST_* or the defaults below).
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from bench.common import running_neo4j, summary, wipe_graph, write_results

os.environ.setdefault("CAIRN_DATA_DIR", os.environ.get("CAIRN_TEST_DATA_DIR", "/tmp/cairn-test-factors"))
os.environ.setdefault("CAIRN_BOLT_PORT", os.environ.get("CAIRN_TEST_BOLT_PORT", "17702"))
os.environ.setdefault("CAIRN_HTTP_PORT", os.environ.get("CAIRN_TEST_HTTP_PORT", "17502"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from neo4j import Driver  # settings above must be in place first

from cairn.memory.factors.dependencies import DepEdge, DepGraph, DepNode
from cairn.memory.factors.questions import what_if, why_blocked
from cairn.memory.factors.traversal import downstream, what_if_subgraph
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
HIDDEN_SHARE = 0.05
BATCH = 5_000
SEED = 20241030
ROLES = ["staff", "manager", "director", "exec", "writer"]

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

    def closure(self, starts: list[str]) -> DepGraph:
        seen = set(starts)
        queue = deque(starts)
        while queue:
            node = queue.popleft()
            for target, _ in self.out[node]:
                if target not in self.hidden and target not in seen:
                    seen.add(target)
                    queue.append(target)
        nodes = [
            DepNode(x, "Option" if x.startswith("o") else "Factor", x, value=self.value.get(x)) for x in seen
        ]
        edges = [DepEdge(x, None if t in self.hidden else t, m) for x in seen for t, m in self.out[x]]
        return DepGraph(nodes, edges)

    def why_blocked(self, option: str) -> int:
        graph = self.closure([option])
        graph.statuses()
        graph.blockers(option)
        return len(graph.nodes)

    def what_if(self, factor: str, value: float) -> int:
        ups = {factor}
        queue = deque([factor])
        while queue:
            node = queue.popleft()
            for source, _ in self.incoming.get(node, ()):
                if source not in self.hidden and source not in ups:
                    ups.add(source)
                    queue.append(source)
        graph = self.closure(sorted(ups))
        before, after = graph.statuses(), graph.statuses({factor: value})
        _ = [n for n in graph.nodes if before[n] != after[n]]
        return len(graph.nodes)


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


def measure(driver: Driver, scope: Scope, model: Model, rng: random.Random) -> dict[str, Any]:
    options = [o for o in model.options if o not in model.hidden]
    low = [f for f in model.levels[1] + model.levels[2] if f not in model.hidden]
    picks_o = rng.sample(options, min(SAMPLES, len(options)))
    picks_f = rng.sample(low, min(SAMPLES, len(low)))
    for o in picks_o[:WARMUP]:
        why_blocked(driver, scope, o)
    for f in picks_f[:WARMUP]:
        what_if(driver, scope, f, 100.0)
    wb_db = [timed(lambda o=o: why_blocked(driver, scope, o), 1)[0] for o in picks_o]
    wi_db = [timed(lambda f=f: what_if(driver, scope, f, 100.0), 1)[0] for f in picks_f]
    wb_py = [timed(lambda o=o: model.why_blocked(o), 1)[0] for o in picks_o]
    wi_py = [timed(lambda f=f: model.what_if(f, 100.0), 1)[0] for f in picks_f]
    # The two sides must agree on the subgraph they evaluate (a check, not a timing).
    for o in picks_o[:5]:
        assert len(downstream(driver, scope, [o]).nodes) == model.why_blocked(o)
    for f in picks_f[:5]:
        assert len(what_if_subgraph(driver, scope, f).nodes) == model.what_if(f, 100.0)
    touched_wb = sum(model.why_blocked(o) for o in picks_o) / len(picks_o)
    touched_wi = sum(model.what_if(f, 100.0) for f in picks_f) / len(picks_f)
    return {
        "why_blocked": {"neo4j": summary(wb_db), "python": summary(wb_py), "mean_subgraph_nodes": touched_wb},
        "what_if": {"neo4j": summary(wi_db), "python": summary(wi_py), "mean_subgraph_nodes": touched_wi},
    }


def main() -> None:
    sizes = tuple(int(a) for a in sys.argv[1:]) or SIZES
    rng = random.Random(SEED)
    results: dict[str, Any] = {
        "sizes": {},
        "levels": LEVELS,
        "samples": SAMPLES,
        "hidden_share": HIDDEN_SHARE,
    }
    with running_neo4j() as settings:
        driver = sync_driver(settings)
        migrate(driver)
        scope = Scope.from_profile(PolicyRegistry.load(get_settings().policy_file).roles["staff"])
        for n in sizes:
            model = Model(n, rng)
            load_s = load(driver, model)
            print(f"{n} factors loaded in {load_s:.1f}s", flush=True)
            result = measure(driver, scope, model, rng)
            result["load_s"] = round(load_s, 1)
            result["edges"] = sum(len(v) for v in model.out.values())
            results["sizes"][str(n)] = result
        wipe_graph(driver)
        driver.close()
    table = [
        "| factors | edges | question | subgraph nodes | Neo4j p50 ms | Neo4j p95 ms | Python p50 ms | "
        "ratio (p50) | Neo4j growth | Python growth |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    previous: dict[str, tuple[float, float]] = {}
    for n, r in results["sizes"].items():
        for question in ("why_blocked", "what_if"):
            q = r[question]
            db, py = q["neo4j"]["p50_ms"], q["python"]["p50_ms"]
            ratio = db / py if py else float("inf")
            q["ratio_p50"] = round(ratio, 1)
            growth = ("", "")
            if question in previous:
                pdb, ppy = previous[question]
                growth = (f"x{db / pdb:.2f}", f"x{py / ppy:.2f}")
                q["growth_vs_previous"] = {"neo4j": round(db / pdb, 2), "python": round(py / ppy, 2)}
            previous[question] = (db, py)
            table.append(
                f"| {n} | {r['edges']} | {question} | {q['mean_subgraph_nodes']:.0f} | {db:.2f} | "
                f"{q['neo4j']['p95_ms']:.2f} | {py:.3f} | {ratio:.0f}x | {growth[0]} | {growth[1]} |"
            )
    write_results(NAME, results, table)


if __name__ == "__main__":
    main()
