// Cairn — saved explorations for Neo4j Browser (drop this file on the Browser, or paste one block).
// Each query reads its anchor from a Browser parameter; the :param lines below set demo values.
// These run as the Neo4j user and see everything: Cairn's role policy applies to the API and the
// web UI, not to Browser sessions.

:param decision => 'acme-prod-sunset-onprem-connectors-2024';
:param corporate => 'acme-corp-descope-onprem-2024';
:param factor => 'ai_readiness_score';
:param dossier => 'Vegetarian';

// 1. Why chain of a decision: its causes up to four steps back and what it led to next.
//    Only CAUSAL_PRECEDES is walked; alias overlays are not part of "why".
MATCH (d:Decision {id: $decision})
OPTIONAL MATCH why = (:Entity)-[:CAUSAL_PRECEDES*1..4]->(d)
WITH d, collect(why) AS why
OPTIONAL MATCH next = (d)-[:CAUSAL_PRECEDES]->(:Entity)
RETURN d, why, collect(next) AS next;

// 1b. The same chain as a table: each step with its relation and reason, oldest first.
MATCH path = (cause:Entity)-[:CAUSAL_PRECEDES*1..4]->(d:Decision {id: $decision})
UNWIND relationships(path) AS step
WITH DISTINCT step, startNode(step) AS from, endNode(step) AS to
RETURN coalesce(from.option, from.summary) AS cause, step.relation AS relation, step.reason AS reason,
       coalesce(to.option, to.summary) AS effect, coalesce(from.timestamp, to.timestamp) AS at
ORDER BY at;

// 2. Alias projections of a corporate decision: the alias events it projects into lower domains,
//    what each projection led to there, and the projections of those in turn (product -> region).
MATCH projection = (d:Decision {id: $corporate})-[:ALIAS_OF]->(alias:Event)
OPTIONAL MATCH local = (alias)-[:CAUSAL_PRECEDES]->(:Decision)
OPTIONAL MATCH further = (alias)-[:CAUSAL_PRECEDES]->(:Decision)-[:ALIAS_OF]->(:Event)
RETURN d, collect(DISTINCT projection) AS projections, collect(DISTINCT local) AS led_to,
       collect(DISTINCT further) AS projected_further;

// 2b. Every alias overlay, with the domains it crosses.
MATCH (d:Decision)-[a:ALIAS_OF]->(e:Event)
RETURN d.id AS decision, a.domain_from AS from_domain, a.domain_to AS to_domain, e.id AS alias_event,
       e.summary AS projected_as
ORDER BY from_domain, decision;

// 3. A factor's dependency tree: the prerequisites it rests on (with thresholds), the factors and
//    options that need it, and its current journal entry.
MATCH (f:Factor {id: $factor})
OPTIONAL MATCH needs = (f)-[:DEPENDS_ON*1..5]->(:Factor)
WITH f, collect(needs) AS needs
OPTIONAL MATCH needed_by = (:Entity)-[:DEPENDS_ON*1..3]->(f)
WITH f, needs, collect(needed_by) AS needed_by
OPTIONAL MATCH now = (f)-[:CURRENT_STATE]->(:JournalEntry)
RETURN f, needs, needed_by, collect(now) AS current_state;

// 3b. The same tree as a table: each prerequisite, its threshold and whether it is met now.
MATCH path = (f:Factor {id: $factor})-[:DEPENDS_ON*1..5]->(pre:Factor)
WITH pre, last(relationships(path)) AS need, length(path) AS depth
RETURN DISTINCT depth, pre.id AS prerequisite, need.min_value AS min_value, pre.current_value AS value,
       pre.current_value >= need.min_value AS met
ORDER BY depth, prerequisite;

// 4. A dossier (by id or title) with its provenance: its facts and the blocks they came from,
//    and the journal entries (create, append, merge, ...) that record every change.
MATCH (d:Dossier) WHERE d.id = $dossier OR d.title = $dossier
OPTIONAL MATCH facts = (d)-[:HAS_FACT]->(f:Fact)
OPTIONAL MATCH origin = (f)-[:FROM_BLOCK]->(:Block)
WITH d, collect(facts) AS facts, collect(origin) AS origins
OPTIONAL MATCH history = (:JournalEntry)-[:ABOUT]->(d)
RETURN d, facts, origins, collect(history) AS history;

// 4b. The dossier's history as a table, oldest first.
MATCH (j:JournalEntry)-[:ABOUT]->(d:Dossier) WHERE d.id = $dossier OR d.title = $dossier
RETURN j.timestamp AS at, j.op AS op, j.rationale AS rationale, j.new_value AS new_value
ORDER BY at;

// 5. Who may see a node: the access fields Cairn's policy reads (domain, sensitivity,
//    namespaces, roles_allowed) for the decision and its neighbours.
MATCH (d:Decision {id: $decision})-[r]-(n:Entity)
RETURN n.id AS id, [l IN labels(n) WHERE l <> 'Entity'][0] AS label, type(r) AS via, n.domain AS domain, n.sensitivity AS sensitivity,
       n.namespaces AS namespaces, n.roles_allowed AS roles_allowed
ORDER BY via, id;
