"""Extractive, deterministic dossier summaries: the facts nearest the dossier's centroid.

No model writes these: the summary is made of the dossier's own sentences, so it can never
state something the facts do not, and the same facts always give the same summary. It is
recomputed from the stored fact embeddings whenever facts are appended, and the journal
keeps the previous text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

SUMMARY_FACTS = 3


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?")) else text + "."


def extractive_summary(texts: Sequence[str], vectors: NDArray[np.float32], size: int = SUMMARY_FACTS) -> str:
    """The ``size`` facts most similar to the mean of all facts, in the order they were added.

    Ties in similarity go to the earlier fact (stable sort), so the choice never depends on
    anything but the facts and their order.
    """
    if not texts:
        return ""
    if len(texts) <= size:
        return " ".join(_sentence(t) for t in texts)
    matrix = np.asarray(vectors, dtype=np.float64)
    centrality = matrix @ matrix.mean(axis=0)
    ranked = np.argsort(-np.round(centrality, 6), kind="stable")[:size]
    return " ".join(_sentence(texts[i]) for i in sorted(int(i) for i in ranked))
