"""A section's embedded text is its twin's, written without the lines a mask strips (review pass 16).

The vector of a section is made of ``embeddable_text``, which leaves out everything a role's mask
may strip. But it stripped without closing up: ``Re: § IV. Marta is right`` was embedded as
``. Marta is right``, a stripped first paragraph as a leading blank line. A role that may search
and reads the body closed up (test_stripped_section_traces.py) can embed what it reads with the
same public model: a score that is not its own text's said the letter held a hidden part. Now the
embedded text is closed up as the mask shows it (sections re-embedded at schema 10).
"""

from __future__ import annotations

import pytest

from cairn.schema.section_text import embeddable_text

ACCESS = "*Access: domain=acme/correspondence; sensitivity=low; namespaces=public; roles=external*"
# (body with governance lines, the same letter written without them)
TWINS = [
    (
        "Re: § I. Marta is right.\n\n[EXEC:GOV] Decision: end it.\n\nJonas calls.",
        "Marta is right.\n\nJonas calls.",
    ),
    (f"Decision: to Porto.\n\nThe agenda follows.\n{ACCESS}", "The agenda follows."),
    (f"{ACCESS}\n\nThe retro:\n`knowledge/retro.md`\n\nOne stack.", "The retro:\n\nOne stack."),
    ("Re: II — we agree.\n\nThe rest.", "we agree.\n\nThe rest."),
    (
        "Steps:\n\n1. Decision: end it.\n2. Jonas calls.\n3. Marta writes.",
        "Steps:\n\n1. Jonas calls.\n2. Marta writes.",
    ),
]


@pytest.mark.parametrize(("governed", "plain"), TWINS)
def test_a_letter_is_embedded_as_its_twin(governed: str, plain: str) -> None:
    assert embeddable_text("A letter", governed) == embeddable_text("A letter", plain)
