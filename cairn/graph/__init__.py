"""Each capability's Cypher, one module per capability (docs/design.md, "Queries by capability").

``org``, ``dossiers``, ``factors`` and ``correspondence`` hold every query and fragment their
capability runs, reads and writes alike, as named constants or small builders. Access
predicates are not written here: they come from ``cairn.policy.acl`` and are spliced in. The
domain services import their queries from here and nowhere else; no capability borrows a
fragment from another's module.
"""
