"""The governance lines of a section's body: exec tags, decision lines, status and access tags,
section and knowledge references.

One grammar read from both sides (docs/design.md §What is embedded): the parser
(``cairn/ingest/correspondence/parser.py``) fills a section's structured fields with it and keeps
those lines out of the embedded text; the policy module's mask (``cairn/policy/preselector.py``)
strips the same lines and tokens from the body for a role whose field mask hides the field they
were read into.
It sits below both so that neither imports the other.
"""

from __future__ import annotations

import re
import textwrap

# The domain a correspondence file's sections get when its preamble names none.
DEFAULT_DOMAIN = "acme/correspondence"

EXEC_TAG = re.compile(r"\[EXEC:([A-Z][A-Z_]*)\]")
EXEC_TAG_TOKEN = re.compile(r"\[EXEC:[A-Z][A-Z_]*\][ \t]?")
DECISION = re.compile(
    r"^(?:[-*+>]\s+|\d+[.)]\s+)*(?:\*\*|__)?\s*(?:decision|decided|resolved)\s*(?:\*\*|__)?\s*:"
    r"\s*(?:\*\*|__)?\s*(?P<text>.*)$",
    re.I,
)
STATUS_SPAN = re.compile(r"[*_]\s*Status\s*:\s*(?P<value>[^*_\n]+?)\s*[*_]", re.I)
STATUS_LINE = re.compile(r"^\s*[*_]*\s*Status\s*:\s*(?P<value>.+?)\s*[*_]*\s*$", re.I)
ACCESS_LINE = re.compile(r"^\s*[*_]*\s*Access\s*:\s*(?P<value>.*?)\s*[*_]*\s*$", re.I)
EXTERNAL_LINE = re.compile(r"^\s*[*_]*\s*External(?: callers)?\s*:\s*(?P<value>.*?)\s*[*_]*\s*$", re.I)
BULLET = re.compile(r"^(?:[-*+>]\s+|\d+[.)]\s+)+")
# A path to a knowledge file, as the parser reads it into ``knowledge_refs``; in the body, quoted
# in backticks or bare (KNOWLEDGE_REF_TOKEN takes the backticks with it).
KNOWLEDGE_REF = re.compile(
    r"(?<![\w/.@-])((?:\.{1,2}/)?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:md|markdown|txt|pdf|json|ya?ml|csv|ipynb|docx?))"
    r"(?![\w/])"
)
KNOWLEDGE_REF_TOKEN = re.compile(rf"`{KNOWLEDGE_REF.pattern}`|{KNOWLEDGE_REF.pattern}")
# A reference to an earlier section by its filed number (``§ XII`` anywhere, ``Re: XII``), as the
# parser reads it into ``responds_to_filed``.
REFERENCE = re.compile(
    r"§+\s*(?P<sec>[IVXLCDM]+|\d{1,6})\b"
    r"|\bRe:\s*(?:§+\s*)?(?P<re>[IVXLCDM]+|\d{1,6})(?=\s*(?:$|[,;.)—–-]))",
    re.M,
)
# The same references as the mask strips them (``without_governance``): a reply's
# opening ``Re: § IV.`` or ``Re: II —`` goes with its separator, as if never written.
REFERENCE_TOKEN = re.compile(
    r"§+\s*(?:[IVXLCDM]+|\d{1,6})\b"
    r"|\bRe:\s*(?:§+\s*)?(?:[IVXLCDM]+|\d{1,6})(?:[ \t]*[,;.—–-]+[ \t]*|(?=\s*(?:$|\))))",
    re.M,
)


def strip_emphasis(line: str) -> str:
    return line.replace("**", "").replace("__", "").strip().strip("*_").strip()


def is_tag_line(line: str) -> bool:
    return bool(ACCESS_LINE.match(line) or STATUS_LINE.match(line) or EXTERNAL_LINE.match(line))


def decision_spans(lines: list[str]) -> list[tuple[int, int, str]]:
    """(first, end, text) of each decision: its line and the rest of its paragraph.

    A decision starts at a line beginning ``Decision:`` (or ``Decided:``/``Resolved:``)
    or carrying an exec tag, and runs until a blank line, a tag line, a list item,
    a heading or the next decision.
    """
    spans: list[tuple[int, int, str]] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        untagged = EXEC_TAG.sub("", line).strip()
        m = DECISION.match(untagged)
        if m is None and untagged == line:
            i += 1
            continue
        parts = [m["text"] if m else BULLET.sub("", untagged)]
        end = i + 1
        while end < len(lines) and _continues(lines[end]):
            parts.append(lines[end].strip())
            end += 1
        text = " ".join(strip_emphasis(EXEC_TAG.sub("", " ".join(parts))).split())
        spans.append((i, end, text))
        i = end
    return spans


def _continues(line: str) -> bool:
    stripped = line.strip()
    return bool(
        stripped
        and not is_tag_line(line)
        and not BULLET.match(stripped)
        and not stripped.startswith("#")
        and not DECISION.match(stripped)
        and not EXEC_TAG.search(stripped)
    )


def embeddable_text(title: str, body: str) -> str:
    """Title and body without exec tags, decision lines, status and access tags, knowledge
    references and references to earlier sections.

    Governance metadata is kept out of the semantic space (docs/design.md §What is embedded): a
    decision must not become indistinguishable from a discussion of decisions. And the vector is
    made only of what every reader of the text reads: whatever the policy module's mask may strip
    for some role (``without_governance`` with every part hidden) is left out for all, so a role
    that may search but not see ``knowledge_refs`` or ``responds_to_filed`` is not ranked by them.
    It is closed up as the mask shows it, so a letter is embedded as its twin
    written without them: a score that differed from that of the text a role reads told it that
    the letter held a hidden part (schema 10 re-embeds).
    """
    title = without_governance(title, tags=True, decisions=True, responses=True).strip()
    body = without_governance(body, tags=True, decisions=True, refs=True, access=True, responses=True)
    kept = [title] if title else []
    for line in body.split("\n"):
        if is_tag_line(line):
            continue
        cleaned = STATUS_SPAN.sub("", line).rstrip()
        if cleaned or (kept and kept[-1]):
            kept.append(cleaned)
    return "\n".join(kept).strip()


def without_governance(
    text: str,
    *,
    tags: bool,
    decisions: bool,
    refs: bool = False,
    access: bool = False,
    responses: bool = False,
    reflow: bool = False,
) -> str:
    """``text`` without its decision lines (when ``decisions``), exec tags (when ``tags``),
    knowledge references (when ``refs``), access line (when ``access``) and references to
    earlier sections (when ``responses``); with ``reflow``, every paragraph of prose wrapped
    again at ``WRAP``, whether or not it lost anything (a body read by a role for which a
    reference is cut out of its sentence: ``_without_inline``).

    The reader-side twin of the structured fields: a role whose field mask hides
    ``exec_decisions``, ``exec_tags``, ``knowledge_refs``, ``responds_to_filed`` or an access
    field (a section's own access line states its domain, sensitivity, namespaces and roles) must
    not read them word for word in the body. Lines, paths and numbers are recognised exactly as
    the parser recognised them when it filled those fields: decision paragraphs are found on the
    text as stored, so dropping an access line never lets a decision run on into the next one.

    Closed up: the text reads as the same letter written without
    them, so their place does not tell the reader that the letter held them. A line the strip
    empties goes too; each run of lines that went takes with it as many of the blank lines after
    it as stood before it (the gap the letter has between its paragraphs is left, none at either
    end; inside a block quote its empty ``>`` lines are the gaps, ``_blank``, and outside one an
    empty ``>`` line is an empty line, ``_outside_quotes``); an ordered list's later items are
    renumbered over its items that went (``_renumbered``);
    and a reply's opening reference goes with its separator (``REFERENCE_TOKEN``: ``Re: § IV.``),
    a reference inside a sentence with its sentence (``_without_inline``).
    """
    lines = text.split("\n")
    dropped = (
        {i for start, end, _ in decision_spans(lines) for i in range(start, end)} if decisions else set()
    )
    if access:
        dropped |= {i for i, line in enumerate(lines) if ACCESS_LINE.match(line)}
    hidden = ((tags, EXEC_TAG_TOKEN), (refs, KNOWLEDGE_REF_TOKEN), (responses, REFERENCE_TOKEN))
    tokens = [token for hide, token in hidden if hide]
    inline = [token for hide, token in hidden[1:] if hide]
    written = _without_inline(lines, dropped, inline, reflow) if inline or reflow else lines
    out: list[tuple[int, str]] = []  # (line, text) of the lines kept
    # Blank lines still to drop behind the run of lines that went last: as many as stood before
    # it (all, at the top), so the gap left is the one the letter has between its paragraphs.
    behind = 0
    ended = False  # the last line read went
    for i, line in enumerate(lines):
        kept = written[i]
        for token in tokens:
            kept = token.sub("", kept).rstrip()
        if i in dropped or (not _blank(line) and _blank(kept)):
            if not ended:
                blanks = 0
                while blanks < len(out) and _blank(out[-1 - blanks][1]):
                    blanks += 1
                behind = blanks if blanks < len(out) else len(lines)
            ended = True
            continue
        ended = False
        if behind and _blank(kept):
            behind -= 1
            continue
        behind = 0
        out.append((i, kept))
    if ended:
        while out and _blank(out[-1][1]):
            out.pop()
    shown = _renumbered(lines, dict(out)) if len(out) < len(lines) else [text for _, text in out]
    return "\n".join(_outside_quotes(shown))


# A sentence ends at ``.``, ``!`` or ``?`` (and any closing quotes or brackets) before a space or
# the end, unless the word it ends is a common abbreviation or an initial.
SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|Dr|Mr|Mrs|Ms|No|St|approx|Fig)|(?<![\w.])[A-Z])\.$")
# A parenthesis that holds nothing but references (``(§ XXXIV)``, ``(`plan.md`)``, ``(see § II, § V)``).
PARENTHESIS = re.compile(r"[ \t]*\(([^()\n]*)\)")
FILLER = re.compile(r"[\s,;]+|\b(?:and|or|see|cf\.?)\b")
# Where a paragraph is wrapped again: one width for every letter (docs/design.md §Correspondence,
# "wrapped again at one width"): a width read off the letter (its widest line shown as written,
# else 72) told which letters had lost a reference, since the authors' own lines are wider
# (red-team pass 18).
WRAP = 72


def _paragraphs(lines: list[str], dropped: set[int]) -> list[tuple[int, int]]:
    """Each run of lines that are neither blank nor dropped, as (first, past the last)."""
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if _blank(lines[i]) or i in dropped:
            i += 1
            continue
        end = i
        while end < len(lines) and not _blank(lines[end]) and end not in dropped:
            end += 1
        runs.append((i, end))
        i = end
    return runs


def _without_inline(
    lines: list[str], dropped: set[int], tokens: list[re.Pattern[str]], reflow: bool
) -> list[str]:
    """``lines`` without the sentences that hold a hidden knowledge or section reference inside
    them, and without a parenthesis that holds only such references, as the letter written without
    them reads (``The details are in `x.md`.`` goes; ``the plan (`x.md`) assumes`` reads ``the plan
    assumes``): cutting the reference alone left ``is in .`` and ``()``. A reply's opening ``Re: §
    IV.`` goes alone (``REFERENCE_TOKEN``). A paragraph of prose that lost one is wrapped again,
    greedily, at ``WRAP`` (a hard-wrapped letter's paragraph left a short line where the sentence
    went), its lines after the last one it fills left empty (they go as a line the strip empties
    does); a list item or a quoted paragraph (``_items``: a sentence may run over its lines) loses
    its sentences the same way, behind its lead. With ``reflow`` every paragraph of prose, list
    item and quoted paragraph is wrapped so, one that lost nothing and a one-line one too: the
    authors wrap wider than any one width, so a paragraph wrapped again beside others left as
    written told the reader that it had lost a reference (red-team pass 18: 20 of the 39 demo
    letters external reads were ``WRAP`` or a status line wide, every letter as written 79-91).
    Fenced code is never wrapped nor read as sentences (``_code``): a line of it that holds a
    hidden reference goes whole, and prose beside a fence is a paragraph of its own (review 36: a
    reference in code took its paragraph, closing fence and all, as a sentence, and the rest of
    the letter read as code); a table row that holds one goes whole too (cut at a sentence in a
    cell, it lost its later cells). Same length as ``lines`` (a wrap longer than its paragraph ends in
    its last entry): decision paragraphs are found on the text as stored."""
    out = list(lines)
    code = _code(lines)
    for k in code:  # a line of code is its own sentence: it goes whole, the fences stay
        if not FENCE.match(lines[k]) and any(token.search(lines[k]) for token in tokens):
            out[k] = ""
    for i, end in _paragraphs(lines, dropped | code):
        block = lines[i:end]
        cut = any(token.search(line) for line in block for token in tokens)
        if not cut and not reflow:
            continue
        if all(_prose(line) for line in block) and (cut or not any(line[:1].isspace() for line in block)):
            text = _cut(" ".join(line.strip() for line in block), tokens)
            out[i:end] = _rewrapped(text, len(block), reflow or len(block) > 1, WRAP)
            continue
        for first, past, lead, more in _items(lines, i, end):
            parts = [lines[k][len(lead if k == first else more) :] for k in range(first, past)]
            cut = any(token.search(part) for part in parts for token in tokens)
            if cut and parts[0].lstrip().startswith("|"):  # a table row goes whole, as code does
                out[first:past] = [""] * (past - first)
                continue
            indented = lead and not lead.strip(" \t")  # code, or a line the list does not continue
            if cut or (reflow and not indented and all(_prose(part) for part in parts)):
                if past - first == 1:  # a one-line item goes on under its text, not as a new item
                    more = re.sub(r"[^>\s]", " ", lead)
                text = _cut(" ".join(part.strip() for part in parts), tokens)
                wrapped = _rewrapped(text, past - first, reflow or past - first > 1, max(1, WRAP - len(more)))
                out[first:past] = [
                    (lead if n == 0 else more) + part.replace("\n", "\n" + more) if part else ""
                    for n, part in enumerate(wrapped)
                ]
    assert len(out) == len(lines)  # decision paragraphs and dropped lines are numbered on ``lines``
    return out


FENCE = re.compile(r"^[ \t]*(?:```|~~~)")


def _code(lines: list[str]) -> set[int]:
    """The lines of fenced code blocks, fences included: never wrapped."""
    inside, code = False, set()
    for i, line in enumerate(lines):
        fence = FENCE.match(line) is not None
        if inside or fence:
            code.add(i)
        if fence:
            inside = not inside
    return code


def _items(lines: list[str], start: int, end: int) -> list[tuple[int, int, str, str]]:
    """The list items and quoted paragraphs of ``lines[start:end]``, a paragraph that is not all
    prose, as (first line, past the last, lead of the first line, lead of the others); a lead is a
    line's indent, quote marks and bullet. A sentence may run over an item's lines: a line of prose
    that has only quote marks continues the quoted prose before it with the same marks, and an
    indented line of prose continues the list item before it (unquoted); any other line is an item
    of its own."""
    items: list[tuple[int, int, str, str]] = []
    for k in range(start, end):
        line = lines[k]
        prefix = BULLET.match(line.lstrip()) if not line.lstrip().startswith("#") else None
        lead = line[: len(line) - len(line.lstrip())] + (prefix[0] if prefix else "")
        rest = line[len(lead) :]
        if items and _prose(rest):
            first, _, first_lead, more = items[-1]
            marks = lead.replace(" ", "").replace("\t", "")
            quoted = marks and not marks.strip(">") and marks == first_lead.replace(" ", "").replace("\t", "")
            listed = not marks and lead and first_lead.strip(" \t>") and ">" not in first_lead
            if _prose(lines[first][len(first_lead) :]) and (quoted or listed):
                items[-1] = (first, k + 1, first_lead, more if k > first + 1 else lead)
                continue
        items.append((k, k + 1, lead, lead))
    return items


def _rewrapped(text: str, count: int, wrap: bool, width: int) -> list[str]:
    """``text``, what is left of a paragraph of ``count`` lines, in as many entries (the last ones
    empty): wrapped at ``width`` where ``wrap``, else one line; lines past ``count`` go into the
    last entry (the entries are numbered as the stored lines; a cap on the lines would make the
    wrap tell how long the hidden text was)."""
    if not wrap or not text:
        return [text, *([""] * (count - 1))]
    lines = _wrap(text, width)
    if len(lines) > count:
        lines = [*lines[: count - 1], "\n".join(lines[count - 1 :])]
    return [*lines, *([""] * (count - len(lines)))]


def _prose(line: str) -> bool:
    stripped = line.strip()
    return not (
        BULLET.match(stripped)
        or stripped.startswith(("#", "|", ">"))
        or is_tag_line(line)
        or DECISION.match(EXEC_TAG.sub("", stripped).strip())
        or EXEC_TAG.search(stripped)
    )


def _cut(text: str, tokens: list[re.Pattern[str]]) -> str:
    """``text`` (one paragraph or item, on one line) without a leading ``Re:`` reference, the
    parentheses that hold only references, and the sentences that hold one."""
    opener = REFERENCE_TOKEN.match(text) if REFERENCE_TOKEN in tokens else None
    if opener is not None and opener[0].startswith("Re:"):
        text = text[opener.end() :]

    def only_references(m: re.Match[str]) -> str:
        inner = m[1]
        found = False
        for token in tokens:
            inner, n = token.subn("", inner)
            found = found or n > 0
        return "" if found and not FILLER.sub("", inner) else m[0]

    text = PARENTHESIS.sub(only_references, text)
    kept: list[str] = []
    start = 0
    for m in [*SENTENCE_END.finditer(text), None]:
        stop = len(text) if m is None else m.end()
        if m is not None and (ABBREVIATION.search(text[start : m.start() + 1]) or stop == start):
            continue
        sentence = text[start:stop]
        if sentence.strip() and not any(token.search(sentence) for token in tokens):
            kept.append(sentence.strip())
        start = stop
        if m is None or start >= len(text):
            break
    return " ".join(kept)


def _wrap(text: str, width: int) -> list[str]:
    """``text`` wrapped greedily at ``width`` (a word longer than that on a line of its own): the
    lines a greedy wrap at any width at least the paragraph's widest line made are made again."""
    return textwrap.wrap(" ".join(text.split()), width, break_long_words=False, break_on_hyphens=False)


def _blank(line: str) -> bool:
    """A line that only parts paragraphs: empty, or a block quote's empty line (``>``, ``> >``): a
    decision quoted between two quoted paragraphs left two ``>`` lines where its twin has one."""
    return not line.strip(" \t>")


def _outside_quotes(lines: list[str]) -> list[str]:
    """``lines`` with each empty ``>`` line that no longer parts two quoted lines made a plain
    empty line: a decision that ended a block quote took the quote's last line with it and left
    its ``>`` gap before the letter's next paragraph, where the twin has an empty line."""
    out = list(lines)
    previous: bool | None = None  # whether the last line with text was quoted (None: none yet)
    gaps: list[int] = []  # the empty ``>`` lines since it
    for i, line in enumerate([*lines, ""]):
        if i < len(lines) and _blank(line):
            if line.strip():
                gaps.append(i)
            continue
        quoted = i < len(lines) and line.lstrip().startswith(">")
        if not (previous and quoted):
            for j in gaps:
                out[j] = ""
        previous, gaps = quoted, []
    return out


ORDERED_ITEM = re.compile(r"^(?P<lead>[ \t]*)(?P<n>\d{1,9})(?P<tail>[.)][ \t].*)$")


def _renumbered(lines: list[str], kept: dict[int, str]) -> list[str]:
    """The lines ``kept`` (line number -> text kept of ``lines``) with each ordered list's items
    renumbered over the items that went: ``1.``, ``3.`` after a stripped ``2.`` told that the list
    held a decision. An item takes the number it had less the gaps the items that went before it
    in its list left (a list numbered ``1.``, ``1.``, ``1.`` keeps its numbers); a list ends at a
    kept line indented no deeper than its items that is neither an item nor blank."""
    shown: list[str] = []
    lists: dict[str, tuple[int, int | None]] = {}  # indent -> (shift, number of the last item that went)
    for i, line in enumerate(lines):
        item = ORDERED_ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if item is not None:
            lead, n = item["lead"], int(item["n"])
            lists = {k: v for k, v in lists.items() if len(k) <= len(lead)}
            shift, pending = lists.get(lead, (0, None))
            if pending is not None:
                shift += n - pending
            lists[lead] = (shift, None if i in kept else n)
        elif line.strip() and i in kept:
            lists = {k: v for k, v in lists.items() if len(k) < indent}
        if i not in kept:
            continue
        text = kept[i]
        if item is not None and lists[item["lead"]][0] and text.startswith(head := item["lead"] + item["n"]):
            text = f"{item['lead']}{int(item['n']) - lists[item['lead']][0]}{text[len(head) :]}"
        shown.append(text)
    return shown
