"""Issue 14, validation in one pass: one run reports every problem; dates name the format;
relations come from the catalog; unreadable records and causes after effects are warned about;
the CLI reports nodes and edges created / unchanged and the graph checksum."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from typer.testing import CliRunner

from cairn.cli import app
from cairn.ingest.fixtures import FixtureError, chronology_warnings, load_fixture_dir
from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.ingest.records import iso_utc
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.catalog import CAUSAL_RELATIONS
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import ACME

DESCOPE = "acme-corp-descope-onprem-2024"
UNIFY = "acme-corp-unify-cloud-platform-2022"


def edit(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(changes)
    path.write_text(json.dumps(data), encoding="utf-8")


def acme_copy(tmp_path: Path) -> Path:
    root = tmp_path / "acme"
    shutil.copytree(ACME, root)
    return root


def small_set(tmp_path: Path, **over: Any) -> Path:
    """Two decisions, the later based on the earlier; ``over`` changes the later one."""
    root = tmp_path / "small"
    (root / "decisions").mkdir(parents=True)
    base = {
        "timestamp": "2024-01-01T00:00:00Z",
        "domain": "acme/product",
        "importance": 0.5,
        "sensitivity": "low",
        "namespaces": ["internal"],
        "roles_allowed": ["staff", "director"],
        "option": "test decision",
        "decision_maker": "Test",
    }
    (root / "decisions" / "d-early.json").write_text(json.dumps({**base, "id": "d-early"}))
    later = {**base, "id": "d-late", "timestamp": "2024-06-01T00:00:00Z", "based_on": ["d-early"], **over}
    (root / "decisions" / "d-late.json").write_text(json.dumps(later))
    return root


def problems_of(root: Path) -> list[str]:
    with pytest.raises(FixtureError) as info:
        load_fixture_dir(root)
    return [str(p) for p in info.value.problems]


def test_record_reference_and_cycle_problems_come_in_one_report(tmp_path: Path) -> None:
    root = acme_copy(tmp_path)
    edit(root / "decisions" / "acme-prod-ai-assistant-beta-2023.json", importance="high")  # record
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", to="acme-no-such-decision")  # reference
    corp = {"relation": "causal", "domain": "acme/corporate"}
    back = {"id": "back", "from": DESCOPE, "to": UNIFY, **corp}  # closes unify -> descope
    (root / "transitions" / "back.json").write_text(json.dumps(back))
    loop = {"id": "self", "from": UNIFY, "to": UNIFY, **corp}
    (root / "transitions" / "self.json").write_text(json.dumps(loop))
    text = "\n".join(problems_of(root))
    assert "field 'importance'" in text
    assert "refers to 'acme-no-such-decision', which does not exist" in text
    assert "cannot point at its own source" in text
    assert "causal edges form a cycle" in text


def test_a_broken_record_is_not_reported_again_as_a_missing_reference(tmp_path: Path) -> None:
    root = acme_copy(tmp_path)
    edit(root / "decisions" / f"{DESCOPE}.json", importance="high")
    problems = problems_of(root)
    assert len(problems) == 1 and "importance" in problems[0]


@pytest.mark.parametrize("value", ["2024-13-45", "yesterday", "2024-03-01T09:30:00", "20240301"])
def test_a_bad_date_names_the_expected_format(tmp_path: Path, value: str) -> None:
    problems = problems_of(small_set(tmp_path, timestamp=value))
    assert len(problems) == 1, problems
    assert "field 'timestamp'" in problems[0]
    assert "ISO-8601" in problems[0] and "2024-03-01T09:30:00Z" in problems[0]
    assert json.dumps(value) in problems[0]


@pytest.mark.parametrize(
    "written",
    [
        "2024-03-01",
        "2024-03-01T00:00:00Z",
        "2024-03-01T00:00:00+00:00",
        " 2024-03-01",
        "2024-03-01T00:00:00Z ",
        "1 March 2024",
        "01 March 2024",
        "1 Mar 2024",
        "March 1, 2024",
        "Mar 1, 2024",
        "March 1 2024",
    ],
)
def test_a_date_without_a_time_is_that_day_at_midnight_utc(tmp_path: Path, written: str) -> None:
    """Public decision records carry days, not instants (PEP "Created", KEP "creation-date",
    an ADR's "Date: 1 March 2024"), with the month in numbers or named."""
    fs = load_fixture_dir(small_set(tmp_path, timestamp=written))
    [late] = [d for d in fs.decisions if d.id == "d-late"]
    assert iso_utc(late.timestamp) == "2024-03-01T00:00:00Z"


NOT_ONE_DAY = ["01-03-2024", "1/3/2024", "28-04-2021", "31 Smarch 2024", "30 February 2024"]


@pytest.mark.parametrize("value", NOT_ONE_DAY)
def test_a_day_that_reads_two_ways_or_not_at_all_is_refused_and_says_why(tmp_path: Path, value: str) -> None:
    """ "01-03-2024" is 1 March or 3 January: refused, saying so, with nothing written; even
    "28-04-2021", where only one reading is a day, is refused alike (one rule for every day)."""
    root = small_set(tmp_path, timestamp=value)
    problems = problems_of(root)
    assert len(problems) == 1, problems
    assert problems[0].startswith("decisions/d-late.json [id=d-late] field 'timestamp': ")
    assert json.dumps(value) in problems[0] and "1 March 2024" in problems[0]
    in_numbers = value[0].isdigit() and any(sep in value for sep in "-/")
    assert ("day-month or month-day" in problems[0]) is in_numbers


GPU = "acme-corp-adopt-gpu-platform-2023"


def test_a_transition_may_name_several_records_at_one_end(tmp_path: Path) -> None:
    """ "Obsoletes: 2145, 2616" is one header: one transition file, one edge per record named."""
    root = acme_copy(tmp_path)
    (root / "transitions" / "trans-acme-a1-to-a3.json").unlink()
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", to=[GPU, DESCOPE])
    fs = load_fixture_dir(root)
    edges = {(e.from_id, e.to_id): e for e in fs.causal_edges()}
    for effect in (GPU, DESCOPE):
        edge = edges[(UNIFY, effect)]
        assert edge.relation == "causal" and edge.reason.startswith("Unified platform")
        assert fs.origin[edge.id] == "transitions/trans-acme-a1-to-a2.json"
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", to=[GPU, "acme-no-such-decision"])
    [problem] = problems_of(root)
    assert problem.startswith("transitions/trans-acme-a1-to-a2.json")
    assert "refers to 'acme-no-such-decision', which does not exist" in problem


def test_a_decision_may_carry_its_transitions(tmp_path: Path) -> None:
    """A decision's own "transitions" are read, never dropped: an inline link from or to the
    decision (the end it leaves out is the decision), or the id of a transition record."""
    root = acme_copy(tmp_path)
    (root / "transitions" / "trans-acme-a1-to-a2.json").unlink()
    inline = {"to": GPU, "relation": "Superseded-By", "reason": "stated on the earlier decision"}
    edit(root / "decisions" / f"{UNIFY}.json", transitions=[inline, "trans-acme-a1-to-a3"])
    fs = load_fixture_dir(root)
    [edge] = [e for e in fs.causal_edges() if (e.from_id, e.to_id) == (UNIFY, GPU)]
    assert edge.relation == "supersedes" and edge.reason == "stated on the earlier decision"
    assert fs.origin[edge.id] == f"decisions/{UNIFY}.json"
    edit(root / "decisions" / f"{UNIFY}.json", transitions=["trans-acme-gone", {"relation": "causal"}])
    missing, empty = sorted(problems_of(root))
    assert "field 'transitions'" in missing and "'trans-acme-gone', which does not exist" in missing
    assert "field 'transitions[1]'" in empty and "names neither 'from' nor 'to'" in empty


@pytest.mark.parametrize(
    "inline,why",
    [
        ({"to": GPU, "relation": "Amends"}, f"name \"{GPU}\" as 'from', the record '{UNIFY}' follows"),
        ({"from": GPU, "relation": "Superseded by"}, f"name \"{GPU}\" as 'to', the record that follows"),
        ({"to": [GPU, DESCOPE], "relation": "Partly supersedes"}, "makes it the later record"),
    ],
)
def test_a_decision_s_own_link_written_the_wrong_way_round_is_refused(
    tmp_path: Path, inline: dict[str, Any], why: str
) -> None:
    """On its own record a link reads as the record says it: "Amends X" makes the decision the
    later record, so X is the cause ('from'), "Superseded by X" the earlier one, so X is the
    effect ('to'). Ends that contradict the words would store the link turned round (unseen
    when both records carry one day): refused, naming the record, the link and the fix."""
    root = acme_copy(tmp_path)
    edit(root / "decisions" / f"{UNIFY}.json", transitions=[inline])
    [problem] = problems_of(root)
    assert problem.startswith(f"decisions/{UNIFY}.json [id={UNIFY}] field 'transitions[0].relation': ")
    assert f"'{inline['relation']}' on '{UNIFY}'" in problem and why in problem
    edit(root / "decisions" / f"{UNIFY}.json", transitions=[{"to": GPU, "relation": "causal"}])
    load_fixture_dir(root)  # a relation with one form says nothing of direction


def test_a_listed_end_is_read_whatever_its_length(tmp_path: Path) -> None:
    """ "Requires: 440" is a list of one: read like the longer lists, not refused as not a string;
    an empty list names no record, and the problem says so."""
    root = acme_copy(tmp_path)
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", to=[GPU])
    fs = load_fixture_dir(root)
    assert [(t.from_id, t.to_id) for t in fs.transitions if t.id.startswith("trans-acme-a1-to-a2")] == [
        (UNIFY, GPU)
    ]
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", to=[])
    [problem] = problems_of(root)
    assert problem.startswith("transitions/trans-acme-a1-to-a2.json [id=trans-acme-a1-to-a2] field 'to'")
    assert "an empty list names no record" in problem
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", to=[GPU, DESCOPE, GPU])
    [problem] = problems_of(root)
    assert problem.startswith("transitions/trans-acme-a1-to-a2.json [id=trans-acme-a1-to-a2] field 'to'")
    assert f"names '{GPU}' twice" in problem


def test_a_transition_naming_several_records_is_checked_as_written(tmp_path: Path) -> None:
    """Its id is required and unique as written, as for any record: not invented ("None:...")
    and not two files' links under one id."""
    root = acme_copy(tmp_path)
    path = root / "transitions" / "trans-acme-a1-to-a2.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    without_id = {k: v for k, v in data.items() if k != "id"}
    path.write_text(json.dumps({**without_id, "to": [GPU, DESCOPE]}), encoding="utf-8")
    [problem] = problems_of(root)
    assert problem.startswith("transitions/trans-acme-a1-to-a2.json field 'id'"), problem
    (root / "transitions" / "trans-acme-a1-to-a3.json").unlink()
    path.write_text(json.dumps({**data, "id": "t-twice", "to": [GPU, DESCOPE]}), encoding="utf-8")
    other = {**data, "id": "t-twice", "from": [GPU], "to": [DESCOPE, "acme-prod-ai-assistant-beta-2023"]}
    (root / "transitions" / "t-twice.json").write_text(json.dumps(other), encoding="utf-8")
    [problem] = problems_of(root)
    assert "[id=t-twice] field 'id': duplicate id, also in" in problem, problem
    (root / "transitions" / "t-twice.json").unlink()
    path.write_text(json.dumps({**data, "to": [GPU, DESCOPE], "relation": "vibes"}), encoding="utf-8")
    [problem] = problems_of(root)  # once, under the id as written, not once per pair
    assert "[id=trans-acme-a1-to-a2] field 'relation': unknown relation 'vibes'" in problem, problem


def test_a_decisions_own_transition_is_from_or_to_it(tmp_path: Path) -> None:
    """An inline link naming two other records, or the id of a transition between two other
    records, is a link misfiled under this decision: refused, not written as if stated here."""
    root = acme_copy(tmp_path)
    own = root / "decisions" / f"{UNIFY}.json"
    edit(own, transitions=[{"from": GPU, "to": DESCOPE, "relation": "causal"}])
    [problem] = problems_of(root)
    assert "field 'transitions[0]'" in problem and f"neither end is '{UNIFY}'" in problem
    edit(own, transitions=["trans-acme-em1-to-em2"])
    [problem] = problems_of(root)
    assert "field 'transitions'" in problem and "'trans-acme-em1-to-em2'" in problem
    assert f"neither end is '{UNIFY}'" in problem
    edit(own, transitions=[GPU])
    [problem] = problems_of(root)
    assert f"refers to '{GPU}', a Decision; expected a transition id" in problem


def test_a_relation_outside_the_catalog_is_refused(tmp_path: Path) -> None:
    root = acme_copy(tmp_path)
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", relation="vibes")
    [problem] = problems_of(root)
    assert "field 'relation'" in problem and "unknown relation 'vibes'" in problem
    assert all(name in problem for name in CAUSAL_RELATIONS)


@pytest.mark.parametrize(
    "written,stored",
    [
        ("replaces", "replaces"),
        ("requires", "requires"),
        ("Obsoletes", "obsoletes"),
        ("Depends-On", "depends_on"),
        (" Informed  by ", "informed_by"),
        # Stated on the earlier record (the cause), as PEP and RFC headers do: the same link.
        ("Superseded-By", "supersedes"),
        ("Obsoleted by", "obsoletes"),
        ("Updated-By", "updates"),
        ("replaced_by", "replaces"),
    ],
)
def test_catalogued_relations_are_accepted_in_the_catalog_spelling(
    tmp_path: Path, written: str, stored: str
) -> None:
    root = acme_copy(tmp_path)
    edit(root / "transitions" / "trans-acme-a1-to-a2.json", relation=written)
    fs = load_fixture_dir(root)
    [edge] = [t for t in fs.transitions if t.id == "trans-acme-a1-to-a2"]
    assert edge.relation == stored


def test_a_cause_dated_after_its_effect_is_warned(tmp_path: Path) -> None:
    fs = load_fixture_dir(small_set(tmp_path, timestamp="2023-01-01T00:00:00Z"))
    [warning] = chronology_warnings(fs)
    assert "cause 'd-early'" in str(warning) and "after its effect 'd-late'" in str(warning)
    assert chronology_warnings(load_fixture_dir(small_set(tmp_path / "ok"))) == []


def test_a_link_written_backwards_is_warned_where_it_is_written(tmp_path: Path) -> None:
    """A decision's own link meant as "d-late informed by d-early" but written ``{"to": "d-early"}``
    makes d-late the cause; a relation with one form only ("informed_by") does not say which end
    its record is (words that do are refused when they disagree), so only the dates show it: the
    warning names the file, the record and the field that state it, how the link reads, and the
    fix; the set still loads (a record's date need not be the link's, as the PEPs show)."""
    backwards = {"based_on": [], "transitions": [{"to": "d-early", "relation": "informed_by"}]}
    root = small_set(tmp_path, **backwards)
    also = {
        "id": "t-also",
        "from": "d-late",
        "to": "d-early",
        "relation": "informed_by",
        "domain": "acme/product",
    }
    (root / "transitions").mkdir()
    (root / "transitions" / "t-also.json").write_text(json.dumps(also))
    [warning] = chronology_warnings(load_fixture_dir(root))
    assert (warning.file, warning.record_id, warning.field) == (
        "decisions/d-late.json",
        "d-late",
        "transitions[0]",
    )
    assert str(warning) == (
        "decisions/d-late.json [id=d-late] field 'transitions[0]': cause 'd-late' (2024-06-01T00:00:00Z) "
        "is dated after its effect 'd-early' (2024-01-01T00:00:00Z): the link reads 'd-early informed "
        "by d-late'; if that is backwards, swap its cause and effect; also stated in "
        "transitions/t-also.json [id=t-also]"
    )
    # A list field names the record that lists the other end.
    [listed] = chronology_warnings(load_fixture_dir(small_set(tmp_path / "l", timestamp="2023-01-01")))
    assert (listed.file, listed.record_id, listed.field) == ("decisions/d-late.json", "d-late", "based_on")
    assert "the link reads 'd-late based on d-early'" in str(listed)


@pytest.mark.parametrize(
    "over,reason",
    [
        ({"roles_allowed": ["ghost"]}, "unknown role(s) ghost"),
        ({"namespaces": ["nowhere"]}, "namespace(s) nowhere held by no role"),
        ({"domain": "other/place"}, "domain 'other/place' granted to no role"),
        ({"roles_allowed": ["staff"], "sensitivity": "high"}, "no role meets"),
    ],
)
def test_records_no_role_can_read_are_warned_or_refused(
    empty_db: Driver, settings: Settings, tmp_path: Path, over: dict[str, Any], reason: str
) -> None:
    registry = PolicyRegistry.load(settings.policy_file)
    root = small_set(tmp_path, **over)
    before = graph_checksum(empty_db)
    with pytest.raises(FixtureError) as info:
        ingest_fixture_dir(empty_db, root, registry=registry, refuse_warnings=True)
    assert graph_checksum(empty_db) == before
    [problem] = info.value.problems
    assert problem.record_id == "d-late" and "no role in the policy file can read it" in problem.message
    assert reason in problem.message


def test_cli_summary_counts_created_and_unchanged_and_prints_the_checksum(
    empty_db: Driver, tmp_path: Path
) -> None:
    root = small_set(tmp_path, roles_allowed=["ghost"])
    first = CliRunner().invoke(app, ["ingest", "fixtures", str(root)])
    assert first.exit_code == 0, first.output
    out = " ".join(first.output.split())
    assert "nodes: 2 created, 0 updated, 0 unchanged; edges: 1 created, 0 updated, 0 unchanged" in out
    assert "no role in the policy file can read it" in out
    checksum = graph_checksum(empty_db)
    assert f"graph checksum {checksum}" in out

    again = CliRunner().invoke(app, ["ingest", "fixtures", str(root)])
    out = " ".join(again.output.split())
    assert "nodes: 0 created, 0 updated, 2 unchanged; edges: 0 created, 0 updated, 1 unchanged" in out
    assert f"graph checksum {checksum}" in out

    edit(root / "decisions" / "d-late.json", option="changed")
    changed = CliRunner().invoke(app, ["ingest", "fixtures", str(root)])
    assert "nodes: 0 created, 1 updated, 1 unchanged" in " ".join(changed.output.split())

    strict = CliRunner().invoke(app, ["ingest", "fixtures", "--strict", str(root)])
    assert strict.exit_code == 2
    assert "no role in the policy file can read it" in " ".join(strict.output.split())
