"""The factor journal of note 003: journal, assessment, why / what-if / what-changed, context, router."""
