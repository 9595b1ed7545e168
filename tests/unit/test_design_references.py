"""Every pointer into docs/design.md names something the document has.

Comments cite ``docs/design.md §Name`` (a heading), sometimes narrowed by a quoted phrase
(``§Policy module, "Derived fields"``), or name a heading in quotes (``docs/design.md, "Queries by
capability"``). design.md's own preamble says a section renamed takes every citing comment with it;
this test is what holds that promise: a reference to a heading that moved reads as documentation
and sends the reader nowhere.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
SOURCES = ("cairn", "bench", "tests")
SUFFIXES = {".py", ".js", ".cypher", ".html"}  # and the README

# A wrapped comment continues on the next line after its marker; joined, a reference reads whole.
_CONTINUATION = re.compile(r"\n\s*(?:#+|//|\*)?\s*")
_SECTION = re.compile(r"design\.md\W{0,3}§\s*(?P<rest>.{0,160})")
_QUOTED = re.compile(r'design\.md,?\s*"(?P<name>[^"]+)"')


def _headings(design: str) -> list[str]:
    """Every heading's words, longest first, so that a longer heading wins a shared prefix."""
    names = [line.lstrip("#").strip() for line in design.splitlines() if line.startswith("#")]
    return sorted(names, key=len, reverse=True)


def _below(design: str, heading: str) -> str:
    """A heading's text with that of its subsections (a quoted phrase may sit in either),
    white space folded and lower-cased."""
    lines = design.splitlines()
    depth, out = 0, []
    for line in lines:
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if line.lstrip("#").strip() == heading:
                depth = level
                continue
            if depth and level <= depth:
                break
        if depth:
            out.append(line)
    return re.sub(r"\s+", " ", " ".join(out)).lower()


def unresolved(source: str, design: str) -> list[str]:
    """The references in ``source`` that name no heading (or no phrase of it) in ``design``."""
    headings = _headings(design)
    flat = _CONTINUATION.sub(" ", source)
    bad = []
    for match in _SECTION.finditer(flat):
        rest = match.group("rest")
        heading = next((h for h in headings if rest.startswith(h)), None)
        if heading is None:
            bad.append(f"§{rest[:40].strip()}")
            continue
        phrase = re.match(re.escape(heading) + r'[,;:]?\s*\(?"([^"]+)"', rest)
        if phrase and re.sub(r"\s+", " ", phrase.group(1)).lower() not in _below(design, heading):
            bad.append(f'§{heading}, "{phrase.group(1)}"')
    for match in _QUOTED.finditer(flat):
        if match.group("name") not in headings:
            bad.append(f'"{match.group("name")}"')
    return bad


def _cited_texts() -> list[Path]:
    """The README and every source file of ``SOURCES`` (this test's own examples left out)."""
    texts = [ROOT / "README.md"]
    for top in SOURCES:
        texts += [p for p in sorted((ROOT / top).rglob("*")) if p.suffix in SUFFIXES and p.is_file()]
    return [p for p in texts if p != Path(__file__).resolve()]


def test_every_reference_names_a_heading_of_design_md() -> None:
    design = DESIGN.read_text(encoding="utf-8")
    found = []
    for path in _cited_texts():
        found += [f"{path.relative_to(ROOT)}: {ref}" for ref in unresolved(path.read_text("utf-8"), design)]
    assert found == []
    assert ROOT / "README.md" in _cited_texts()


def test_a_made_up_reference_is_caught() -> None:
    design = DESIGN.read_text(encoding="utf-8")
    assert unresolved("# see docs/design.md §Policy module\n", design) == []
    assert unresolved("# see docs/design.md §Nowhere at all\n", design) == ["§Nowhere at all"]
    assert unresolved('# docs/design.md §Policy module, "Derived fields"', design) == []
    assert unresolved('# docs/design.md §Policy module, "No such rule"', design) == [
        '§Policy module, "No such rule"'
    ]
    assert unresolved('# (docs/design.md, "Made up")', design) == ['"Made up"']
    # A reference wrapped over two comment lines is read whole.
    assert unresolved("# docs/design.md §Embedded\n    # Neo4j start-up: why\n", design) == []


# A repository path as comments and docs write it (``cairn/policy/acl.py``, ``tests/e2e/commits.py``).
_PATH = re.compile(
    r"\b(?:cairn|bench|tests|web|fixtures|docs|scripts|neo4j)/[A-Za-z0-9_./-]+"
    r"\.(?:py|js|mjs|html|css|yaml|json|jsonl|cypher|md|xml|grass)\b"
)
# Named but not kept: `make fuzz` writes its counts to the first; test_layers plants the second.
_NOT_KEPT = {"bench/results/fuzz.md", "cairn/resolvers/planted.py"}


def missing_paths(text: str) -> list[str]:
    return sorted({p for p in _PATH.findall(text) if p not in _NOT_KEPT and not (ROOT / p).exists()})


def test_every_path_a_comment_or_doc_names_exists() -> None:
    found = []
    for path in [*_cited_texts(), DESIGN, ROOT / "Makefile"]:
        found += [f"{path.relative_to(ROOT)}: {p}" for p in missing_paths(path.read_text(encoding="utf-8"))]
    assert found == []
    assert missing_paths("see tests/e2e/tests/e2e/commits.py and cairn/policy/acl.py") == [
        "tests/e2e/tests/e2e/commits.py"
    ]
