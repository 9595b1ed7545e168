"""The factor journal (docs/design.md §Factor journal): journal, assessment, why / what-if / what-changed,
context, router.
"""
