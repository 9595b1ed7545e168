"""Read a long markdown correspondence of numbered sections into typed section records.

Authors write what they write: Roman or arabic numbers, headings with or without a
separator, the same number filed twice, a skipped number, a missing date. The parser
accepts all of that, but it never guesses silently: every line it read in a way the
author may not have meant becomes a warning with its line number. What would make the
store wrong is refused outright (``CorrespondenceError``, nothing is written): a binary
or non-UTF-8 file, a file with no numbered sections, a heading with no body, and a
malformed ``*Access: …*`` line (access control is never guessed).

The rules, in the order they apply:

- **Sections.** A section starts at an ATX heading whose text begins with a number:
  ``## LXVI — Title``, ``## 31: Title``, ``## XII Title``, ``## § 12. Title``,
  ``## Section XII — Title``. Sections live at one heading level: the shallowest level
  holding at least two numbered headings (else the one numbered heading's level).
  Deeper numbered headings (``### 1. Background``) are body text; Roman-numbered headings
  at another level, and unnumbered headings at the section level, are read as body text
  *with a warning*. Headings inside fenced code blocks are ignored.
- **Attribution.** The first non-blank line under the heading is the author and date
  line when it starts with ``Author:``, ``By``, ``From:``, ``Filed by`` or an em dash,
  or when it is wholly italic and holds a date: ``*Priya Raman, CTO · 2026-03-02*``.
  The author is the first name-like part; parentheticals are dropped, and one that says
  "external" marks an external caller (so does a preamble ``*External: A, B*`` line).
  Dates: ``2026-03-02``, ``2 March 2026``, ``March 2, 2026``.
- **Body.** Everything after the attribution line up to the next section, without
  trailing blank lines and horizontal rules. It is stored as written (source of truth).
- **Structured fields** (kept out of the embedded text): ``[EXEC:MICRO]``-style tags;
  decision lines (starting ``Decision:``/``Decided:``/``Resolved:``, or carrying an exec
  tag); ``*Status: EXPERIMENT PENDING — why*`` tags (the upper-cased label before a dash);
  ``*Access: …*`` lines.
- **References.** ``§ XII`` anywhere and ``Re: XII`` (followed by punctuation or the end
  of the line) name a filed number; each resolves to the latest *earlier* section filed
  with that number (→ ``RESPONDS_TO``). Unresolvable ones are warnings. File paths with a
  known extension (``knowledge/pricing/model.md``) are knowledge references.
- **Access.** ``*Access: sensitivity=medium; namespaces=internal; roles=manager,exec*``
  in the preamble sets the file's defaults; inside a section it overrides them for that
  section. Keys: ``domain``, ``sensitivity``, ``namespaces``, ``roles`` (or
  ``roles_allowed``); unknown keys or values are fatal.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date

from cairn.errors import CairnError
from cairn.schema.nodes import MAX_INDEXED_CHARS
from cairn.schema.section_text import (
    ACCESS_LINE,
    DEFAULT_DOMAIN,
    EXEC_TAG,
    EXTERNAL_LINE,
    KNOWLEDGE_REF,
    REFERENCE,
    STATUS_LINE,
    STATUS_SPAN,
    decision_spans,
    embeddable_text,
    strip_emphasis,
)

SENSITIVITIES = ("low", "medium", "high")
UNKNOWN_AUTHOR = "unknown"


@dataclass(frozen=True)
class Access:
    """The access fields every stored section carries (SPEC §4)."""

    domain: str
    sensitivity: str
    namespaces: tuple[str, ...]
    roles_allowed: tuple[str, ...]


DEFAULT_ACCESS = Access(
    domain=DEFAULT_DOMAIN,
    sensitivity="low",
    namespaces=("internal",),
    roles_allowed=("staff", "manager", "director", "exec", "writer"),
)


@dataclass(frozen=True)
class Issue:
    """Something at a line that was not read as the author may have meant."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class CorrespondenceError(CairnError, ValueError):
    """The file cannot be synced as it is; nothing was written."""

    def __init__(self, source: str, problems: list[Issue]) -> None:
        self.source = source
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        super().__init__("INVALID_INPUT", f"{source}: cannot sync: {shown}{more}", problems=problems)


@dataclass(frozen=True)
class ParsedSection:
    ordinal: int  # 1-based position in the file
    line: int  # line of the heading
    filed_id: str  # the number as the author wrote it, e.g. "LXVI" or "31"
    filed_number: int
    title: str
    author: str
    is_external_caller: bool
    date: str | None  # ISO date
    body: str
    exec_tags: tuple[str, ...]
    exec_decisions: tuple[str, ...]
    status_tags: tuple[str, ...]
    references: tuple[str, ...]  # filed numbers cited, as written
    responds_to: tuple[int, ...]  # ordinals of the earlier sections those resolve to
    knowledge_refs: tuple[str, ...]
    access: Access
    content_hash: str  # of the heading and every line of the section, as written

    @property
    def embed_text(self) -> str:
        return embeddable_text(self.title, self.body)


@dataclass(frozen=True)
class ParsedFile:
    source: str
    sha256: str
    sections: tuple[ParsedSection, ...]
    warnings: tuple[Issue, ...]
    defaults: Access


# --- patterns ------------------------------------------------------------------------------

HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
NUMBERED = re.compile(
    r"^(?:§+\s*|(?i:section|no\.?)\s+)?(?P<num>[IVXLCDM]+|\d{1,6})(?P<rest>(?:[\s—–\-:.|)].*)?)$"
)
TITLE_LEAD = " \t—–-:.|)"
ROMAN = re.compile(r"^M{0,4}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")
ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")

ATTRIBUTION_PREFIX = re.compile(r"^(?:author|by|from|filed by|written by)\s*:\s*", re.I)
BY_PREFIX = re.compile(r"^by\s+", re.I)  # "By Dana Okafor, 2 March 2026" only when wholly italic
DASH_PREFIX = re.compile(r"^(?:—|–|--)\s*")
PARENTHETICAL = re.compile(r"\(([^)]*)\)")
NAME_SPLIT = re.compile(r"\s*[·|,;—–]\s*|\s+-\s+")
DATE_LABEL = re.compile(r"^date\s*:\s*", re.I)

MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>[A-Za-z]{3,9})\.?"
DATE_ISO = re.compile(r"\b(?P<year>\d{4})-(?P<mon>\d{2})-(?P<day>\d{2})\b")
DATE_DMY = re.compile(rf"\b(?P<day>\d{{1,2}})\s+{_MONTH}\s+(?P<year>\d{{4}})\b")
DATE_MDY = re.compile(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}}),?\s+(?P<year>\d{{4}})\b")

STATUS_HEAD = re.compile(r"\s+[—–-]\s+|:")

ACCESS_LIST_ITEM = re.compile(r"^[a-z0-9_-]{1,64}$")
ACCESS_DOMAIN = re.compile(r"^[a-z0-9_-]+(/[a-z0-9_-]+)*$")


# --- small pure helpers ----------------------------------------------------------------------


def roman_value(numeral: str) -> int:
    """Value of a Roman numeral, read leniently (subtractive pairs anywhere)."""
    total = 0
    for i, ch in enumerate(numeral):
        value = ROMAN_VALUES[ch]
        following = ROMAN_VALUES[numeral[i + 1]] if i + 1 < len(numeral) else 0
        total += -value if value < following else value
    return total


def number_value(token: str) -> tuple[int, bool]:
    """(value, well_formed) of a Roman or arabic section number."""
    if token.isdigit():
        return int(token), int(token) > 0
    return roman_value(token), ROMAN.match(token) is not None


def _find_date(text: str) -> tuple[str | None, tuple[int, int] | None, bool]:
    """(ISO date or None, span of the date text, whether date-like text was found)."""
    for pattern in (DATE_ISO, DATE_DMY, DATE_MDY):
        m = pattern.search(text)
        if m is None:
            continue
        raw_month = m.groupdict().get("month")
        month = MONTHS.get(raw_month.lower()) if raw_month else int(m["mon"])
        if month is None:
            continue
        try:
            iso = date(int(m["year"]), month, int(m["day"])).isoformat()
        except ValueError:
            return None, m.span(), True
        return iso, m.span(), True
    return None, None, False


# --- the parser -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Heading:
    index: int  # 0-based line index
    level: int
    text: str


@dataclass(frozen=True)
class _Numbered:
    heading: _Heading
    token: str
    title: str


class _Reader:
    """One pass over one file's lines; collects warnings and fatal problems."""

    def __init__(self, lines: list[str], defaults: Access) -> None:
        self.lines = lines
        self.defaults = defaults
        self.warnings: list[Issue] = []
        self.problems: list[Issue] = []
        self.external: set[str] = set()

    def warn(self, index: int, message: str) -> None:
        self.warnings.append(Issue(index + 1, message))

    def fail(self, index: int, message: str) -> None:
        self.problems.append(Issue(index + 1, message))

    # structure

    def headings(self) -> Iterator[_Heading]:
        fence: str | None = None
        for i, line in enumerate(self.lines):
            fm = FENCE.match(line)
            if fm:
                marker = fm.group(1)
                if fence is None:
                    fence = marker[0] * len(marker)
                elif marker.startswith(fence):
                    fence = None
                continue
            if fence is not None:
                continue
            hm = HEADING.match(line)
            if hm:
                yield _Heading(i, len(hm.group(1)), hm.group(2))

    @staticmethod
    def numbered(h: _Heading) -> _Numbered | None:
        m = NUMBERED.match(h.text)
        if m is None:
            return None
        return _Numbered(h, m["num"], m["rest"].lstrip(TITLE_LEAD).strip())

    def section_starts(self) -> list[_Numbered]:
        all_headings = list(self.headings())
        numbered = [n for n in (self.numbered(h) for h in all_headings) if n is not None]
        if not numbered:
            return []
        per_level: dict[int, int] = {}
        for n in numbered:
            per_level[n.heading.level] = per_level.get(n.heading.level, 0) + 1
        crowded = [lvl for lvl, c in per_level.items() if c >= 2]
        level = min(crowded) if crowded else min(per_level)
        starts = [n for n in numbered if n.heading.level == level]
        first = starts[0].heading.index
        for n in numbered:
            if n.heading.level != level and not n.token.isdigit():
                self.warn(
                    n.heading.index,
                    f"'{n.heading.text}' is a level-{n.heading.level} heading; sections are "
                    f"level-{level} headings here, so it is read as body text",
                )
        for h in all_headings:
            if h.level == level and h.index > first and self.numbered(h) is None:
                self.warn(h.index, f"heading '{h.text}' has no section number; read as body text")
        return starts

    # preamble

    def read_preamble(self, end: int) -> Access:
        access = self.defaults
        seen_access = False
        for i in range(end):
            am = ACCESS_LINE.match(self.lines[i])
            if am:
                if seen_access:
                    self.fail(i, "a second access line in the preamble")
                seen_access = True
                access = self.parse_access(i, am["value"], access)
            em = EXTERNAL_LINE.match(self.lines[i])
            if em:
                names = (n.strip() for n in em["value"].split(","))
                self.external.update(n.casefold() for n in names if n)
        return access

    def parse_access(self, index: int, value: str, base: Access) -> Access:
        result = base
        for part in (p.strip() for p in value.split(";")):
            if not part:
                continue
            key, sep, raw = part.partition("=")
            key = key.strip().lower()
            raw = raw.strip()
            if not sep or not raw:
                self.fail(index, f"access entry '{part}' is not key=value")
                continue
            items = tuple(v.strip() for v in raw.split(",") if v.strip())
            if key == "sensitivity":
                if raw not in SENSITIVITIES:
                    self.fail(index, f"access sensitivity '{raw}' is not low|medium|high")
                    continue
                result = replace(result, sensitivity=raw)
            elif key == "domain":
                if not ACCESS_DOMAIN.match(raw):
                    self.fail(index, f"access domain '{raw}' is malformed")
                    continue
                if len(raw) > MAX_INDEXED_CHARS:
                    self.fail(index, f"access domain is longer than {MAX_INDEXED_CHARS} characters")
                    continue
                result = replace(result, domain=raw)
            elif key in ("namespaces", "roles", "roles_allowed"):
                if not items or not all(ACCESS_LIST_ITEM.match(v) for v in items):
                    self.fail(index, f"access {key} '{raw}' must be a comma-separated list of names")
                    continue
                result = (
                    replace(result, namespaces=items)
                    if key == "namespaces"
                    else replace(result, roles_allowed=items)
                )
            else:
                self.fail(index, f"unknown access key '{key}' (domain|sensitivity|namespaces|roles)")
        return result

    # one section

    def attribution(self, index: int, text: str) -> tuple[str, bool, str | None] | None:
        """(author, is_external, date) when ``text`` is an attribution line."""
        stripped = text.strip()
        core = strip_emphasis(stripped)
        wholly_italic = len(stripped) > 2 and stripped[0] in "*_" and stripped[-1] in "*_"
        prefixed = (
            ATTRIBUTION_PREFIX.match(core)
            or DASH_PREFIX.match(core)
            or (BY_PREFIX.match(core) if wholly_italic else None)
        )
        iso, span, date_like = _find_date(core)
        if not prefixed and not (wholly_italic and date_like):
            return None
        rest = core[prefixed.end() :] if prefixed else core
        if span is not None:
            offset = prefixed.end() if prefixed else 0
            start, end = span[0] - offset, span[1] - offset
            rest = rest[: max(start, 0)] + " " + rest[max(end, 0) :]
        notes = PARENTHETICAL.findall(rest)
        rest = PARENTHETICAL.sub(" ", rest)
        chunks = [DATE_LABEL.sub("", c).strip() for c in NAME_SPLIT.split(rest)]
        author = next((c for c in chunks if c), "")
        if not author:
            self.warn(index, "attribution line names no author; recorded as 'unknown'")
            author = UNKNOWN_AUTHOR
        if len(author) > MAX_INDEXED_CHARS:
            self.fail(index, f"the author's name is longer than {MAX_INDEXED_CHARS} characters")
        if date_like and iso is None:
            self.warn(index, "attribution line has a date that is not a real calendar date")
        elif not date_like:
            self.warn(index, f"section by {author} has no date")
        external = any("external" in n.lower() for n in notes) or author.casefold() in self.external
        return author, external, iso

    def section(self, ordinal: int, start: _Numbered, end: int, preamble_access: Access) -> ParsedSection:
        h = start.heading
        value, well_formed = number_value(start.token)
        if not well_formed:
            self.warn(h.index, f"'{start.token}' is not a well-formed section number; read as {value}")
        if not start.title:
            self.warn(h.index, f"section '{start.token}' has no title")
        i = h.index + 1
        while i < end and not self.lines[i].strip():
            i += 1
        author, external, iso = UNKNOWN_AUTHOR, False, None
        found = self.attribution(i, self.lines[i]) if i < end else None
        if found is None:
            self.warn(
                h.index, f"section '{start.token}' has no author/date line; author recorded as 'unknown'"
            )
        else:
            author, external, iso = found
            i += 1
            if iso is None and i < end and DATE_LABEL.match(strip_emphasis(self.lines[i])):
                iso, _, _ = _find_date(self.lines[i])
                i += 1
        while i < end and not self.lines[i].strip():
            i += 1
        body_end = end
        while body_end > i and (not self.lines[body_end - 1].strip() or RULE.match(self.lines[body_end - 1])):
            body_end -= 1
        body_lines = self.lines[i:body_end]
        if not body_lines:
            self.fail(h.index, f"section '{start.token}' has a heading but no body")
        body = "\n".join(line.rstrip() for line in body_lines)
        access = preamble_access
        access_lines = [(k, m) for k, line in enumerate(body_lines) if (m := ACCESS_LINE.match(line))]
        for n, (k, m) in enumerate(access_lines):
            if n:
                self.fail(i + k, f"section '{start.token}' has a second access line")
            else:
                access = self.parse_access(i + k, m["value"], preamble_access)
        whole = [line.rstrip() for line in self.lines[h.index : i]] + body.split("\n")
        return ParsedSection(
            ordinal=ordinal,
            line=h.index + 1,
            filed_id=start.token,
            filed_number=value,
            title=start.title,
            author=author,
            is_external_caller=external,
            date=iso,
            body=body,
            exec_tags=_unique(f"EXEC:{t}" for t in EXEC_TAG.findall(start.title + "\n" + body)),
            exec_decisions=_decisions(body_lines),
            status_tags=_status_tags(body_lines),
            references=_references(start.title + "\n" + body),
            responds_to=(),
            knowledge_refs=_unique(KNOWLEDGE_REF.findall(body)),
            access=access,
            content_hash=hashlib.sha256("\n".join(whole).encode("utf-8")).hexdigest(),
        )

    def resolve(self, sections: list[ParsedSection]) -> list[ParsedSection]:
        """Point each cited filed number at the latest earlier section filed with it."""
        latest: dict[int, int] = {}
        resolved = []
        for s in sections:
            targets: list[int] = []
            for ref in s.references:
                value, ok = number_value(ref)
                target = latest.get(value) if ok else None
                if target is None:
                    self.warn(
                        s.line - 1, f"section '{s.filed_id}' cites § {ref}, which no earlier section has"
                    )
                elif target not in targets:
                    targets.append(target)
            resolved.append(replace(s, responds_to=tuple(targets)))
            latest[s.filed_number] = s.ordinal
        return resolved


def _unique(items: Iterator[str] | list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _decisions(lines: list[str]) -> tuple[str, ...]:
    return _unique([text for _, _, text in decision_spans(lines) if text])


def _status_tags(lines: list[str]) -> tuple[str, ...]:
    values = []
    for line in lines:
        lm = STATUS_LINE.match(line)
        values.extend([lm["value"]] if lm else [m["value"] for m in STATUS_SPAN.finditer(line)])
    tags = []
    for value in values:
        head = STATUS_HEAD.split(strip_emphasis(value), maxsplit=1)[0]
        for part in head.split(";"):
            tag = " ".join(part.split()).rstrip(".").upper()
            if tag:
                tags.append(tag)
    return _unique(tags)


def _references(text: str) -> tuple[str, ...]:
    refs = []
    for m in REFERENCE.finditer(text):
        token = m["sec"] or m["re"]
        if number_value(token)[1]:
            refs.append(token)
    return _unique(refs)


def _decode(data: bytes, source: str) -> str:
    nul = data.find(b"\x00")
    if nul >= 0:
        raise CorrespondenceError(source, [Issue(0, f"binary file (NUL byte at offset {nul}), not markdown")])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorrespondenceError(
            source, [Issue(0, f"not UTF-8 text (invalid byte at offset {exc.start})")]
        ) from None


def parse_bytes(data: bytes, source: str, defaults: Access = DEFAULT_ACCESS) -> ParsedFile:
    """Parse the file's bytes; raise CorrespondenceError listing every fatal problem."""
    text = _decode(data, source)
    lines = [line.rstrip("\r") for line in text.split("\n")]
    reader = _Reader(lines, defaults)
    starts = reader.section_starts()
    if not starts:
        raise CorrespondenceError(
            source, [Issue(0, "no numbered sections found (expected headings like '## XII — Title')")]
        )
    file_access = reader.read_preamble(starts[0].heading.index)
    ends = [s.heading.index for s in starts[1:]] + [len(lines)]
    sections = [
        reader.section(i + 1, start, end, file_access)
        for i, (start, end) in enumerate(zip(starts, ends, strict=True))
    ]
    sections = reader.resolve(sections)
    if reader.problems:
        raise CorrespondenceError(source, reader.problems)
    return ParsedFile(
        source=source,
        sha256=hashlib.sha256(data).hexdigest(),
        sections=tuple(sections),
        warnings=tuple(sorted(reader.warnings, key=lambda w: w.line)),
        defaults=file_access,
    )
