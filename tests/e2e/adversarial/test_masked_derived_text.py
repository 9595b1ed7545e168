"""Fields written from a masked fact text are masked with it (latent leak).

A dossier's title is the gardener's label built from its facts' text, and its journal's
``new_value``/``previous_value`` quote such titles. Under a policy that shows a fact without its
``text``, the title and journal still said what the masked facts say. They are now derived
fields (``scope.DERIVED_FIELDS``): shown only where their source field shows in the node's domain,
and named in ``masked`` otherwise (docs/design.md §Policy module, "Derived fields"). The probe
policy is ``test_masked_text_search``'s (staff: fact text masked in acme/assistant).
"""

from __future__ import annotations

from tests.e2e.adversarial.test_masked_text_search import (  # noqa: F401  (fixtures)
    FACT,
    Probe,
    ask,
    demo,
    dossier_of,
    masked_registry,
    probe,
)

DOSSIER = """query($i: ID!) { dossier(id: $i) { title factCount masked
  history { op newValue previousValue } } }"""


def test_a_dossier_title_and_journal_do_not_quote_masked_facts(probe: Probe) -> None:  # noqa: F811
    dossier_id = dossier_of(probe, FACT)
    stored = ask(probe, DOSSIER, "director", i=dossier_id)["dossier"]
    assert stored["title"] and any(e["newValue"] for e in stored["history"]), stored
    shown = ask(probe, DOSSIER, i=dossier_id)["dossier"]
    assert shown["factCount"] == stored["factCount"]
    assert shown["title"] is None and "title" in shown["masked"], shown
    assert all(e["newValue"] is None and e["previousValue"] is None for e in shown["history"]), shown
